"""Timing: statistics of a list of durations (plain functions) and CUDA-event timing of work on a stream.

How a duration is taken (EventTimer.time): a CUDA event is recorded on the stream right before the call and
another right after it; the elapsed time between the two events is the duration. The call only enqueues work
(execute_async_v3, a kernel launch), so the figure is the span the stream spent from the first to the last
piece of that work, including any gap while the host was still enqueueing it (TensorRT and the Python
plugin's enqueue run on the host in between). Nothing else is on the stream, and the timer waits for the end
event before returning, so calls never overlap. time_with_host also returns the host time of the call alone
(time.perf_counter_ns right around it): what TensorRT's and the plugin's enqueue, or one cuGraphLaunch, cost.
"""

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


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


def format_duration(ms: float) -> str:
    """A duration with a unit that keeps it readable: '12.3 us', '4.56 ms', '7.89 s'."""
    if ms < 1.0:
        return f"{ms * 1e3:.1f} us"
    if ms < 1e3:
        return f"{ms:.3g} ms" if ms < 100 else f"{ms:.0f} ms"
    return f"{ms / 1e3:.2f} s"


def describe_summary(summary: TimingSummary, *, p90: bool = True) -> str:
    """'median 12.3 us, p90 13.0 us, min 11.9 us, max 20.1 us over 100 runs' (p90 left out on request)."""
    parts = [f"median {format_duration(summary.median_ms)}"]
    if p90:
        parts.append(f"p90 {format_duration(summary.p90_ms)}")
    parts += [f"min {format_duration(summary.min_ms)}", f"max {format_duration(summary.max_ms)}"]
    runs = "run" if summary.count == 1 else "runs"
    return ", ".join(parts) + f" over {summary.count} {runs}"


class EventTimer:
    """A pair of CUDA events (cuda-python runtime API) that times calls which enqueue work on a stream."""

    def __init__(self) -> None:
        from cuda.bindings import runtime

        from plugin.cuda_check import check

        self._start: Any = check(runtime.cudaEventCreate())
        self._end: Any = check(runtime.cudaEventCreate())

    def time(self, stream: int, call: Callable[[], Any]) -> float:
        """Milliseconds between events recorded on `stream` right before and right after call(); waits for them."""
        return self.time_with_host(stream, call)[0]

    def time_with_host(self, stream: int, call: Callable[[], Any]) -> tuple[float, float]:
        """(time(stream, call), the host milliseconds call() itself took to return: the cost of issuing the work,
        without the event records)."""
        from cuda.bindings import runtime

        from plugin.cuda_check import check

        check(runtime.cudaEventRecord(self._start, stream))
        start = time.perf_counter_ns()
        call()
        host_ms = (time.perf_counter_ns() - start) / 1e6
        check(runtime.cudaEventRecord(self._end, stream))
        check(runtime.cudaEventSynchronize(self._end))
        return float(check(runtime.cudaEventElapsedTime(self._start, self._end))), host_ms

    def close(self) -> None:
        from cuda.bindings import runtime

        from plugin.cuda_check import check

        for event in (self._start, self._end):
            if event is not None:
                check(runtime.cudaEventDestroy(event))
        self._start = self._end = None
