"""The priority of the work a test session runs beside its tests and awaits late: PyG's export
(tests/support/onnx_pyg.py, for test_onnx_pyg.py), the docs walk (tests/cpp/test_own_model_walk.py) and the trt_bindings run
on real bindings (tests/plugin/test_real_bindings.py), about 50 s of CPU on a 2-core machine.

The tests run one after another in the main thread, and the NVRTC compiles (tests/support/nvrtc_cubins.py, 26 of 3-4 s)
are awaited by the kernel tests, a third of the way through: those two decide when the session ends. At nice
+10 the late work takes the CPU they leave (all of it while the main thread waits) instead of an equal share:
with the NVRTC threads at nice +10 too, the kernel tests of one run waited 67 s for their CUBINs. Linux keeps a
nice value per thread, and a process started from a thread inherits it. Elsewhere (or where the value cannot be
changed) everything runs at the session's priority, as before. BackgroundJob runs such work in a thread.
"""

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

NICE = 10


def _lower(who: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        os.setpriority(os.PRIO_PROCESS, who, min(19, os.getpriority(os.PRIO_PROCESS, who) + NICE))
    except OSError:  # gone already, or not ours to change
        pass


def lower_this_thread() -> None:
    """The calling thread (and the processes it starts from now on) at NICE more than it had."""
    _lower(threading.get_native_id())


def lower_process(pid: int) -> None:
    """A started process (and those it starts from now on) at NICE more than it had."""
    _lower(pid)


class BackgroundJob:
    """Work a test awaits, run in a thread from the end of collection (tests/conftest.py calls its module's
    start_background), below the tests' priority; what it starts through run() is stopped with it.

    target(job) does the work: job.run(argv, ...) for each process, its findings in job.results. A test calls
    wait(), which raises what target raised; stop() (pytest_sessionfinish) ends a job no test waited for and
    removes `folder`."""

    def __init__(self, name: str, target: Callable[["BackgroundJob"], None], folder: Path) -> None:
        self.folder = folder
        self.results: dict[str, Any] = {}
        self._target = target
        self._lock = threading.Lock()
        self._stopped = False
        self._process: subprocess.Popen | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        lower_this_thread()  # the processes it starts inherit it
        try:
            self._target(self)
        except BaseException as error:  # raised again by wait(), in the test
            self._error = error

    def run(self, argv: list[str], timeout: float = 600, **options: Any) -> subprocess.CompletedProcess | None:
        """argv's process (a session of its own, so that stop() ends what it starts too), its output as text;
        None once the job is stopped."""
        with self._lock:
            if self._stopped:
                return None
            process = self._process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                       text=True, start_new_session=True, **options)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            stdout, stderr = process.communicate()
        return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)

    @property
    def stopped(self) -> bool:
        return self._stopped

    def wait(self, timeout: float) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self._thread.name} did not end within {timeout:.0f} s"
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            if self._process is not None and self._process.poll() is None:
                _kill_group(self._process)
        self._thread.join(timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
