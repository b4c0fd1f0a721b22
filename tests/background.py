"""The priority of the work a test session runs beside its tests: the NVRTC compiles (tests/nvrtc_cubins.py),
PyG's export (tests/onnx_pyg.py), the trt_bindings run on real bindings (tests/test_real_bindings.py) and the
docs walk (tests/test_own_model_walk.py).

The tests themselves run one after another in the main thread, so that thread decides when the session ends;
the background work is awaited later, by a test that needs it. At nice +10 it takes the cores the main thread
leaves (on a 2-core machine the second one, and both while the main thread waits), instead of an equal share of
the main thread's core. Linux keeps a nice value per thread, and a process started from a thread inherits it.
Elsewhere (or where the value cannot be changed) everything runs at the session's priority, as before.
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
