"""Row overwrite in place (state[index[e]] = src[e], the last edge winning): overwrite.cu's kernels, described,
compiled and launched without TensorRT.

One source serves both plugins. The AOT plugins (plugin/scatter_add_aot.py) hand TensorRT its PTX (compute_75,
PTX ISA 8.0, as scatter_add_aot.cu's) and the launch of OVERWRITE_KERNELS, TensorRT launching one kernel per
plugin: aliased_io::overwrite_claim, then aliased_io::overwrite_rows, with the table (keys, winners: int64
[2 E + 1], filled with -1) made by the network. The Python plugin (ScatterAddInPlace with overwrite = 1) loads a
CUBIN of it and runs PreparedOverwrite: a memset of its workspace (the table), then the same two kernels, from
the second call with the same pointers replayed from a CUDA graph. Every step is O(E F): nothing of size N.
docs/overwrite.md gives the design and its cost.
"""

import ctypes
import functools
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from plugin.cuda_check import check
from plugin.kernels.aot import (
    PTX_ISA_VERSION,
    THREADS_PER_BLOCK,
    AotKernel,
    aot_arguments,
    aot_argument_types,
    aot_compile_options,
    aot_launch_params,
    declare_ptx_isa,
)

OVERWRITE_SOURCE_PATH = Path(__file__).with_name("overwrite.cu")
MAX_SIZE = 2**31 - 1  # the kernels take int32 sizes
MAX_EDGES = (MAX_SIZE - 1) // 2  # so that the table's 2 E + 1 slots fit an int32 too
EMPTY = -1  # the table's fill: keys and winners

OVERWRITE_KERNELS: dict[str, AotKernel] = {
    kernel.name: kernel
    for kernel in (
        AotKernel("overwrite_claim", ("index", "keys", "winners"), ("num_edges", "capacity"), ("keys", "winners"),
                  "num_edges", per_feature=False),
        AotKernel("overwrite_rows_f32", ("state", "src", "index", "keys", "winners"),
                  ("num_nodes", "num_edges", "num_features", "capacity"), ("state",), "num_edges"),
        AotKernel("overwrite_rows_f16", ("state", "src", "index", "keys", "winners"),
                  ("num_nodes", "num_edges", "num_features", "capacity"), ("state",), "num_edges"),
    )
}
CLAIM_KERNEL = "overwrite_claim"
ROWS_KERNELS = {np.dtype(np.float32): "overwrite_rows_f32", np.dtype(np.float16): "overwrite_rows_f16"}


def overwrite_capacity(num_edges: Any) -> Any:
    """The table's slots for E edges: 2 E + 1 (at most half full, never empty); ints or symbolic sizes. The
    kernels need at least as many slots as distinct non-negative indices, which E + 1 always is."""
    return num_edges * 2 + 1


def overwrite_workspace_size(max_edges: int) -> int:
    """Bytes of the Python plugin's workspace for at most `max_edges` edges: keys then winners, int64 each."""
    return 16 * overwrite_capacity(int(max_edges))


def rows_kernel(dtype: object) -> str:
    """The pass-2 kernel of a state dtype (float32 or float16); ValueError for another."""
    resolved = np.dtype(dtype)  # type: ignore[call-overload]
    if resolved not in ROWS_KERNELS:
        raise ValueError(f"the overwrite kernels take a float32 or float16 state, got {resolved}")
    return ROWS_KERNELS[resolved]


def overwrite_sizes(num_nodes: int, num_edges: int, num_features: int, dtype: object,
                    capacity: int | None = None) -> dict[str, int]:
    """{num_nodes, num_edges, num_features, capacity} checked for the kernels' int32 arguments (capacity default
    2 E + 1; at least 1); ValueError naming the size that does not fit."""
    rows_kernel(dtype)  # float32 or float16
    itemsize = np.dtype(dtype).itemsize  # type: ignore[call-overload]
    capacity = overwrite_capacity(num_edges) if capacity is None else capacity
    sizes = {"num_nodes": num_nodes, "num_edges": num_edges, "num_features": num_features, "capacity": capacity}
    for name, value in sizes.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not 0 <= value <= MAX_SIZE:
            raise ValueError(f"{name} must be an integer from 0 to {MAX_SIZE} for the overwrite kernels, got {value!r}")
    if num_features < 1 or num_features * itemsize > MAX_SIZE:
        raise ValueError(f"num_features must be from 1 to {MAX_SIZE // itemsize}, got {num_features}")
    if capacity < 1:
        raise ValueError(f"the overwrite table needs at least one slot, got capacity {capacity}")
    return {name: int(value) for name, value in sizes.items()}


def overwrite_steps(dtype: object, sizes: Mapping[str, int]) -> list[tuple[Any, ...]]:
    """The work of one overwrite, in order: ("fill", tensor, 32-bit value, words) for the table, then
    ("kernel", name); none where there is nothing to write (E = 0 or N = 0)."""
    if sizes["num_edges"] == 0 or sizes["num_nodes"] == 0:
        return []
    words = 2 * sizes["capacity"]
    return [("fill", "keys", 0xFFFFFFFF, words), ("fill", "winners", 0xFFFFFFFF, words),
            ("kernel", CLAIM_KERNEL), ("kernel", rows_kernel(dtype))]


# --- compiling and loading ---------------------------------------------------------------------------------
@functools.cache
def compile_overwrite_ptx() -> bytes:
    """The PTX text of overwrite.cu (compute_75, PTX ISA 8.0, no trailing NUL) that the AOT plugins embed."""
    from plugin.kernels.compile import nvrtc_compile

    ptx, _ = nvrtc_compile(OVERWRITE_SOURCE_PATH, aot_compile_options(), ptx=True)
    return declare_ptx_isa(ptx.rstrip(b"\0"), PTX_ISA_VERSION)


@functools.cache
def compile_overwrite_cubin(arch: int) -> bytes:
    """The CUBIN of overwrite.cu for sm_<arch> (the Python plugin's), compiled once per process."""
    from plugin.kernels.compile import cubin_options, nvrtc_compile

    cubin, _ = nvrtc_compile(OVERWRITE_SOURCE_PATH, cubin_options(arch), target=f" for sm_{arch}")
    return cubin


def load_overwrite_functions(image: bytes) -> tuple[Any, dict[str, Any]]:
    """(module, {name: CUfunction}) of a PTX text or CUBIN of overwrite.cu, loaded into the current context."""
    from cuda.bindings import driver

    from plugin.kernels.launch import current_context

    current_context()
    if not image.startswith(b"\x7fELF") and not image.endswith(b"\0"):
        image += b"\0"  # PTX as a C string
    module = check(driver.cuModuleLoadData(image))
    return module, {name: check(driver.cuModuleGetFunction(module, name.encode())) for name in OVERWRITE_KERNELS}


_loaded: dict[int, dict[str, Any]] = {}
_load_lock = threading.Lock()


def prepare_overwrite_kernels() -> dict[str, Any]:
    """The CUBIN's functions in the current context, compiled and loaded once per context (outside enqueue)."""
    from plugin.kernels.compile import nvrtc_supported_archs, pick_arch
    from plugin.kernels.launch import current_context, read_device_info

    context = current_context()
    functions = _loaded.get(context)
    if functions is None:
        with _load_lock:
            functions = _loaded.get(context)
            if functions is None:
                arch = pick_arch(read_device_info().arch, nvrtc_supported_archs())
                functions = _loaded[context] = load_overwrite_functions(compile_overwrite_cubin(arch))[1]
    return functions


# --- launching ---------------------------------------------------------------------------------------------
def launch_overwrite(functions: Mapping[str, Any], dtype: object, pointers: Mapping[str, int],
                     sizes: Mapping[str, int], stream: int) -> None:
    """overwrite_steps on `stream` as TensorRT runs the AOT plugins (the fills are the network's layers): each
    kernel on aot_launch_params' grid with aot_arguments. pointers: state, src, index, keys, winners. For tests."""
    from cuda.bindings import driver

    for step in overwrite_steps(dtype, sizes):
        if step[0] == "fill":
            _, tensor, value, words = step
            check(driver.cuMemsetD32Async(pointers[tensor], value, words, stream))
            continue
        kernel = OVERWRITE_KERNELS[step[1]]
        grid, block, shared = aot_launch_params(kernel, sizes)
        check(driver.cuLaunchKernel(functions[kernel.name], grid, 1, 1, block, 1, 1, shared, stream,
                                    (aot_arguments(kernel, pointers, sizes), aot_argument_types(kernel)), 0))


class PreparedOverwrite:
    """The Python plugin's overwrite for fixed sizes and dtype: called with (state, src, index, workspace,
    stream) it issues one memset of the workspace's table (keys, then winners, 2 (2 E + 1) int64 of -1) and the
    two kernels, arguments packed once per pointer set; from the second call with the same pointers and stream
    on, those three driver calls are one cuGraphLaunch of a graph captured on a stream of its own (not while the
    caller's stream is being captured: then the calls go into the caller's graph). The workspace must hold
    overwrite_workspace_size(E) bytes, 8-byte aligned. Not thread-safe: one per execution context (the plugin
    makes its own in on_shape_change)."""

    graph_replay = True  # False (on an instance): the driver calls every time (the benchmark times both)
    _KEPT = 8  # pointer sets remembered, each with its graph

    def __init__(self, *, num_nodes: int, num_edges: int, num_features: int, dtype: object) -> None:
        from cuda.bindings import driver

        from plugin.kernels.launch import current_context

        self.dtype = np.dtype(dtype)  # type: ignore[call-overload]
        self.sizes = overwrite_sizes(num_nodes, num_edges, num_features, self.dtype)
        self.workspace_size = overwrite_workspace_size(num_edges)
        self.steps = overwrite_steps(self.dtype, self.sizes)
        self.functions = prepare_overwrite_kernels() if self.steps else {}
        self.context = current_context()
        self._driver = driver
        self._pointers: tuple[int, ...] | None = None  # what self._calls are bound to (with the stream)
        self._calls: tuple[tuple[Any, tuple[Any, ...]], ...] = ()
        self._keep: list[Any] = []  # the bound calls' packed arguments
        self._seen: dict[tuple[int, ...], Any] = {}  # pointers -> None (seen once) or (CapturedGraph, CUstream)
        self._is_capturing, self._graph_launch = driver.cuStreamIsCapturing, driver.cuGraphLaunch
        self._not_capturing = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE

    def _bind(self, pointers: tuple[int, ...], stream: int) -> tuple[tuple[tuple[Any, tuple[Any, ...]], ...], list[Any]]:
        """The driver calls for these pointers on `stream`, each with its arguments ready, and the ctypes objects
        those arguments point into (kept while the calls may be issued; the driver copies them at each call)."""
        driver = self._driver
        state, src, index, workspace = pointers
        if self.steps and (not workspace or workspace % 8):
            raise ValueError(f"the overwrite needs an 8-byte aligned workspace of {self.workspace_size} bytes, "
                             f"got {workspace:#x}")
        if self.steps and not (state and src and index):
            raise ValueError("state, src and index must be device addresses")
        capacity = self.sizes["capacity"]
        named = {"state": state, "src": src, "index": index, "keys": workspace, "winners": workspace + 8 * capacity}
        on = driver.CUstream(int(stream))
        calls: list[tuple[Any, tuple[Any, ...]]] = []
        keep: list[Any] = []
        for step in self.steps:
            if step[0] == "fill":
                if step[1] == "keys":  # keys and winners lie back to back: one memset
                    calls.append((driver.cuMemsetD32Async, (driver.CUdeviceptr(workspace), 0xFFFFFFFF,
                                                            4 * capacity, on)))
                continue
            kernel = OVERWRITE_KERNELS[step[1]]
            grid, block, shared = self._grid(kernel)
            slots = [kind(value) for kind, value in zip(aot_argument_types(kernel),
                                                        aot_arguments(kernel, named, self.sizes))]
            array = (ctypes.c_void_p * len(slots))(*(ctypes.addressof(slot) for slot in slots))
            keep += [slots, array]
            calls.append((driver.cuLaunchKernel, (self.functions[kernel.name], grid, 1, 1, block, 1, 1, shared, on,
                                                  ctypes.addressof(array), 0)))
        return tuple(calls), keep

    def _grid(self, kernel: AotKernel) -> tuple[int, int, int]:
        """aot_launch_params, except that pass 2 counts the 16-byte words of a row where it has them (the
        kernel's widest copy; any grid of at least one block is correct)."""
        grid, block, shared = aot_launch_params(kernel, self.sizes)
        if kernel.per_feature:
            row_bytes = self.sizes["num_features"] * self.dtype.itemsize
            words = row_bytes // 16 if row_bytes % 16 == 0 else self.sizes["num_features"]
            grid = max(1, min(-(-self.sizes["num_edges"] * words // THREADS_PER_BLOCK), grid))
        return grid, block, shared

    def __call__(self, state: int, src: int, index: int, workspace: int, stream: int) -> None:
        """Issues the overwrite on `stream` (asynchronous: no allocation, no synchronisation)."""
        key = (state, src, index, workspace, stream)
        if self.graph_replay and self.steps:
            seen = self._seen.get(key, False)
            if seen is False:  # first use: the driver calls below
                if len(self._seen) >= self._KEPT:
                    self.close()
                self._seen[key] = None
            else:
                on = seen[1] if seen is not None else self._driver.CUstream(int(stream))
                capturing = self._is_capturing(on)
                if not capturing[0] and capturing[1] == self._not_capturing:
                    if seen is None:
                        seen = self._seen[key] = (self._capture(key[:4]), on)
                    result = self._graph_launch(seen[0].executable, on)
                    if result[0]:
                        check(result, call="cuGraphLaunch of the overwrite")
                    return
        if key != self._pointers:
            self._calls, self._keep = self._bind(key[:4], stream)
            self._pointers = key
        for call, arguments in self._calls:
            result = call(*arguments)
            if result[0]:
                check(result, call=f"{call.__name__} of the overwrite")

    def _capture(self, pointers: tuple[int, ...]) -> Any:
        """A CapturedGraph of the driver calls for these pointers, made on the launcher's own stream."""
        from plugin.cuda_graph import CapturedGraph
        from plugin.kernels.launch import backend

        on = backend.capture_stream(self.context)
        calls, keep = self._bind(pointers, on)

        def issue() -> None:
            for call, arguments in calls:
                check(call(*arguments), call=f"{call.__name__} of the overwrite")

        graph = CapturedGraph(on, issue)
        del keep  # the graph holds its own copies of the arguments
        return graph

    def close(self) -> None:
        """Frees the captured graphs (replays already queued still run)."""
        for seen in self._seen.values():
            if seen is not None:
                seen[0].close()
        self._seen.clear()

