"""The AOT plugins' kernels without TensorRT: the PTX, each kernel's argument list and its launch parameters.

TensorRT launches one kernel of scatter_add_aot.cu per AOT plugin with (input pointers..., extra int32
arguments..., output pointers...). `AOT_KERNELS` names each kernel's tensors and extra arguments in that order;
`aot_launch_params` / `aot_extra_args` compute the grid and the extra arguments from the sizes N, E, F and the
table capacity C, for ints or TensorRT's symbolic sizes alike, so the AOT implementation
(plugin/scatter_add_aot.py) hands TensorRT the formulas the GPU test evaluates for concrete sizes.

The PTX (AOT plugins take only PTX) targets compute_75 (PTX_ARCH) and declares PTX ISA 8.0 (PTX_ISA_VERSION), so
that one engine loads on every GPU and driver TensorRT 10.16 and 11.x run on; docs/aot_plugin.md says why.
"""

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.cuda_check import check
from common.nvrtc import PTX_ARCH

AOT_SOURCE_PATH = Path(__file__).with_name("scatter_add_aot.cu")
THREADS_PER_BLOCK = 256  # AOT_THREADS_PER_BLOCK in scatter_add_aot.cu
MAX_BLOCKS = 1 << 16  # the kernels loop over their elements, so a capped grid still covers any size
# float32 sums in shared memory first where N (F + counts) <= PRIVATE_MAX_FLOATS (40 KiB: under the 48 KiB a
# launch gets without an opt-in, which TensorRT does not make) and E >= PRIVATE_MIN_EDGES_PER_NODE N (the
# kernel decides: scatter_add_aot.cu privatised; the launch parameters give the shared memory it then needs).
PRIVATE_MAX_FLOATS = 10240
PRIVATE_MIN_EDGES_PER_NODE = 256
# scatter_block_f16 (AOT_BLOCK_* in scatter_add_aot.cu): one block of BLOCK_THREADS, a shared table of BLOCK_SLOTS
# (32 KiB, no opt-in); a network takes it where its profile allows at most BLOCK_MAX_EDGES edges, 4 slots per
# edge as plan.py's block_table (aot_takes_one_block).
BLOCK_THREADS = 1024
BLOCK_SLOTS = 4096
BLOCK_MAX_EDGES = 1024

SIZE_NAMES = ("num_nodes", "num_edges", "num_features", "capacity")


@dataclass(frozen=True)
class AotKernel:
    """One kernel of scatter_add_aot.cu as TensorRT launches it: the plugin's input tensors, the extra int32
    arguments (names from SIZE_NAMES), the output tensors (in the kernel's parameter order), and which size
    counts the rows its grid covers."""

    name: str
    inputs: tuple[str, ...]
    extra_args: tuple[str, ...]
    outputs: tuple[str, ...]
    rows: str
    privatised: bool = False  # may sum in shared memory first (float32): aot_shared_bytes
    one_block: bool = False  # one block of BLOCK_THREADS, whatever the sizes (scatter_block_f16)


AOT_KERNELS: dict[str, AotKernel] = {
    kernel.name: kernel
    for kernel in (
        AotKernel("scatter_add_f32", ("state", "src", "index"), ("num_nodes", "num_edges", "num_features"),
                  ("state",), "num_edges", privatised=True),
        AotKernel("scatter_add_f32_counts", ("state", "src", "index", "counts"),
                  ("num_nodes", "num_edges", "num_features"), ("state", "counts"), "num_edges", privatised=True),
        AotKernel("scatter_table_f16", ("src", "index", "keys", "values"),
                  ("num_edges", "num_features", "capacity"), ("keys", "values"), "num_edges"),
        AotKernel("scatter_table_f16_counts", ("src", "index", "keys", "values", "counts"),
                  ("num_nodes", "num_edges", "num_features", "capacity"), ("keys", "values", "counts"), "num_edges"),
        AotKernel("apply_table_f16", ("state", "keys", "values"), ("num_nodes", "num_features", "capacity"),
                  ("state",), "capacity"),
        AotKernel("scatter_block_f16", ("state", "src", "index"), ("num_nodes", "num_edges"), ("state",),
                  "num_edges", one_block=True),
    )
}


def table_capacity(num_edges: Any) -> Any:
    """Slots of the float16 path's hash table for E edges: 2 E + 1 (at most half full, never empty).

    Works for an int and for a symbolic size (the network computes the same with shape layers).
    """
    return num_edges * 2 + 1


def _ops(size: Any) -> tuple[Any, Any, Any]:
    """(cdiv, min, max) for an int, or tensorrt.plugin's for a symbolic size."""
    if isinstance(size, int):
        return (lambda a, b: -(-a // b)), min, max
    import tensorrt.plugin as trtp

    return trtp.cdiv, trtp.min, trtp.max


def aot_shared_bytes(kernel: AotKernel, sizes: Mapping[str, Any]) -> Any:
    """Dynamic shared memory per block: for a privatised kernel 4 N (F + counts) bytes where that is at most
    PRIVATE_MAX_FLOATS words (the kernel may then sum in shared memory), else 0. Written with *, // and min
    only, so that it holds for ints and symbolic sizes alike: min(over, 1), over = words // (PRIVATE_MAX_FLOATS
    + 1), is 0 up to PRIVATE_MAX_FLOATS words and 1 beyond (no negative constant: TensorRT's sizes are
    non-negative)."""
    if not kernel.privatised:
        return 0
    words = sizes["num_nodes"] * (sizes["num_features"] + int("counts" in kernel.inputs))
    over = words // (PRIVATE_MAX_FLOATS + 1)
    return words * 4 - words * 4 * _ops(over)[1](over, 1)


def aot_launch_params(kernel: AotKernel, sizes: Mapping[str, Any]) -> tuple[Any, int, Any]:
    """(grid_x, block_x, shared_mem) of `kernel` for sizes {name: int or symbolic size}: ints give ints, symbolic
    sizes tensorrt.plugin expressions.

    grid_x = max(1, min(ceil(rows * F / THREADS_PER_BLOCK), MAX_BLOCKS)): one thread per (row, feature)
    element up to MAX_BLOCKS blocks (the kernels loop beyond), and at least one block, so E = 0 still launches
    a valid (empty) grid; shared_mem = aot_shared_bytes. A one-block kernel: (1, BLOCK_THREADS, 0) (its table
    is static shared memory).
    """
    if kernel.one_block:
        return 1, BLOCK_THREADS, 0
    elements = sizes[kernel.rows] * sizes["num_features"]
    cdiv, low, high = _ops(elements)
    grid = high(low(cdiv(elements, THREADS_PER_BLOCK), MAX_BLOCKS), 1)
    return grid, THREADS_PER_BLOCK, aot_shared_bytes(kernel, sizes)


def aot_extra_args(kernel: AotKernel, sizes: Mapping[str, Any]) -> tuple[Any, ...]:
    """The extra int32 arguments of `kernel`, in its parameter order, from sizes (ints or symbolic)."""
    return tuple(sizes[name] for name in kernel.extra_args)


def check_aot_sizes(sizes: Mapping[str, int]) -> None:
    """ValueError unless every size is a non-negative int32 and F >= 1 (the kernels take int32 sizes)."""
    for name, value in sizes.items():
        if not isinstance(value, int) or not 0 <= value <= 2**31 - 1:
            raise ValueError(f"{name} must be an integer from 0 to 2**31-1 for the AOT kernels, got {value!r}")
    if sizes.get("num_features", 1) < 1:
        raise ValueError(f"num_features must be at least 1, got {sizes['num_features']}")


@functools.cache
def compile_aot_ptx() -> bytes:
    """The PTX text of scatter_add_aot.cu (all six kernels; common.nvrtc.compile_engine_ptx: compute_<PTX_ARCH>,
    PTX ISA PTX_ISA_VERSION), compiled once with NVRTC (no GPU needed); NvrtcError carries the log on failure."""
    from common.nvrtc import compile_engine_ptx

    return compile_engine_ptx(AOT_SOURCE_PATH)


FAMILY_PTX_ISA = {75: (8, 0), 90: (8, 1)}  # sm_90's vector float atomics need PTX ISA 8.1 (CUDA 12.1 drivers)


@functools.cache
def aot_target_arch() -> int:
    """The virtual architecture of the kernel family's AOT PTX: 90 where the GPU the engine is built on is a Hopper
    or newer (its vector atomics; newer GPUs compile compute_90 PTX too), else PTX_ARCH. TensorRT builds an engine
    for the GPU it builds on; without a GPU (CPU tests) PTX_ARCH."""
    try:
        from cuda.bindings import driver

        if int(driver.cuInit(0)[0]) != 0:
            return PTX_ARCH
        status, device = driver.cuDeviceGet(0)
        if int(status) != 0:
            return PTX_ARCH
        attribute = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
        status, major = driver.cuDeviceGetAttribute(attribute, device)
        return 90 if int(status) == 0 and int(major) >= 9 else PTX_ARCH
    except Exception:  # no driver library at all
        return PTX_ARCH


@functools.cache
def compile_family_ptx(kernel: str, dtype: str, arch: int) -> bytes:
    """The PTX of one AOT entry point of scatter_add.cu (the Python plugin's kernel family; SCATTER_AOT_ONLY: that
    entry point alone) for `dtype` ("float32" or "float16") and compute_<arch> (75 or 90), its ISA declared
    FAMILY_PTX_ISA[arch], without the trailing NUL. NvrtcError carries the log on failure."""
    from common.nvrtc import compile_engine_ptx
    from plugin.kernels.compile import SOURCE_PATH

    if arch not in FAMILY_PTX_ISA or dtype not in ("float32", "float16"):
        raise ValueError(f"the family's AOT PTX is for compute_75 or compute_90 and float32 or float16, got "
                         f"compute_{arch}, {dtype}")
    defines = (f"-DSCATTER_HALF={int(dtype == 'float16')}", "-DSCATTER_GRID_SYNC=0", "-DSCATTER_AOT_ONLY=1",
               f"-DAOT_KERNEL_{kernel}=1")
    return compile_engine_ptx(SOURCE_PATH, defines, arch=arch, isa=FAMILY_PTX_ISA[arch],
                              target=f" ({kernel}, compute_{arch}, {dtype})")


def aot_argument_types(kernel: AotKernel) -> tuple[Any, ...]:
    """ctypes of the kernel's parameters in TensorRT's order: pointers, int32 extra arguments, pointers."""
    import ctypes

    return ((ctypes.c_void_p,) * len(kernel.inputs) + (ctypes.c_int32,) * len(kernel.extra_args)
            + (ctypes.c_void_p,) * len(kernel.outputs))


def load_aot_functions(ptx: bytes | None = None) -> tuple[Any, dict[str, Any]]:
    """(module, {name: CUfunction}) of the AOT PTX (default: compile_aot_ptx()) loaded with cuModuleLoadData
    into the current context, the way TensorRT loads it from an engine. For tests and benchmarks."""
    from cuda.bindings import driver

    from plugin.kernels.launch import current_context

    current_context()
    text = compile_aot_ptx() if ptx is None else ptx
    module = check(driver.cuModuleLoadData(text if text.endswith(b"\0") else text + b"\0"))  # a C string
    return module, {name: check(driver.cuModuleGetFunction(module, name.encode())) for name in AOT_KERNELS}


def aot_arguments(kernel: AotKernel, pointers: Mapping[str, int], sizes: Mapping[str, int]) -> tuple[int, ...]:
    """`kernel`'s arguments in TensorRT's order: input pointers, extra arguments, output pointers (an aliased
    output's pointer is its input's). `pointers` maps tensor names (state, src, index, counts, keys, values)."""
    return (tuple(pointers[name] for name in kernel.inputs) + aot_extra_args(kernel, sizes)
            + tuple(pointers[name] for name in kernel.outputs))


def packed_aot_arguments(kernel: AotKernel, pointers: Mapping[str, int], sizes: Mapping[str, int]) -> tuple[int, Any]:
    """(address, owner): aot_arguments packed once as cuLaunchKernel's kernelParams by the one AOT launcher
    (inplace.launch.pack_arguments) and the object that keeps them alive while the address may be passed."""
    from inplace.launch import pack_arguments

    return pack_arguments(aot_arguments(kernel, pointers, sizes), aot_argument_types(kernel))


def prepared_aot_kernel(function: Any, kernel: AotKernel, pointers: Mapping[str, int], sizes: Mapping[str, int],
                        stream: int) -> Any:
    """`kernel` prepared as TensorRT prepares its AOT plugin's launch (inplace.launch.PreparedKernel): the grid
    of aot_launch_params(sizes), then aot_arguments."""
    from inplace.launch import PreparedKernel

    check_aot_sizes(sizes)
    grid, block, shared = aot_launch_params(kernel, sizes)
    return PreparedKernel(function, (grid, 1, 1), (block, 1, 1), shared, aot_arguments(kernel, pointers, sizes),
                          aot_argument_types(kernel), stream, kernel.name)


def launch_aot_kernel(function: Any, kernel: AotKernel, pointers: Mapping[str, int], sizes: Mapping[str, int],
                      stream: int) -> None:
    """Launches `kernel` once as TensorRT does for its AOT plugin (prepared_aot_kernel)."""
    prepared_aot_kernel(function, kernel, pointers, sizes, stream)()


def aot_takes_one_block(*, half: bool, with_counts: bool, num_features: int, max_edges: int | None) -> bool:
    """Whether a network's scatter-add is scatter_block_f16 alone: float16 rows of one feature without counts,
    and an optimization profile of at most BLOCK_MAX_EDGES edges (max_edges: None when no bound is known)."""
    return (half and not with_counts and num_features == 1 and max_edges is not None
            and max_edges <= BLOCK_MAX_EDGES)


def aot_scatter_add_steps(*, half: bool, with_counts: bool, num_nodes: int, num_edges: int, num_features: int,
                          max_edges: int | None = None
                          ) -> tuple[dict[str, int], list[tuple[str, int, int]], list[str]]:
    """What an AOT engine runs for one scatter-add: (sizes, the fills the network's layers make as (tensor,
    32-bit value, words): counts to 0 with counts; float16: keys to -1, values to 0; then the kernels by name).
    `max_edges` is the profile's bound on E (aot_takes_one_block: then no fills and one kernel)."""
    sizes = {"num_nodes": num_nodes, "num_edges": num_edges, "num_features": num_features,
             "capacity": table_capacity(num_edges)}
    check_aot_sizes(sizes)
    if max_edges is not None and num_edges > max_edges:
        raise ValueError(f"num_edges {num_edges} is more than the profile's max_edges {max_edges}")
    if aot_takes_one_block(half=half, with_counts=with_counts, num_features=num_features, max_edges=max_edges):
        return sizes, [], ["scatter_block_f16"]
    fills = [("counts", 0, 2 * num_nodes)] if with_counts else []
    if not half:
        return sizes, fills, ["scatter_add_f32_counts" if with_counts else "scatter_add_f32"]
    fills += [("keys", 0xFFFFFFFF, sizes["capacity"]), ("values", 0, sizes["capacity"] * num_features)]
    return sizes, fills, ["scatter_table_f16_counts" if with_counts else "scatter_table_f16", "apply_table_f16"]


def run_aot_scatter_add(functions: Mapping[str, Any], *, half: bool, pointers: Mapping[str, int],
                        num_nodes: int, num_edges: int, num_features: int, stream: int,
                        max_edges: int | None = None) -> None:
    """aot_scatter_add_steps on `stream` (PreparedAotLaunch, made and called once). float16 needs "keys"
    (table_capacity(E) int32) and "values" (capacity x F float32) unless it takes one block; counts are computed
    when pointers has "counts". For tests and benchmarks."""
    PreparedAotLaunch(functions, half=half, pointers=pointers, num_nodes=num_nodes, num_edges=num_edges,
                      num_features=num_features, stream=stream, max_edges=max_edges)()


class PreparedAotLaunch:
    """run_aot_scatter_add for fixed sizes, pointers and stream, prepared once as TensorRT prepares an AOT
    plugin's launch when it builds the engine (grid, shared memory and the argument array fixed): a call is the
    driver calls alone (the fills as memsets, then the kernels), each with its arguments packed once in ctypes.
    For benchmarks of one step's latency (bench_aot.py) and, through run_aot_scatter_add, the tests."""

    def __init__(self, functions: Mapping[str, Any], *, half: bool, pointers: Mapping[str, int], num_nodes: int,
                 num_edges: int, num_features: int, stream: int, max_edges: int | None = None) -> None:
        from cuda.bindings import driver

        sizes, fills, names = aot_scatter_add_steps(half=half, with_counts="counts" in pointers,
                                                    num_nodes=num_nodes, num_edges=num_edges,
                                                    num_features=num_features, max_edges=max_edges)
        on = driver.CUstream(int(stream))
        calls: list[tuple[Any, tuple[Any, ...]]] = [
            (driver.cuMemsetD32Async, (driver.CUdeviceptr(pointers[tensor]), value, words, on))
            for tensor, value, words in fills]
        for name in names:
            calls.append((prepared_aot_kernel(functions[name], AOT_KERNELS[name], pointers, sizes, stream), ()))
        self._calls = tuple(calls)

    def __call__(self) -> None:
        for call, arguments in self._calls:
            result = call(*arguments)
            if result is not None and result[0]:
                check(result)
