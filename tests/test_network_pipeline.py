"""run_graph stops with one line naming what to install before it touches the graph, where TensorRT is not enough."""

import numpy as np
import pytest

from common.errors import MissingDependencyError
from common.imports import is_full_tensorrt
from network.pipeline import run_graph


@pytest.mark.trt_standin
def test_run_graph_refuses_tensorrt_without_add_plugin_v3_before_any_work(trt):
    if is_full_tensorrt(trt):
        pytest.skip("the full TensorRT is installed here (see tests/test_e2e.py)")
    with pytest.raises(MissingDependencyError) as raised:
        run_graph(None, np.ones((3, 1)), "not-a-precision")  # the graph is never read
    message = str(raised.value)
    assert "add_plugin_v3" in message and "pip install" in message
    assert "\n" not in message
