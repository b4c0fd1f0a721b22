"""aliased_io_plugin.py --onnx with a model of one's own (not the sample's network), on the CPU: inputs from
--onnx_inputs FILE.npz or made from the seed (--onnx_shapes), --dry-run running the rewritten model in ONNX
Runtime with the plugin node's CPU reference, --steps feeding the states back, --validate against ONNX Runtime on
the original, --save_onnx written only after a passing run; every refusal one line, exit 2, nothing written.
The engine runs of these models are in tests/onnx/test_e2e_onnx_any.py, marked tensorrt.
"""

import numpy as np
import pytest

import aliased_io_plugin as cli
from cli.report import DRY_RUN_LINE
from tests.support.onnx_helpers import REWRITE_MISSING, needs_export, ops_inputs, ops_model
from tests.support.onnx_models import ACCEPTED, REFUSED, zoo, zoo_feeds, zoo_path
from tests.cli.test_cli import assert_one_line_error
from tests.network.test_network_onnx_parse import state_io_model

pytestmark = pytest.mark.skipif(REWRITE_MISSING is not None, reason=REWRITE_MISSING or "")

F = 3  # tests.network.test_network_onnx_parse.state_io_model's features


def aggregation_model(path) -> str:
    """state [N, F], src [E, F], idx [E] -> y = Relu(state.index_add(0, idx, src)): the scatter's output is read
    by another layer and is no graph output, so no output aliases an input (onnx.helper, as the exporter writes
    index_add)."""
    from onnx import TensorProto, helper, save

    nodes = [helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("axes", TensorProto.INT64, [1], [1])),
             helper.make_node("Unsqueeze", ["idx", "axes"], ["column"]),
             helper.make_node("ScatterND", ["state", "column", "src"], ["summed"], name="aggregate", reduction="add"),
             helper.make_node("Relu", ["summed"], ["y"])]
    graph = helper.make_graph(nodes, "aggregation", [
        helper.make_tensor_value_info("state", TensorProto.FLOAT, ["N", F]),
        helper.make_tensor_value_info("src", TensorProto.FLOAT, ["E", F]),
        helper.make_tensor_value_info("idx", TensorProto.INT64, ["E"]),
    ], [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", F])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return str(path)


def masked_state_model(path) -> str:
    """state [N, F], src [E, F], idx [E], mask [E] bool -> X_out = state.index_add(0, idx, src * mask[:, None]):
    an input that is neither a float nor an index (onnx.helper)."""
    from onnx import TensorProto, helper, save

    nodes = [helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("axes", TensorProto.INT64, [1], [1])),
             helper.make_node("Unsqueeze", ["idx", "axes"], ["column"]),
             helper.make_node("Unsqueeze", ["mask", "axes"], ["mask_column"]),
             helper.make_node("Cast", ["mask_column"], ["weight"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["src", "weight"], ["masked"]),
             helper.make_node("ScatterND", ["state", "column", "masked"], ["X_out"], name="update", reduction="add")]
    graph = helper.make_graph(nodes, "masked", [
        helper.make_tensor_value_info("state", TensorProto.FLOAT, ["N", F]),
        helper.make_tensor_value_info("src", TensorProto.FLOAT, ["E", F]),
        helper.make_tensor_value_info("idx", TensorProto.INT64, ["E"]),
        helper.make_tensor_value_info("mask", TensorProto.BOOL, ["E"]),
    ], [helper.make_tensor_value_info("X_out", TensorProto.FLOAT, ["N", F])],
        value_info=[helper.make_tensor_value_info("masked", TensorProto.FLOAT, ["E", F])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return str(path)


def own_state_model(tmp_path) -> str:
    """state [N, F], src [E, F], idx [E] -> X_out = state.index_add(0, idx, src): not the sample's network (its
    state is not named X), the output aliasing the input `state`."""
    return state_io_model(tmp_path / "own.onnx", scatter=True, state="state")


def npz(tmp_path, **arrays) -> str:
    path = tmp_path / "inputs.npz"
    np.savez(path, **arrays)
    return str(path)


def good_inputs(rng=None):
    rng = rng or np.random.default_rng(0)
    return {"state": rng.standard_normal((5, F)).astype(np.float32),
            "src": rng.standard_normal((7, F)).astype(np.float32),
            "idx": np.array([0, 1, 2, 3, 4, 2, 2], np.int64)}


def printed_output(stdout: str, heading: str) -> np.ndarray:
    block = stdout.split(heading + "\n", 1)[1].split("\n\n", 1)[0]
    rows = [row for row in block.replace("[[", "[").split("]") if row.strip()]
    return np.array([[float(value) for value in row.replace("[", " ").split()] for row in rows])


def test_dry_run_validates_the_rewritten_model_on_the_users_inputs_and_saves_it_last(tmp_path, capsys):
    model, out = own_state_model(tmp_path), tmp_path / "rewritten.onnx"
    inputs = good_inputs()
    status = cli.main(["--dry-run", "--seed", "1", "--onnx", model, "--onnx_inputs", npz(tmp_path, **inputs),
                       "--save_onnx", str(out), "--validate"])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert captured.err == ""
    stdout = captured.out
    assert f"ONNX model {model}: a model of your own (not the sample's network), rewritten for the python plugin:" \
        in stdout
    assert "  output X_out is input state's memory (bind it at state's address)" in stdout
    assert f"Inputs from --onnx_inputs {tmp_path / 'inputs.npz'}:\n  state float32 [5, 3]\n  src float32 [7, 3]\n" \
           "  idx int64 [7]: indices in [0, 5), the rows of state it indexes" in stdout
    expected = inputs["state"].astype(np.float64)
    np.add.at(expected, inputs["idx"], inputs["src"])
    np.testing.assert_allclose(printed_output(stdout, "Output X_out float32 [5, 3]:"), expected, atol=1e-5)
    assert DRY_RUN_LINE in stdout
    assert "Validation against reference successful!\nOutput X_out against ONNX Runtime (the original " in stdout
    assert stdout.rstrip().endswith(f"Rewritten model saved to {out}")
    assert out.exists()


def test_a_wrong_rewrite_fails_validation_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """--validate sees the rewritten model: a plugin reference that drops the last edge fails against ONNX
    Runtime on the original, exit 1, and --save_onnx is not written."""
    from onnx_path.runtime import RewrittenSession

    correct = RewrittenSession.run

    def drops_an_edge(session, feeds):
        feeds = dict(feeds)
        feeds["src"] = feeds["src"].copy()
        feeds["src"][-1] = 0.0
        return correct(session, feeds)

    monkeypatch.setattr(RewrittenSession, "run", drops_an_edge)
    out = tmp_path / "rewritten.onnx"
    status = cli.main(["--dry-run", "--seed", "1", "--onnx", own_state_model(tmp_path), "--onnx_inputs",
                       npz(tmp_path, **good_inputs()), "--save_onnx", str(out), "--validate"])
    captured = capsys.readouterr()
    assert status == 1, captured.out + captured.err
    assert "Validation against reference failed!\nOutput X_out against ONNX Runtime" in captured.out
    assert not out.exists()


def test_steps_keep_the_state_and_draw_the_other_inputs_again_from_the_seed(tmp_path, capsys):
    """--steps 3 on inputs made from the seed (--onnx_shapes): the final state is the initial state plus each
    run's fresh src added at its fresh idx, as computed here from the seed's draws."""
    from onnx_path.inputs import make_onnx_inputs
    from onnx_path.rewrite import load_model, model_io, rewrite_model

    model = own_state_model(tmp_path)
    status = cli.main(["--dry-run", "--seed", "4", "--onnx", model, "--onnx_shapes", "state:6x3,src:9x3", "--steps", "3",
                       "--validate"])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert "Inputs made from the seed (dynamic dimensions: N=6 (--onnx_shapes state:6x3), E=9 (--onnx_shapes " \
           "src:9x3)):" in captured.out
    assert "--steps: 3 runs; the states (state) stay in place" in captured.out
    rewritten = rewrite_model(load_model(model))
    specs, _ = model_io(rewritten.model)
    shapes = {"state": (6, 3), "src": (9, 3), "idx": (9,)}
    first = make_onnx_inputs(specs, shapes, rewritten.index_bounds, 4)
    expected = first["state"].astype(np.float64)
    for run in range(3):
        feeds = first if run == 0 else make_onnx_inputs(specs, shapes, rewritten.index_bounds, 4, run, ["src", "idx"])
        np.add.at(expected, feeds["idx"], feeds["src"].astype(np.float64))
    np.testing.assert_allclose(printed_output(captured.out, "Output X_out float32 [6, 3] after 3 runs:"), expected,
                               atol=1e-5)
    assert "Validation against reference successful!" in captured.out


def test_polygraphys_saved_inputs_feed_one_run_each_with_the_state_kept(tmp_path, capsys):
    """--onnx_inputs FILE.json as `polygraphy run --save-inputs` writes it (a list of feed dicts): with --steps 3
    each run takes its own src and idx from the file, the state only from the first; the final state is the
    first state plus every run's update, computed here."""
    from polygraphy.json import save_json

    runs = [good_inputs(np.random.default_rng(seed)) for seed in range(3)]
    path = tmp_path / "inputs.json"
    save_json(runs, str(path))
    status = cli.main(["--dry-run", "--seed", "1", "--onnx", own_state_model(tmp_path), "--onnx_inputs", str(path),
                       "--steps", "3", "--validate"])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert f"runs 1 to 2 take their other inputs from --onnx_inputs {path}" in captured.out
    expected = runs[0]["state"].astype(np.float64)
    for feeds in runs:
        np.add.at(expected, feeds["idx"], feeds["src"].astype(np.float64))
    np.testing.assert_allclose(printed_output(captured.out, "Output X_out float32 [5, 3] after 3 runs:"), expected,
                               atol=1e-5)
    assert "Validation against reference successful!" in captured.out


@pytest.mark.parametrize("case, message", [
    ("json of more runs", "--onnx_inputs {json} holds the inputs of 2 runs; give --steps 2"),
    ("json of other shapes", "--onnx_inputs {json} (run 1): src [6, 3], but [7, 3] in run 0; every run keeps the "
                             "first run's shapes"),
    ("json not polygraphy's", "--onnx_inputs {json}: not polygraphy's JSON of inputs"),
    ("index out of range", "--onnx_inputs {npz}: idx[6] = 5 is outside [0, 5), the rows of state it indexes"),
    ("missing input", "--onnx_inputs {npz}: no array 'src' (the model's inputs: state, src, idx)"),
    ("steps without a state", "--steps 2 keeps the states (outputs that alias an input) between runs; no output of "
                              "--onnx {model} aliases an input"),
    ("graph options", "--edges gives the sample network's graph; --onnx {model} is not the sample's network: its "
                      "inputs come from --onnx_inputs FILE.npz or the seed"),
    ("profile", "--max_nodes serves the sample's networks; --onnx {model} is not the sample's network"),
    ("shape of no input", "--onnx_shapes W: not an input of the model (its inputs: state, src, idx)"),
    ("steps with a mask", "--steps 2: the runs after the first draw their inputs other than the states from the "
                          "seed, but input mask bool [E]: no value can be made up"),
])
def test_what_a_model_of_ones_own_cannot_take_is_one_line_and_writes_nothing(tmp_path, capsys, case, message):
    model = aggregation_model(tmp_path / "agg.onnx") if case == "steps without a state" else \
        masked_state_model(tmp_path / "masked.onnx") if case == "steps with a mask" else own_state_model(tmp_path)
    inputs = good_inputs()
    if case == "steps with a mask":
        inputs["mask"] = np.ones(7, bool)
    if case == "index out of range":
        inputs["idx"][6] = 5
    if case == "missing input":
        del inputs["src"]
    path = npz(tmp_path, **inputs)
    json_path = tmp_path / "inputs.json"
    if case.startswith("json"):
        from polygraphy.json import save_json

        later = good_inputs(np.random.default_rng(1))
        if case == "json of other shapes":
            later = {**later, "src": later["src"][:6], "idx": later["idx"][:6]}
        save_json([inputs, later], str(json_path))
        if case == "json not polygraphy's":
            json_path.write_text("[1, 2")
        path = str(json_path)
    extra = {"steps without a state": ["--steps", "2"], "graph options": ["--edges", "[[0,1],[1,0]]"],
             "profile": ["--max_nodes", "10"], "shape of no input": ["--onnx_shapes", "W:3"],
             "steps with a mask": ["--onnx_inputs", path, "--steps", "2"],
             "json of other shapes": ["--onnx_inputs", path, "--steps", "2"]}.get(case)
    args = extra if extra is not None else ["--onnx_inputs", path]
    out = tmp_path / "out.onnx"
    status = cli.main(["--dry-run", "--seed", "1", "--onnx", model, *args, "--save_onnx", str(out)])
    assert_one_line_error(status, capsys.readouterr(), message.format(npz=path, model=model, json=json_path))
    assert not out.exists()


def test_an_engine_run_without_tensorrt_is_exit_3_and_writes_nothing(tmp_path, capsys):
    from tests.conftest import full_tensorrt_missing_reason

    if full_tensorrt_missing_reason() is None:
        pytest.skip("TensorRT and a GPU are here: the engine runs (tests/onnx/test_e2e_onnx_any.py)")
    out = tmp_path / "out.onnx"
    status = cli.main(["--seed", "1", "--onnx", own_state_model(tmp_path), "--save_onnx", str(out)])
    captured = capsys.readouterr()
    assert status == 3, captured.out + captured.err
    assert len(captured.err.splitlines()) == 1 and "(or run with --dry-run" in captured.err
    assert "Output X_out float32" not in captured.out and not out.exists()


def test_a_dry_run_of_a_model_of_ones_own_imports_neither_tensorrt_nor_cuda_nor_polygraphy(tmp_path):
    from tests.support.import_check import heavy_modules_imported_by

    args = ["--dry-run", "--seed", "2", "--onnx", own_state_model(tmp_path), "--steps", "2", "--validate"]
    assert heavy_modules_imported_by(args, ("tensorrt", "tensorrt_rtx_bindings", "cuda", "polygraphy")) == []


# --- the users' models of tests/support/onnx_models.py, exported by the real exporter once per session ----------------
@needs_export
@pytest.mark.parametrize("name", ACCEPTED)
def test_each_users_model_passes_the_dry_run_round_trip_and_its_saved_model_the_checker(tmp_path_factory, tmp_path,
                                                                                         capsys, name):
    """Issue 24's done-when: --dry-run --onnx M --onnx_inputs I.npz --save_onnx O --validate passes for each
    model the rewrite accepts (the rewritten model in ONNX Runtime against the original, output by output), and
    O passes onnx.checker."""
    import onnx

    model, out = zoo_path(tmp_path_factory, name), tmp_path / "rewritten.onnx"
    status = cli.main(["--dry-run", "--seed", "1", "--onnx", str(model), "--onnx_inputs",
                       npz(tmp_path, **zoo_feeds(name)), "--save_onnx", str(out), "--validate"])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert "Validation against reference successful!" in captured.out
    for output in zoo()[name].outputs:
        assert f"Output {output} against ONNX Runtime (the original {model}, same inputs): largest absolute error" \
            in captured.out
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)


@needs_export
def test_two_states_run_in_steps_on_inputs_made_from_the_seed(tmp_path_factory, capsys):
    """Two states updated in one model, each indexed by its own index input: --steps 3 keeps both in place
    and draws src_x, idx_x, src_y, idx_y again for each run, each index within its own state's rows."""
    model = zoo_path(tmp_path_factory, "two_states")
    status = cli.main(["--dry-run", "--seed", "6", "--onnx", str(model), "--onnx_shapes", "X:30x3,Y:5x2", "--steps",
                       "3", "--validate"])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert "idx_y int64 [16]: indices in [0, 5), the rows of Y it indexes" in captured.out
    assert "--steps: 3 runs; the states (X, Y) stay in place" in captured.out
    assert "Output X_out float32 [30, 3] after 3 runs:" in captured.out and "Validation against reference successful!" \
        in captured.out


@needs_export
def test_a_narrow_index_scatter_add_is_refused_in_one_line_and_nothing_is_written(tmp_path_factory, tmp_path, capsys):
    out = tmp_path / "out.onnx"
    status = cli.main(["--dry-run", "--seed", "1", "--onnx", str(zoo_path(tmp_path_factory, "narrow")), "--save_onnx",
                       str(out), "--validate"])
    captured = capsys.readouterr()
    for part in REFUSED["narrow"]:
        assert_one_line_error(status, captured, part)
    assert not out.exists()


@needs_export
@pytest.mark.parametrize("name", ["state", "layers"])
def test_a_model_calling_the_in_place_custom_op_passes_the_dry_run_round_trip(tmp_path_factory, tmp_path, capsys,
                                                                              name):
    """torch.ops.aliased_io.scatter_add_ exported through export.ops holds the plugin node already: ONNX Runtime
    runs the original with that node by its CPU reference; the dry run passes and O passes onnx.checker."""
    import onnx

    model, out = ops_model(tmp_path_factory, name), tmp_path / "rewritten.onnx"
    status = cli.main(["--dry-run", "--seed", "1", "--onnx", str(model), "--onnx_inputs",
                       npz(tmp_path, **ops_inputs(name, "fp32", 9, 20, seed=3)), "--save_onnx", str(out), "--validate"])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert "(a plugin node in the model, into X)" in captured.out
    assert f"Output X_out against ONNX Runtime (the original {model}, its plugin nodes by their CPU reference, same " \
           "inputs): largest absolute error" in captured.out
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)


def torch_eager(name: str, feeds: dict) -> dict:
    """Model `name` of tests/support/onnx_models.py run by torch on copies of `feeds`: {output name: array}."""
    import torch

    spec = zoo()[name]
    with torch.no_grad():
        outputs = spec.module()(*(torch.from_numpy(np.array(feeds[input_name])) for input_name in spec.inputs))
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    return {output: value.numpy() for output, value in zip(spec.outputs, outputs)}


@needs_export
def test_a_model_that_wraps_negative_indices_itself_takes_them_as_torch_does(tmp_path_factory, tmp_path, capsys):
    """torch.where(idx < 0, idx + X.shape[0], idx) before the scatter: the index the scatter receives is in range
    for idx in [-N, N), so such idx are taken and the output is torch eager's; idx < -N is refused in one line
    naming the value."""
    model = str(zoo_path(tmp_path_factory, "wrap_negative"))
    feeds = zoo_feeds("wrap_negative", 3)
    feeds["idx"][:4] = [-1, -9, 8, -1]  # N = 9
    status = cli.main(["--dry-run", "--seed", "1", "--onnx", model, "--onnx_inputs", npz(tmp_path, **feeds),
                       "--validate"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "idx int64 [23]: indices in [-9, 9), the rows of X it indexes" in printed
    assert "Validation against reference successful!" in printed
    np.testing.assert_allclose(printed_output(printed, "Output X_out float32 [9, 3]:"),
                               torch_eager("wrap_negative", feeds)["X_out"], atol=1e-5)
    feeds["idx"][5] = -10
    out = tmp_path / "out.onnx"
    status = cli.main(["--dry-run", "--onnx", model, "--onnx_inputs", npz(tmp_path, **feeds), "--save_onnx", str(out)])
    assert_one_line_error(status, capsys.readouterr(), "idx[5] = -10 is outside [-9, 9)")
    assert not out.exists()


@needs_export
def test_each_row_of_an_edge_index_has_the_bound_of_the_rows_it_indexes(tmp_path_factory, tmp_path, capsys):
    """edge_index [2, E] of two node types (PyG's to_hetero): row 0 gathers U's 50 rows, row 1 adds into X's 70.
    Made from the seed, each row is drawn in its own rows and the run matches torch eager on them; given, a row 0
    value of 55 is refused (one line naming it) and row 1 takes values up to 69."""
    model = str(zoo_path(tmp_path_factory, "two_node_types"))
    saved = tmp_path / "run"
    status = cli.main(["--dry-run", "--seed", "4", "--onnx", model, "--onnx_shapes", "U:50x3,X:70x3,edge_index:2x400",
                       "--validate", "--save_outputs", str(saved)])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "edge_index int64 [2, 400]: row 0 in [0, 50), the rows of U it indexes; row 1 in [0, 70), the rows of X " \
           "it indexes" in printed
    made = {name: np.load(saved / "inputs" / "step_0" / f"{name}.npy") for name in ("U", "X", "edge_index")}
    assert made["edge_index"][0].max() < 50 <= made["edge_index"][1].max() < 70
    np.testing.assert_allclose(np.load(saved / "outputs" / "X_out.npy"), torch_eager("two_node_types", made)["X_out"],
                               atol=1e-5)
    given = {**made, "edge_index": made["edge_index"].copy()}
    given["edge_index"][1, 0] = 69
    status = cli.main(["--dry-run", "--onnx", model, "--onnx_inputs", npz(tmp_path, **given), "--validate"])
    assert status == 0, capsys.readouterr().out
    capsys.readouterr()
    given["edge_index"][0, 7] = 55
    status = cli.main(["--dry-run", "--onnx", model, "--onnx_inputs", npz(tmp_path, **given), "--validate"])
    assert_one_line_error(status, capsys.readouterr(), "edge_index[0, 7] = 55 is outside [0, 50)")
