"""The AOT plugins' PTX, compiled without TensorRT or a GPU.

    compile_family_ptx(kernel, dtype, arch)   the PTX of one aot_* entry point of scatter_add.cu (the kernel family
                                              both plugins run; plugin/scatter_add_op.py's steps and tactics), for
                                              the build's target (aot_target_arch)
    family_entry(kernel)                      (its entry point in scatter_add.cu, the tactic it is compiled for)
    compile_overwrite_ptx(arch)               overwrite.cu's PTX (plugin/overwrite_op.py's step), the same way

Their launches are the steps' own (inplace/spec.py Launch), launched without TensorRT by inplace/launch.py.

The PTX targets compute_75 (PTX_ARCH, compute_90 on a Hopper or newer) and declares the oldest PTX ISA that holds
it, so that one engine loads on every GPU and driver TensorRT 10.16 and 11.x run on; docs/aot_plugin.md says why.
"""

import functools
from pathlib import Path

from common.nvrtc import PTX_ARCH

OVERWRITE_SOURCE_PATH = Path(__file__).with_name("overwrite.cu")

FAMILY_PTX_ISA = {75: (8, 0), 90: (8, 1)}  # sm_90's vector float atomics need PTX ISA 8.1 (CUDA 12.1 drivers)
# A scatter kernel's tactics 1, 2, ...: NAME_<mode> is NAME compiled with AOT_TACTIC 1, 2, ... (scatter_add.cu)
SCATTER_TACTICS = ("atomics", "chunked")


def family_entry(kernel: str) -> tuple[str, int]:
    """(the entry point of scatter_add.cu that `kernel` is compiled from, its AOT_TACTIC): a scatter kernel's
    tactic NAME_atomics or NAME_chunked is NAME at tactic 1 or 2, any other kernel itself at 0."""
    for tactic, mode in enumerate(SCATTER_TACTICS, 1):
        if kernel.startswith("aot_scatter_") and kernel.endswith(f"_{mode}"):
            return kernel.removesuffix(f"_{mode}"), tactic
    return kernel, 0


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
    entry point alone; a tactic's, family_entry, renamed by a define) for `dtype` ("float32" or "float16") and
    compute_<arch> (75 or 90), its ISA declared FAMILY_PTX_ISA[arch], without the trailing NUL. NvrtcError carries
    the log on failure."""
    from common.nvrtc import compile_engine_ptx
    from plugin.kernels.compile import SOURCE_PATH

    if arch not in FAMILY_PTX_ISA or dtype not in ("float32", "float16"):
        raise ValueError(f"the family's AOT PTX is for compute_75 or compute_90 and float32 or float16, got "
                         f"compute_{arch}, {dtype}")
    entry, tactic = family_entry(kernel)
    defines = (f"-DSCATTER_HALF={int(dtype == 'float16')}", "-DSCATTER_GRID_SYNC=0", "-DSCATTER_AOT_ONLY=1",
               f"-DAOT_KERNEL_{entry}=1", f"-DAOT_TACTIC={tactic}", *((f"-D{entry}={kernel}",) if tactic else ()))
    return compile_engine_ptx(SOURCE_PATH, defines, arch=arch, isa=FAMILY_PTX_ISA[arch],
                              target=f" ({kernel}, compute_{arch}, {dtype})")


@functools.cache
def compile_overwrite_ptx(arch: int = PTX_ARCH) -> bytes:
    """The PTX text of overwrite.cu that the AOT plugin embeds, for compute_<arch> (75 or 90, its ISA declared
    FAMILY_PTX_ISA[arch]; common.nvrtc.compile_engine_ptx), compiled once per arch."""
    from common.nvrtc import compile_engine_ptx

    return compile_engine_ptx(OVERWRITE_SOURCE_PATH, arch=arch, isa=FAMILY_PTX_ISA[arch], target=f" (compute_{arch})")
