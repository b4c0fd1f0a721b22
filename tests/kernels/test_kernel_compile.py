"""The scatter-add kernel's source without a GPU: NVRTC compilation for every architecture, the architecture
picked for a device, the dtypes refused, and CUDA / NVRTC errors wrapped with their names and calls."""

import numpy as np
import pytest

from common.cuda_check import CudaError, NvrtcError, check
from plugin.kernels import compile_scatter_add
from common.nvrtc import grid_sync_available, nvrtc_supported_archs
from plugin.kernels.compile import MIN_ARCH, compile_cubin, kernel_dtype, pick_arch
from plugin.kernels.launch import COOPERATIVE_KERNEL_NAMES, KERNEL_NAMES, kernel_names

DTYPES = [np.float32, np.float16]


def archs_to_compile() -> list[int]:
    return [arch for arch in nvrtc_supported_archs() if arch >= MIN_ARCH]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
@pytest.mark.parametrize("arch", archs_to_compile())
def test_source_compiles_to_a_cubin_for_every_supported_arch(cubin_for, arch, dtype):
    cubin = cubin_for(arch, dtype)
    assert cubin[:4] == b"\x7fELF"
    # grid_table's kernel exists exactly where CCCL's headers are found (nvidia-cuda-cccl, a test requirement as
    # it is a runtime one), so the cooperative-groups source is compiled here as on a user's machine; float16's
    # module has no direct kernel (float16 takes the table paths).
    cooperative = grid_sync_available()
    expected = set(kernel_names(dtype, cooperative))
    for name in KERNEL_NAMES + COOPERATIVE_KERNEL_NAMES:
        assert (name.encode() in cubin) == (name in expected), f"{name} in the sm_{arch} cubin: expected {name in expected}"


def test_supported_archs_reach_from_sm75_to_beyond_hopper():
    archs = archs_to_compile()
    assert archs[0] == 75 and 90 in archs and max(archs) > 90


def test_compilation_is_cached_per_arch_and_dtype(monkeypatch):
    # compile_cubin recorded instead of run: the caching is under test here, NVRTC above (cubin_for)
    from plugin.kernels import compile as compile_module

    compiled = []
    monkeypatch.setattr(compile_module, "compile_cubin",
                        lambda arch, dtype: (compiled.append((arch, dtype)) or bytearray(b"sm_%d" % arch), ""))
    compile_module.forget_compiled()
    try:
        assert compile_scatter_add(90, np.float32) is compile_scatter_add(90, "float32")
        assert compile_scatter_add(90, np.float16) is not compile_scatter_add(90, np.float32)
        assert compiled == [(90, np.float32), (90, np.float16)]
    finally:
        compile_module.forget_compiled()  # nothing recorded is left for the kernel tests


def test_compile_error_carries_the_nvrtc_log():
    with pytest.raises(NvrtcError) as caught:
        compile_cubin(90, np.float32, ("-Du64=struct",))
    message = str(caught.value)
    assert "NVRTC_ERROR_COMPILATION" in message and "scatter_add.cu" in message and "error" in message.split("\n", 1)[1]
    assert isinstance(caught.value, CudaError) and caught.value.name == "NVRTC_ERROR_COMPILATION"


NVRTC_THEN_COMPILE = """
import sys
from pathlib import Path
from common.nvrtc import nvrtc_compile
output, log = nvrtc_compile(Path(sys.argv[1]), [], ptx=True)
namespace = {"__name__": "compiled_after_nvrtc"}  # compiled now, as bench_enqueue.py imports the plugin host late
exec(compile("def spec(name, low, high):\\n    return f'profile {name} {low} {high}'\\n", "late.py", "exec"), namespace)
print(repr((log, " ".encode(), b"a b"[1:2], namespace["spec"]("N", 1, 1000000))))
"""


def test_nvrtc_compile_writes_only_into_buffers_of_its_own(tmp_path):
    """nvrtc_compile with an empty log (nvrtcGetProgramLogSize 1: the NUL alone), in a fresh process: the
    interpreter's shared one-byte b" " stays a space. The log buffer once was b" " * size, which for size 1 is
    that shared object; NVRTC wrote its NUL into it, every later b" " became b"\\0", and on Python 3.12 the
    f-strings of modules compiled afterwards lost their single-space parts (bench_enqueue.py's plugin host spec
    arrived as "profile N110000001000000" on the H200)."""
    import ast
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("cuda.bindings.nvrtc")
    root = Path(__file__).resolve().parents[2]
    source = tmp_path / "empty_log.cu"
    source.write_text('extern "C" __global__ void one(float* x) { x[0] = 1.0f; }\n')
    result = subprocess.run([sys.executable, "-c", NVRTC_THEN_COMPILE, str(source)], cwd=root, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    log, space, sliced, spec = ast.literal_eval(result.stdout.strip().splitlines()[-1])
    assert log == "", f"NVRTC wrote a log ({log!r}): this source no longer tests the one-byte buffer"
    assert (space, sliced, spec) == (b" ", b" ", "profile N 1 1000000")


def test_pick_arch_prefers_the_device_arch_then_an_older_minor_of_the_same_major():
    supported = (75, 80, 86, 89, 90, 100, 120)
    assert pick_arch(90, supported) == 90
    assert pick_arch(87, supported) == 86
    assert pick_arch(121, supported) == 120
    with pytest.raises(ValueError, match="sm_70"):
        pick_arch(70, supported)


@pytest.mark.parametrize("bad", [np.float64, np.int32, "bfloat16", None])
def test_unsupported_dtypes_are_refused(bad):
    with pytest.raises(ValueError, match="float32 or float16"):
        kernel_dtype(bad)


def test_check_unwraps_values_and_raises_with_name_description_and_call():
    from cuda.bindings import nvrtc, runtime

    assert check((nvrtc.nvrtcResult.NVRTC_SUCCESS,)) is None
    assert check((nvrtc.nvrtcResult.NVRTC_SUCCESS, 7)) == 7
    assert check((nvrtc.nvrtcResult.NVRTC_SUCCESS, 7, 8)) == (7, 8)
    with pytest.raises(CudaError) as caught:
        check((runtime.cudaError_t.cudaErrorMemoryAllocation, None))
    assert "cudaErrorMemoryAllocation" in str(caught.value) and "out of memory" in str(caught.value)
    assert "test_kernel_compile.py" in str(caught.value)  # the failing call's source line
    with pytest.raises(CudaError, match=r"NVRTC_ERROR_INVALID_INPUT.*\(in nvrtcFoo\)"):
        check((nvrtc.nvrtcResult.NVRTC_ERROR_INVALID_INPUT,), "nvrtcFoo")

