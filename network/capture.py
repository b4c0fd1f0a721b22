"""--cuda_graph: one engine execution (or one kernel launch) captured into a CUDA graph after the warm-up, then
replayed with cuGraphLaunch (plugin.cuda_graph.CapturedGraph), as trtexec's --useCudaGraph runs an engine.

A replay issues the kernels and memsets the call enqueued when it was captured, at the addresses it used then:
TensorRT's enqueue and the Python plugin's enqueue do not run again. So the buffers keep their addresses and
shapes, and new inputs are uploaded into them between replays. The call runs (untimed) before it is captured,
so that first-run work (TensorRT's shape setup, the plugin's on_shape_change compiling its kernels) happens
outside the capture. An engine or TensorRT whose enqueue cannot be captured (CUDA refuses a call inside the
capture, or execute_async_v3 fails there) stops with one line (EngineError, exit 4). The wording of the
reports (how each timed call was issued) is plain functions; capture and warm_up need cuda-python and a GPU.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from common.errors import EngineError
from network.builder import AOT_PLUGIN, PYTHON_PLUGIN
from network.timing import TimingSummary, format_duration

if TYPE_CHECKING:
    from plugin.cuda_graph import CapturedGraph

WITHOUT_GRAPH_HINT = "run without --cuda_graph"


def issued_by(cuda_graph: bool, plugin: str | None = PYTHON_PLUGIN) -> str:
    """What the host runs to issue one execution: the captured graph's launch, or TensorRT's enqueue with the
    scatter-add `plugin` (None: an engine file's, whichever it holds)."""
    if cuda_graph:
        return "cuGraphLaunch of the captured execution"
    if plugin == PYTHON_PLUGIN:
        return "execute_async_v3 with the Python plugin's enqueue"
    if plugin == AOT_PLUGIN:
        return "execute_async_v3; the AOT plugin runs no Python"
    return "execute_async_v3 with the engine file's plugin"


def timed_call(cuda_graph: bool) -> str:
    """The call the CUDA events are recorded around."""
    if cuda_graph:
        return "cuGraphLaunch of the execution captured once after the warm-up"
    return "execute_async_v3"


def host_time_line(summary: TimingSummary, what: str, how: str) -> str:
    """'Host time to issue one step: median 7.1 us (execute_async_v3 with ...)'."""
    return f"Host time to issue one {what}: median {format_duration(summary.median_ms)} ({how})"


def capture_failure_message(what: str, cause: str) -> str:
    """The one line for a capture that failed: what was captured, the cause (a CUDA error's name), the way out."""
    return f"{what} could not be captured into a CUDA graph: {cause}; {WITHOUT_GRAPH_HINT}"


def engine_execution(trt: Any) -> str:
    """How a failed capture names what it captured: "TensorRT 10.16.1.11's execution of this engine"."""
    return f"TensorRT {getattr(trt, '__version__', '?')}'s execution of this engine"


def capture(stream: int, call: Callable[[], Any], what: str) -> "CapturedGraph":
    """call() captured on `stream` (created by the caller, not 0) and instantiated; EngineError naming `what` and
    the CUDA error when the capture fails. Run call() at least once before (see the module docstring)."""
    from plugin.cuda_check import CudaError
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
