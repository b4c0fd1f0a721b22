"""The oracle of --validate --onnx: ONNX Runtime on the ORIGINAL model, exact for its scatters (one thread per
operator: its CPU ScatterND/ScatterElements(add) loses or reorders additions across threads), its own logging
silenced (the sample's one line says what failed)."""

import numpy as np
import pytest

import aliased_io_plugin as cli
from tests.support.issue_models import index_add_model
from tests.support.onnx_helpers import REWRITE_MISSING

pytestmark = pytest.mark.skipif(REWRITE_MISSING is not None, reason=REWRITE_MISSING or "")


def test_a_model_with_a_scatter_runs_single_threaded_and_quiet(tmp_path):
    from onnx_path.rewrite import load_model
    from onnx_path.runtime import QUIET, session_options
    from tests.network.test_network_onnx_parse import state_io_model

    options = session_options(load_model(index_add_model(tmp_path / "scatter.onnx")))
    assert options.intra_op_num_threads == 1 and options.log_severity_level == QUIET
    plain = session_options(load_model(state_io_model(tmp_path / "plain.onnx", scatter=False)))
    assert plain.intra_op_num_threads == 0 and plain.log_severity_level == QUIET  # 0: ONNX Runtime's own choice


def test_scatter_add_in_onnx_runtime_is_the_float32_sum_in_edge_order(tmp_path):
    """2e6 edges into 1000 rows (2,000 each): with its default threads ONNX Runtime was off by thousands here;
    single-threaded it equals np.add.at in float32 bit for bit, run after run."""
    from onnx_path.rewrite import load_model
    from onnx_path.runtime import OnnxRuntimeSession

    session = OnnxRuntimeSession(load_model(index_add_model(tmp_path / "own.onnx", features=1)))
    rng = np.random.default_rng(0)
    feeds = {"state": np.zeros((1000, 1), np.float32), "src": rng.uniform(0, 10, (2_000_000, 1)).astype(np.float32),
             "idx": rng.integers(0, 1000, 2_000_000)}
    expected = feeds["state"].copy()
    np.add.at(expected, feeds["idx"], feeds["src"])
    for _ in range(2):
        assert np.array_equal(session.run(feeds)["state_out"], expected)


def test_validate_passes_a_correct_rewrite_of_a_large_graph(tmp_path, capsys):
    from export.export_onnx import main as export

    model = tmp_path / "gnn.onnx"
    assert export(["--network", "classifier", "--out", str(model)]) == 0
    capsys.readouterr()
    status = cli.main(["--onnx", str(model), "--random_graph", "20000", "400000", "--dry-run", "--validate",
                       "--seed", "1"])
    captured = capsys.readouterr()
    assert status == 0, captured.out[-2000:] + captured.err
    assert "Validation against reference successful!" in captured.out
