"""--cuda_graph's order of work and its one-line errors (network.timing), without a GPU: plugin.cuda_graph's
CapturedGraph is replaced by a recorder, so these tests check only what network.timing does around it (the
warm-up before the capture, the replays, the error it turns a failed capture into). The capture itself is
GPU-tested in tests/network/test_cuda_graph_gpu.py and tests/plugin/test_plugin_gpu.py; through TensorRT in tests/network/test_e2e_state.py."""

import pytest

import plugin.cuda_graph
from common.errors import EngineError
from network.timing import WITHOUT_GRAPH_HINT, capture, capture_failure_message, engine_execution, warm_up
from common.cuda_check import CudaError


class RecordingGraph:
    """Stands in for CapturedGraph: runs nothing on a device, records each event in `log`."""

    log: list[str] = []

    def __init__(self, stream, enqueue):
        self.log.append(f"capture on stream {stream}")
        enqueue()  # CapturedGraph calls enqueue inside the capture

    def launch(self):
        self.log.append("launch")

    def close(self):
        self.log.append("close")


@pytest.fixture
def log(monkeypatch):
    RecordingGraph.log = []
    monkeypatch.setattr(plugin.cuda_graph, "CapturedGraph", RecordingGraph)
    return RecordingGraph.log


def test_warm_up_without_a_graph_runs_the_call_and_times_it(log):
    call = lambda: log.append("call")  # noqa: E731
    timed, graph = warm_up(7, call, 2, False, "x")
    assert (timed, graph) == (call, None) and log == ["call", "call"]


def test_warm_up_runs_the_call_before_capturing_it_then_replays(log):
    timed, graph = warm_up(7, lambda: log.append("call"), 2, True, "x")
    assert log == ["call", "call", "capture on stream 7", "call", "launch", "launch"]
    assert isinstance(graph, RecordingGraph) and timed == graph.launch


def test_a_failed_replay_during_the_warm_up_frees_the_graph(log, monkeypatch):
    def fail():
        raise CudaError("CUDA_ERROR_LAUNCH_FAILED: ...", "CUDA_ERROR_LAUNCH_FAILED")

    monkeypatch.setattr(RecordingGraph, "launch", lambda self: fail())
    with pytest.raises(CudaError):
        warm_up(7, lambda: None, 1, True, "x")
    assert log[-1] == "close"


@pytest.mark.parametrize("raised, cause", [
    (CudaError("CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: operation failed due to a previous error during capture "
               "(in cuStreamEndCapture)", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"), "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"),
    (CudaError("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: operation not permitted when stream is capturing", ""),
     "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: operation not permitted when stream is capturing"),
    (EngineError("TensorRT could not enqueue the engine (execute_async_v3 returned False; see its log)"),
     "TensorRT could not enqueue the engine (execute_async_v3 returned False; see its log)"),
])
def test_a_failed_capture_is_one_engine_error_line(log, raised, cause):
    class Trt:
        __version__ = "10.16.1.11"

    def enqueue():
        raise raised

    with pytest.raises(EngineError) as error:
        capture(7, enqueue, engine_execution(Trt))
    message = str(error.value)
    assert message == (f"TensorRT 10.16.1.11's execution of this engine could not be captured into a CUDA graph: {cause}; "
                       "run without --cuda_graph")
    assert "\n" not in message and error.value.__cause__ is raised


def test_capture_failure_message():
    assert capture_failure_message("scatter_add_launch", "CUDA_ERROR_X") == (
        f"scatter_add_launch could not be captured into a CUDA graph: CUDA_ERROR_X; {WITHOUT_GRAPH_HINT}")
    assert engine_execution(object()) == "TensorRT ?'s execution of this engine"
