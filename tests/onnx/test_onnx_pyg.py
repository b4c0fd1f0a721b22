"""PyTorch Geometric's layers through the rewrite (issue 34): each model of tests/support/onnx_pyg.py, exported once per
session by torch.onnx.export(dynamo=True) with N and E dynamic, rewritten for both plugins (how many scatters go
in place, which are left to TensorRT), passing onnx.checker's full check, and validated by the round trip (the
rewritten model with the plugin nodes' CPU reference against ONNX Runtime on the original) on graphs of other
sizes than the export's, with nodes that have no in-edges; then the CLI's dry run on the user's inputs and on
inputs made from the seed. The engines of these models: tests/onnx/test_e2e_onnx_any.py (tensorrt)."""

import numpy as np
import pytest

import aliased_io_plugin as cli
from common.errors import InputError
from tests.support.onnx_pyg import PYG, PYG_MISSING, SIZES, pyg_feeds, pyg_path
from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_cli_onnx_any import npz

pytestmark = pytest.mark.skipif(PYG_MISSING is not None, reason=PYG_MISSING or "")

ACCEPTED = [name for name, expected in PYG.items() if not expected.refused]


@pytest.fixture(scope="session")
def pyg_models():
    """name -> the session's export (tests/support/onnx_pyg.py: one background process for all of them)."""
    return pyg_path


def reductions(model):
    import onnx

    return [onnx.helper.get_attribute_value(attribute).decode() for node in model.graph.node
            if node.op_type.startswith("Scatter") for attribute in node.attribute if attribute.name == "reduction"]


@pytest.mark.parametrize("plugin", ["python", "aot"])
@pytest.mark.parametrize("name", ACCEPTED)
def test_each_pyg_model_has_its_add_scatters_rewritten_and_round_trips(pyg_models, name, plugin):
    import onnx

    from onnx_path.rewrite import load_model, rewrite_model
    from onnx_path.runtime import run_onnxruntime, run_rewritten

    expected = PYG[name]
    original = load_model(pyg_models(name))
    result = rewrite_model(original, plugin)
    onnx.checker.check_model(result.model, full_check=True)
    assert "add" in reductions(original) and "add" not in reductions(result.model)
    assert reductions(result.model) == list(expected.left)
    assert [scatter.reduction for scatter in result.left] == list(expected.left)
    assert len(result.scatters) == expected.plugins
    assert sum(scatter.counts_node is not None for scatter in result.scatters) == expected.counts
    added = sum(1 for reduction in reductions(original) if reduction == "add")
    assert added == expected.plugins + expected.counts  # every add scatter replaced
    if plugin == "python":
        nodes = [node for node in result.model.graph.node if node.domain == "aliased_io"]
        assert len(nodes) == expected.plugins
        assert sum(len(node.output) == 2 for node in nodes) == expected.counts
    lines = result.summary()
    assert sum("left to TensorRT" in line for line in lines) == len(expected.left)
    for seed in (0, 1):
        feeds = pyg_feeds(name, seed)
        want = run_onnxruntime(original, feeds).outputs
        got = run_rewritten(result.model, feeds)
        assert got["out"].shape[0] == (SIZES["B"] if name == "two_layer_pool" else SIZES["N"])
        np.testing.assert_allclose(got["out"], want["out"], rtol=1e-5, atol=1e-5)


def test_edge_conv_max_has_no_scatter_add_and_is_one_line(pyg_models):
    """EdgeConv(aggr='max'): two ScatterElements (min, then max) and no add: nothing to rewrite in place, one line
    (docs/onnx.md: build such a model as it is)."""
    from onnx_path.rewrite import load_model, rewrite_model

    model = load_model(pyg_models("edge_max"))
    assert reductions(model) == ["min", "max"]
    for plugin in ("python", "aot"):
        with pytest.raises(InputError) as raised:
            rewrite_model(model, plugin)
        message = str(raised.value)
        assert "\n" not in message and message.startswith("the model has no scatter-add")
        assert "(ScatterElements, reduction 'min') stays with TensorRT" in message


@pytest.mark.parametrize("name", ACCEPTED)
def test_each_pyg_model_passes_the_dry_run_on_its_inputs_and_on_inputs_from_the_seed(pyg_models, tmp_path, capsys,
                                                                                     name):
    """Issue 34's done-when: --dry-run --onnx M --onnx_inputs I.npz --save_onnx O --validate, then with inputs
    made from the seed (--onnx_shapes); O passes onnx.checker's full check."""
    import onnx

    model, out = str(pyg_models(name)), tmp_path / "rewritten.onnx"
    status = cli.main(["--dry-run", "--seed", "1", "--onnx", model, "--onnx_inputs", npz(tmp_path, **pyg_feeds(name)),
                       "--save_onnx", str(out), "--validate"])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert "Validation against reference successful!" in captured.out
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)
    shapes = f"x:{SIZES['N']}x3,edge_index:2x{SIZES['E']}" + (f",batch:{SIZES['N']}" if name == "two_layer_pool" else "")
    status = cli.main(["--dry-run", "--seed", "2", "--onnx", model, "--onnx_shapes", shapes, "--validate"])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert "Validation against reference successful!" in captured.out


def test_edge_conv_max_in_the_cli_is_exit_2_and_one_line(pyg_models, tmp_path, capsys):
    out = tmp_path / "rewritten.onnx"
    status = cli.main(["--dry-run", "--seed", "1", "--onnx", str(pyg_models("edge_max")), "--onnx_inputs",
                       npz(tmp_path, **pyg_feeds("edge_max")), "--save_onnx", str(out)])
    assert_one_line_error(status, capsys.readouterr(), "the model has no scatter-add")
    assert not out.exists()


@pytest.mark.tensorrt
@pytest.mark.parametrize("plugin", ["python", "aot"])
@pytest.mark.parametrize("name", ["sage_mean", "gat"])
def test_a_pyg_model_builds_runs_and_validates_on_tensorrt(pyg_models, tmp_path, name, plugin):
    """End to end on the full TensorRT with a GPU: SAGEConv (mean: the plugin's counts serve the 1-D counts
    scatter) and GATConv (its min/max ScatterElements left to TensorRT's own plugin) rewritten, parsed, built
    for the inputs' shapes, run, and validated against ONNX Runtime on the original."""
    import subprocess
    import sys

    from tests.support.onnx_helpers import ROOT

    model = str(pyg_models(name))
    result = subprocess.run([sys.executable, str(ROOT / "aliased_io_plugin.py"), "--seed", "1", "--plugin", plugin,
                             "--onnx", model, "--onnx_inputs", npz(tmp_path, **pyg_feeds(name)), "--validate"],
                            cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Engine built from the rewritten {model} in " in result.stdout
    assert "Validation against reference successful!" in result.stdout
    assert f"against ONNX Runtime (the original {model}" in result.stdout
