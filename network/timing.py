"""How repeated executions (--steps, --benchmark) are timed: CUDA events around each call, the statistics of the
durations, and --cuda_graph's capture of one call replayed instead.

The timing (EventTimer.time). A CUDA event is recorded on the stream right before the call and another right
after it; the elapsed time between the two events is the duration. The call only enqueues work
(execute_async_v3, a kernel launch), so the figure is the span the stream spent from the first to the last
piece of that work, including any gap while the host was still enqueueing it (TensorRT and the Python
plugin's enqueue run on the host in between). Nothing else is on the stream, and the timer waits for the end
event before returning, so calls never overlap. time_with_host also returns the host time of the call alone
(time.perf_counter_ns right around it): what TensorRT's and the plugin's enqueue, or one cuGraphLaunch, cost.

--cuda_graph. One engine execution (or one kernel launch) is captured into a CUDA graph after the warm-up, then
replayed with cuGraphLaunch (plugin.cuda_graph.CapturedGraph), as trtexec's --useCudaGraph runs an engine.
A replay issues the kernels and memsets the call enqueued when it was captured, at the addresses it used then:
TensorRT's enqueue and the Python plugin's enqueue do not run again. So the buffers keep their addresses and
shapes, and new inputs are uploaded into them between replays. The call runs (untimed) before it is captured,
so that first-run work (TensorRT's shape setup, the plugin's on_shape_change compiling its kernels) happens
outside the capture. An engine or TensorRT whose enqueue cannot be captured (CUDA refuses a call inside the
capture, or execute_async_v3 fails there) stops with one line (EngineError, exit 4).

The statistics and the wording of the reports (how each timed call was issued) are plain functions; the
timer and the capture need cuda-python and a GPU (imported inside them).
"""

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from common.errors import EngineError

if TYPE_CHECKING:
    from plugin.cuda_graph import CapturedGraph


@dataclass(frozen=True)
class TimingSummary:
    """Statistics of `count` durations in milliseconds."""

    count: int
    median_ms: float
    p90_ms: float
    min_ms: float
    max_ms: float


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest value with at least `fraction` of the values at or below it.

    percentile(v, 0.9) of 10 values is the 9th smallest; of 1 value, that value. ValueError when empty.
    """
    if not values:
        raise ValueError("percentile of an empty list")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered) - 1e-9))  # 1-based; the epsilon keeps 0.9 * 10 at rank 9
    return float(ordered[rank - 1])


def summarize(durations_ms: Sequence[float]) -> TimingSummary:
    """Median, 90th percentile (nearest rank), minimum and maximum; ValueError for an empty list."""
    if not durations_ms:
        raise ValueError("no durations to summarize")
    values = [float(value) for value in durations_ms]
    return TimingSummary(
        count=len(values),
        median_ms=float(statistics.median(values)),
        p90_ms=percentile(values, 0.9),
        min_ms=min(values),
        max_ms=max(values),
    )


class EventTimer:
    """A pair of CUDA events (cuda-python runtime API) that times calls which enqueue work on a stream."""

    def __init__(self) -> None:
        from cuda.bindings import runtime

        from common.cuda_check import check

        self._start: Any = check(runtime.cudaEventCreate())
        self._end: Any = check(runtime.cudaEventCreate())

    def time(self, stream: int, call: Callable[[], Any]) -> float:
        """Milliseconds between events recorded on `stream` right before and right after call(); waits for them."""
        return self.time_with_host(stream, call)[0]

    def time_with_host(self, stream: int, call: Callable[[], Any]) -> tuple[float, float]:
        """(time(stream, call), the host milliseconds call() itself took to return: the cost of issuing the work,
        without the event records)."""
        from cuda.bindings import runtime

        from common.cuda_check import check

        check(runtime.cudaEventRecord(self._start, stream))
        start = time.perf_counter_ns()
        call()
        host_ms = (time.perf_counter_ns() - start) / 1e6
        check(runtime.cudaEventRecord(self._end, stream))
        check(runtime.cudaEventSynchronize(self._end))
        return float(check(runtime.cudaEventElapsedTime(self._start, self._end))), host_ms

    def close(self) -> None:
        from cuda.bindings import runtime

        from common.cuda_check import check

        for event in (self._start, self._end):
            if event is not None:
                check(runtime.cudaEventDestroy(event))
        self._start = self._end = None


WITHOUT_GRAPH_HINT = "run without --cuda_graph"


def capture_failure_message(what: str, cause: str) -> str:
    """The one line for a capture that failed: what was captured, the cause (a CUDA error's name), the way out."""
    return f"{what} could not be captured into a CUDA graph: {cause}; {WITHOUT_GRAPH_HINT}"


def engine_execution(trt: Any) -> str:
    """How a failed capture names what it captured: "TensorRT 10.16.1.11's execution of this engine"."""
    return f"TensorRT {getattr(trt, '__version__', '?')}'s execution of this engine"


def capture(stream: int, call: Callable[[], Any], what: str) -> "CapturedGraph":
    """call() captured on `stream` (created by the caller, not 0) and instantiated; EngineError naming `what` and
    the CUDA error when the capture fails. Run call() at least once before (see the module docstring)."""
    from common.cuda_check import CudaError
    from plugin.cuda_graph import CapturedGraph

    try:
        return CapturedGraph(stream, call)
    except CudaError as error:
        raise EngineError(capture_failure_message(what, error.name or str(error))) from error
    except EngineError as error:  # execute_async_v3 returned False inside the capture
        raise EngineError(capture_failure_message(what, str(error))) from error


def warm_up(stream: int, call: Callable[[], Any], warmup: int, cuda_graph: bool,
            what: str) -> tuple[Callable[[], Any], "CapturedGraph | None"]:
    """Runs call() `warmup` times; with cuda_graph, then captures it (capture) and launches the graph `warmup`
    times (its first launches upload it). Returns what to time, call or the graph's launch, and the graph for the
    caller to close (None without cuda_graph)."""
    for _ in range(warmup):
        call()
    if not cuda_graph:
        return call, None
    graph = capture(stream, call, what)
    try:
        for _ in range(warmup):
            graph.launch()
    except BaseException:
        graph.close()
        raise
    return graph.launch, graph
