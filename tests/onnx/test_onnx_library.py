"""onnx_path/ called as a library, without the command line: a model read, run on the CPU, its outputs compared
and described; what it returns, and the InputError it raises naming the file (the command line adds the option)."""

import numpy as np
import pytest

from common.errors import InputError
from common.plugin_kind import PluginKind
from onnx_path.compare import compare_output
from onnx_path.describe import model_lines
from onnx_path.read import read_model
from onnx_path.run import original_run, rewritten_run
from reference import scatter_add_rows
from tests.network.test_network_onnx_parse import state_io_model
from tests.support.onnx_helpers import REWRITE_MISSING

pytestmark = pytest.mark.skipif(REWRITE_MISSING is not None, reason=REWRITE_MISSING or "")


def test_a_model_read_runs_rewritten_and_original_to_the_same_state(tmp_path):
    model = read_model(state_io_model(tmp_path / "own.onnx", scatter=True, state="state"), PluginKind.PYTHON)
    assert not model.is_sample and dict(model.rewritten.aliases) == {"X_out": "state"}
    assert model_lines(model)[0] == (f"ONNX model {tmp_path / 'own.onnx'}: a model of your own (not the sample's "
                                     "network), rewritten for the python plugin:")
    rng = np.random.default_rng(3)
    feeds = {"state": rng.standard_normal((5, 3)).astype(np.float32),
             "src": rng.standard_normal((9, 3)).astype(np.float32), "idx": rng.integers(0, 5, 9)}
    rewritten = rewritten_run(model)(feeds)["X_out"]
    expected = scatter_add_rows(feeds["src"], None, feeds["idx"], 5, start=feeds["state"]).astype(np.float32)
    assert np.array_equal(rewritten, expected)  # the plugin node's CPU reference: float64 sums, rounded once
    assert compare_output(rewritten, original_run(model)(feeds)["X_out"], np.float32).ok
    assert not compare_output(rewritten + 1.0, original_run(model)(feeds)["X_out"], np.float32).ok


def test_the_library_names_the_file_and_leaves_the_option_to_the_command_line(tmp_path):
    missing = tmp_path / "absent.onnx"
    with pytest.raises(InputError) as raised:
        read_model(str(missing), PluginKind.PYTHON)
    assert str(raised.value) == f"{missing}: file not found"
