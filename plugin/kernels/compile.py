"""NVRTC compilation of scatter_add.cu to a CUBIN for one GPU architecture, cached per (arch, dtype).

A CUBIN (machine code for the exact architecture) rather than PTX: PTX from an NVRTC newer than the driver
does not load, while a CUBIN from any NVRTC of the driver's major version does. NVRTC needs no GPU.
"""

import functools
from pathlib import Path

import numpy as np

from common.nvrtc import grid_sync_available, nvrtc_compile, nvrtc_options

SOURCE_PATH = Path(__file__).with_name("scatter_add.cu")
SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))
MIN_ARCH = 75


def kernel_dtype(dtype: object) -> np.dtype:
    """np.dtype(dtype) if the kernel supports it (float32, float16), else ValueError naming it."""
    try:
        resolved = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError:
        raise ValueError(f"unsupported dtype {dtype!r}: the scatter-add kernel takes float32 or float16") from None
    if resolved not in SUPPORTED_DTYPES:
        raise ValueError(f"unsupported dtype {resolved}: the scatter-add kernel takes float32 or float16")
    return resolved


def pick_arch(device_arch: int, supported: tuple[int, ...]) -> int:
    """The architecture to compile for a device of compute capability `device_arch` (major*10 + minor).

    The device's own if NVRTC knows it; else the newest known one of the same major version and an older
    minor (CUBINs run on later minor versions of their major). ValueError if there is none.
    """
    if device_arch in supported:
        return device_arch
    same_major = [arch for arch in supported if arch // 10 == device_arch // 10 and arch <= device_arch]
    if not same_major:
        raise ValueError(
            f"this NVRTC compiles for sm_{min(supported)}..sm_{max(supported)}, not for the device's sm_{device_arch}; "
            "install an nvidia-cuda-nvrtc that supports it"
        )
    return max(same_major)


def cubin_options(arch: int, defines: tuple[str, ...] = ()) -> list[bytes]:
    """NVRTC options for a CUBIN for sm_<arch> (nvrtc_options)."""
    return nvrtc_options(f"sm_{arch}", defines)


def compile_options(arch: int, dtype: np.dtype, extra: tuple[str, ...] = ()) -> list[bytes]:
    """NVRTC options for one (arch, dtype) of scatter_add.cu: the dtype as SCATTER_HALF, and
    SCATTER_GRID_SYNC = 1 where cooperative groups compile (grid_sync_available)."""
    half = 1 if kernel_dtype(dtype) == np.float16 else 0
    grid_sync = 1 if grid_sync_available() else 0
    return cubin_options(arch, (f"-DSCATTER_HALF={half}", f"-DSCATTER_GRID_SYNC={grid_sync}")) + \
        [option.encode() for option in extra]


def compile_cubin(arch: int, dtype: object, extra_options: tuple[str, ...] = ()) -> tuple[bytes, str]:
    """Compiles scatter_add.cu; returns (cubin, compiler log). NvrtcError carries the log on failure."""
    resolved = kernel_dtype(dtype)
    return nvrtc_compile(SOURCE_PATH, compile_options(arch, resolved, extra_options), target=f" for sm_{arch}, {resolved}")


@functools.cache
def _compile_cached(arch: int, dtype: np.dtype) -> bytes:
    return compile_cubin(arch, dtype)[0]


def compile_scatter_add(arch: int, dtype: object) -> bytes:
    """The CUBIN of scatter_add.cu for sm_<arch> and dtype (float32 or float16), compiled once per process."""
    return _compile_cached(int(arch), kernel_dtype(dtype))


def forget_compiled() -> None:
    """Forgets the CUBINs compile_scatter_add has made in this process: its next call per arch and dtype compiles."""
    _compile_cached.cache_clear()
