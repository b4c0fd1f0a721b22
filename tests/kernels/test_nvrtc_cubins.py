"""tests/support/nvrtc_cubins.py, the `cubin_for` fixture's store: one compile per (arch, dtype), in pytest's cache or,
without the cache plugin (-p no:cacheprovider), in memory; errors raised to the test that asks. NVRTC itself is
recorded here (tests/kernels/test_kernel_compile.py compiles for real)."""

import subprocess
import sys
import threading
import types
from pathlib import Path

import numpy as np
import pytest

from common.cuda_check import NvrtcError
from tests.support.nvrtc_cubins import CubinStore, store_for

ROOT = Path(__file__).resolve().parents[2]


class Recorder:
    """Stands in for nvrtc_compile: records each compile's options; sm_<arch> CUBINs of their own bytes."""

    def __init__(self, fail_arch: int | None = None):
        self.calls: list[list[bytes]] = []
        self.fail_arch = fail_arch
        self.lock = threading.Lock()

    def __call__(self, source, options, *, target=""):
        with self.lock:
            self.calls.append(options)
        arch = next(option for option in options if option.startswith(b"--gpu-architecture=")).split(b"_")[-1]
        if self.fail_arch is not None and int(arch) == self.fail_arch:
            raise NvrtcError(f"NVRTC could not compile {source.name}{target}: NVRTC_ERROR_COMPILATION\nlog", "x")
        return b"\x7fELF sm_" + arch + (b" half" if b"-DSCATTER_HALF=1" in options else b""), ""


def test_each_arch_and_dtype_is_compiled_once_even_when_asked_from_many_threads():
    recorder = Recorder()
    store = CubinStore(None, workers=2, compile=recorder)
    try:
        keys = [(arch, dtype) for arch in (75, 90) for dtype in (np.float32, "float16")] * 4
        threads = [threading.Thread(target=store.get, args=key) for key in keys]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(recorder.calls) == 4 and len(store.compiled) == 4
        assert store.get(90, np.float16) == b"\x7fELF sm_90 half" and store.get(75, "float32") == b"\x7fELF sm_75"
        assert len(recorder.calls) == 4
    finally:
        store.close()


def test_a_kept_cubin_is_read_back_by_the_next_session_without_compiling(tmp_path):
    first, second = Recorder(), Recorder()
    for recorder in (first, second):
        store = CubinStore(tmp_path, workers=1, compile=recorder)
        try:
            assert store.get(86, np.float32) == b"\x7fELF sm_86"
        finally:
            store.close()
    assert len(first.calls) == 1 and second.calls == []
    assert [path.name.split("_")[:3] for path in tmp_path.iterdir()] == [["sm", "86", "float32"]]  # no partial file


def test_a_compile_error_is_raised_in_the_test_that_asks_with_nvrtcs_log():
    store = CubinStore(None, workers=2, compile=Recorder(fail_arch=80))
    try:
        with pytest.raises(NvrtcError, match="for sm_80, float16: NVRTC_ERROR_COMPILATION\nlog"):
            store.get(80, np.float16)
        assert store.get(75, np.float16) == b"\x7fELF sm_75 half"
    finally:
        store.close()


def test_without_pytests_cache_the_store_is_in_memory_and_with_it_in_the_cache(tmp_path):
    without = types.SimpleNamespace(stash=pytest.Stash())  # -p no:cacheprovider: the config has no `cache`
    with_cache = types.SimpleNamespace(stash=pytest.Stash(),
                                       cache=types.SimpleNamespace(mkdir=lambda name: tmp_path / name))
    (tmp_path / "nvrtc-cubins").mkdir()
    stores = [store_for(without), store_for(with_cache)]
    try:
        assert stores[0].folder is None and stores[1].folder == tmp_path / "nvrtc-cubins"
        assert store_for(without) is stores[0]  # one per session
    finally:
        for store in stores:
            store.close()


def test_the_kernel_tests_set_up_without_pytests_cache():
    # issue 27: `-p no:cacheprovider` gave 26 errors (the fixture read request.config.cache); --setup-only sets the
    # fixture up without compiling
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--setup-only",
                             "tests/kernels/test_kernel_compile.py", "-k", "compiles_to_a_cubin"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "SETUP    S cubin_for" in result.stdout and " error" not in result.stdout.splitlines()[-1]
