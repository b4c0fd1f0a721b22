"""run_graph stops with one line naming what to install before it touches the graph, where TensorRT is not enough."""

import numpy as np
import pytest

from common.errors import MissingDependencyError
from common.imports import is_full_tensorrt
from network.run import run_graph


@pytest.mark.trt_standin
def test_run_graph_refuses_tensorrt_without_add_plugin_v3_before_any_work(trt):
    if is_full_tensorrt(trt):
        pytest.skip("the full TensorRT is installed here (see tests/network/test_e2e.py)")
    with pytest.raises(MissingDependencyError) as raised:
        run_graph(None, np.ones((3, 1)), "not-a-precision")  # the graph is never read
    message = str(raised.value)
    assert "add_plugin_v3" in message and "pip install" in message
    assert "\n" not in message


def test_run_engine_frees_its_buffers_and_session_when_the_execution_fails(monkeypatch):
    """run_engine executes on an ExecutionSession (network/execution.py); when TensorRT cannot enqueue, the
    session's one-line EngineError (exit 4) reaches the caller and the session and every uploaded buffer are
    released. Stand-ins for the device buffers and the session: this checks the clean-up, not an execution."""
    pytest.importorskip("polygraphy")
    import network.execution
    import network.run
    import plugin.device_array
    from common.errors import EngineError

    freed, closed, bound = [], [], []

    class HostArray:
        def __init__(self, array):
            self.array, self.ptr, self.shape, self.dtype = array, 0, array.shape, array.dtype

        @classmethod
        def from_array(cls, array):
            return cls(np.asarray(array))

        def free(self):
            freed.append(self)

    class FailingSession:
        def __init__(self, trt, engine, inputs, outputs_at_inputs=None):
            bound.append(sorted(inputs))
            self.outputs = {}

        def execute(self):
            raise EngineError("TensorRT could not enqueue the engine (execute_async_v3 returned False; see its log)")

        def close(self):
            closed.append(self)

    monkeypatch.setattr(plugin.device_array, "DeviceArray", HostArray)
    monkeypatch.setattr(network.execution, "ExecutionSession", FailingSession)
    feeds = {"X": np.zeros((2, 1), np.float32), "idx": np.zeros(2, np.int64)}
    with pytest.raises(EngineError) as raised:
        network.run.run_engine(None, None, feeds)
    assert str(raised.value).startswith("TensorRT could not enqueue the engine") and "\n" not in str(raised.value)
    assert bound == [["X", "idx"]] and len(closed) == 1 and len(freed) == 2
