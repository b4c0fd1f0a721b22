"""Capture what a call enqueues on a stream into a CUDA graph, then replay it with one driver call.

An engine execution costs host time on every call: TensorRT's enqueue, the Python plugin's enqueue and their
driver calls. When the buffers' addresses stay the same from one execution to the next (an engine's bindings,
the --steps state), all of that can be recorded once: stream capture turns the kernels and memsets the call
enqueues into a graph, and each later execution is one cuGraphLaunch, with no Python and no TensorRT code on
the host (trtexec's --useCudaGraph does the same). The graph replays the addresses and kernel arguments it
recorded: new inputs go into the same buffers, and a shape or address change needs a new capture.

Run the call once before capturing it: first-run work (TensorRT's shape setup, the plugin's on_shape_change,
which compiles and loads the kernels) must not happen inside a capture. Capture needs a stream created by the
caller (the legacy default stream 0 cannot be captured).
"""

from collections.abc import Callable
from typing import Any

from common.cuda_check import check


class CapturedGraph:
    """The work `enqueue()` puts on `stream`, captured once (thread-local capture mode) and instantiated;
    launch() replays it on that stream, and `executable` (a CUgraphExec) can be launched on any other stream
    with cuGraphLaunch. close() frees it."""

    def __init__(self, stream: int, enqueue: Callable[[], Any], driver: Any = None) -> None:
        if driver is None:  # the launcher passes its own (plugin/kernels/launch.py Backend)
            from cuda.bindings import driver as cuda_driver

            driver = cuda_driver
        self._driver = driver
        if not int(stream):
            raise ValueError("CUDA graph capture needs a created stream; the legacy default stream 0 cannot be captured")
        self._stream = driver.CUstream(int(stream))
        self.executable: Any = None
        check(driver.cuStreamBeginCapture(self._stream, driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))
        try:
            enqueue()
        except BaseException:
            ended = driver.cuStreamEndCapture(self._stream)  # the stream must leave capture mode either way
            if not ended[0] and ended[1] is not None and int(ended[1]):
                check(driver.cuGraphDestroy(ended[1]))
            raise
        # an error inside the capture (an unsupported call) shows here as CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
        graph = check(driver.cuStreamEndCapture(self._stream))
        try:
            self.executable = check(driver.cuGraphInstantiate(graph, 0))
        finally:
            check(driver.cuGraphDestroy(graph))  # the executable graph keeps its own copy

    def launch(self) -> None:
        """Enqueues one replay on the capture's stream (asynchronous)."""
        result = self._driver.cuGraphLaunch(self.executable, self._stream)
        if result[0]:
            check(result, call="cuGraphLaunch of the captured graph")

    def close(self) -> None:
        """Frees the executable graph; replays already queued still run (the driver frees it after them)."""
        if self.executable is not None:
            check(self._driver.cuGraphExecDestroy(self.executable))
            self.executable = None

    def __enter__(self) -> "CapturedGraph":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
