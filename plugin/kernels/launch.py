"""Loads the compiled kernels into the current CUDA context and launches a scatter-add on a stream.

`prepare_kernels(dtype)` compiles (NVRTC, cached per arch and dtype) and loads the module into the current
context; the plugin calls it outside enqueue. `scatter_add_launch` only issues asynchronous driver calls on
the caller's stream: memsets of counts, skipped and the float16 table, then one kernel per node range, then
(float16) apply_table or (paired path) fold_pairs. No synchronisation, allocation or host copy.

Host time per launch is what a small in-place update costs (every engine execution pays it), so the plan and
the kernel arguments are made once per set of sizes (`PreparedScatterAdd`; the plugin makes one in
on_shape_change) and a launch only writes changed pointers into a prepared kernel-parameter buffer and
calls cuMemsetD32Async / cuLaunchKernel with it (the buffer packed at the kernel's parameter offsets and
passed as `extra` where the driver gives them, cuFuncGetParamInfo; kernelParams otherwise). From the second
launch with the same pointers and stream on, those driver calls are replayed from a CUDA graph captured once
(one cuGraphLaunch: about 2 us of host time on the H200's host against about 5 us for one cuLaunchKernel),
unless the caller's stream is being captured itself (plugin/kernels/NOTES.md, "CUDA graph replay").
"""

import ctypes
import functools
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from plugin.cuda_check import CudaError, check
from plugin.cuda_graph import CapturedGraph, capture_stream
from plugin.kernels.compile import (
    compile_scatter_add,
    grid_sync_available,
    kernel_dtype,
    nvrtc_supported_archs,
    pick_arch,
)
from plugin.kernels.plan import (
    MAX_EDGES,
    MAX_NODES,
    PAIR_BYTES,
    PAIRED_MAX_EDGES,
    THREADS_PER_BLOCK,
    UNCOUNTED_ALGORITHMS,
    DeviceInfo,
    LaunchPlan,
    grid_table_workspace_bytes,
    pairs_workspace_bytes,
    partition_layout,
    plan_launch,
    sort_layout,
    split_table_workspace_bytes,
    table_layout,
    vector_width,
)

KERNEL_NAMES = tuple(
    f"{kind}_v{vec}" for kind in ("scatter_global", "scatter_hashed", "scatter_shared", "apply_table") for vec in (1, 2, 4)
) + ("scatter_global_pairs", "scatter_shared_pairs", "fold_pairs", "fold_pair_chunk") + (
    "sort_count", "sort_tile_sums", "sort_scan_tiles", "sort_cursors", "sort_place") + tuple(
    f"{kind}_v{vec}" for kind in ("sort_reduce", "sort_fixup", "chunk_reduce", "scatter_direct") for vec in (1, 2, 4)) + (
    "scatter_owned", "scatter_clustered", "partition_chunks", "reduce_buckets", "scatter_split_table",
    "apply_split_table", "scatter_block_table")
# kernels that may use all the opt-in shared memory (their dynamic shared memory is raised to it at load)
LARGE_SHARED_KERNELS = ("scatter_shared", "chunk_reduce", "scatter_owned", "partition_chunks", "reduce_buckets")
# with cooperative groups only: the zeroing scatters and the grid_table path's kernel
ZEROING_KERNEL_NAMES = tuple(f"scatter_global_zeroing_v{vec}" for vec in (1, 2, 4)) + ("scatter_grid_table",)

@dataclass(frozen=True)
class LoadedKernels:
    """The module loaded into one CUDA context for one dtype, its functions and the device's properties."""

    module: Any
    functions: dict[str, Any]
    device: DeviceInfo
    grid_sync: bool = False  # the scatter_global_zeroing_v* kernels exist (compiled with cooperative groups)


_loaded: dict[tuple[int, str], LoadedKernels] = {}
_load_lock = threading.Lock()
_driver_ready = False
# driver.cuCtxGetId once cuCtxGetId(NULL) was seen to give the current context's id: then one call tells it
_current_id: Any = None


def current_context() -> int:
    """A process-unique id of the current CUDA context (cuCtxGetId: unlike the handle, never reused after a
    context is destroyed); if no context is current, device 0's primary context is made current first.

    One driver call once the first call has shown that cuCtxGetId(NULL) names the current context."""
    get_id = _current_id
    if get_id is not None:
        result = get_id(None)
        if not result[0]:  # CUDA_SUCCESS is 0
            return result[1]
    return _make_context_current()


def _make_context_current() -> int:
    global _driver_ready, _current_id
    from cuda.bindings import driver

    if not _driver_ready:
        try:
            result = driver.cuInit(0)
        except Exception as error:  # cuda-python raises (rather than returning a status) when libcuda is missing
            from common.errors import MissingDependencyError

            raise MissingDependencyError(f"no CUDA driver here ({error}); the kernel needs an NVIDIA GPU") from None
        check(result)
        _driver_ready = True
    context = check(driver.cuCtxGetCurrent())
    if int(context) == 0:
        device = check(driver.cuDeviceGet(0))
        context = check(driver.cuDevicePrimaryCtxRetain(device))
        check(driver.cuCtxSetCurrent(context))
    context_id = int(check(driver.cuCtxGetId(context)))
    status, null_id = driver.cuCtxGetId(None)
    _current_id = driver.cuCtxGetId if int(status) == 0 and int(null_id) == context_id else None
    return context_id


def read_device_info() -> DeviceInfo:
    """Compute capability, SM count, shared-memory limits and L2 size of the current context's device."""
    from cuda.bindings import driver

    device = check(driver.cuCtxGetDevice())
    attribute = driver.CUdevice_attribute

    def read(name: str) -> int:
        return int(check(driver.cuDeviceGetAttribute(getattr(attribute, name), device)))

    return DeviceInfo(
        arch=10 * read("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR") + read("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
        sm_count=read("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
        max_shared_per_block=read("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        shared_per_sm=read("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        l2_bytes=read("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"),
    )


def prepare_kernels(dtype: object) -> LoadedKernels:
    """Compiles (once per arch and dtype) and loads the kernels into the current context (once per context).

    Call it outside the stream-ordered hot path (the plugin does at shape change); scatter_add_launch calls
    it too, as a fallback, and then finds the module already loaded.
    """
    resolved = kernel_dtype(dtype)
    key = (current_context(), resolved.str)
    loaded = _loaded.get(key)
    if loaded is not None:
        return loaded
    with _load_lock:
        loaded = _loaded.get(key)
        if loaded is None:
            loaded = _load(resolved)
            _loaded[key] = loaded
    return loaded


def _load(dtype: np.dtype) -> LoadedKernels:
    from cuda.bindings import driver

    device = read_device_info()
    cubin = compile_scatter_add(pick_arch(device.arch, nvrtc_supported_archs()), dtype)
    module = check(driver.cuModuleLoadData(cubin))
    grid_sync = grid_sync_available()
    names = KERNEL_NAMES + (ZEROING_KERNEL_NAMES if grid_sync else ())
    functions = {name: check(driver.cuModuleGetFunction(module, name.encode())) for name in names}
    attribute = driver.CUfunction_attribute
    for name, function in functions.items():
        if name.startswith(LARGE_SHARED_KERNELS):
            static = check(driver.cuFuncGetAttribute(attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function))
            check(driver.cuFuncSetAttribute(
                function, attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, device.max_shared_per_block - static
            ))
    return LoadedKernels(module, functions, device, grid_sync)


@functools.lru_cache(maxsize=256)
def _cached_plan(num_nodes: int, num_edges: int, num_features: int, dtype: np.dtype, device: DeviceInfo, vec: int,
                 algorithm: str, node_passes: int | None, with_counts: bool, counts_aligned: bool,
                 pairs_workspace: bool, paired: bool | None, max_slice_width: int | None,
                 zero_in_kernel: bool | None,
                 with_skipped: bool, sort_workspace: bool, partition_workspace: bool,
                 grid_table_workspace: bool, split_table_workspace: bool) -> LaunchPlan:
    return plan_launch(num_nodes, num_edges, num_features, dtype, device, vec, algorithm, node_passes,
                       with_counts=with_counts, counts_aligned=counts_aligned, pairs_workspace=pairs_workspace,
                       paired=paired, max_slice_width=max_slice_width, zero_in_kernel=zero_in_kernel,
                       with_skipped=with_skipped, sort_workspace=sort_workspace,
                       partition_workspace=partition_workspace, grid_table_workspace=grid_table_workspace,
                       split_table_workspace=split_table_workspace)


def _validate_sizes(num_nodes: int, num_edges: int, num_features: int) -> None:
    for name, value in (("num_nodes", num_nodes), ("num_edges", num_edges), ("num_features", num_features)):
        if not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
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


# Positions in the pointer tuple a prepared launch is called with (the stream last), and the kernel arguments
# derived from them: an argument is (position, byte offset) -- e.g. the float16 table's values are
# (WORKSPACE, values_offset).
STATE, SRC, INDEX, COUNTS, WORKSPACE, SKIPPED, STREAM = range(7)
_POSITION_NAMES = ("state", "src", "index", "counts", "workspace", "skipped", "stream")
_MEMSET, _KERNEL, _COOPERATIVE = 0, 1, 2
# cuLaunchKernel's `extra` keys: the values of CUDA's CU_LAUNCH_PARAM_BUFFER_POINTER, _BUFFER_SIZE and _END
_LAUNCH_PARAM_BUFFER_POINTER, _LAUNCH_PARAM_BUFFER_SIZE, _LAUNCH_PARAM_END = 1, 2, 0


class _KernelArguments:
    """The arguments of one kernel launch, packed once into one buffer, in the two forms cuLaunchKernel takes:
    `address` (kernelParams: a void* array pointing at each argument in the buffer) and `extra_address`
    (extra: CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END over the whole buffer, set by `lay_out`).

    Until `lay_out` gives the kernel's own parameter layout (cuFuncGetParamInfo), each argument has an 8-byte
    slot (little-endian: a 4-byte argument reads the low half of its slot), which only kernelParams can pass.
    Constants are written once; pointer arguments by `patch` when the pointers change."""

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.values = values
        self.extra_address = 0  # no extra form until the kernel's layout is known
        self._fill(tuple((8 * i, 8) for i in range(len(values))))

    def lay_out(self, layout: tuple[tuple[int, int], ...]) -> None:
        """Packs the arguments at the kernel's (offset, size) per parameter, as cuFuncGetParamInfo gives them,
        and makes the extra form; the pointer arguments must be patched again afterwards."""
        if len(layout) != len(self.values):
            raise ValueError(f"the kernel takes {len(layout)} parameters; {len(self.values)} prepared")
        self.size = ctypes.c_size_t(self._fill(layout))  # the arguments' end, without tail padding
        self.extra = (ctypes.c_void_p * 5)(_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(self.buffer),
                                           _LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(self.size), _LAUNCH_PARAM_END)
        self.extra_address = ctypes.addressof(self.extra)

    def _fill(self, layout: tuple[tuple[int, int], ...]) -> int:
        """Packs the arguments at these (offset, size) places; returns where the last one ends."""
        end = max((offset + nbytes for offset, nbytes in layout), default=0)
        self.buffer = (ctypes.c_uint64 * max(1, -(-end // 8)))()
        base = ctypes.addressof(self.buffer)
        self.pointers = (ctypes.c_void_p * max(1, len(layout)))(*(base + offset for offset, _ in layout))
        self.address = ctypes.addressof(self.pointers)
        self.patches: list[tuple[int, int, int]] = []  # (8-byte word of the buffer, pointer position, byte offset)
        for (offset, nbytes), value in zip(layout, self.values):
            if isinstance(value, tuple):
                if nbytes != 8 or offset % 8:
                    raise ValueError(f"a pointer parameter must be 8 bytes at an 8-byte offset; got {nbytes} at {offset}")
                self.patches.append((offset // 8, value[0], value[1]))
            else:
                data = (int(value) & ((1 << (8 * nbytes)) - 1)).to_bytes(nbytes, "little")
                ctypes.memmove(base + offset, data, nbytes)
        return end

    def patch(self, pointers: tuple[int, ...]) -> None:
        for word, position, offset in self.patches:
            base = pointers[position]
            self.buffer[word] = base + offset if base else 0


def parameter_layout(driver: Any, function: Any, count: int) -> tuple[tuple[int, int], ...] | None:
    """(offset, size) of each of the first `count` parameters of `function` (cuFuncGetParamInfo, CUDA 12.4
    drivers and later); None where the driver or the bindings lack it, or where the kernel takes a different
    number of parameters (then the launch passes kernelParams, which needs no layout)."""
    get_info = getattr(driver, "cuFuncGetParamInfo", None)
    if get_info is None:
        return None
    layout: list[tuple[int, int]] = []
    try:
        for index in range(count + 1):
            result = get_info(function, index)
            if index == count:  # one past the last: must not exist
                return None if not result[0] else tuple(layout)
            if result[0]:
                return None
            layout.append((int(result[1]), int(result[2])))
    except Exception:  # cuda.bindings raises where the driver has no such entry point
        return None
    return tuple(layout)


class _LaunchSequence:
    """The driver calls of one plan, in order: (_MEMSET, (position, offset), value, count) and
    (_KERNEL or _COOPERATIVE, function, grid x, grid y, shared bytes, arguments, kernel name, block size)."""

    def __init__(self, plan: LaunchPlan | None, operations: list[tuple[Any, ...]]) -> None:
        self.plan = plan
        self.operations = operations
        self.arguments = [op[5] for op in operations if op[0] != _MEMSET]


class PreparedScatterAdd:
    """scatter_add_launch for fixed sizes, dtype and options, with the plan decided and the kernel arguments
    packed once; calling it with the pointers only issues the driver calls (one kernel launch for a small
    float32 update, with or without counts, where the kernels have cooperative groups), and from the second
    call with the same pointers and stream on replays them from a CUDA graph (`graph_replay`).

    Made in the CUDA context it will launch in (the plugin prepares one in on_shape_change). Not thread-safe:
    a call patches its argument buffer before it launches, so each thread (or execution context) needs its
    own; scatter_add_launch keeps one per thread. Choices that depend on the pointers (vector width:
    alignment of src and the destination; paired path: 8-byte aligned counts) are re-planned when the
    pointers change, and each alignment's plan is kept.
    """

    def __init__(self, *, num_nodes: int, num_edges: int, num_features: int, dtype: object, with_counts: bool,
                 with_skipped: bool = False, workspace_size: int = 0, algorithm: str = "auto",
                 node_passes: int | None = None, paired: bool | None = None,
                 max_slice_width: int | None = None, zero_in_kernel: bool | None = None) -> None:
        self.dtype = kernel_dtype(dtype)
        _validate_sizes(num_nodes, num_edges, num_features)
        self.num_nodes, self.num_edges, self.num_features = int(num_nodes), int(num_edges), int(num_features)
        self.with_counts, self.with_skipped = bool(with_counts), bool(with_skipped)
        self.table = table_layout(num_nodes, num_edges, num_features) if self.dtype == np.float16 else None
        if self.table is not None:  # also where the paired path will not use it: the same workspace everywhere
            _check_table_workspace(self.table.nbytes, 1, workspace_size)
        self.pairs_bytes = pairs_workspace_bytes(num_nodes, num_edges, num_features, with_counts=with_counts)
        self.pairs_workspace = self.pairs_bytes > 0 and workspace_size >= self.pairs_bytes  # else none beyond 2^24
        sort = sort_layout(num_nodes, num_edges, num_features) if with_counts else None
        self.sort_workspace = sort is not None and workspace_size >= sort.nbytes  # the sorted path may run
        partition = None if with_counts else partition_layout(num_edges, num_features)
        self.partition_workspace = partition is not None and workspace_size >= partition.nbytes
        grid = grid_table_workspace_bytes(num_nodes, num_edges, num_features, self.dtype, with_counts=with_counts)
        self.grid_table_workspace = grid > 0 and workspace_size >= grid  # and 8-byte aligned: checked per call
        split = split_table_workspace_bytes(num_nodes, num_edges, num_features, self.dtype, with_counts=with_counts,
                                            forced=True)  # this launch's table, wherever the path may run
        self.split_table_workspace = split > 0 and workspace_size >= split  # and 8-byte aligned: checked per call
        self.options = (algorithm, node_passes, paired, max_slice_width)
        self.kernels = prepare_kernels(self.dtype)
        self.context = current_context()
        if zero_in_kernel and not self.kernels.grid_sync:
            raise ValueError("zero_in_kernel needs kernels compiled with cooperative groups (CCCL headers: "
                             "pip install nvidia-cuda-cccl)")
        # None: plan.py decides where it pays; the kernels must have it for anything but False
        self.zero_in_kernel = zero_in_kernel if self.kernels.grid_sync else False
        from cuda.bindings import driver

        self._driver = driver
        self._sequences: dict[tuple[int, bool, bool], _LaunchSequence] = {}
        self._pointers: tuple[Any, ...] | None = None  # (state, src, index, counts, workspace, skipped, stream)
        self._sequence: _LaunchSequence | None = None  # the bound pointers' driver calls, as operations
        self._calls: tuple[tuple[Any, tuple[Any, ...], str], ...] = ()  # (driver function, arguments, what)
        self._plan: LaunchPlan | None = None
        # Graph replay: per pointer set _SEEN_ONCE, _NO_GRAPH or (CapturedGraph, its replay, its plan); the
        # current pointers' replay (executable graph, CUstream) or None, and whether self._calls are bound to
        # them (pointers switched to by their graph are bound only if their driver calls are needed). The
        # graphs are freed with this object.
        self._replays: dict[tuple[Any, ...], Any] = {}
        self._replay: tuple[Any, Any] | None = None
        self._bound = False
        self._graph_launch, self._is_capturing = driver.cuGraphLaunch, driver.cuStreamIsCapturing
        self._not_capturing = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
        # freed with this object (at exit the driver frees them); by then their context may be gone, which is
        # no error of the program's: the finalizer does not raise
        weakref.finalize(self, _close_graphs, self._replays, raising=False).atexit = False

    # "extra": a kernel launch passes its packed argument buffer as cuLaunchKernel's `extra` where the driver
    # gives the kernel's parameter layout (cuFuncGetParamInfo), else kernelParams; cooperative launches keep
    # kernelParams (cuLaunchCooperativeKernel has no `extra`). "kernel_params": kernelParams everywhere. Set it
    # on an instance before its first call (tests and benchmarks compare the two).
    launch_form = "extra"
    # True: the second launch with the same pointers and stream captures the driver calls into a CUDA graph (on
    # a stream of the launcher's own), and from then on each launch with them is its replay, one cuGraphLaunch,
    # unless the caller's stream is being captured (then the driver calls are issued, into the caller's graph).
    # False (set on an instance): the driver calls every time (benchmarks time both).
    graph_replay = True

    def __call__(self, state: int, src: int, index: int, counts: int, workspace: int, stream: int,
                 skipped: int = 0) -> LaunchPlan | None:
        """Issues the launch on `stream` (asynchronous; no allocation, no synchronisation); returns the plan.

        With the pointers and stream of the last call, this is one tuple comparison, a capture-status query and
        the graph's replay, or the driver calls with arguments made when they changed (cuda.bindings' own
        wrappers: measured faster than ctypes, NOTES.md)."""
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
        on = capture_stream(self.context)
        calls = bind_driver_calls(self._driver, self._sequence.operations, pointers[:STREAM] + (on,))

        def issue() -> None:
            for call, arguments, what in calls:
                check(call(*arguments), call=what)

        try:
            graph = CapturedGraph(on, issue)
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
        than planned (e.g. under MPS), after which this launch makes no cooperative launch: it zeroes with
        memsets, and float16 takes another path than grid_table. Where the caller's stream was being captured,
        the refused launch has invalidated that capture: the fallback is kept for later launches, and this one
        raises CudaError saying so instead of issuing more calls into the broken capture."""
        driver = self._driver
        too_large = driver.CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
        if call == driver.cuLaunchCooperativeKernel and result[0] == too_large:
            self.zero_in_kernel, self._sequences, self._pointers = False, {}, None
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
        if (self.pairs_workspace or self.sort_workspace or self.partition_workspace or self.split_table_workspace
                or self.grid_table_workspace) and not workspace:
            raise ValueError("this launch was prepared with a workspace; got none")
        table_dest = workspace + self.table.values_offset if self.table is not None else state
        vec = vector_width(self.num_features, src, self.dtype.itemsize, table_dest)
        key = (vec, counts % PAIR_BYTES == 0, workspace % 8 == 0)
        sequence = self._sequences.get(key)
        if sequence is None:
            sequence = self._sequences[key] = self._build(vec, counts_aligned=key[1], workspace_aligned=key[2])
            if self.launch_form == "extra":
                for operation in sequence.operations:
                    if operation[0] == _KERNEL:
                        arguments = operation[5]
                        layout = parameter_layout(self._driver, operation[1], len(arguments.values))
                        if layout is not None:
                            arguments.lay_out(layout)
        for arguments in sequence.arguments:
            arguments.patch(pointers)
        self._calls = bind_driver_calls(self._driver, sequence.operations, pointers)
        self._pointers, self._plan, self._sequence, self._bound = pointers, sequence.plan, sequence, True
        replay = self._replays.get(pointers)
        self._replay = replay[1] if isinstance(replay, tuple) else None

    def _build(self, vec: int, *, counts_aligned: bool, workspace_aligned: bool) -> _LaunchSequence:
        """The driver calls for one vector width, counts alignment and workspace alignment (the grid_table and
        split_table paths need 8 bytes; see scatter_add_launch)."""
        num_nodes, num_edges, num_features = self.num_nodes, self.num_edges, self.num_features
        operations: list[tuple[Any, ...]] = []
        plan = None
        if num_edges > 0:
            algorithm, node_passes, paired, max_slice_width = self.options
            plan = _cached_plan(num_nodes, num_edges, num_features, self.dtype, self.kernels.device, vec, algorithm,
                                node_passes, self.with_counts, counts_aligned, self.pairs_workspace, paired,
                                max_slice_width, self.zero_in_kernel, self.with_skipped, self.sort_workspace,
                                self.partition_workspace, self.grid_table_workspace and workspace_aligned,
                                self.split_table_workspace and workspace_aligned)
        if plan is None or not plan.zeroing:
            if self.with_counts:
                operations.append((_MEMSET, (COUNTS, 0), 0, 2 * num_nodes))  # also the paired path's zero pairs
            if self.with_skipped:
                operations.append((_MEMSET, (SKIPPED, 0), 0, 2))
        if plan is None:
            return _LaunchSequence(None, operations)
        if plan.sort is not None:
            return _LaunchSequence(plan, operations + self._sort_operations(plan))
        if plan.algorithm in UNCOUNTED_ALGORITHMS:
            return _LaunchSequence(plan, operations + self._uncounted_operations(plan))
        table = plan.table  # None on the paired path
        if plan.paired:  # (value, count) pairs in the counts, or beyond 2^24 edges in the workspace
            dest: tuple[int, int] = (COUNTS, 0) if plan.pair_chunks == 1 else (WORKSPACE, 0)
        elif table is not None:
            dest = (WORKSPACE, table.values_offset)
        else:
            dest = (STATE, 0)
        keys: Any = (WORKSPACE, 0) if table is not None and table.hashed else 0  # one slot per node: no keys
        if table is not None:
            if keys:
                operations.append((_MEMSET, keys, 0xFFFFFFFF, table.capacity))
            operations.append((_MEMSET, dest, 0, table.capacity * num_features))
        if plan.pair_chunks > 1:
            operations.append((_MEMSET, dest, 0, 2 * num_nodes))
        counts: Any = 0 if plan.paired or not self.with_counts else (COUNTS, 0)
        skipped: Any = (SKIPPED, 0) if self.with_skipped else 0
        functions = self.kernels.functions
        scatter = plan.scatter
        itemsize = self.dtype.itemsize
        for chunk in range(plan.pair_chunks):
            first = chunk * PAIRED_MAX_EDGES if plan.pair_chunks > 1 else 0
            edges = num_edges - first if plan.pair_chunks == 1 else min(PAIRED_MAX_EDGES, num_edges - first)
            src, index = (SRC, first * num_features * itemsize), (INDEX, first * 8)
            for node_lo, node_hi in plan.node_ranges:
                if plan.algorithm == "shared":
                    values: tuple[Any, ...] = (src, index, edges, num_nodes, num_features, plan.lanes_log2,
                                               plan.slice_width, dest, counts, skipped)
                elif plan.algorithm == "chunked":
                    values = (src, index, edges, num_nodes, num_features, plan.chunk_edges, dest, counts, skipped)
                else:
                    table_log2 = table.table_log2 if table is not None else 0
                    values = (src, index, edges, num_nodes, num_features, plan.lanes_log2, dest, keys, table_log2,
                              counts, skipped, node_lo, node_hi)
                kind = _COOPERATIVE if plan.cooperative else _KERNEL
                operations.append((kind, functions[scatter.name], *scatter.grid, scatter.shared_bytes,
                                   _KernelArguments(values), scatter.name, scatter.block))
            if plan.fold is not None and plan.pair_chunks > 1:
                last = int(chunk == plan.pair_chunks - 1)
                operations.append((_KERNEL, functions[plan.fold.name], *plan.fold.grid, 0,
                                   _KernelArguments(((STATE, 0), dest, (COUNTS, 0), num_nodes, last)), plan.fold.name,
                                   plan.fold.block))
        if plan.fold is not None and plan.pair_chunks == 1:
            operations.append((_KERNEL, functions[plan.fold.name], *plan.fold.grid, 0,
                               _KernelArguments(((STATE, 0), (COUNTS, 0), num_nodes)), plan.fold.name, plan.fold.block))
        if plan.apply is not None and table is not None:
            values = ((STATE, 0), keys, dest, table.capacity, num_features, plan.apply_lanes_log2, num_nodes)
            operations.append((_KERNEL, functions[plan.apply.name], *plan.apply.grid, 0, _KernelArguments(values),
                               plan.apply.name, plan.apply.block))
        return _LaunchSequence(plan, operations)

    def _uncounted_operations(self, plan: LaunchPlan) -> list[tuple[Any, ...]]:
        """The kernels of the paths without counts (scatter_add.cu, "Launches without counts"), after the memset
        of skipped."""
        num_nodes, num_edges, num_features = self.num_nodes, self.num_edges, self.num_features
        skipped: Any = (SKIPPED, 0) if self.with_skipped else 0
        scatter = plan.scatter
        operations: list[tuple[Any, ...]] = []
        table = plan.table  # float16 direct: the one-slot table, zeroed here, applied after the scatter
        if plan.algorithm == "direct":
            dest: Any = (STATE, 0)
            if table is not None:
                dest = (WORKSPACE, table.values_offset)
                operations.append((_MEMSET, dest, 0, table.capacity * num_features))
            values: tuple[Any, ...] = ((SRC, 0), (INDEX, 0), num_edges, num_nodes, num_features, dest, skipped)
        elif plan.algorithm == "block_table":
            values = ((SRC, 0), (INDEX, 0), num_edges, num_nodes, plan.block_log2, (STATE, 0), skipped)
        elif plan.grid is not None:
            values = ((SRC, 0), (INDEX, 0), num_edges, num_nodes, (WORKSPACE, 0), plan.grid.capacity,
                      int(plan.grid.hashed), (STATE, 0), skipped)
        elif plan.split is not None:  # a memset clears the slots (all ones: node -1), the scan applies them
            operations.append((_MEMSET, (WORKSPACE, 0), 0xFFFFFFFF, 2 * plan.split.capacity))
            values = ((SRC, 0), (INDEX, 0), num_edges, num_nodes, (WORKSPACE, 0), plan.split.capacity, skipped)
        elif plan.owned is not None:
            values = ((SRC, 0), (INDEX, 0), num_edges, num_nodes, num_features, plan.owned.capacity, plan.owned.probes,
                      (STATE, 0), skipped)
        else:
            layout = plan.partition
            assert layout is not None and plan.reduce is not None
            nodes, sums, offsets = (WORKSPACE, 0), (WORKSPACE, layout.sums_offset), (WORKSPACE, layout.offsets_offset)
            values = ((SRC, 0), (INDEX, 0), num_edges, num_nodes, num_features, layout.chunk_edges, layout.buckets,
                      layout.chunk_capacity, nodes, sums, offsets, skipped)
            reduce = plan.reduce
            reduce_values = (nodes, sums, offsets, num_features, layout.chunk_edges, layout.chunks,
                             layout.bucket.capacity, layout.bucket.probes, (STATE, 0), num_edges, num_nodes)
        functions = self.kernels.functions
        kind = _COOPERATIVE if plan.cooperative else _KERNEL
        operations.append((kind, functions[scatter.name], *scatter.grid, scatter.shared_bytes,
                           _KernelArguments(values), scatter.name, scatter.block))
        if plan.apply is not None and table is not None:
            apply_values = ((STATE, 0), 0, (WORKSPACE, table.values_offset), table.capacity, num_features,
                            plan.apply_lanes_log2, num_nodes)
            operations.append((_KERNEL, functions[plan.apply.name], *plan.apply.grid, 0, _KernelArguments(apply_values),
                               plan.apply.name, plan.apply.block))
        if plan.reduce is not None:
            operations.append((_KERNEL, functions[reduce.name], *reduce.grid, reduce.shared_bytes,
                               _KernelArguments(reduce_values), reduce.name, reduce.block))
        if plan.split is not None:
            apply = plan.split.apply
            operations.append((_KERNEL, functions[apply.name], *apply.grid, 0,
                               _KernelArguments(((WORKSPACE, 0), plan.split.capacity, num_nodes, (STATE, 0))),
                               apply.name, apply.block))
        return operations

    def _sort_operations(self, plan: LaunchPlan) -> list[tuple[Any, ...]]:
        """The sorted path's kernels, after the memsets of counts and skipped (scatter_add.cu, "Sorted path")."""
        sort = plan.sort
        assert sort is not None
        layout, functions = sort.layout, self.kernels.functions
        num_nodes, num_edges, num_features = self.num_nodes, self.num_edges, self.num_features
        cursor, tile_sums, pairs = (WORKSPACE, 0), (WORKSPACE, layout.tile_sums_offset), (WORKSPACE, layout.sorted_offset)
        head, tail = (WORKSPACE, layout.head_offset), (WORKSPACE, layout.tail_offset)
        skipped: Any = (SKIPPED, 0) if self.with_skipped else 0
        kernels: list[tuple[str, tuple[int, int], int, tuple[Any, ...]]] = [(
            "sort_count", sort.count.grid, sort.count.shared_bytes,
            ((INDEX, 0), num_edges, num_nodes, (COUNTS, 0), skipped, sort.private_nodes))]
        if layout.tiles > 1:  # else sort_cursors scans the one tile alone
            kernels.append(("sort_tile_sums", (layout.tiles, 1), 0,
                            ((COUNTS, 0), num_nodes, layout.tile_nodes, tile_sums)))
            kernels.append(("sort_scan_tiles", (1, 1), 0, (tile_sums, layout.tiles, cursor, num_nodes)))
        kernels.append(("sort_cursors", (layout.tiles, 1), 0,
                        ((COUNTS, 0), num_nodes, layout.tile_nodes, tile_sums, cursor)))
        for node_lo, node_hi in sort.place_ranges:
            kernels.append(("sort_place", sort.count.grid, sort.count.shared_bytes,
                            ((INDEX, 0), num_edges, num_nodes, cursor, pairs, sort.private_nodes, node_lo, node_hi)))
        kernels.append((sort.reduce.name, sort.reduce.grid, 0,
                        ((SRC, 0), pairs, cursor, num_nodes, num_features, layout.span, (STATE, 0), head, tail,
                         num_edges)))
        if sort.fixup is not None:
            kernels.append((sort.fixup.name, sort.fixup.grid, 0,
                            (pairs, cursor, num_nodes, num_features, layout.span, layout.ranges, (STATE, 0), head, tail)))
        return [(_KERNEL, functions[name], *grid, shared_bytes, _KernelArguments(values), name, THREADS_PER_BLOCK)
                for name, grid, shared_bytes, values in kernels]


def bind_driver_calls(driver: Any, operations: list[tuple[Any, ...]],
                      pointers: tuple[Any, ...]) -> tuple[tuple[Any, tuple[Any, ...], str], ...]:
    """The driver calls of a launch sequence for these pointers and stream: (cuda.bindings function, its
    arguments, what it does for an error message), each argument already the type the wrapper takes fastest
    (CUstream, CUdeviceptr, the packed buffer's `extra` address as an int), so that a launch only calls
    function(*arguments)."""
    stream = driver.CUstream(int(pointers[STREAM]))
    calls: list[tuple[Any, tuple[Any, ...], str]] = []
    for operation in operations:
        if operation[0] == _MEMSET:
            _, (position, offset), value, count = operation
            what = f"cuMemsetD32Async of {count} words at the {_POSITION_NAMES[position]} (+{offset} bytes)"
            calls.append((driver.cuMemsetD32Async,
                          (driver.CUdeviceptr(pointers[position] + offset), value, count, stream), what))
            continue
        kind, function, grid_x, grid_y, shared_bytes, arguments, name, block = operation
        grid = (function, grid_x, grid_y, 1, block, 1, 1, shared_bytes, stream)
        if kind == _KERNEL and arguments.extra_address:  # packed at the kernel's layout: one buffer, no kernelParams
            calls.append((driver.cuLaunchKernel, (*grid, None, arguments.extra_address), f"cuLaunchKernel of {name}"))
        elif kind == _KERNEL:
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


class _PreparedPerThread(threading.local):
    """scatter_add_launch's prepared launches, one cache per thread: a PreparedScatterAdd patches its argument
    buffer before each launch, so two threads must never share one."""

    def __init__(self) -> None:
        self.launches: dict[tuple[Any, ...], PreparedScatterAdd] = {}
        self.last: tuple[Any, PreparedScatterAdd | None] = (None, None)  # the last call's key and launch


_prepared = _PreparedPerThread()
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
    max_slice_width: int | None = None,
    zero_in_kernel: bool | None = None,
) -> LaunchPlan | None:
    """state[index[e], :] += src[e, :] for e < num_edges, in place on `stream`; counts[n] = #{e: index[e] = n}.

    All pointers are device addresses (int; 0 = absent). counts (int64 [N, 1]) and skipped (one 64-bit
    word: rows whose index is < 0 or >= num_nodes, which are never written) are zeroed and filled when given;
    counts = 0 skips them and their O(N) zeroing. float16 needs `workspace` of at least
    scatter_add_workspace_size(...) bytes; float32 runs without one, and with it where that size is not 0
    (with counts: wide rows with many edges sort them there, F = 1 beyond 2^24 edges keeps its pairs).
    With counts and F = 1 the paired path (plan.py) sums in the counts buffer itself, so it must be 8-byte
    aligned for that (cuMemAlloc and TensorRT give 256); otherwise the launch takes the two-atomic path.
    `algorithm` (plan.py ALGORITHMS; those of UNCOUNTED_ALGORITHMS without counts only), `node_passes`,
    `paired`, `max_slice_width` and `zero_in_kernel` (True: the scatter kernel zeroes the counts wherever it
    can; False: a memset always, and no cooperative launch at all, so no grid_table path) override plan.py's
    choices for tests and benchmarks. float16's grid_table and split_table paths need the workspace 8-byte
    aligned (else "auto" takes another path).
    Returns the plan (None when E = 0).

    The work for each set of sizes and options is prepared once (PreparedScatterAdd, kept per thread and
    checked against the current CUDA context); a repeated call costs a context check and the driver calls, or
    from the second call with the same pointers on, a capture-status query and the replay of their graph.
    """
    key = (dtype, num_nodes, num_edges, num_features, not counts, not skipped, workspace_size, algorithm,
           node_passes, paired, max_slice_width, zero_in_kernel)
    local = _prepared
    last_key, prepared = local.last
    if key != last_key:  # a tuple comparison; the dict lookup would hash all 12 fields first
        prepared = local.launches.get(key)
        if prepared is not None:
            local.last = (key, prepared)
    get_id = _current_id
    if prepared is not None and get_id is not None:
        # The hot path, with current_context() and the pointer check of a PreparedScatterAdd call inlined (each
        # Python call saved is ~0.1 us of the ~1 us this entry adds to the launch's own cost; NOTES.md, host time)
        result = get_id(None)
        if not result[0] and result[1] == prepared.context:
            pointers = (state, src, index, counts, workspace, skipped, stream)
            if pointers == prepared._pointers:
                return prepared._issue(pointers)
            return prepared(state, src, index, counts, workspace, stream, skipped)
    if prepared is None or prepared.context != current_context():
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
            algorithm=algorithm, node_passes=node_passes, paired=paired, max_slice_width=max_slice_width,
            zero_in_kernel=zero_in_kernel)
        local.last = (key, prepared)
    return prepared(state, src, index, counts, workspace, stream, skipped)
