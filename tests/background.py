"""The priority of the work a test session runs beside its tests and awaits late: PyG's export
(tests/onnx_pyg.py, for test_onnx_pyg.py), the docs walk (tests/test_own_model_walk.py) and the trt_bindings run
on real bindings (tests/test_real_bindings.py), about 50 s of CPU on a 2-core machine.

The tests run one after another in the main thread, and the NVRTC compiles (tests/nvrtc_cubins.py, 26 of 3-4 s)
are awaited by the kernel tests, a third of the way through: those two decide when the session ends. At nice
+10 the late work takes the CPU they leave (all of it while the main thread waits) instead of an equal share:
with the NVRTC threads at nice +10 too, the kernel tests of one run waited 67 s for their CUBINs. Linux keeps a
nice value per thread, and a process started from a thread inherits it. Elsewhere (or where the value cannot be
changed) everything runs at the session's priority, as before.
"""

import os
import sys
import threading

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
