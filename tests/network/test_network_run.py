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


def test_run_engine_turns_polygraphys_execution_error_into_one_line(monkeypatch):
    """TrtRunner reports a failed context or execution with a PolygraphyException (G_LOGGER.critical); run_engine
    turns it into an EngineError (exit 4, one line) and still frees its buffers. Stand-ins for the device
    buffers and the runner: this checks the error mapping, not an execution."""
    pytest.importorskip("polygraphy")
    import network.run
    import plugin.device_array
    import polygraphy.backend.trt
    from common.errors import EngineError
    from polygraphy.exception import PolygraphyException

    freed = []

    class HostArray:
        def __init__(self, array):
            self.array, self.ptr, self.shape, self.dtype = array, 0, array.shape, array.dtype

        @classmethod
        def from_array(cls, array):
            return cls(np.asarray(array))

        def free(self):
            freed.append(self)

    class FailingRunner:
        def __init__(self, engine):
            pass

        def __enter__(self):
            raise PolygraphyException("Invalid Context. See error log for details.\nmore lines")

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(plugin.device_array, "DeviceArray", HostArray)
    monkeypatch.setattr(polygraphy.backend.trt, "TrtRunner", FailingRunner)
    feeds = {"X": np.zeros((2, 1), np.float32), "idx": np.zeros(2, np.int64)}
    with pytest.raises(EngineError) as raised:
        network.run.run_engine(None, None, feeds)
    assert str(raised.value) == ("TensorRT could not run the engine (Invalid Context. See error log for details.); "
                                 "-v shows TensorRT's log")
    assert len(freed) == 2
