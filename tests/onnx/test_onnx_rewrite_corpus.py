"""No model of an exporter crashes the CLI (issue 34, item 4): a corpus of exported models (PyTorch Geometric's
layers, tests/support/onnx_pyg.py; the users' models, tests/support/onnx_models.py) and of mutated ones (shape information
removed, an input renamed, an attribute dropped, a Shape slice changed), each read and rewritten: a result or one
InputError line, never another exception; and through the CLI (--dry-run --onnx M --onnx_inputs I): exit 0, or
exit 2 with one stderr line, never a traceback or exit 1."""

import numpy as np
import pytest

import aliased_io_plugin as cli
from common.errors import InputError
from tests.support.onnx_models import zoo_feeds, zoo_path
from tests.support.onnx_pyg import PYG, PYG_MISSING, pyg_feeds, pyg_path
from tests.cli.test_cli_onnx_any import npz

pytestmark = pytest.mark.skipif(PYG_MISSING is not None, reason=PYG_MISSING or "")

ATTRIBUTES = (("ScatterElements", "reduction"), ("ScatterElements", "axis"), ("ScatterND", "reduction"),
              ("Shape", "end"), ("Shape", "start"), ("Reshape", "allowzero"), ("Gather", "axis"),
              ("ConstantOfShape", "value"), ("Concat", "axis"), ("Unsqueeze", "axes"))


def mutants(model):
    """(what was changed, the changed copy) for each mutation that applies to `model` (an onnx.ModelProto)."""
    import onnx

    def copy():
        changed = onnx.ModelProto()
        changed.CopyFrom(model)
        return changed

    found = []
    unrecorded = copy()  # the exporter's shapes of the tensors between the nodes removed
    del unrecorded.graph.value_info[:]
    found.append(("no value_info", unrecorded))
    bare = copy()  # shape information removed: no value_info, and every input's and output's dimension unnamed
    del bare.graph.value_info[:]
    for value in [*bare.graph.input, *bare.graph.output]:
        for dim in value.type.tensor_type.shape.dim:
            dim.Clear()
    found.append(("no shapes", bare))
    integer = next((value.name for value in model.graph.input if value.type.tensor_type.elem_type == onnx.TensorProto.INT64),
                   None)
    if integer is not None:
        renamed = copy()  # the input renamed, and every use of it
        for value in renamed.graph.input:
            value.name = "renamed" if value.name == integer else value.name
        for node in renamed.graph.node:
            node.input[:] = ["renamed" if name == integer else name for name in node.input]
        found.append((f"input {integer} renamed", renamed))
        dangling = copy()  # the declaration alone renamed: its readers read a tensor no one makes
        next(value for value in dangling.graph.input if value.name == integer).name = "renamed"
        found.append((f"input {integer} renamed, not its uses", dangling))
    for op, name in ATTRIBUTES:
        dropped = copy()
        node = next((node for node in dropped.graph.node if node.op_type == op
                     and any(attribute.name == name for attribute in node.attribute)), None)
        if node is not None:
            kept = [attribute for attribute in node.attribute if attribute.name != name]
            del node.attribute[:]
            node.attribute.extend(kept)
            found.append((f"{op} {node.name} without {name}", dropped))
    sliced = copy()
    shape = next((node for node in sliced.graph.node if node.op_type == "Shape"
                  and any(attribute.name in ("start", "end") for attribute in node.attribute)), None)
    if shape is not None:
        for attribute in shape.attribute:
            if attribute.name == "start":
                attribute.i = 1 - attribute.i if attribute.i in (0, 1) else 0
            if attribute.name == "end":
                attribute.i = 2 - attribute.i if attribute.i in (1, 2) else 1
        found.append((f"Shape {shape.name} sliced otherwise", sliced))
    return found


def corpus():
    """(model name, its path getter, its feeds): the PyG models and a few users' models."""
    return [*((name, "pyg") for name in PYG), *((name, "zoo") for name in ("gnn_zeros", "heads_state",
                                                                         "scatter_add_classifier", "float_counts"))]


def source(tmp_path_factory, name, where):
    if where == "pyg":
        return pyg_path(name), pyg_feeds(name)
    return zoo_path(tmp_path_factory, name), zoo_feeds(name)


@pytest.mark.parametrize("name, where", corpus())
def test_every_mutant_is_rewritten_or_refused_in_one_line(tmp_path_factory, tmp_path, capsys, name, where):
    import onnx

    from onnx_path.rewrite import load_model, rewrite_model

    path, inputs = source(tmp_path_factory, name, where)
    original = onnx.load(str(path))
    outcomes = []
    for what, model in mutants(original):
        file = tmp_path / "mutant.onnx"
        onnx.save(model, str(file))
        try:
            rewrite_model(load_model(file))
            outcomes.append((what, "rewritten"))
        except InputError as error:
            assert "\n" not in str(error), (what, str(error))
            outcomes.append((what, "refused"))
        # Any other exception fails the test here, naming nothing: pytest shows the mutation in the traceback.
    assert len(outcomes) >= 3, outcomes
    assert ("no shapes", "rewritten") in outcomes or ("no shapes", "refused") in outcomes


@pytest.mark.parametrize("name", ["gcn", "gat", "two_layer_pool", "edge_max"])
def test_the_cli_on_every_mutant_is_exit_0_or_one_line_and_exit_2(tmp_path, capsys, name):
    import onnx

    original = onnx.load(str(pyg_path(name)))
    inputs = npz(tmp_path, **pyg_feeds(name))
    statuses = {}
    for what, model in mutants(original):
        file = tmp_path / "mutant.onnx"
        onnx.save(model, str(file))
        status = cli.main(["--dry-run", "--seed", "1", "--onnx", str(file), "--onnx_inputs", inputs, "--validate"])
        captured = capsys.readouterr()
        assert status in (0, 2), (what, status, captured.err)
        assert "Traceback" not in captured.out + captured.err, what
        if status == 2:
            lines = captured.err.splitlines()
            assert len(lines) == 1 and lines[0].startswith("aliased_io_plugin.py: error: "), (what, captured.err)
        statuses[what] = status
    assert 0 in statuses.values() or name == "edge_max", statuses
    assert 2 in statuses.values(), statuses
    assert np.isfinite(len(statuses))
