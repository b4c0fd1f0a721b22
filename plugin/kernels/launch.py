"""Loads the compiled kernels into the current CUDA context and launches a scatter-add on a stream.

`prepare_kernels(dtype)` compiles (NVRTC, cached per arch and dtype) and loads the module into the current
context; the plugin calls it outside enqueue. `scatter_add_launch` only issues asynchronous driver calls on
the caller's stream: memsets of counts, skipped and the float16 table, then one kernel per node range, then
(float16) apply_table or (paired path) fold_pairs. No synchronisation, allocation or host copy.
"""

import ctypes
import functools
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from plugin.cuda_check import check
from plugin.kernels.compile import compile_scatter_add, kernel_dtype, nvrtc_supported_archs, pick_arch
from plugin.kernels.plan import (
    MAX_EDGES,
    MAX_NODES,
    PAIR_BYTES,
    THREADS_PER_BLOCK,
    DeviceInfo,
    LaunchPlan,
    plan_launch,
    table_layout,
    vector_width,
)

KERNEL_NAMES = tuple(
    f"{kind}_v{vec}" for kind in ("scatter_global", "scatter_hashed", "scatter_shared", "apply_table") for vec in (1, 2, 4)
) + ("scatter_global_pairs", "scatter_shared_pairs", "fold_pairs")

_POINTER = ctypes.c_void_p
_I64 = ctypes.c_int64
_I32 = ctypes.c_int32
_GLOBAL_ARG_TYPES = (_POINTER, _POINTER, _I64, _I64, _I32, _I32, _POINTER, _POINTER, _I32, _POINTER, _POINTER, _I64, _I64)
_SHARED_ARG_TYPES = (_POINTER, _POINTER, _I64, _I32, _I32, _I32, _I32, _POINTER, _POINTER, _POINTER)
_APPLY_ARG_TYPES = (_POINTER, _POINTER, _POINTER, _I64, _I32, _I32)
_FOLD_ARG_TYPES = (_POINTER, _POINTER, _I64)


@dataclass(frozen=True)
class LoadedKernels:
    """The module loaded into one CUDA context for one dtype, its functions and the device's properties."""

    module: Any
    functions: dict[str, Any]
    device: DeviceInfo


_loaded: dict[tuple[int, str], LoadedKernels] = {}
_load_lock = threading.Lock()
_driver_ready = False


def current_context() -> int:
    """A process-unique id of the current CUDA context (cuCtxGetId: unlike the handle, never reused after a
    context is destroyed); if no context is current, device 0's primary context is made current first."""
    global _driver_ready
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
    return int(check(driver.cuCtxGetId(context)))


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
    functions = {name: check(driver.cuModuleGetFunction(module, name.encode())) for name in KERNEL_NAMES}
    attribute = driver.CUfunction_attribute
    for name, function in functions.items():
        if name.startswith("scatter_shared"):  # may use all the opt-in shared memory beside its static queue
            static = check(driver.cuFuncGetAttribute(attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function))
            check(driver.cuFuncSetAttribute(
                function, attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, device.max_shared_per_block - static
            ))
    return LoadedKernels(module, functions, device)


@functools.lru_cache(maxsize=256)
def _cached_plan(num_nodes: int, num_edges: int, num_features: int, dtype: np.dtype, device: DeviceInfo, vec: int,
                 algorithm: str, node_passes: int | None, with_counts: bool, counts_aligned: bool,
                 paired: bool | None) -> LaunchPlan:
    return plan_launch(num_nodes, num_edges, num_features, dtype, device, vec, algorithm, node_passes,
                       with_counts=with_counts, counts_aligned=counts_aligned, paired=paired)


def _validate(state: int, src: int, index: int, num_nodes: int, num_edges: int, num_features: int) -> None:
    for name, value in (("num_nodes", num_nodes), ("num_edges", num_edges), ("num_features", num_features)):
        if not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if num_features < 1:
        raise ValueError(f"num_features must be at least 1, got {num_features}")
    if num_edges > MAX_EDGES:
        raise ValueError(f"num_edges {num_edges} exceeds the kernel's limit of {MAX_EDGES} (32-bit counts)")
    if num_nodes > MAX_NODES:
        raise ValueError(f"num_nodes {num_nodes} exceeds the kernel's limit of {MAX_NODES} (32-bit node ids)")
    if num_edges > 0 and (not src or not index):
        raise ValueError(f"src and index must be device addresses when num_edges = {num_edges} > 0")
    if num_edges > 0 and num_nodes > 0 and not state:
        raise ValueError(f"state must be a device address when num_nodes = {num_nodes} > 0")


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
    scatter_add_workspace_size(...) bytes; float32 none. With counts and F = 1 the paired path (plan.py)
    sums in the counts buffer itself, so it must be 8-byte aligned for that (cuMemAlloc and TensorRT give
    256); otherwise the launch takes the two-atomic path. `algorithm` ("auto", "global", "shared"),
    `node_passes` and `paired` override plan.py's choices for tests and benchmarks. Returns the plan (None
    when E = 0).
    """
    from cuda.bindings import driver

    dtype = kernel_dtype(dtype)
    _validate(state, src, index, num_nodes, num_edges, num_features)
    table = table_layout(num_nodes, num_edges, num_features) if dtype == np.float16 else None
    if table is not None:  # also where the paired path will not use it: the same workspace on every device
        _check_table_workspace(table.nbytes, workspace, workspace_size)
    kernels = prepare_kernels(dtype)

    if counts:
        check(driver.cuMemsetD32Async(counts, 0, 2 * num_nodes, stream))  # also the paired path's zero pairs
    if skipped:
        check(driver.cuMemsetD32Async(skipped, 0, 2, stream))
    if num_edges == 0:
        return None

    table_dest = workspace + table.values_offset if table is not None else state
    vec = vector_width(num_features, src, dtype.itemsize, table_dest)  # the paired path has F = 1, so vec = 1
    plan = _cached_plan(num_nodes, num_edges, num_features, dtype, kernels.device, vec, algorithm, node_passes,
                        bool(counts), counts % PAIR_BYTES == 0, paired)
    table = plan.table  # None on the paired path
    dest = counts if plan.paired else table_dest  # the paired path sums (value, count) pairs in the counts
    keys = workspace if table is not None and table.hashed else 0  # a table with one slot per node needs no keys
    if table is not None:
        if keys:
            check(driver.cuMemsetD32Async(keys, 0xFFFFFFFF, table.capacity, stream))
        check(driver.cuMemsetD32Async(dest, 0, table.capacity * num_features, stream))

    scatter = plan.scatter
    function = kernels.functions[scatter.name]
    scatter_counts = 0 if plan.paired else counts
    for node_lo, node_hi in plan.node_ranges:
        if plan.algorithm == "shared":
            args: tuple[Any, ...] = (src, index, num_edges, num_nodes, num_features, plan.lanes_log2, plan.slice_width,
                                     dest, scatter_counts, skipped)
            types: tuple[Any, ...] = _SHARED_ARG_TYPES
        else:
            table_log2 = table.table_log2 if table is not None else 0
            args = (src, index, num_edges, num_nodes, num_features, plan.lanes_log2, dest, keys, table_log2,
                    scatter_counts, skipped, node_lo, node_hi)
            types = _GLOBAL_ARG_TYPES
        _launch(function, scatter.grid, scatter.shared_bytes, stream, args, types)
    if plan.fold is not None:
        _launch(kernels.functions[plan.fold.name], plan.fold.grid, 0, stream, (state, counts, num_nodes),
                _FOLD_ARG_TYPES)
    if plan.apply is not None and table is not None:
        args = (state, keys, dest, table.capacity, num_features, plan.apply_lanes_log2)
        _launch(kernels.functions[plan.apply.name], plan.apply.grid, 0, stream, args, _APPLY_ARG_TYPES)
    return plan


def _check_table_workspace(needed: int, workspace: int, workspace_size: int) -> None:
    if not workspace:
        raise ValueError(f"float16 needs a workspace of {needed} bytes; got none")
    if workspace_size < needed:
        raise ValueError(f"float16 needs a workspace of {needed} bytes; got {workspace_size}")


def _launch(function: Any, grid: tuple[int, int], shared_bytes: int, stream: int, args: tuple[Any, ...],
            types: tuple[Any, ...]) -> None:
    from cuda.bindings import driver

    check(driver.cuLaunchKernel(function, grid[0], grid[1], 1, THREADS_PER_BLOCK, 1, 1, shared_bytes, stream,
                                (args, types), 0))
