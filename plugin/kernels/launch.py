"""Loads the compiled kernels into the current CUDA context and launches a scatter-add on a stream.

`prepare_kernels(dtype)` compiles and loads the module (the plugin calls it outside enqueue);
`scatter_add_launch` only issues asynchronous driver calls on the caller's stream (memsets, then the plan's
kernels): no synchronisation, allocation or host copy. The plan and the kernel arguments are made once per set
of sizes (`PreparedScatterAdd`), and from the second launch with the same pointers and stream on, the driver
calls are replayed from a CUDA graph captured once, unless the caller's stream is being captured itself.

Everything this module takes from CUDA goes through one object, `backend` (Backend): the driver module, the
current context's id, the loaded kernels, and the caches kept per process and thread. Tests replace it.
"""

import functools
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from common.cuda_check import CudaError, check, current_context_id
from plugin.cuda_graph import CapturedGraph
from common.nvrtc import grid_sync_available, nvrtc_supported_archs
from plugin.kernels.compile import compile_scatter_add, kernel_dtype, pick_arch
from plugin.kernels.plan import (
    MAX_EDGES,
    MAX_NODES,
    PAIR_BYTES,
    PAIRED_MAX_EDGES,
    PATHS,
    SLOT_ALIGNMENT,
    DeviceInfo,
    Direct,
    GridTable,
    KernelLaunch,
    LaunchPlan,
    LaunchRequest,
    check_sizes,
    pairs_in_workspace,
    plan_launch,
    table_layout,
    vector_width,
)

# The entry points of scatter_add.cu: the kernels of plan.PATHS, "_v*" standing for the vector widths 1, 2 and 4.
COOPERATIVE_KERNEL_NAMES = GridTable.kernels  # compiled with cooperative groups only
FLOAT32_ONLY = tuple(kernel.removesuffix("*") for kernel in Direct.kernels)  # name prefixes float16's module lacks
KERNEL_NAMES = tuple(dict.fromkeys(
    name for path in PATHS if not isinstance(path, GridTable) for kernel in path.kernels
    for name in ([kernel[:-1] + str(vec) for vec in (1, 2, 4)] if kernel.endswith("*") else [kernel])))
# kernels that may use all the opt-in shared memory (their dynamic shared memory is raised to it at load)
LARGE_SHARED_KERNELS = ("scatter_shared", "chunk_reduce", "scatter_owned")


def kernel_names(dtype: object, cooperative: bool) -> tuple[str, ...]:
    """The entry points of scatter_add.cu compiled for dtype (with cooperative groups: and grid_table's)."""
    half = kernel_dtype(dtype) == np.float16
    names = tuple(name for name in KERNEL_NAMES if not (half and name.startswith(FLOAT32_ONLY)))
    return names + (COOPERATIVE_KERNEL_NAMES if cooperative else ())


@dataclass(frozen=True)
class LoadedKernels:
    """The module loaded into one CUDA context for one dtype, its functions and the device's properties."""

    module: Any
    functions: dict[str, Any]
    device: DeviceInfo
    cooperative: bool = False  # compiled with cooperative groups: grid_table's kernel exists


class _PerThread(threading.local):
    """scatter_add_launch's prepared launches (a PreparedScatterAdd patches its argument buffer before each
    launch, so two threads must never share one) and the launcher's capture stream per context."""

    def __init__(self) -> None:
        self.launches: dict[tuple[Any, ...], PreparedScatterAdd] = {}
        self.last: tuple[Any, PreparedScatterAdd | None] = (None, None)  # the last call's key and launch
        self.capture_streams: dict[int, Any] = {}


class Backend:
    """The launcher's one seam to CUDA: `driver` (cuda.bindings.driver, imported on first use), `context_id()`,
    `kernels(dtype)` (compiled and loaded once per context), `capture_stream(context)`, and what it keeps:
    loaded modules, plans, prepared launches. A test replaces `launch.backend` with a subclass over a recording
    driver and kernels it does not compile; `forget()` drops the plans and prepared launches (after a patch of
    plan.py)."""

    def __init__(self, driver: Any = None) -> None:
        self._driver = driver
        # driver.cuCtxGetId once cuCtxGetId(NULL) was seen to give the current context's id: one call tells it
        self.fast_id: Any = None
        self._loaded: dict[tuple[int, str], LoadedKernels] = {}
        self._lock = threading.Lock()
        self.threads = _PerThread()
        self.plan = functools.lru_cache(maxsize=256)(plan_launch)

    @property
    def driver(self) -> Any:
        if self._driver is None:
            from cuda.bindings import driver

            self._driver = driver
        return self._driver

    def forget(self) -> None:
        self.plan.cache_clear()
        self.threads.launches.clear()
        self.threads.last = (None, None)

    def context_id(self) -> int:
        """A process-unique id of the current CUDA context (cuCtxGetId: unlike the handle, never reused after a
        context is destroyed); if no context is current, device 0's primary context is made current first."""
        get_id = self.fast_id
        if get_id is not None:
            result = get_id(None)
            if not result[0]:  # CUDA_SUCCESS is 0
                return result[1]
        driver = self.driver
        context_id = current_context_id(driver)
        status, null_id = driver.cuCtxGetId(None)
        self.fast_id = driver.cuCtxGetId if int(status) == 0 and int(null_id) == context_id else None
        return context_id

    def device_info(self) -> DeviceInfo:
        """Compute capability, SM count, shared-memory limits and L2 size of the current context's device."""
        driver = self.driver
        device = check(driver.cuCtxGetDevice())

        def read(name: str) -> int:
            return int(check(driver.cuDeviceGetAttribute(getattr(driver.CUdevice_attribute, name), device)))

        return DeviceInfo(
            arch=10 * read("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
            + read("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
            sm_count=read("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
            max_shared_per_block=read("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            shared_per_sm=read("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
            l2_bytes=read("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"),
        )

    def kernels(self, dtype: object) -> LoadedKernels:
        """The kernels for dtype in the current context: compiled once per arch and dtype, loaded once per context."""
        resolved = kernel_dtype(dtype)
        key = (self.context_id(), resolved.str)
        loaded = self._loaded.get(key)
        if loaded is None:
            with self._lock:
                loaded = self._loaded.get(key)
                if loaded is None:
                    loaded = self._loaded[key] = self._load(resolved)
        return loaded

    def _load(self, dtype: np.dtype) -> LoadedKernels:
        driver = self.driver
        device = self.device_info()
        module = check(driver.cuModuleLoadData(compile_scatter_add(pick_arch(device.arch, nvrtc_supported_archs()),
                                                                   dtype)))
        cooperative = grid_sync_available()
        functions = {name: check(driver.cuModuleGetFunction(module, name.encode()))
                     for name in kernel_names(dtype, cooperative)}
        attribute = driver.CUfunction_attribute
        for name, function in functions.items():
            if name.startswith(LARGE_SHARED_KERNELS):
                static = check(driver.cuFuncGetAttribute(attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function))
                check(driver.cuFuncSetAttribute(
                    function, attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, device.max_shared_per_block - static
                ))
        return LoadedKernels(module, functions, device, cooperative)

    def capture_stream(self, context_id: int) -> int:
        """A non-blocking stream of this thread in the current context, made on first use and kept for the
        thread's life, on which the launcher captures its own graphs: never a caller's stream, whose capture
        state and pending work are the caller's."""
        streams = self.threads.capture_streams
        stream = streams.get(context_id)
        if stream is None:
            driver = self.driver
            stream = streams[context_id] = check(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING))
        return int(stream)


backend = Backend()


def current_context() -> int:
    """backend.context_id(): the current CUDA context's id (device 0's primary context made current if none is)."""
    return backend.context_id()


def read_device_info() -> DeviceInfo:
    """The current context's device (backend.device_info)."""
    return backend.device_info()


def prepare_kernels(dtype: object) -> LoadedKernels:
    """Compiles (once per arch and dtype) and loads the kernels into the current context (once per context).

    Call it outside the stream-ordered hot path (the plugin does at shape change); scatter_add_launch calls
    it too, as a fallback, and then finds the module already loaded."""
    return backend.kernels(dtype)


def _validate_sizes(num_nodes: int, num_edges: int, num_features: int) -> None:
    check_sizes(num_nodes, num_edges, num_features)
    if num_features < 1:
        raise ValueError(f"num_features must be at least 1, got {num_features}")
    if num_edges > MAX_EDGES:
        raise ValueError(f"num_edges {num_edges} exceeds the kernel's limit of {MAX_EDGES} (32-bit counts)")
    if num_nodes > MAX_NODES:
        raise ValueError(f"num_nodes {num_nodes} exceeds the kernel's limit of {MAX_NODES} (32-bit node ids)")


def _check_table_workspace(needed: int, workspace: int, workspace_size: int) -> None:
    if not workspace:
        raise ValueError(f"float16 needs a workspace of {needed} bytes; got none")
    if workspace_size < needed:
        raise ValueError(f"float16 needs a workspace of {needed} bytes; got {workspace_size}")


# Positions in the pointer tuple a prepared launch is called with (the stream last); a kernel argument derived
# from a pointer is (position, byte offset), e.g. the float16 table's values (WORKSPACE, values_offset).
STATE, SRC, INDEX, COUNTS, WORKSPACE, SKIPPED, STREAM = range(7)
_POSITION_NAMES = ("state", "src", "index", "counts", "workspace", "skipped", "stream")
MEMSET, KERNEL, COOPERATIVE = 0, 1, 2  # the kinds of operation in a launch sequence (PreparedScatterAdd.bind)


class KernelArguments:
    """The arguments of one kernel launch, packed once into one buffer of 8-byte slots (little-endian: a 4-byte
    argument reads the low half of its slot), and `address`, the kernelParams array pointing at each slot.
    Constants are written once; pointer arguments, (position, offset), by `patch` when the pointers change."""

    def __init__(self, values: tuple[Any, ...]) -> None:
        import ctypes

        self.values = values
        self.buffer = (ctypes.c_uint64 * max(1, len(values)))()
        base = ctypes.addressof(self.buffer)
        self.pointers = (ctypes.c_void_p * max(1, len(values)))(*(base + 8 * i for i in range(len(values))))
        self.address = ctypes.addressof(self.pointers)
        self.patches: list[tuple[int, int, int]] = []  # (slot, pointer position, byte offset)
        for slot, value in enumerate(values):
            if isinstance(value, tuple):
                self.patches.append((slot, value[0], value[1]))
            else:
                self.buffer[slot] = int(value) & (2**64 - 1)

    def patch(self, pointers: tuple[int, ...]) -> None:
        for slot, position, offset in self.patches:
            base = pointers[position]
            self.buffer[slot] = base + offset if base else 0


class _LaunchSequence:
    """The driver calls of one plan, in order: (MEMSET, (position, offset), value, count) and kernel
    operations (PreparedScatterAdd._kernel)."""

    def __init__(self, plan: LaunchPlan | None, operations: list[tuple[Any, ...]]) -> None:
        self.plan = plan
        self.operations = operations
        self.arguments = [op[5] for op in operations if op[0] != MEMSET]


class PreparedScatterAdd:
    """scatter_add_launch for fixed sizes, dtype and options, with the plan decided and the kernel arguments
    packed once; calling it with the pointers only issues the driver calls, and from the second call with the
    same pointers and stream on replays them from a CUDA graph captured on the launcher's own stream, unless
    the caller's stream is being captured (then the driver calls go into the caller's graph).

    Made in the CUDA context it will launch in. Not thread-safe: a call patches its argument buffer before it
    launches, so each thread (or execution context) needs its own. Choices that depend on the pointers (vector
    width, aligned counts for the pairs, an aligned workspace for the slot tables) are planned per alignment.
    """

    # False (set on an instance): the driver calls every time, never a graph's replay (benchmarks time both)
    graph_replay = True

    def __init__(self, *, num_nodes: int, num_edges: int, num_features: int, dtype: object, with_counts: bool,
                 with_skipped: bool = False, workspace_size: int = 0, algorithm: str = "auto",
                 node_passes: int | None = None, paired: bool | None = None) -> None:
        self.dtype = kernel_dtype(dtype)
        _validate_sizes(num_nodes, num_edges, num_features)
        self.num_nodes, self.num_edges, self.num_features = int(num_nodes), int(num_edges), int(num_features)
        self.with_counts, self.with_skipped = bool(with_counts), bool(with_skipped)
        self._skipped: Any = (SKIPPED, 0) if self.with_skipped else 0  # the kernels' skipped argument
        self.table = table_layout(num_nodes, num_edges, num_features) if self.dtype == np.float16 else None
        if self.table is not None:  # also where another path will not use it: the same workspace everywhere
            _check_table_workspace(self.table.nbytes, 1, workspace_size)
        self.workspace_size = int(workspace_size)
        self.options = (algorithm, node_passes, paired)
        self.backend = backend
        self.kernels = self.backend.kernels(self.dtype)
        self.context = self.backend.context_id()
        self.cooperative = self.kernels.cooperative  # False after a cooperative launch was refused
        driver = self._driver = self.backend.driver
        self._sequences: dict[tuple[int, bool, bool], _LaunchSequence] = {}
        self._pointers: tuple[Any, ...] | None = None  # (state, src, index, counts, workspace, skipped, stream)
        self._sequence: _LaunchSequence | None = None  # the bound pointers' driver calls, as operations
        self._calls: tuple[tuple[Any, tuple[Any, ...], str], ...] = ()  # (driver function, arguments, what)
        self._plan: LaunchPlan | None = None
        # per pointer set _SEEN_ONCE, _NO_GRAPH or (CapturedGraph, its replay, its plan); the current pointers'
        # replay (executable graph, CUstream) or None; whether self._calls are bound to the current pointers
        self._replays: dict[tuple[Any, ...], Any] = {}
        self._replay: tuple[Any, Any] | None = None
        self._bound = False
        self._graph_launch, self._is_capturing = driver.cuGraphLaunch, driver.cuStreamIsCapturing
        self._not_capturing = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
        # the graphs are freed with this object (at exit the driver frees them; their context may be gone by then)
        weakref.finalize(self, _close_graphs, self._replays, raising=False).atexit = False

    @property
    def graph(self) -> Any:
        """The executable CUDA graph replayed for the current pointers and stream; None before one is captured
        (the first call with them), while they have none, or with graph_replay off."""
        return None if self._replay is None else self._replay[0]

    def bind(self, state: int, src: int, index: int, counts: int, workspace: int, stream: int,
             skipped: int = 0) -> tuple[tuple[Any, ...], ...]:
        """Binds the launch to these pointers without issuing it and returns its operations in order, each
        (MEMSET, (pointer position, byte offset), value, words) or (KERNEL or COOPERATIVE, function, grid x,
        grid y, shared bytes, KernelArguments, kernel name, block size): what a fuzzer launches one by one."""
        self._use_pointers((state, src, index, counts, workspace, skipped, stream))
        assert self._sequence is not None
        return tuple(self._sequence.operations)

    def __call__(self, state: int, src: int, index: int, counts: int, workspace: int, stream: int,
                 skipped: int = 0) -> LaunchPlan | None:
        """Issues the launch on `stream` (asynchronous; no allocation, no synchronisation); returns the plan.

        With the pointers and stream of the last call, this is one tuple comparison, a capture-status query and
        the graph's replay, or the driver calls with arguments made when they changed."""
        pointers = (state, src, index, counts, workspace, skipped, stream)
        if pointers != self._pointers:
            seen = self._replays.get(pointers)
            if type(seen) is tuple:  # pointers in rotation with a graph each: no driver calls to bind yet
                self._pointers, self._replay, self._plan, self._bound = pointers, seen[1], seen[2], False
            else:
                self._use_pointers(pointers)
        return self._issue(pointers)

    def _issue(self, pointers: tuple[Any, ...]) -> LaunchPlan | None:
        """The launch for the current pointers: their graph's replay where there is one and the caller's stream
        is not being captured, else the driver calls (bound to the pointers first where they are not yet)."""
        replay = self._replay
        if replay is None and self.graph_replay:
            replay = self._graph_for(pointers)
        if replay is not None:
            capturing = self._is_capturing(replay[1])
            if not capturing[0] and capturing[1] == self._not_capturing:
                result = self._graph_launch(*replay)
                if not result[0]:  # CUDA_SUCCESS is 0
                    return self._plan
                self._drop_replays()  # the driver calls below either succeed or say what failed
                self.graph_replay = False
        if not self._bound:
            self._use_pointers(pointers)
        for call, arguments, what in self._calls:
            result = call(*arguments)
            if result[0]:
                return self._failed(result, call, what, pointers)
        return self._plan

    def _graph_for(self, pointers: tuple[Any, ...]) -> tuple[Any, Any] | None:
        """The bound pointers' replay, captured at their second use (not while the caller's stream is being
        captured); None at their first use, and where capturing failed (then the driver calls serve them)."""
        seen = self._replays.get(pointers)
        if seen is None:
            if len(self._replays) >= _REPLAYS_KEPT:
                self._drop_replays()
            self._replays[pointers] = _SEEN_ONCE
            return None
        if seen is not _SEEN_ONCE:
            return None
        stream = self._driver.CUstream(int(pointers[STREAM]))
        capturing = self._is_capturing(stream)
        if capturing[0] or capturing[1] != self._not_capturing:
            return None
        assert self._sequence is not None
        on = self.backend.capture_stream(self.context)
        calls = bind_driver_calls(self._driver, self._sequence.operations, pointers[:STREAM] + (on,))

        def issue() -> None:
            for call, arguments, what in calls:
                check(call(*arguments), call=what)

        try:
            graph = CapturedGraph(on, issue, self._driver)
        except CudaError:  # e.g. a cooperative launch the device cannot hold: the driver calls will say so
            self._replays[pointers] = _NO_GRAPH
            return None
        self._replay = (graph.executable, stream)
        self._replays[pointers] = (graph, self._replay, self._plan)
        return self._replay

    def _drop_replays(self) -> None:
        _close_graphs(self._replays)
        self._replay = None

    def _failed(self, result: tuple[Any, ...], call: Any, what: str, pointers: tuple[Any, ...]) -> LaunchPlan | None:
        """A driver call failed: raises CudaError, except for a cooperative launch with fewer resident blocks
        than planned (e.g. under MPS), after which this launch makes no cooperative launch (float16 takes another
        path than grid_table). Where the caller's stream was being captured, the refused launch has invalidated
        that capture: the fallback is kept for later launches, and this one raises CudaError saying so instead
        of issuing more calls into the broken capture."""
        driver = self._driver
        too_large = driver.CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
        if call == driver.cuLaunchCooperativeKernel and result[0] == too_large:
            self.cooperative, self._sequences, self._pointers = False, {}, None
            self._drop_replays()
            state, src, index, counts, workspace, skipped, stream = pointers
            capturing = self._is_capturing(driver.CUstream(int(stream)))
            if capturing[0] or capturing[1] != self._not_capturing:
                raise CudaError(f"{too_large.name}: {what} was refused (fewer resident blocks than it needs, e.g. "
                                "under MPS) while the stream was being captured, which invalidates the capture; "
                                "later launches make no cooperative launch: capture again", too_large.name)
            return self(state, src, index, counts, workspace, stream, skipped)
        check(result, call=what)
        return None  # not reached: check raised

    def _use_pointers(self, pointers: tuple[Any, ...]) -> None:
        state, src, index, counts, workspace, skipped, stream = pointers
        _check_pointers(state, src, index, self.num_nodes, self.num_edges)
        if bool(counts) != self.with_counts or bool(skipped) != self.with_skipped:
            raise ValueError(f"this launch was prepared with counts={self.with_counts}, skipped={self.with_skipped}; "
                             f"got counts={counts:#x}, skipped={skipped:#x}")
        if self.table is not None and not workspace:
            _check_table_workspace(self.table.nbytes, workspace, 0)
        table_dest = workspace + self.table.values_offset if self.table is not None else state
        vec = vector_width(self.num_features, src, self.dtype.itemsize, table_dest)
        key = (vec, counts % PAIR_BYTES == 0, workspace % SLOT_ALIGNMENT == 0)
        sequence = self._sequences.get(key)
        if sequence is None:
            sequence = self._sequences[key] = self._build(vec, counts_aligned=key[1], workspace_aligned=key[2])
        plan = sequence.plan
        if plan is not None and (plan.sort or plan.slots or (plan.paired and pairs_in_workspace(
                self.with_counts, self.num_edges))) and not workspace:
            raise ValueError(f"this launch was prepared with a workspace for its {plan.path} path; got none")
        for arguments in sequence.arguments:
            arguments.patch(pointers)
        self._calls = bind_driver_calls(self._driver, sequence.operations, pointers)
        self._pointers, self._plan, self._sequence, self._bound = pointers, sequence.plan, sequence, True
        replay = self._replays.get(pointers)
        self._replay = replay[1] if isinstance(replay, tuple) else None

    def _build(self, vec: int, *, counts_aligned: bool, workspace_aligned: bool) -> _LaunchSequence:
        """The driver calls for one vector width, counts alignment and workspace alignment."""
        operations: list[tuple[Any, ...]] = []
        if self.with_counts:
            operations.append((MEMSET, (COUNTS, 0), 0, 2 * self.num_nodes))  # also the paired path's zero pairs
        if self.with_skipped:
            operations.append((MEMSET, (SKIPPED, 0), 0, 2))
        if self.num_edges == 0:
            return _LaunchSequence(None, operations)
        request = LaunchRequest(self.num_nodes, self.num_edges, self.num_features, self.dtype, vec, self.with_counts,
                                self.workspace_size, counts_aligned, workspace_aligned, self.cooperative, *self.options)
        plan = self.backend.plan(request, self.kernels.device)
        if plan.sort is not None:
            self._sort_operations(plan, operations)
        elif plan.path in ("block_table", "grid_table", "split_table", "owned", "direct"):
            self._uncounted_operations(plan, operations)
        else:
            self._atomics_operations(plan, operations)
        return _LaunchSequence(plan, operations)

    def _kernel(self, operations: list[tuple[Any, ...]], launch: KernelLaunch, *values: Any,
                kind: int = KERNEL) -> None:
        """Appends a kernel operation: (kind, function, grid x, grid y, shared bytes, arguments, name, block)."""
        operations.append((kind, self.kernels.functions[launch.name], *launch.grid, launch.shared_bytes,
                           KernelArguments(values), launch.name, launch.block))

    def _atomics_operations(self, plan: LaunchPlan, operations: list[tuple[Any, ...]]) -> None:
        """The shared, paired, global and chunked paths' kernels (float16: into the table, then apply_table)."""
        kernel = functools.partial(self._kernel, operations)
        num_nodes, num_edges, num_features = self.num_nodes, self.num_edges, self.num_features
        table = plan.table  # None on the paired path
        if plan.paired:  # (value, count) pairs in the counts, else in the workspace (plan.pairs_in_workspace)
            dest: tuple[int, int] = (WORKSPACE, 0) if pairs_in_workspace(self.with_counts, num_edges) else (COUNTS, 0)
        elif table is not None:
            dest = (WORKSPACE, table.values_offset)
        else:
            dest = (STATE, 0)
        keys: Any = (WORKSPACE, 0) if table is not None and table.hashed else 0  # one slot per node: no keys
        if table is not None:
            if keys:
                operations.append((MEMSET, keys, 0xFFFFFFFF, table.capacity))
            operations.append((MEMSET, dest, 0, table.capacity * num_features))
        if plan.paired and dest[0] == WORKSPACE:  # pairs in the counts: zeroed with them
            operations.append((MEMSET, dest, 0, 2 * num_nodes))
        counts: Any = 0 if plan.paired or not self.with_counts else (COUNTS, 0)
        for chunk in range(plan.pair_chunks):
            first = chunk * PAIRED_MAX_EDGES if plan.pair_chunks > 1 else 0
            edges = num_edges - first if plan.pair_chunks == 1 else min(PAIRED_MAX_EDGES, num_edges - first)
            head = ((SRC, first * num_features * self.dtype.itemsize), (INDEX, first * 8), edges, num_nodes,
                    num_features)
            for node_lo, node_hi in plan.node_ranges:
                if plan.algorithm == "shared":
                    kernel(plan.scatter, *head, plan.lanes_log2, dest, counts, self._skipped)
                elif plan.algorithm == "chunked":
                    kernel(plan.scatter, *head, plan.chunk_edges, dest, counts, self._skipped)
                else:
                    kernel(plan.scatter, *head, plan.lanes_log2, plan.window_loads, dest, keys,
                           table.table_log2 if table else 0, counts, self._skipped, node_lo, node_hi)
            if plan.fold is not None and plan.pair_chunks > 1:
                kernel(plan.fold, (STATE, 0), dest, (COUNTS, 0), num_nodes, int(chunk == plan.pair_chunks - 1))
        if plan.fold is not None and plan.pair_chunks == 1:
            kernel(plan.fold, (STATE, 0), dest, num_nodes)
        if plan.apply is not None and table is not None:
            kernel(plan.apply, (STATE, 0), keys, dest, table.capacity, num_features, plan.apply_lanes_log2, num_nodes)

    def _uncounted_operations(self, plan: LaunchPlan, operations: list[tuple[Any, ...]]) -> None:
        """The kernels of the paths without counts (scatter_add.cu, "Launches without counts")."""
        head = ((SRC, 0), (INDEX, 0), self.num_edges, self.num_nodes)
        slots, state, skipped = plan.slots, (STATE, 0), self._skipped
        if plan.algorithm == "direct":
            values: tuple[Any, ...] = (*head, self.num_features, state, skipped)
        elif plan.algorithm == "block_table":
            values = (*head, plan.block_log2, state, skipped)
        elif plan.algorithm == "grid_table":
            assert slots is not None
            values = (*head, (WORKSPACE, 0), slots.capacity, int(slots.hashed), state, skipped)
        elif plan.algorithm == "split_table":  # a memset clears the slots (all ones: node -1), the scan applies them
            assert slots is not None
            operations.append((MEMSET, (WORKSPACE, 0), 0xFFFFFFFF, 2 * slots.capacity))
            values = (*head, (WORKSPACE, 0), slots.capacity, skipped)
        else:
            assert plan.owned is not None
            values = (*head, self.num_features, plan.owned.capacity, plan.owned.probes, state, skipped)
        self._kernel(operations, plan.scatter, *values, kind=COOPERATIVE if plan.cooperative else KERNEL)
        if slots is not None and slots.apply is not None:
            self._kernel(operations, slots.apply, (WORKSPACE, 0), slots.capacity, self.num_nodes, state)

    def _sort_operations(self, plan: LaunchPlan, operations: list[tuple[Any, ...]]) -> None:
        """The sorted path's kernels, after the memsets of counts (or of the workspace's in-degrees) and skipped
        (scatter_add.cu, "Sorted path")."""
        kernel = functools.partial(self._kernel, operations)
        sort = plan.sort
        assert sort is not None
        layout, nodes, edges, features = sort.layout, self.num_nodes, self.num_edges, self.num_features
        cursor, tile_sums, counts = (WORKSPACE, 0), (WORKSPACE, layout.tile_sums_offset), (COUNTS, 0)
        if sort.counts_offset is not None:  # no counts asked for: the in-degrees the sort needs, in the workspace
            counts = (WORKSPACE, sort.counts_offset)
            operations.append((MEMSET, counts, 0, 2 * nodes))
        pairs, head, tail = ((WORKSPACE, at) for at in (layout.sorted_offset, layout.head_offset, layout.tail_offset))
        kernel(sort.count, (INDEX, 0), edges, nodes, counts, self._skipped, sort.private_nodes)
        if layout.tiles > 1:  # else sort_cursors scans the one tile alone
            kernel(KernelLaunch("sort_tile_sums", (layout.tiles, 1)), counts, nodes, layout.tile_nodes, tile_sums)
            kernel(KernelLaunch("sort_scan_tiles", (1, 1)), tile_sums, layout.tiles, cursor, nodes)
        kernel(KernelLaunch("sort_cursors", (layout.tiles, 1)), counts, nodes, layout.tile_nodes, tile_sums, cursor)
        for node_lo, node_hi in sort.place_ranges:
            kernel(KernelLaunch("sort_place", sort.count.grid, sort.count.shared_bytes), (INDEX, 0), edges, nodes,
                   cursor, pairs, sort.private_nodes, node_lo, node_hi)
        kernel(sort.reduce, (SRC, 0), pairs, cursor, nodes, features, layout.span, (STATE, 0), head, tail, edges)
        if sort.fixup is not None:
            kernel(sort.fixup, pairs, cursor, nodes, features, layout.span, layout.ranges, (STATE, 0), head, tail)


def bind_driver_calls(driver: Any, operations: list[tuple[Any, ...]],
                      pointers: tuple[Any, ...]) -> tuple[tuple[Any, tuple[Any, ...], str], ...]:
    """The driver calls of a launch sequence for these pointers and stream: (cuda.bindings function, its
    arguments, what it does for an error message), each argument already the type the wrapper takes fastest
    (CUstream, CUdeviceptr, the kernelParams address as an int), so that a launch only calls function(*arguments)."""
    stream = driver.CUstream(int(pointers[STREAM]))
    calls: list[tuple[Any, tuple[Any, ...], str]] = []
    for operation in operations:
        if operation[0] == MEMSET:
            _, (position, offset), value, count = operation
            what = f"cuMemsetD32Async of {count} words at the {_POSITION_NAMES[position]} (+{offset} bytes)"
            calls.append((driver.cuMemsetD32Async,
                          (driver.CUdeviceptr(pointers[position] + offset), value, count, stream), what))
            continue
        kind, function, grid_x, grid_y, shared_bytes, arguments, name, block = operation
        grid = (function, grid_x, grid_y, 1, block, 1, 1, shared_bytes, stream)
        if kind == KERNEL:
            calls.append((driver.cuLaunchKernel, (*grid, arguments.address, 0), f"cuLaunchKernel of {name}"))
        else:
            calls.append((driver.cuLaunchCooperativeKernel, (*grid, arguments.address),
                          f"cuLaunchCooperativeKernel of {name}"))
    return tuple(calls)


_SEEN_ONCE, _NO_GRAPH = "seen once", "no graph"  # PreparedScatterAdd._replays' states of a pointer set
_REPLAYS_KEPT = 8  # pointer sets a PreparedScatterAdd remembers (e.g. batches rotating over a few buffers)


def _close_graphs(replays: dict[tuple[Any, ...], Any], raising: bool = True) -> None:
    """Frees the graphs of a PreparedScatterAdd's replays (replays already queued still run) and forgets them;
    raising=False (the finalizer) stops at the first CUDA error instead of raising it."""
    try:
        for seen in replays.values():
            if isinstance(seen, tuple):
                seen[0].close()
    except CudaError:
        if raising:
            raise
    finally:
        replays.clear()


def _check_pointers(state: int, src: int, index: int, num_nodes: int, num_edges: int) -> None:
    if num_edges > 0 and (not src or not index):
        raise ValueError(f"src and index must be device addresses when num_edges = {num_edges} > 0")
    if num_edges > 0 and num_nodes > 0 and not state:
        raise ValueError(f"state must be a device address when num_nodes = {num_nodes} > 0")


_PREPARED_KEPT = 64


def scatter_add_launch(
    *,
    state: int,
    src: int,
    index: int,
    counts: int,
    num_nodes: int,
    num_edges: int,
    num_features: int,
    dtype: object,
    stream: int,
    workspace: int = 0,
    workspace_size: int = 0,
    skipped: int = 0,
    algorithm: str = "auto",
    node_passes: int | None = None,
    paired: bool | None = None,
) -> LaunchPlan | None:
    """state[index[e], :] += src[e, :] for e < num_edges, in place on `stream`; counts[n] = #{e: index[e] = n}.

    All pointers are device addresses (int; 0 = absent). counts (int64 [N, 1]) and skipped (one 64-bit
    word: rows whose index is < 0 or >= num_nodes, which are never written) are zeroed and filled when given;
    counts = 0 skips them and their O(N) zeroing. float16 needs `workspace` of at least
    scatter_add_workspace_size(...) bytes; float32 runs without one, and with it where that size is not 0.
    The paired path (F = 1) sums in the counts buffer itself, so it needs counts 8-byte aligned (float16 without
    counts: in the workspace), and the paired path in the workspace, grid_table and split_table an 8-byte aligned
    workspace (cuMemAlloc and TensorRT give 256); else "auto" takes another path. `algorithm` (plan.py
    ALGORITHMS; UNCOUNTED_ALGORITHMS without counts only), `node_passes` and `paired` override plan.py's choices
    for tests and benchmarks. Returns
    the plan (None when E = 0). The work for each set of sizes and options is prepared once (a PreparedScatterAdd,
    kept per thread and checked against the current CUDA context).
    """
    key = (dtype, num_nodes, num_edges, num_features, not counts, not skipped, workspace_size, algorithm,
           node_passes, paired)
    seam = backend
    local = seam.threads
    last_key, prepared = local.last
    if key != last_key:  # a tuple comparison; the dict lookup would hash all 10 fields first
        prepared = local.launches.get(key)
        if prepared is not None:
            local.last = (key, prepared)
    get_id = seam.fast_id
    if prepared is not None and get_id is not None:
        # The hot path, with current_context() and the pointer check of a PreparedScatterAdd call inlined: each
        # Python call saved counts against what this entry adds to the launch (bench_enqueue.py times it)
        result = get_id(None)
        if not result[0] and result[1] == prepared.context:
            pointers = (state, src, index, counts, workspace, skipped, stream)
            if pointers == prepared._pointers:
                return prepared._issue(pointers)
            return prepared(state, src, index, counts, workspace, stream, skipped)
    if prepared is None or prepared.context != seam.context_id():
        resolved = kernel_dtype(dtype)
        _validate_sizes(num_nodes, num_edges, num_features)
        _check_pointers(state, src, index, num_nodes, num_edges)
        if resolved == np.float16:  # before any CUDA call: a float16 launch without its workspace is refused
            table = table_layout(num_nodes, num_edges, num_features)
            if table is not None:
                _check_table_workspace(table.nbytes, workspace, workspace_size)
        cache = local.launches
        if len(cache) >= _PREPARED_KEPT:
            cache.clear()
        prepared = cache[key] = PreparedScatterAdd(
            num_nodes=num_nodes, num_edges=num_edges, num_features=num_features, dtype=resolved,
            with_counts=bool(counts), with_skipped=bool(skipped), workspace_size=workspace_size,
            algorithm=algorithm, node_passes=node_passes, paired=paired)
        local.last = (key, prepared)
    return prepared(state, src, index, counts, workspace, stream, skipped)
