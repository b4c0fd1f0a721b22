"""What a newcomer does with a model of their own (issue 37), on the CPU: options that contradict the model, odd
models and input files, ranges the engine cannot hold, the order of the checks (nothing decompressed, drawn or
imported before what the arguments and the model decide), one stderr line for every refusal, nothing written.
Each test names the status, the one line's value and, where it matters, what was not done."""

import zipfile

import numpy as np
import pytest

import aliased_io_plugin as cli
from tests.support.issue_models import index_add_model
from tests.support.onnx_helpers import REWRITE_MISSING, needs_export
from tests.support.onnx_models import zoo_model, zoo_path
from tests.cli.test_cli import assert_one_line_error

pytestmark = pytest.mark.skipif(REWRITE_MISSING is not None, reason=REWRITE_MISSING or "")


def main(capsys, *args: str):
    """main() of a dry run with seed 1, and what it printed."""
    status = cli.main(["--dry-run", "--seed", "1", *args])
    return status, capsys.readouterr()


def npz(path, **arrays) -> str:
    np.savez(path, **arrays)
    return str(path)


def own_inputs(rows: int = 5, edges: int = 7, features: int = 2, dtype=np.float32, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"state": rng.standard_normal((rows, features)).astype(dtype),
            "src": rng.standard_normal((edges, features)).astype(dtype),
            "idx": rng.integers(0, rows, edges).astype(np.int64)}


# --- 2: a float16 model's overflow ----------------------------------------------------------------------------
def test_a_float16_state_that_would_overflow_is_refused_before_the_run(tmp_path, capsys):
    model = index_add_model(tmp_path / "fp16.onnx", dtype="float16")
    inputs = npz(tmp_path / "over.npz", state=np.full((2, 2), 60000, np.float16),
                 src=np.full((2, 2), 60000, np.float16), idx=np.array([0, 0]))
    out = tmp_path / "out.onnx"
    status, captured = main(capsys, "--onnx", model, "--onnx_inputs", inputs, "--validate", "--save_onnx", str(out))
    assert_one_line_error(status, captured, "180000")
    assert "65504" in captured.err and "state" in captured.err
    assert "Output state_out" not in captured.out and not out.exists()


def test_a_float16_state_that_would_overflow_in_a_later_run_is_refused_before_the_first(tmp_path, capsys):
    """--steps 4: the state reaches 80000 at run 3 (20000 + 3 x 20000) and comes back to 50000 at run 4, so
    only the check of every run's rows (not the first run's, nor the final output's) sees the engine's inf."""
    from polygraphy.json import save_json

    model = index_add_model(tmp_path / "fp16.onnx", dtype="float16")
    state = np.full((2, 2), 20000, np.float16)
    runs = [{"state": state, "src": np.full((1, 2), value, np.float16), "idx": np.array([0])}
            for value in (20000, 20000, 20000, -30000)]
    save_json(runs, str(tmp_path / "runs.json"))
    status, captured = main(capsys, "--onnx", model, "--onnx_inputs", str(tmp_path / "runs.json"), "--steps", "4",
                            "--validate")
    assert_one_line_error(status, captured, "65504")


def test_a_float16_output_beyond_its_range_is_refused_not_printed():
    from onnx_path.run import as_output_dtype
    from common.errors import InputError
    from onnx_path.rewrite import TensorSpec

    spec = TensorSpec("y", np.dtype(np.float16), ("N",))
    assert as_output_dtype({"y": np.array([1.0, 65504.0], np.float32)}, (spec,), "the dry run")["y"].dtype == np.float16
    with pytest.raises(InputError, match=r"output y\[1\] = 70000 in the dry run .*65504"):
        as_output_dtype({"y": np.array([1.0, 70000.0], np.float32)}, (spec,), "the dry run")


# --- 3: options that contradict the model -----------------------------------------------------------------------
@pytest.mark.parametrize("option, value, named", [
    ("--precision", "fp16", "float32"),
    ("--num_classes", "9", "--num_classes 9"),
])
def test_an_option_that_contradicts_a_model_of_ones_own_is_refused(tmp_path, capsys, option, value, named):
    model = index_add_model(tmp_path / "own.onnx")
    status, captured = main(capsys, "--onnx", model, option, value)
    assert_one_line_error(status, captured, f"{option} {value}")
    assert named in captured.err


def test_options_that_agree_with_the_model_are_taken(tmp_path, capsys):
    model = index_add_model(tmp_path / "own.onnx")
    status, captured = main(capsys, "--onnx", model, "--precision", "fp32")
    assert status == 0 and captured.err == "", captured.err
    assert any("state_out" in line and "float32" in line for line in captured.out.splitlines()), captured.out
    assert captured.out == main(capsys, "--onnx", model)[1].out  # the run the option agrees with, unchanged


def test_the_sample_network_on_inputs_of_its_own_keeps_its_class_count(tmp_path_factory, capsys):
    from tests.support.onnx_helpers import NUM_CLASSES, sample_model

    model = str(sample_model(tmp_path_factory, "classifier", "fp32"))
    capsys.readouterr()  # what the export printed
    status, captured = main(capsys, "--onnx", model, "--onnx_shapes", "X:5x3", "--num_classes", "9")
    assert_one_line_error(status, captured, "--num_classes 9")
    assert f"{NUM_CLASSES} classes" in captured.err


# --- 4: one index into several states -------------------------------------------------------------------------------
def test_one_index_into_two_states_is_bounded_by_the_smaller(tmp_path, capsys):
    model = index_add_model(tmp_path / "two.onnx", states={"A": "NA", "B": "NB"})
    status, captured = main(capsys, "--onnx", model, "--onnx_shapes", "A:16x2,B:4x2")
    assert status == 0, captured.err
    assert "idx int64 [16]: indices in [0, 4)" in captured.out
    inputs = npz(tmp_path / "in.npz", A=np.zeros((16, 2), np.float32), B=np.zeros((4, 2), np.float32),
                 src=np.ones((3, 2), np.float32), idx=np.array([0, 9, 1]))
    status, captured = main(capsys, "--onnx", model, "--onnx_inputs", inputs)
    assert_one_line_error(status, captured, "idx[1] = 9 is outside [0, 4)")


# --- 5: a model that holds AOT nodes already ------------------------------------------------------------------------
def aot_model(tmp_path) -> str:
    from onnx_path.rewrite import load_model, rewrite_model

    onnx = pytest.importorskip("onnx")
    path = tmp_path / "rw_aot.onnx"
    onnx.save(rewrite_model(load_model(index_add_model(tmp_path / "own.onnx")), "aot").model, str(path))
    return str(path)


def test_a_model_holding_aot_nodes_is_the_aot_plugin(tmp_path, capsys):
    from onnx_path.nodes import PLUGIN_DOMAIN, step_of
    from onnx_path.rewrite import load_model, rewrite_model

    model = aot_model(tmp_path)
    rewritten = rewrite_model(load_model(model), "python")
    assert rewritten.plugin == "aot"
    assert [node for node in rewritten.model.graph.node if step_of(node.domain, node.op_type) is not None]
    assert all(node.domain == PLUGIN_DOMAIN for node in rewritten.model.graph.node if node.domain)
    status, captured = main(capsys, "--onnx", model)
    assert status == 0, captured.err
    assert "rewritten for the aot plugin" in captured.out and "python plugin" not in captured.out
    status, captured = main(capsys, "--onnx", model, "--plugin", "python")
    assert_one_line_error(status, captured, "--plugin python")
    assert "aot" in captured.err


# --- 6, 10, 11: odd models and input files ----------------------------------------------------------------------------
def member_not_npy(path) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("state.npy", b"not an array")
    return str(path)


def member_and_its_twin(path) -> str:
    np.savez(path, **own_inputs())
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("state", b"text")
    return str(path)


@pytest.mark.parametrize("make, named, not_named", [
    (member_not_npy, "'state.npy'", "bytes"),
    (member_and_its_twin, "'state'", "no array"),
    (lambda path: str(path) if path.write_text("a text file\n") else "", "not a zip archive", "pickled"),
])
def test_an_npz_that_is_not_numpys_is_one_line(tmp_path, capsys, make, named, not_named):
    path = make(tmp_path / "inputs.npz")
    status, captured = main(capsys, "--onnx", index_add_model(tmp_path / "own.onnx"), "--onnx_inputs", path)
    assert_one_line_error(status, captured, f"--onnx_inputs {path}")
    assert named in captured.err and not_named not in captured.err


def test_a_negative_static_dimension_is_one_line(tmp_path, capsys):
    model = index_add_model(tmp_path / "neg.onnx", dims={"state": [-3, 2]})
    status, captured = main(capsys, "--onnx", model)
    assert_one_line_error(status, captured, "-3")
    assert "input state" in captured.err


@pytest.mark.parametrize("shapes, named", [("state:[4,,2]", "''"), ("state:[]", "state:[]")])
def test_malformed_onnx_shapes_are_refused(tmp_path, capsys, shapes, named):
    status, captured = main(capsys, "--onnx", index_add_model(tmp_path / "own.onnx"), "--onnx_shapes", shapes)
    assert_one_line_error(status, captured, "--onnx_shapes state")
    assert named in captured.err


def computed_index_model(path) -> str:
    """S [N, 2], src [E, 2], at [E] -> S_out = S.index_add(0, at + 1, src): an index computed from an input."""
    from onnx import TensorProto, helper, save

    nodes = [helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.INT64, [], [1])),
             helper.make_node("Add", ["at", "one"], ["idx"]),
             helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("axes", TensorProto.INT64, [1], [1])),
             helper.make_node("Unsqueeze", ["idx", "axes"], ["column"]),
             helper.make_node("ScatterND", ["S", "column", "src"], ["S_out"], reduction="add")]
    graph = helper.make_graph(nodes, "computed_index", [
        helper.make_tensor_value_info("S", TensorProto.FLOAT, ["N", 2]),
        helper.make_tensor_value_info("src", TensorProto.FLOAT, ["E", 2]),
        helper.make_tensor_value_info("at", TensorProto.INT64, ["E"])],
        [helper.make_tensor_value_info("S_out", TensorProto.FLOAT, ["N", 2])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return str(path)


def with_input_type(path, name: str, elem_type: int) -> str:
    import onnx

    model = onnx.load(str(path))
    for value in [*model.graph.input, *model.graph.output]:
        if value.name in (name, f"{name}_out"):
            value.type.tensor_type.elem_type = elem_type
    onnx.save(model, str(path))
    return str(path)


def with_extra_input(path, name: str, elem_type: int) -> str:
    import onnx
    from onnx import helper

    model = onnx.load(str(path))
    model.graph.input.append(helper.make_tensor_value_info(name, elem_type, [2]))
    onnx.save(model, str(path))
    return str(path)


def test_messages_name_the_real_problem(tmp_path, capsys):
    """Each refusal one line naming what is wrong and the value, not a neighbouring problem."""
    from onnx import TensorProto

    own = index_add_model(tmp_path / "own.onnx")
    cases = [  # (arguments, named, not named)
        (["--onnx", index_add_model(tmp_path / "opset99.onnx", opset=99), "--validate"], "Opset 99",
         "onnxruntime_src"),
        (["--onnx", computed_index_model(tmp_path / "at.onnx")], "input at int64 [E]", "neither a float"),
        (["--onnx", index_add_model(tmp_path / "zero.onnx", dims={"state": [0, 2]})], "state [0, 2]", "it indexes,"),
        (["--onnx", with_input_type(index_add_model(tmp_path / "untyped.onnx"), "state", 0)], "untyped [N, 2]",
         " 0 [N, 2]"),
        (["--onnx", with_extra_input(index_add_model(tmp_path / "bf16.onnx"), "W", TensorProto.BFLOAT16)],
         "W bfloat16 [2]", "neither a float"),
    ]
    for arguments, named, not_named in cases:
        status, captured = main(capsys, *arguments)
        assert_one_line_error(status, captured, named)
        assert not_named not in captured.err, captured.err
    dangling = tmp_path / "dangling.onnx"
    dangling.symlink_to(tmp_path / "no_folder" / "x.onnx")
    status, captured = main(capsys, "--onnx", own, "--save_onnx", str(dangling))
    assert_one_line_error(status, captured, str(tmp_path / "no_folder"))
    assert "does not exist" in captured.err and "takes no new files" not in captured.err


def test_a_model_whose_update_is_not_returned_is_told_so(tmp_path, capsys):
    """forward updated X in place and returned something else: the exporter dropped the scatter."""
    from onnx import TensorProto, helper, save

    graph = helper.make_graph([helper.make_node("Relu", ["src"], ["y"])], "dropped", [
        helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 2]),
        helper.make_tensor_value_info("src", TensorProto.FLOAT, ["E", 2]),
        helper.make_tensor_value_info("idx", TensorProto.INT64, ["E"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["E", 2])])
    path = tmp_path / "dropped.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    status, captured = main(capsys, "--onnx", str(path))
    assert_one_line_error(status, captured, f"--onnx {path}")
    assert "ScatterND" in captured.err and "return the updated state" in captured.err


def test_the_steps_hint_names_a_file_of_several_runs(tmp_path, capsys):
    """--steps 2 with an .npz (one run) and a bool input no value can be made up for in the later run: the hint is
    the JSON of one feed dict per run, not another .npz."""
    from onnx import TensorProto

    model = with_extra_input(index_add_model(tmp_path / "own.onnx"), "mask", TensorProto.BOOL)
    inputs = npz(tmp_path / "in.npz", **own_inputs(), mask=np.ones(2, bool))
    status, captured = main(capsys, "--onnx", model, "--onnx_inputs", inputs, "--steps", "2")
    assert_one_line_error(status, captured, "--steps 2")
    assert "input mask bool [2]" in captured.err
    assert "FILE.json" in captured.err and "FILE.npz" not in captured.err


def test_nan_and_inf_are_compared_element_by_element():
    from onnx_path.compare import compare_output

    same = compare_output(np.array([1.0, np.nan, np.inf]), np.array([1.0, np.nan, np.inf]), np.float32)
    assert same.ok and np.isfinite(same.tolerance)
    for actual, expected in (([1.0, np.nan], [1.0, 2.0]), ([1.0, 2.0], [1.0, np.nan]), ([np.inf, 2.0], [1.0, 2.0])):
        check = compare_output(np.array(actual), np.array(expected), np.float32)
        assert not check.ok and np.isfinite(check.tolerance)
        assert "element [" in check.summary()


# --- 7: nothing heavy before what the arguments and the model decide --------------------------------------------------
def test_a_misnamed_array_is_refused_before_any_array_is_decompressed(tmp_path, capsys, monkeypatch):
    inputs = own_inputs()
    path = npz(tmp_path / "misnamed.npz", S=inputs.pop("state"), **inputs)

    def decompressed(*args, **kwargs):
        raise AssertionError("an array was decompressed")

    monkeypatch.setattr(np.lib.format, "read_array", decompressed)
    status, captured = main(capsys, "--onnx", index_add_model(tmp_path / "own.onnx"), "--onnx_inputs", path)
    assert_one_line_error(status, captured, "no array 'state'")


@pytest.mark.parametrize("given", ["--onnx_shapes", "--onnx_inputs"])
def test_a_missing_engine_dependency_is_reported_before_inputs_are_read_or_made(tmp_path, capsys, monkeypatch,
                                                                                 given):
    import importlib

    import network.engine

    own_model = importlib.import_module("cli.own_model")
    from common.errors import MissingDependencyError

    def missing(*args, **kwargs):
        raise MissingDependencyError("stand-in: TensorRT is not installed")

    def heavy(*args, **kwargs):
        raise AssertionError("inputs were read or made before the dependency was checked")

    monkeypatch.setattr(network.engine, "require_engine_dependencies", missing)
    monkeypatch.setattr(own_model, "make_onnx_inputs", heavy)
    monkeypatch.setattr(np.lib.format, "read_array", heavy)
    model = index_add_model(tmp_path / "own.onnx")
    value = "state:5x2" if given == "--onnx_shapes" else npz(tmp_path / "in.npz", **own_inputs())
    status = cli.main(["--seed", "1", "--onnx", model, given, value])
    captured = capsys.readouterr()
    assert status == 3, captured.err
    assert len(captured.err.splitlines()) == 1 and "stand-in: TensorRT is not installed" in captured.err


# --- 8: other libraries' logging --------------------------------------------------------------------------------------
def test_onnx_runtime_logs_nothing_beside_its_refusal(tmp_path, capfd):
    from common.errors import InputError
    from onnx_path.rewrite import load_model
    from onnx_path.runtime import OnnxRuntimeSession

    session = OnnxRuntimeSession(load_model(index_add_model(tmp_path / "own.onnx")))
    inputs = own_inputs()
    inputs["idx"][3] = 99
    with pytest.raises(InputError, match="99"):
        session.run(inputs)
    assert capfd.readouterr().err == ""


def test_polygraphys_log_is_folded_into_the_one_line(tmp_path, capsys):
    pytest.importorskip("polygraphy")
    path = tmp_path / "inputs.json"
    path.write_text('[{"state": {"polygraphy_class": "NoSuchClass", "value": 1}}]')
    status, captured = main(capsys, "--onnx", index_add_model(tmp_path / "own.onnx"), "--onnx_inputs", str(path))
    assert_one_line_error(status, captured, "NoSuchClass")
    assert "[!]" not in captured.out


# --- the surviving mutations ---------------------------------------------------------------------------------------------
def test_the_tolerance_is_the_expected_outputs_never_the_actual_ones():
    """A blown-up output must not widen its own tolerance."""
    from onnx_path.compare import RELATIVE_TOLERANCE, compare_output

    expected = np.array([[1.0, -2.0], [0.5, 0.0]])
    blown = expected * 1000
    check = compare_output(blown, expected, np.float32)
    assert not check.ok
    assert check.tolerance == pytest.approx(RELATIVE_TOLERANCE["float32"] * 2.0)


def test_each_steps_run_of_a_model_of_ones_own_draws_inputs_of_its_own(tmp_path, capsys):
    """--steps 3 on inputs made from the seed: run k draws from default_rng((seed, 2, k)) (onnx_path.inputs'
    INPUTS_STREAM, in the model's input order), computed here without the sample's code."""
    from tests.cli.test_cli_onnx_any import printed_output

    model = index_add_model(tmp_path / "own.onnx")
    status, captured = main(capsys, "--onnx", model, "--onnx_shapes", "state:6x2,src:9x2", "--steps", "3")
    assert status == 0, captured.err
    draws = []
    for run in range(3):
        rng = np.random.default_rng((1, 2, run))
        state = rng.standard_normal((6, 2)).astype(np.float32) if run == 0 else None  # later runs: only src, idx
        draws.append((state, rng.standard_normal((9, 2)).astype(np.float32), rng.integers(0, 6, 9)))
    final = np.asarray(draws[0][0], np.float64)
    for _, src, idx in draws:
        np.add.at(final, idx, src.astype(np.float64))
    assert not np.array_equal(draws[1][1], draws[2][1])
    np.testing.assert_allclose(printed_output(captured.out, "Output state_out float32 [6, 2] after 3 runs:"), final,
                               atol=1e-5)


def test_an_output_that_links_to_a_python_file_is_refused_and_the_source_kept(tmp_path, capsys):
    source = tmp_path / "module.py"
    source.write_text("print('mine')\n")
    link = tmp_path / "rewritten.onnx"
    link.symlink_to(source)
    status, captured = main(capsys, "--onnx", index_add_model(tmp_path / "own.onnx"), "--save_onnx", str(link))
    assert_one_line_error(status, captured, f"--save_onnx {link}")
    assert str(source) in captured.err
    assert source.read_text() == "print('mine')\n"


# --- issue 50's odd models ----------------------------------------------------------------------------------------
@needs_export
def test_a_source_longer_than_its_index_is_one_line_before_any_run(tmp_path_factory, tmp_path, capsys):
    """X.scatter_add(0, idx[:, None].expand(-1, F), src) with src of 9 rows and idx of 5 values (torch adds the
    first 5; the exported ScatterElements, which ONNX Runtime refuses, takes one row per value): exit 2, one line
    naming both lengths, from the inputs' shapes before any run, nothing written. As many rows as values: torch's
    result."""
    from tests.cli.test_cli_onnx_any import printed_output, torch_eager

    model = str(zoo_path(tmp_path_factory, "longer_source"))
    rng = np.random.default_rng(2)
    feeds = {"X": rng.standard_normal((6, 3)).astype(np.float32), "src": rng.standard_normal((9, 3)).astype(np.float32),
             "idx": np.array([1, 3, 4, 1, 0])}
    out = tmp_path / "out.onnx"
    status, captured = main(capsys, "--onnx", model, "--onnx_inputs", npz(tmp_path / "long.npz", **feeds), "--validate",
                            "--save_onnx", str(out))
    assert_one_line_error(status, captured, "node node_scatter_add (ScatterElements)")  # the model's node, not the
    assert "src [9, 3]" in captured.err and "idx [5]" in captured.err  # plugin's
    assert "Inputs from" not in captured.out and not out.exists()
    status, captured = main(capsys, "--onnx", model, "--onnx_shapes", "src:9x3,idx:5")
    assert_one_line_error(status, captured, "node node_scatter_add (ScatterElements)")
    assert "src [9, 3]" in captured.err and "Inputs made" not in captured.out
    feeds["src"] = feeds["src"][:5]
    status, captured = main(capsys, "--onnx", model, "--onnx_inputs", npz(tmp_path / "same.npz", **feeds), "--validate")
    assert status == 0, captured.out + captured.err
    np.testing.assert_allclose(printed_output(captured.out, "Output X_out float32 [6, 3]:"),
                               torch_eager("longer_source", feeds)["X_out"], atol=1e-5)


@needs_export
@pytest.mark.parametrize("name", ["constant_index", "constant_scatter_index"])
def test_a_constant_index_is_taken_and_checked_against_the_rows(tmp_path_factory, tmp_path, capsys, name):
    """X.index_add(0, torch.tensor([0, 2, 0]), src) (ScatterND of constant [3, 1] indices) and its scatter_add form
    (ScatterElements of constant [3, F]): rewritten in place, torch eager's result; into 2 rows, row 2 is beyond
    them: one line naming it, from the shapes before any run."""
    from tests.cli.test_cli_onnx_any import printed_output, torch_eager
    from tests.support.onnx_models import zoo_feeds

    model = str(zoo_path(tmp_path_factory, name))
    feeds = zoo_feeds(name, 1)
    status, captured = main(capsys, "--onnx", model, "--onnx_inputs", npz(tmp_path / "in.npz", **feeds), "--validate")
    assert status == 0, captured.out + captured.err
    assert "-> " in captured.out and "(python plugin, in place)" in captured.out
    np.testing.assert_allclose(printed_output(captured.out, "Output X_out float32 [9, 3]:"),
                               torch_eager(name, feeds)["X_out"], atol=1e-5)
    status, captured = main(capsys, "--onnx", model, "--onnx_shapes", "X:2x3")
    assert_one_line_error(status, captured, "row 2")
    assert "X [2, 3]" in captured.err and "Inputs made" not in captured.out


@needs_export
def test_a_scatter_the_exporters_optimizer_removed_is_told_so(tmp_path_factory, capsys):
    """X.index_add_(0, torch.arange(4), src) into a fixed [4, F] X: onnxscript's optimizer leaves X_out =
    Identity(src) and X unread (issue #3049). One line that names that output, input and the issue, and does not
    tell a model that returned its state to return it."""
    model = zoo_model(tmp_path_factory, "every_row_constant")
    assert [node.op_type for node in model.graph.node] == ["Identity"]
    status, captured = main(capsys, "--onnx", str(zoo_path(tmp_path_factory, "every_row_constant")))
    assert_one_line_error(status, captured, "X_out")
    assert "#3049" in captured.err and "return the updated state" not in captured.err
