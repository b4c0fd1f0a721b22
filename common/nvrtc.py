"""NVRTC without a project kernel in mind: the options (architecture, C++17, cuda_fp16.h's and CCCL's folders),
one compile to a CUBIN or PTX with the log, and the PTX an engine holds (compute_75, PTX ISA 8.0: one engine loads on
every GPU and driver TensorRT 10.16 and 11.x run on; docs/aot_plugin.md). NVRTC needs no GPU. The scatter-add's
CUBINs (plugin/kernels/compile.py), the AOT plugins' PTX and an in-place op's CUDA C (inplace/ptx.py) use it.
"""

import functools
import re
from pathlib import Path

from common.cuda_check import NvrtcError, check

PTX_ARCH = 75  # compute_75: the oldest virtual architecture NVRTC 13 accepts; runs on sm_75 and newer
PTX_ISA_VERSION = (8, 0)  # CUDA 12.0: the oldest driver generation TensorRT 10.16 and 11.x run with
_VERSION_LINE = re.compile(rb"^\.version (\d+)\.(\d+)", re.MULTILINE)


@functools.cache
def nvrtc_supported_archs() -> tuple[int, ...]:
    """The architectures (75, 80, ..., 120) this NVRTC compiles for, from nvrtcGetSupportedArchs."""
    from cuda.bindings import nvrtc

    return tuple(int(arch) for arch in check(nvrtc.nvrtcGetSupportedArchs()))


@functools.cache
def include_dirs() -> tuple[str, ...]:
    """Where cuda_fp16.h lives (the nvidia-cuda-runtime wheel's headers, else a system CUDA toolkit), and CCCL's
    headers if present (nvidia-cuda-cccl or a toolkit), which cooperative_groups.h needs."""
    dirs = []
    try:
        from cuda import pathfinder

        for library in ("cudart", "cccl"):
            try:
                found = pathfinder.find_nvidia_header_directory(library)
            except Exception:  # an unknown library name in an older cuda-pathfinder, or a broken install
                found = None
            if found:
                dirs.append(str(found))
    except ImportError:
        pass
    toolkit = Path("/usr/local/cuda/include")
    if (toolkit / "cuda_fp16.h").exists():
        dirs.append(str(toolkit))
    return tuple(dict.fromkeys(dirs))


def grid_sync_available() -> bool:
    """Whether cooperative_groups.h can be compiled here (it needs CCCL's <nv/target>): then the kernels
    include grid_table's, which meets at grid-wide barriers."""
    return any((Path(folder) / "nv" / "target").exists() for folder in include_dirs())


def nvrtc_options(architecture: str, defines: tuple[str, ...] = ()) -> list[bytes]:
    """NVRTC options for a kernel file: the architecture (sm_90: a CUBIN, compute_75: PTX), `defines` (-DNAME=VALUE)."""
    options = [f"--gpu-architecture={architecture}", "--std=c++17", *defines, "--restrict"]
    options += [f"--include-path={path}" for path in include_dirs()]
    return [option.encode() for option in options]


def nvrtc_compile(source_path: Path, options: list[bytes], *, ptx: bool = False, target: str = "") -> tuple[bytes, str]:
    """Compiles source_path with NVRTC; returns (CUBIN, or PTX with ptx=True, compiler log). NvrtcError carries
    the log on failure, its message naming the file and `target` (e.g. " for sm_90, float32")."""
    from cuda.bindings import nvrtc

    program = check(nvrtc.nvrtcCreateProgram(source_path.read_bytes(), source_path.name.encode(), 0, [], []))
    try:
        (status,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
        # NVRTC writes into the buffers it is given: they must be writable and the caller's own. Never b" " * n:
        # for n = 1 that is the interpreter's shared one-byte b" ", and the NUL written into it would turn every
        # later b" " of the process into b"\0".
        log_buffer = bytearray(check(nvrtc.nvrtcGetProgramLogSize(program)))
        check(nvrtc.nvrtcGetProgramLog(program, log_buffer))
        log = bytes(log_buffer).rstrip(b"\0 ").decode(errors="replace")
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise NvrtcError(f"NVRTC could not compile {source_path.name}{target}: {status.name}\n{log}", status.name)
        get_size, get_output = (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX) if ptx else (nvrtc.nvrtcGetCUBINSize,
                                                                                       nvrtc.nvrtcGetCUBIN)
        output = bytearray(check(get_size(program)))
        check(get_output(program, output))
        return bytes(output), log
    finally:
        check(nvrtc.nvrtcDestroyProgram(program))


def ptx_isa_version(ptx: bytes) -> tuple[int, int]:
    """The (major, minor) of the PTX's `.version` directive; ValueError if it has none."""
    match = _VERSION_LINE.search(ptx)
    if match is None:
        raise ValueError("no .version directive in the PTX")
    return int(match.group(1)), int(match.group(2))


def declare_ptx_isa(ptx: bytes, version: tuple[int, int]) -> bytes:
    """The PTX with its `.version` directive lowered to `version` (kept when already that or older).

    The rest of the text is unchanged. Lowering is sound only for code that needs nothing newer: the driver's
    JIT rejects an instruction the declared ISA lacks, which the GPU test would show.
    """
    if ptx_isa_version(ptx) <= version:
        return ptx
    return _VERSION_LINE.sub(f".version {version[0]}.{version[1]}".encode(), ptx, count=1)


def compile_engine_ptx(source_path: Path, defines: tuple[str, ...] = (), *, arch: int = PTX_ARCH,
                       isa: tuple[int, int] = PTX_ISA_VERSION, target: str = "") -> bytes:
    """The PTX an AOT plugin hands TensorRT for the entry points of `source_path`: NVRTC for compute_<arch> with
    `defines`, its `.version` declared `isa` (declare_ptx_isa), without nvrtcGetPTX's trailing NUL (as NVIDIA's
    samples hand it over). NvrtcError carries the log on failure, naming the file and `target`."""
    ptx, _ = nvrtc_compile(source_path, nvrtc_options(f"compute_{arch}", defines), ptx=True, target=target)
    return declare_ptx_isa(ptx.rstrip(b"\0"), isa)

