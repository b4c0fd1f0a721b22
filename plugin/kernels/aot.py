"""The AOT plugins' PTX and TensorRT's launch of one kernel, without TensorRT.

    compile_family_ptx(kernel, dtype, arch)   the PTX of one aot_* entry point of scatter_add.cu (the kernel family
                                              both plugins run; plugin/scatter_add_op.py's steps), for the build's
                                              target (aot_target_arch)
    compile_overwrite_ptx(arch)               overwrite.cu's PTX (plugin/overwrite_op.py's step), the same way
    AotKernel, aot_launch_params, ...         a kernel launched as TensorRT launches an AOT plugin's, with
                                              (input pointers..., extra int32 arguments..., output pointers...):
                                              overwrite.cu's kernels (plugin/kernels/overwrite.py), for tests and
                                              benchmarks that launch them without TensorRT

The PTX targets compute_75 (PTX_ARCH, compute_90 on a Hopper or newer) and declares the oldest PTX ISA that holds
it, so that one engine loads on every GPU and driver TensorRT 10.16 and 11.x run on; docs/aot_plugin.md says why.
"""

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.nvrtc import PTX_ARCH

OVERWRITE_SOURCE_PATH = Path(__file__).with_name("overwrite.cu")
THREADS_PER_BLOCK = 256
MAX_BLOCKS = 1 << 16  # the kernels loop over their elements, so a capped grid still covers any size


@dataclass(frozen=True)
class AotKernel:
    """A kernel as TensorRT launches an AOT plugin's: the plugin's input tensors, the extra int32 arguments (size
    names), the output tensors (in the kernel's parameter order), and which size counts the rows its grid covers."""

    name: str
    inputs: tuple[str, ...]
    extra_args: tuple[str, ...]
    outputs: tuple[str, ...]
    rows: str


def aot_launch_params(kernel: AotKernel, sizes: Mapping[str, int]) -> tuple[int, int, int]:
    """(grid_x, block_x, shared_mem) of `kernel` for int sizes: one thread per (row, feature) element up to
    MAX_BLOCKS blocks (the kernels loop beyond), at least one block, so E = 0 still launches a valid (empty) grid;
    no dynamic shared memory."""
    elements = sizes[kernel.rows] * sizes["num_features"]
    return max(min(-(-elements // THREADS_PER_BLOCK), MAX_BLOCKS), 1), THREADS_PER_BLOCK, 0


def aot_extra_args(kernel: AotKernel, sizes: Mapping[str, Any]) -> tuple[Any, ...]:
    """The extra int32 arguments of `kernel`, in its parameter order, from sizes."""
    return tuple(sizes[name] for name in kernel.extra_args)


def check_aot_sizes(sizes: Mapping[str, int]) -> None:
    """ValueError unless every size is a non-negative int32 and F >= 1 (the kernels take int32 sizes)."""
    for name, value in sizes.items():
        if not isinstance(value, int) or not 0 <= value <= 2**31 - 1:
            raise ValueError(f"{name} must be an integer from 0 to 2**31-1 for the AOT kernels, got {value!r}")
    if sizes.get("num_features", 1) < 1:
        raise ValueError(f"num_features must be at least 1, got {sizes['num_features']}")


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


@functools.cache
def compile_overwrite_ptx(arch: int = PTX_ARCH) -> bytes:
    """The PTX text of overwrite.cu that the AOT plugin embeds, for compute_<arch> (75 or 90, its ISA declared
    FAMILY_PTX_ISA[arch]; common.nvrtc.compile_engine_ptx), compiled once per arch."""
    from common.nvrtc import compile_engine_ptx

    return compile_engine_ptx(OVERWRITE_SOURCE_PATH, arch=arch, isa=FAMILY_PTX_ISA[arch], target=f" (compute_{arch})")


def aot_argument_types(kernel: AotKernel) -> tuple[Any, ...]:
    """ctypes of the kernel's parameters in TensorRT's order: pointers, int32 extra arguments, pointers."""
    import ctypes

    return ((ctypes.c_void_p,) * len(kernel.inputs) + (ctypes.c_int32,) * len(kernel.extra_args)
            + (ctypes.c_void_p,) * len(kernel.outputs))


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
