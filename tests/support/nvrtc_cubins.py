"""The `cubin_for` fixture: scatter_add.cu compiled by NVRTC once per (arch, dtype) for the whole test session.

NVRTC takes about 3 s per compile on a 2-core machine, and tests/kernels/test_kernel_compile.py compiles for every architecture
from sm_75 to the newest this NVRTC knows, in both dtypes (26 compiles with NVRTC 13.5). So the compiles that the
collected tests will ask for start when collection ends, in background threads (one per core; NVRTC is
thread-safe and cuda-python releases the GIL during nvrtcCompileProgram), while the tests before them run; a test
waits only for its own CUBIN, and a compile error is raised in that test, with NVRTC's log. The options are
plugin.kernels.compile.compile_options, the ones the plugin compiles with on a user's machine.

CUBINs are kept in pytest's cache under a hash of the source, the options and NVRTC's version, so a rerun over an
unchanged kernel compiles nothing (`python3 -m pytest --cache-clear` compiles again); without pytest's cache
(`-p no:cacheprovider`) they are kept for the session only. Registered by tests/conftest.py (pytest_plugins).
"""

import functools
import hashlib
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from common.cuda_check import check
from common.nvrtc import nvrtc_compile
from plugin.kernels.compile import SOURCE_PATH, compile_options, kernel_dtype

FIXTURE = "cubin_for"
_STORE = pytest.StashKey["CubinStore"]()


def compile_workers() -> int:
    """Background compile threads: one per core this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class CubinStore:
    """CUBINs of scatter_add.cu by (arch, dtype): each compiled once, in a pool of threads, and kept in `folder`
    (pytest's cache) when there is one, else in memory for the session."""

    def __init__(self, folder: Path | None, workers: int, compile=nvrtc_compile):
        self.folder = folder
        self._compile = compile  # (source path, options, target=...) -> (CUBIN, log): nvrtc_compile
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nvrtc")
        self._futures: dict[tuple[int, np.dtype], Future[bytes]] = {}
        self._lock = threading.Lock()
        self.compiled: list[tuple[int, np.dtype]] = []  # what NVRTC compiled (not read from the cache), in order

    def submit(self, arch: int, dtype: object) -> "Future[bytes]":
        """The (possibly running or finished) compile of (arch, dtype), started if it was not asked for yet. Its
        options are made here, in the caller's thread, as compile_cubin makes them."""
        key = (int(arch), kernel_dtype(dtype))
        with self._lock:
            if key not in self._futures:
                options = compile_options(*key)
                self._futures[key] = self._pool.submit(self._load_or_compile, *key, options, self._path(*key, options))
            return self._futures[key]

    def get(self, arch: int, dtype: object) -> bytes:
        """The CUBIN for (arch, dtype); NvrtcError (with NVRTC's log) if it does not compile."""
        return self.submit(arch, dtype).result()

    def close(self) -> None:
        """Drops the compiles not started yet and waits for the running ones (at most one per thread)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _path(self, arch: int, dtype: np.dtype, options: list[bytes]) -> Path | None:
        """Where the CUBIN is kept: a name of the source's, the options' and NVRTC's version's hash."""
        if self.folder is None:
            return None
        digest = hashlib.sha256(b"\0".join([*self._source_and_version, *options])).hexdigest()[:16]
        return self.folder / f"sm_{arch}_{dtype}_{digest}.cubin"

    @functools.cached_property
    def _source_and_version(self) -> tuple[bytes, bytes]:
        """The kernel source and NVRTC's version, read once per session (every key's hash starts with them)."""
        from cuda.bindings import nvrtc

        return SOURCE_PATH.read_bytes(), repr(check(nvrtc.nvrtcVersion())).encode()

    def _load_or_compile(self, arch: int, dtype: np.dtype, options: list[bytes], path: Path | None) -> bytes:
        if path is not None and path.exists():
            return path.read_bytes()
        cubin, _ = self._compile(SOURCE_PATH, options, target=f" for sm_{arch}, {dtype}")
        with self._lock:
            self.compiled.append((arch, dtype))
        if path is not None:  # through a file of this thread's own: a concurrent session reads whole CUBINs only
            partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
            partial.write_bytes(cubin)
            os.replace(partial, path)
        return cubin


def store_for(config: pytest.Config) -> CubinStore:
    """The session's CubinStore, made on first use: in pytest's cache where the cache plugin is loaded."""
    store = config.stash.get(_STORE, None)
    if store is None:
        cache = getattr(config, "cache", None)  # absent under -p no:cacheprovider
        folder = Path(cache.mkdir("nvrtc-cubins")) if cache is not None else None
        store = config.stash[_STORE] = CubinStore(folder, compile_workers())
    return store


def wanted(items: list[pytest.Item]) -> list[tuple[int, object]]:
    """(arch, dtype) of each collected test that asks for `cubin_for` with `arch` and `dtype` parameters and is not
    marked skip, in test order, each once."""
    keys: dict[tuple[int, object], None] = {}
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if FIXTURE in getattr(item, "fixturenames", ()) and "arch" in params and "dtype" in params \
                and item.get_closest_marker("skip") is None:
            keys[(params["arch"], params["dtype"])] = None
    return list(keys)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Starts the compiles the collected tests will ask for, in the background (not where no test runs:
    --collect-only, --setup-only, --setup-plan)."""
    option = session.config.option
    runs = not any(getattr(option, name, False) for name in ("collectonly", "setuponly", "setupplan"))
    keys = wanted(session.items) if runs else []
    if keys:
        store = store_for(session.config)
        for arch, dtype in keys:
            store.submit(arch, dtype)


def pytest_sessionfinish(session: pytest.Session) -> None:
    store = session.config.stash.get(_STORE, None)
    if store is not None:
        store.close()


@pytest.fixture(scope="session")
def cubin_for(request):
    """cubin_for(arch, dtype): the CUBIN of scatter_add.cu for sm_<arch> and dtype (float32 or float16), compiled
    once per session (in the background from the end of collection) and kept in pytest's cache."""
    return store_for(request.config).get
