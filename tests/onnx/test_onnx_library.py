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


def reshaped_state_model(path) -> str:
    """X_out = X.index_add(0, idx, src), also reshaped to [-1, 4]: ONNX Runtime refuses N * 3 not divisible by 4."""
    from onnx import TensorProto, helper, numpy_helper, save

    value = helper.make_tensor_value_info
    nodes = [helper.make_node("Unsqueeze", ["idx", "axes"], ["column"]),
             helper.make_node("ScatterND", ["X", "column", "src"], ["X_out"], reduction="add"),
             helper.make_node("Reshape", ["X_out", "shape"], ["flat"])]
    graph = helper.make_graph(nodes, "reshaped", [value("X", TensorProto.FLOAT, ["N", 3]),
                                                  value("src", TensorProto.FLOAT, ["E", 3]),
                                                  value("idx", TensorProto.INT64, ["E"])],
                              [value("X_out", TensorProto.FLOAT, ["N", 3]), value("flat", TensorProto.FLOAT, [None, 4])],
                              [numpy_helper.from_array(np.array([1], np.int64), "axes"),
                               numpy_helper.from_array(np.array([-1, 4], np.int64), "shape")])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return str(path)


def test_onnx_runtime_refusing_a_run_is_a_model_error_naming_the_file_not_the_option(tmp_path, capsys):
    """The library raises ModelError("PATH: ..."); the command line prints it after --onnx."""
    import aliased_io_plugin as cli
    from common.errors import ModelError

    path = reshaped_state_model(tmp_path / "reshaped.onnx")
    model = read_model(path, PluginKind.PYTHON)
    feeds = {"X": np.zeros((5, 3), np.float32), "src": np.ones((2, 3), np.float32), "idx": np.array([0, 4])}
    with pytest.raises(ModelError) as raised:
        rewritten_run(model)(feeds)
    assert str(raised.value).startswith(f"{path}: ONNX Runtime could not run the rewritten model")
    assert cli.main(["--dry-run", "--seed", "1", "--onnx", path, "--onnx_shapes", "X:5x3,src:2x3"]) == 2
    assert capsys.readouterr().err.startswith(f"aliased_io_plugin.py: error: --onnx {path}: ONNX Runtime could not run")


def test_the_library_words_what_it_refuses_without_the_command_lines_options(tmp_path, monkeypatch):
    """Where the library speaks of a file, a shape or a missing package, it names the thing; the command line's
    option names (--onnx, --onnx_inputs, --onnx_shapes) come from cli/ (tests/cli/test_cli_onnx*.py)."""
    import importlib.util

    from common.errors import MissingDependencyError
    from onnx_path.inputs import check_made_inputs, input_shapes, load_onnx_inputs
    from onnx_path.read import require_onnx_packages
    from onnx_path.rewrite import TensorSpec

    with pytest.raises(InputError, match=rf"^the inputs file {tmp_path / 'none.npz'}: not a readable .npz"):
        load_onnx_inputs(str(tmp_path / "none.npz"))
    spec = TensorSpec("k", np.dtype(np.int64), (1,))
    with pytest.raises(InputError, match="no value can be made up for .*; give its values in an inputs file$"):
        check_made_inputs([spec], {"k": (1,)}, {})
    with pytest.raises(InputError, match=r"^shape Q: not an input of the model \(its inputs: k\)$"):
        input_shapes([spec], {"Q": (3,)})
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None if name == "onnxruntime" else
                        real(name, *args))
    with pytest.raises(MissingDependencyError, match="; reading and running an ONNX model needs onnx, onnx-graph"):
        require_onnx_packages(with_runtime=True)


def test_no_refusal_of_the_library_names_an_option_of_the_command_line():
    """The string constants of every raise in onnx_path/ (polygraphy's own `polygraphy run --save-inputs` aside)."""
    import ast
    import re
    from pathlib import Path

    named = []
    for path in sorted((Path(__file__).resolve().parents[2] / "onnx_path").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                named += [f"{path.name}:{node.lineno}: {text.value!r}" for text in ast.walk(node.exc)
                          if isinstance(text, ast.Constant) and isinstance(text.value, str)
                          and re.search(r"(?<!run )--[a-z]", text.value)]
    assert named == []
