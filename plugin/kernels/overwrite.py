"""Row overwrite in place (state[index[e]] = src[e]; where an index repeats, which edge wins is undefined):
overwrite.cu's kernel, described, compiled and launched without TensorRT.

One source serves both plugins. The AOT plugin (plugin/overwrite_op.py OVERWRITE_ROWS, aliased_io::overwrite_rows)
hands TensorRT its PTX (compile_overwrite_ptx for the build's target) and LAUNCH there, the overwrite's one launch
rule: the Python plugin reads its grid from it too (overwrite_grid) and packs its arguments in the step's order
(overwrite_arguments). The Python plugin (ScatterAddInPlace with overwrite = 1) loads a CUBIN of it and runs
PreparedOverwrite: one kernel launch per call. Every call is O(E F): nothing of size N, no workspace.
docs/overwrite.md gives the design and its cost.
"""

import functools
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from common.cuda_check import check
from inplace.spec import Kernel
from plugin.kernels.aot import (  # the source and its AOT PTX live with the other AOT PTX (no import circle)
    OVERWRITE_SOURCE_PATH,
    compile_overwrite_ptx,  # noqa: F401 (re-exported: the overwrite's callers read it here)
)
from plugin.overwrite_op import KERNEL_NAMES, KERNELS, STEP, THREADS_PER_BLOCK

MAX_SIZE = 2**31 - 1  # the kernel takes int32 sizes
SIZE_ARGS = ("num_nodes", "num_edges", "num_features")
OVERWRITE_KERNELS = tuple(KERNEL_NAMES.values())  # the kernels' names (plugin.overwrite_op: one per state dtype)


def overwrite_kernel(dtype: object) -> Kernel:
    """The kernel of a state dtype (float32 or float16): plugin.overwrite_op's, its name and the one launch;
    ValueError for another."""
    resolved = np.dtype(dtype)  # type: ignore[call-overload]
    if resolved.name not in KERNELS:
        raise ValueError(f"the overwrite kernels take a float32 or float16 state, got {resolved}")
    return KERNELS[resolved.name]


def _op_sizes(sizes: Mapping[str, int]) -> dict[str, int]:
    """The step's size names (N, E, F) of {num_nodes, num_edges, num_features}."""
    return {"N": sizes["num_nodes"], "E": sizes["num_edges"], "F": sizes["num_features"]}


def overwrite_sizes(num_nodes: int, num_edges: int, num_features: int, dtype: object) -> dict[str, int]:
    """{num_nodes, num_edges, num_features} checked for the kernel's int32 arguments; ValueError naming the size
    that does not fit."""
    overwrite_kernel(dtype)  # float32 or float16
    itemsize = np.dtype(dtype).itemsize  # type: ignore[call-overload]
    sizes = dict(zip(SIZE_ARGS, (num_nodes, num_edges, num_features)))
    for name, value in sizes.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not 0 <= value <= MAX_SIZE:
            raise ValueError(f"{name} must be an integer from 0 to {MAX_SIZE} for the overwrite kernels, got {value!r}")
    if num_features < 1 or num_features * itemsize > MAX_SIZE:
        raise ValueError(f"num_features must be from 1 to {MAX_SIZE // itemsize}, got {num_features}")
    return {name: int(value) for name, value in sizes.items()}


def aot_overwrite_launch(dtype: object, sizes: Mapping[str, int]) -> tuple[int, int, int]:
    """(grid, block, shared) of the AOT plugin's launch for these sizes: plugin.overwrite_op LAUNCH, the one launch
    rule of the overwrite, evaluated with ints (inplace.launch.evaluate_launch). ValueError for a dtype other than
    float32 and float16."""
    from inplace.launch import evaluate_launch

    grid, block, shared, _ = evaluate_launch(overwrite_kernel(dtype), _op_sizes(sizes))
    return grid[0], block[0], shared


def overwrite_arguments(dtype: object, pointers: Mapping[str, int], sizes: Mapping[str, int]
                        ) -> tuple[tuple[int, ...], tuple[Any, ...]]:
    """(values, ctypes) of the kernel's parameters in TensorRT's AOT order, as the step's (inplace.launch
    step_arguments): the state, src and index pointers, (N, E, F), the state's pointer again (its aliased output)."""
    from inplace.launch import step_arguments

    return step_arguments(STEP, overwrite_kernel(dtype), pointers, _op_sizes(sizes))


def overwrite_grid(dtype: object, sizes: Mapping[str, int]) -> tuple[int, int, int]:
    """(grid, block, shared) of the Python plugin's launch: the AOT plugin's (aot_overwrite_launch: one thread per
    feature), except that it counts the 16-byte words of a row where a row has them (the kernel's widest copy).
    Any grid of at least one block is correct: the kernel loops."""
    grid, block, shared = aot_overwrite_launch(dtype, sizes)
    row_bytes = sizes["num_features"] * np.dtype(dtype).itemsize  # type: ignore[call-overload]
    words = row_bytes // 16 if row_bytes % 16 == 0 else sizes["num_features"]
    return max(1, min(-(-sizes["num_edges"] * words // THREADS_PER_BLOCK), grid)), block, shared


# --- compiling and loading (the AOT plugin's PTX: plugin.kernels.aot compile_overwrite_ptx) ------------------

@functools.cache
def compile_overwrite_cubin(arch: int) -> bytes:
    """The CUBIN of overwrite.cu for sm_<arch> (the Python plugin's), compiled once per process."""
    from common.nvrtc import nvrtc_compile
    from plugin.kernels.compile import cubin_options

    cubin, _ = nvrtc_compile(OVERWRITE_SOURCE_PATH, cubin_options(arch), target=f" for sm_{arch}")
    return cubin


def load_overwrite_functions(image: bytes) -> tuple[Any, dict[str, Any]]:
    """(module, {kernel name: CUfunction}) of a PTX text or CUBIN of overwrite.cu, loaded into the current
    context."""
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
    from common.nvrtc import nvrtc_supported_archs
    from plugin.kernels.compile import pick_arch
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
                     sizes: Mapping[str, int], stream: int, grid: int | None = None) -> None:
    """The kernel on `stream` as TensorRT runs the AOT plugin: aot_overwrite_launch's grid (or `grid` blocks) with
    overwrite_arguments. pointers: state, src, index. For tests and benchmarks."""
    from cuda.bindings import driver

    blocks, block, shared = aot_overwrite_launch(dtype, sizes)
    check(driver.cuLaunchKernel(functions[overwrite_kernel(dtype).name], blocks if grid is None else grid, 1, 1, block,
                                1, 1, shared, stream, overwrite_arguments(dtype, pointers, sizes), 0))


class PreparedOverwrite:
    """The Python plugin's overwrite for fixed sizes and dtype: called with (state, src, index, stream) it
    launches the kernel on overwrite_grid's grid, its arguments packed once per pointer set and stream. One
    driver call per call: there is no graph to replay (inside a caller's capture it is captured like any
    launch). Not thread-safe: one per execution context (the plugin makes its own in on_shape_change)."""

    def __init__(self, *, num_nodes: int, num_edges: int, num_features: int, dtype: object) -> None:
        from plugin.kernels import launch

        self.dtype = np.dtype(dtype)  # type: ignore[call-overload]
        self.sizes = overwrite_sizes(num_nodes, num_edges, num_features, self.dtype)
        self.kernel = overwrite_kernel(self.dtype)
        self.empty = self.sizes["num_edges"] == 0 or self.sizes["num_nodes"] == 0  # nothing to write
        self.function = None if self.empty else prepare_overwrite_kernels()[self.kernel.name]
        self.grid, self.block, self.shared = overwrite_grid(self.dtype, self.sizes)
        self._driver = launch.backend.driver  # the launcher's one seam to CUDA (a test records it)
        self._bound: tuple[int, ...] | None = None  # the pointers and stream the arguments below hold
        self._launch: tuple[Any, ...] = ()
        self._keep: Any = None  # what the packed arguments point into

    def _bind(self, state: int, src: int, index: int, stream: int) -> None:
        if not (state and src and index):
            raise ValueError("state, src and index must be device addresses")
        from inplace.launch import pack_arguments

        address, self._keep = pack_arguments(*overwrite_arguments(self.dtype, {"state": state, "src": src,
                                                                                "index": index}, self.sizes))
        self._launch = (self.function, self.grid, 1, 1, self.block, 1, 1, self.shared,
                        self._driver.CUstream(int(stream)), address, 0)
        self._bound = (state, src, index, stream)

    def __call__(self, state: int, src: int, index: int, stream: int) -> None:
        """Launches the overwrite on `stream` (asynchronous: no allocation, no synchronisation)."""
        if self.empty:
            return
        if (state, src, index, stream) != self._bound:
            self._bind(state, src, index, stream)
        result = self._driver.cuLaunchKernel(*self._launch)
        if result[0]:
            check(result, call="cuLaunchKernel of the overwrite")
