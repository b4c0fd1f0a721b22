"""Row overwrites through the rewrite (issue 36): torch's index_copy(_), index_put(_) without accumulate,
X[idx] = rows and scatter of an expanded index, exported by torch 2.13's dynamo exporter once per session
(tests/support/onnx_models.py OVERWRITES), become the plugin's overwrite mode (ScatterAddInPlace overwrite=1, or the AOT
overwrite_rows); each rewritten model passes onnx.checker's full check and agrees with ONNX Runtime on the
original where ONNX defines the result (the CPU reference keeps the last edge of a repeated index); the dry
run's --validate says which rows it compared how; the refusals are one line each."""

import numpy as np
import pytest

import aliased_io_plugin as cli
from common.errors import InputError
from tests.support.onnx_helpers import REWRITE_MISSING, needs_export
from tests.support.onnx_models import OVERWRITES, REFUSED, SIZES, zoo, zoo_feeds, zoo_model, zoo_path
from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_cli_onnx_any import npz, printed_output

pytestmark = pytest.mark.skipif(REWRITE_MISSING is not None, reason=REWRITE_MISSING or "")

PLUGINS = ("python", "aot")
# name -> (each plugin node of the Python rewrite: overwrite or not, the aliases)
EXPECTED = {name: ([True], {"X_out": "X"}) for name in OVERWRITES}
EXPECTED["copy_and_add"] = ([True, False], {"X_out": "X", "Y_out": "Y"})
EXPECTED["copy_into_zeros"] = ([True], {})  # into zeros_like(X): no output is an input's memory
REPEATED = {**SIZES, "K": 23}  # more edges than rows: indices repeat


def attributes(node):
    import onnx

    return {attribute.name: onnx.helper.get_attribute_value(attribute) for attribute in node.attribute}


def sequential(state, src, idx):
    """`for e in range(E): state[idx[e]] = src[e]` on a copy: the plugin's rule, written the plain way."""
    state = np.array(state, copy=True)
    for edge, row in enumerate(idx):
        state[row] = src[edge]
    return state


def expected_outputs(name, feeds):
    """X_out (and Y_out) by the sequential rule (and np.add.at for the added state)."""
    if name == "copy_and_add":
        added = feeds["Y"].astype(np.float64)
        np.add.at(added, feeds["idx_y"], feeds["src_y"])
        return {"X_out": sequential(feeds["X"], feeds["src_x"], feeds["idx_x"]), "Y_out": added}
    if name == "copy_into_zeros":
        return {"X_out": feeds["X"] + sequential(np.zeros_like(feeds["X"]), feeds["src"], feeds["idx"])}
    return {"X_out": sequential(feeds["X"], feeds["src"], feeds["idx"])}


@needs_export
@pytest.mark.parametrize("plugin", PLUGINS)
@pytest.mark.parametrize("name", OVERWRITES)
def test_each_overwrite_is_rewritten_into_the_overwrite_plugin_and_round_trips(tmp_path_factory, name, plugin):
    """No Scatter* left, onnx.checker's full check, the plugin node of each overwrite, the overwritten states
    among the aliases; on distinct indices the rewritten model equals ONNX Runtime on the original exactly, and
    with repeated indices its CPU reference follows the sequential loop."""
    import onnx

    from onnx_path.rewrite import IndexBound, model_io, rewrite_model
    from onnx_path.runtime import run_onnxruntime, run_rewritten

    original = zoo_model(tmp_path_factory, name)
    result = rewrite_model(original, plugin)
    model = result.model
    onnx.checker.check_model(model, full_check=True)
    assert not [node for node in model.graph.node if node.op_type.startswith("Scatter") and node.domain == ""]
    assert model_io(model) == model_io(original)
    overwrites, aliases = EXPECTED[name]
    plugins = [node for node in model.graph.node if node.domain == "aliased_io"]
    if plugin == "python":
        assert [node.op_type for node in plugins] == ["ScatterAddInPlace"] * len(overwrites)
        assert [attributes(node).get("overwrite", 0) for node in plugins] == [int(flag) for flag in overwrites]
        assert all(attributes(node)["compute_counts"] == 0 and len(node.output) == 1 for node in plugins)
    else:
        ops = ["overwrite_rows" if flag else "add_rows" for flag in overwrites]  # OVERWRITE_ROWS, SCATTER_ADD
        assert sorted(node.op_type for node in plugins) == sorted(ops)  # in topological order
    assert result.aliases == aliases
    assert [scatter.overwrite for scatter in result.scatters] == overwrites
    first = "idx_x" if name == "copy_and_add" else "idx"
    assert result.index_bounds[first] == IndexBound(None, "X", 0, distinct=True)
    for seed in (0, 1):
        feeds = zoo_feeds(name, seed)
        expected, actual = run_onnxruntime(original, feeds).outputs, run_rewritten(model, feeds)
        for output in zoo()[name].outputs:
            np.testing.assert_allclose(actual[output], expected[output], rtol=1e-6, atol=1e-6, err_msg=output)
        repeated = zoo_feeds(name, seed, REPEATED, repeats=True)
        actual = run_rewritten(model, repeated)
        for output, value in expected_outputs(name, repeated).items():
            np.testing.assert_allclose(actual[output], value, rtol=1e-6, atol=1e-6, err_msg=output)


@needs_export
def test_the_aot_overwrite_is_one_node_writing_the_state_in_place(tmp_path_factory):
    """overwrite_rows reads the state, src and idx and nothing else (no table, no fill); its output is the
    state's memory (node_aliases) and the graph output X_out: OVERWRITE_ROWS's chain, one step."""
    from onnx_path.nodes import node_aliases, step_of
    from onnx_path.rewrite import rewrite_model

    model = rewrite_model(zoo_model(tmp_path_factory, "index_copy"), "aot").model
    (rows,) = (node for node in model.graph.node if node.domain == "aliased_io")
    assert rows.op_type == "overwrite_rows" and node_aliases("aliased_io", "overwrite_rows") == {0: 0}
    _, chain, step = step_of("aliased_io", "overwrite_rows")
    assert chain.steps == (step,) and (len(step.inputs), len(step.outputs)) == (3, 1)
    assert list(rows.input) == ["X", "src", "idx"] and list(rows.output) == ["X_out"]
    assert attributes(rows) == {"plugin_namespace": b"aliased_io", "plugin_version": b"1", "aot": 1}
    assert not [node for node in model.graph.node if node.op_type == "ConstantOfShape"]


def test_the_cpu_reference_of_both_forms_follows_the_sequential_rule_at_every_repeat():
    """The plugin nodes' CPU reference (onnx_path/runtime.py) against a Python loop, many repeats, both
    dtypes, both plugins' nodes."""
    from onnx import helper

    from onnx_path.runtime import plugin_reference

    python = helper.make_node("ScatterAddInPlace", ["X", "src", "idx"], ["out"], domain="aliased_io", overwrite=1,
                              compute_counts=0)
    rows = helper.make_node("overwrite_rows", ["X", "src", "idx"], ["out"], domain="aliased_io")
    rng = np.random.default_rng(7)
    for trial in range(20):
        dtype = (np.float32, np.float16)[trial % 2]
        n, e = int(rng.integers(1, 12)), int(rng.integers(0, 40))
        state, src = rng.standard_normal((n, 3)).astype(dtype), rng.standard_normal((e, 3)).astype(dtype)
        idx = rng.integers(0, n, e).astype(np.int64)
        expected = sequential(state, src, idx)
        (out,) = plugin_reference(python, [state, src, idx])
        np.testing.assert_array_equal(out, expected)
        (out,) = plugin_reference(rows, [state, src, idx])
        np.testing.assert_array_equal(out, expected)
        assert out.dtype == dtype and not np.shares_memory(out, state)
    with pytest.raises(InputError, match="index 9 at position 0 is outside the"):
        plugin_reference(python, [state, src, np.concatenate([[9], idx[1:]]).astype(np.int64)])


@pytest.mark.parametrize("change, message", [
    ({"overwrite": 2}, "attribute overwrite is 2; the plugin node has overwrite=0 (add) or 1 (overwrite) (INT)"),
    ({"overwrite": 1.0}, "attribute overwrite is 1.0"),
    ({"outputs": 2}, "overwrite=1 with 2 outputs; an overwrite has one output"),
])
def test_an_overwrite_node_of_another_form_is_refused_in_one_line(change, message):
    from onnx import TensorProto, helper

    from onnx_path.nodes import check_plugin_nodes

    outputs = ["out", "counts"][:change.get("outputs", 1)]
    node = helper.make_node("ScatterAddInPlace", ["X", "src", "idx"], outputs, domain="aliased_io", name="node",
                            plugin_version="1", plugin_namespace="", compute_counts=int(len(outputs) == 2),
                            overwrite=change.get("overwrite", 1))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3]),
                                            helper.make_tensor_value_info("src", TensorProto.FLOAT, ["E", 3]),
                                            helper.make_tensor_value_info("idx", TensorProto.INT64, ["E"])],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("aliased_io", 1)])
    with pytest.raises(InputError) as raised:
        check_plugin_nodes(model)
    assert message in str(raised.value) and "\n" not in str(raised.value)


@needs_export
def test_a_python_overwrite_node_in_the_model_becomes_the_aot_overwrite(tmp_path_factory):
    """A model holding ScatterAddInPlace overwrite=1 (the Python rewrite's own output, read back) rewritten for
    the AOT plugin: overwrite_rows, its CPU reference still the sequential loop."""
    from onnx_path.rewrite import rewrite_model
    from onnx_path.runtime import run_rewritten

    python = rewrite_model(zoo_model(tmp_path_factory, "set_rows")).model
    aot = rewrite_model(python, "aot")
    assert [node.op_type for node in aot.model.graph.node if node.domain == "aliased_io"] == \
        ["overwrite_rows"]
    assert aot.aliases == {"X_out": "X"}
    feeds = zoo_feeds("set_rows", 3, REPEATED, repeats=True)
    np.testing.assert_array_equal(run_rewritten(aot.model, feeds)["X_out"], expected_outputs("set_rows", feeds)["X_out"])


@needs_export
def test_an_overwrite_under_the_samples_names_is_not_the_samples_state_update(tmp_path_factory):
    """index_copy with X, src, idx -> X_out has the sample's inputs and outputs, but writes rows: not validated
    by the sample's add formula."""
    from onnx_path.rewrite import sample_network

    assert sample_network(zoo_model(tmp_path_factory, "index_copy")) is None


@needs_export
@pytest.mark.parametrize("name", [name for name in REFUSED if name.startswith("copy_")])
def test_an_overwrite_that_cannot_go_in_place_is_refused_in_one_line_exit_2(tmp_path_factory, tmp_path, capsys, name):
    """Data read elsewhere, data that is a graph output, an axis other than rows, a narrow index: exit 2, one
    line, nothing written (the rewrite's refusals of each are in tests/onnx/test_onnx_rewrite_models.py)."""
    out = tmp_path / "out.onnx"
    status = cli.main(["--dry-run", "--seed", "1", "--onnx", str(zoo_path(tmp_path_factory, name)), "--onnx_inputs",
                       npz(tmp_path, **zoo_feeds(name)), "--save_onnx", str(out), "--validate"])
    captured = capsys.readouterr()
    for part in REFUSED[name]:
        assert_one_line_error(status, captured, part)
    assert not out.exists()


@needs_export
@pytest.mark.parametrize("name, concatenate", [("copy_copy", True), ("copy_then_add", False),
                                                ("add_then_copy", False)])
def test_two_updates_of_one_state_with_an_overwrite_are_refused_as_overwrites(tmp_path_factory, tmp_path, capsys,
                                                                            name, concatenate):
    """Two index_copy_, or an index_copy_ and an index_add_ either way, into one state: one line, exit 2, naming
    the second node and what it updates; the line speaks of overwrites, not of two scatter-adds, and advises
    concatenating only where that can do the same (two overwrites), never for an overwrite and an add."""
    out = tmp_path / "out.onnx"
    model = zoo_model(tmp_path_factory, name)
    second = [node.name for node in model.graph.node if node.op_type == "ScatterND"][1]
    status = cli.main(["--dry-run", "--onnx", str(zoo_path(tmp_path_factory, name)), "--onnx_inputs",
                       npz(tmp_path, **zoo_feeds(name)), "--save_onnx", str(out)])
    captured = capsys.readouterr()
    assert_one_line_error(status, captured, f"node {second} (ScatterND)")
    assert "overwrite" in captured.err and "two scatter-adds" not in captured.err
    assert ("torch.cat" in captured.err) == concatenate
    assert not out.exists()


# --- the dry run's --validate -------------------------------------------------------------------------------------
def dry_run(tmp_path, capsys, model, feeds, *extra):
    out = tmp_path / "rewritten.onnx"
    status = cli.main(["--dry-run", "--seed", "1", "--onnx", str(model), "--onnx_inputs", npz(tmp_path, **feeds),
                       "--save_onnx", str(out), "--validate", *extra])
    captured = capsys.readouterr()
    return status, captured.out + captured.err, out


@needs_export
@pytest.mark.parametrize("name", OVERWRITES)
def test_each_overwrite_passes_the_dry_run_validation_and_its_saved_model_the_checker(tmp_path_factory, tmp_path,
                                                                                      capsys, name):
    """Issue 36's done-when, distinct indices: every output compared whole with ONNX Runtime on the original
    (the AOT plugin's nodes for the first model, the Python plugin's for the others)."""
    import onnx

    model = zoo_path(tmp_path_factory, name)
    plugin = ["--plugin", "aot"] if name == OVERWRITES[0] else []
    status, printed, out = dry_run(tmp_path, capsys, model, zoo_feeds(name), *plugin)
    assert status == 0, printed
    into = "zeros zeros_like" if name == "copy_into_zeros" else "X"
    assert f"rows of {into} overwritten) -> " in printed and "one edge of a repeated index wins, undefined which" \
        in printed
    assert ("output X_out is input X's memory (bind it at X's address)" in printed) == bool(EXPECTED[name][1])
    assert "Validation against reference successful!" in printed
    for output in zoo()[name].outputs:
        assert f"Output {output} against ONNX Runtime (the original {model}, same inputs): largest absolute error" \
            in printed
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)


@needs_export
@pytest.mark.parametrize("plugin", PLUGINS)
def test_repeated_indices_compare_the_defined_rows_with_onnx_runtime_and_the_rest_by_the_rule(tmp_path_factory,
                                                                                             tmp_path, capsys, plugin):
    """Issue 36's done-when, repeated indices: the printed state is the CPU reference's (the sequential loop);
    --validate names the rows written at a repeated index (each element checked against the nearest of its
    edges'), and compares the rest with ONNX Runtime; the added state next to it is compared whole."""
    import onnx

    feeds = zoo_feeds("copy_and_add", 2, REPEATED, repeats=True)
    model = zoo_path(tmp_path_factory, "copy_and_add")
    status, printed, out = dry_run(tmp_path, capsys, model, feeds, "--plugin", plugin)
    assert status == 0, printed
    expected = expected_outputs("copy_and_add", feeds)
    np.testing.assert_allclose(printed_output(printed, "Output X_out float32 [9, 3]:"), expected["X_out"], atol=1e-5)
    rows = np.unique(feeds["idx_x"], return_counts=True)
    repeated = rows[0][rows[1] > 1].tolist()
    shown = ", ".join(str(row) for row in repeated[:6]) + (", ..." if len(repeated) > 6 else "")
    assert f"Output X_out against ONNX Runtime (the original {model}, same inputs); {len(repeated)} rows ({shown}) " \
           "written at a repeated index: against the nearest of its edges' rows (ONNX and the plugin leave which edge " \
           "wins undefined): largest absolute error 0," in printed
    assert f"Output Y_out against ONNX Runtime (the original {model}, same inputs): largest" in printed
    assert "Validation against reference successful!" in printed
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)


@needs_export
def test_an_output_computed_from_rows_of_a_repeated_index_is_not_compared_and_says_so(tmp_path_factory, tmp_path,
                                                                                      capsys):
    model = zoo_path(tmp_path_factory, "copy_then_layers")
    status, printed, _ = dry_run(tmp_path, capsys, model, zoo_feeds("copy_then_layers", 1, REPEATED, repeats=True))
    assert status == 0, printed
    assert "written at a repeated index: against the nearest of its edges' rows" in printed
    scatter = next(node.name for node in zoo_model(tmp_path_factory, "copy_then_layers").graph.node
                   if node.op_type == "ScatterND")
    assert f"Output y against ONNX Runtime (the original {model}, same inputs): not compared (computed from " \
           f"{scatter}, which wrote rows at a repeated index: ONNX and the plugin leave which edge wins undefined)" \
           in printed


@needs_export
@pytest.mark.parametrize("rule", ["another row's edge", "wrong row"])
def test_a_wrong_overwrite_fails_the_validation_and_writes_nothing(tmp_path_factory, tmp_path, capsys, monkeypatch,
                                                                   rule):
    """The comparison is not vacuous: a reference that writes a repeated index's row from an edge of another row
    fails at the repeated rows (the rule's check), one that writes a row off by one fails at the defined rows
    (ONNX Runtime's)."""
    import reference.gnn as gnn  # the overwrite's one reference (scatter_overwrite_numpy) picks its winners here

    correct = gnn.last_edges

    def another_rows_edge(idx):
        rows, edges = correct(idx)
        repeated = np.bincount(idx)[rows] > 1
        assert repeated.any() and rows.size > 1
        return rows, np.where(repeated, np.roll(edges, 1), edges)

    def wrong_row(idx):
        rows, edges = correct(idx)
        return (rows + 1) % 9, edges

    monkeypatch.setattr(gnn, "last_edges", another_rows_edge if rule == "another row's edge" else wrong_row)
    status, printed, out = dry_run(tmp_path, capsys, zoo_path(tmp_path_factory, "index_copy"),
                                   zoo_feeds("index_copy", 0, REPEATED, repeats=True))
    assert status == 1, printed
    assert "Validation against reference failed!\nOutput X_out against ONNX Runtime" in printed
    assert not out.exists()


@needs_export
@pytest.mark.parametrize("name", ["index_copy_", "scatter_rows"])
def test_an_empty_batch_of_overwrites_validates_and_leaves_the_state_as_it_was(tmp_path_factory, tmp_path, capsys,
                                                                                name):
    """No rows to write (idx [0], rows [0, F]): the dry run's --validate compares the state, unchanged, with ONNX
    Runtime (exit 0), for ScatterND's [0, 1] indices and ScatterElements' expanded [0, F] alike."""
    feeds = zoo_feeds(name, 0, {**SIZES, "K": 0})
    assert feeds["idx"].shape == (0,) and feeds["src"].shape == (0, 3)
    status, printed, out = dry_run(tmp_path, capsys, zoo_path(tmp_path_factory, name), feeds)
    assert status == 0, printed
    assert "Validation against reference successful!" in printed
    np.testing.assert_allclose(printed_output(printed, "Output X_out float32 [9, 3]:"), feeds["X"], atol=1e-6)
    assert out.exists()


@needs_export
def test_steps_with_repeated_indices_keep_the_rule_and_leave_earlier_repeats_uncompared(tmp_path_factory, capsys):
    """--steps 4 on inputs made from the seed (50 indices into 40 rows: they repeat): the overwritten state fed
    back, both states in place; rows left from an earlier run's repeated index are named and not compared."""
    model = zoo_path(tmp_path_factory, "copy_and_add")
    status = cli.main(["--dry-run", "--seed", "3", "--onnx", str(model), "--onnx_shapes",
                       "X:40x3,Y:5x2,src_x:50x3,src_y:9x2", "--steps", "4", "--validate"])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert "--steps: 4 runs; the states (X, Y) stay in place" in captured.out
    assert "written at a repeated index in an earlier run: not compared" in captured.out
    assert "Validation against reference successful!" in captured.out


@needs_export
def test_inputs_made_for_an_overwrites_index_do_not_repeat_where_they_can(tmp_path_factory, capsys):
    """The seed's indices of an overwrite are distinct where there are at most as many as rows (the engine's row
    of a repeated index is undefined, so C++ --expected could not compare it), uniform as for add beyond; the
    added state's index is uniform."""
    from onnx_path.inputs import make_onnx_inputs
    from onnx_path.rewrite import model_io, rewrite_model

    result = rewrite_model(zoo_model(tmp_path_factory, "copy_and_add"))
    bounds = result.index_bounds
    assert bounds["idx_x"].distinct and not bounds["idx_y"].distinct
    specs, _ = model_io(result.model)
    shapes = {"X": (40, 3), "Y": (5, 2), "src_x": (40, 3), "src_y": (60, 2), "idx_x": (40,), "idx_y": (60,)}
    for run in range(5):
        feeds = make_onnx_inputs(specs, shapes, bounds, seed=1, run=run, only=["idx_x", "idx_y"])
        assert sorted(feeds["idx_x"].tolist()) == list(range(40))  # 40 distinct of 40 rows
        assert np.unique(feeds["idx_y"]).size < 60 and feeds["idx_y"].max() < 5
    shapes.update(src_x=(41, 3), idx_x=(41,))
    assert np.unique(make_onnx_inputs(specs, shapes, bounds, seed=1, only=["idx_x"])["idx_x"]).size < 41
    model = zoo_path(tmp_path_factory, "copy_and_add")
    assert cli.main(["--dry-run", "--onnx", str(model), "--onnx_shapes", "X:40x3,Y:5x2,src_x:30x3,src_y:9x2"]) == 0
    assert "idx_x int64 [30]: indices in [0, 40), the rows of X it indexes, without repeats (a row overwrite's " \
           "index)" in capsys.readouterr().out


def float16_copy_model(path):
    """X [N, 3] float16, src [E, 3], idx [E] -> X_out = ScatterND(X, Unsqueeze(idx, [1]), src) without reduction,
    as the exporter writes index_copy (onnx.helper: the float16 form)."""
    from onnx import TensorProto, helper, save

    nodes = [helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("axes", TensorProto.INT64, [1], [1])),
             helper.make_node("Unsqueeze", ["idx", "axes"], ["column"]),
             helper.make_node("ScatterND", ["X", "column", "src"], ["X_out"], name="copy_rows")]
    graph = helper.make_graph(nodes, "copy16", [
        helper.make_tensor_value_info("X", TensorProto.FLOAT16, ["N", 3]),
        helper.make_tensor_value_info("src", TensorProto.FLOAT16, ["E", 3]),
        helper.make_tensor_value_info("idx", TensorProto.INT64, ["E"]),
    ], [helper.make_tensor_value_info("X_out", TensorProto.FLOAT16, ["N", 3])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


@pytest.mark.parametrize("plugin", PLUGINS)
def test_a_float16_overwrite_copies_rows_exactly_in_both_plugins(tmp_path, plugin):
    """float16 rows are copied, not summed: the rewritten model's X_out is bit for bit the sequential rule."""
    from onnx_path.rewrite import load_model, rewrite_model
    from onnx_path.runtime import run_rewritten

    rng = np.random.default_rng(4)
    feeds = {"X": rng.standard_normal((7, 3)).astype(np.float16), "src": rng.standard_normal((12, 3)).astype(np.float16),
             "idx": rng.integers(0, 7, 12).astype(np.int64)}
    result = rewrite_model(load_model(float16_copy_model(tmp_path / "copy16.onnx")), plugin)
    out = run_rewritten(result.model, feeds)["X_out"]
    np.testing.assert_array_equal(out.astype(np.float16), sequential(feeds["X"], feeds["src"], feeds["idx"]))


def test_a_float16_overwrite_with_repeated_indices_passes_the_dry_run_validation(tmp_path, capsys):
    rng = np.random.default_rng(5)
    feeds = {"X": rng.standard_normal((7, 3)).astype(np.float16), "src": rng.standard_normal((12, 3)).astype(np.float16),
             "idx": rng.integers(0, 7, 12).astype(np.int64)}
    status, printed, _ = dry_run(tmp_path, capsys, float16_copy_model(tmp_path / "copy16.onnx"), feeds)
    assert status == 0, printed
    assert "written at a repeated index: against the nearest of its edges' rows" in printed
    heading = next(line for line in printed.splitlines() if line.startswith("Output X_out float"))  # 16, or 32: the
    np.testing.assert_allclose(printed_output(printed, heading),  # float32 copy ONNX Runtime ran
                               sequential(feeds["X"], feeds["src"], feeds["idx"]), atol=1e-3)


def test_a_float16_overwrite_near_the_largest_float16_is_taken_it_adds_nothing(tmp_path, capsys):
    """State and rows of 60000 (their sum would be beyond 65504, but an overwrite writes, never adds): the dry run
    runs and validates, every written row 60000 and the others as they were."""
    feeds = {"X": np.full((4, 3), -60000, np.float16), "src": np.full((3, 3), 60000, np.float16),
             "idx": np.array([0, 2, 0], np.int64)}
    status, printed, out = dry_run(tmp_path, capsys, float16_copy_model(tmp_path / "copy16.onnx"), feeds)
    assert status == 0, printed
    assert "Validation against reference successful!" in printed and out.exists()
    heading = next(line for line in printed.splitlines() if line.startswith("Output X_out float"))
    np.testing.assert_array_equal(printed_output(printed, heading), sequential(feeds["X"], feeds["src"], feeds["idx"]))


def test_the_scatter_op_of_old_opsets_is_refused_in_one_line():
    from onnx import TensorProto, helper

    from onnx_path.rewrite import rewrite_model

    node = helper.make_node("Scatter", ["X", "indices", "src"], ["X_out"], name="old", axis=0)
    graph = helper.make_graph([node], "old", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 3]),
                                              helper.make_tensor_value_info("indices", TensorProto.INT64, [2, 3]),
                                              helper.make_tensor_value_info("src", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("X_out", TensorProto.FLOAT, [4, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    with pytest.raises(InputError, match=r"^node old \(Scatter\): the Scatter op of opsets before 11 is not rewritten"):
        rewrite_model(model)


@needs_export
@pytest.mark.trt_bindings
@pytest.mark.parametrize("name", ["index_copy", "copy_and_add"])
def test_the_aot_overwrite_nodes_match_the_registered_aot_plugins(tmp_path_factory, name):
    """Each AOT node of an overwrite's rewrite names a plugin the project's ops registered (namespace::op_type,
    inplace.registry's register_aot_plugins, as --onnx --plugin aot registers them before parsing) with as many
    inputs and outputs as its registered descriptor function takes and returns (TensorRT >= 10.16's
    tensorrt.plugin)."""
    import inspect
    import typing

    from common.errors import MissingDependencyError
    from onnx_path.rewrite import rewrite_model

    from inplace.registry import register_aot_plugins
    from plugin.inplace_ops import PROJECT_OPS  # noqa: F401 (registers them)
    from tests.support.trt_plugin_internals import qdp_registry

    try:
        ids = register_aot_plugins()
    except MissingDependencyError as error:
        pytest.skip(str(error))
    model = rewrite_model(zoo_model(tmp_path_factory, name), "aot").model
    seen = []
    for node in (n for n in model.graph.node if n.domain):
        plugin_id = f"{attributes(node)['plugin_namespace'].decode()}::{node.op_type}"
        assert node.domain == "aliased_io" and plugin_id in ids
        signature = inspect.signature(qdp_registry()[plugin_id].register_func)
        assert len(node.input) == len(signature.parameters), plugin_id
        returned = signature.return_annotation
        assert len(node.output) == (len(typing.get_args(returned)) if typing.get_origin(returned) is tuple else 1)
        seen.append(node.op_type)
    assert "overwrite_rows" in seen


@needs_export
@pytest.mark.trt_standin
@pytest.mark.trt_bindings
def test_the_python_overwrite_node_creates_an_overwriting_plugin_through_the_real_creator(trt, tmp_path_factory):
    """As TensorRT's ONNX parser does (tests/onnx/test_onnx_rewrite.py's add case): each INT attribute the creator
    advertises becomes an INT32 field; the plugin overwrites, has one output, no counts, output 0 X's memory."""
    import onnx

    from plugin.scatter_add_plugin import ScatterAddPlugin, ScatterAddPluginCreator
    from onnx_path.rewrite import rewrite_model

    node = next(n for n in rewrite_model(zoo_model(tmp_path_factory, "set_rows")).model.graph.node
                if n.op_type == "ScatterAddInPlace")
    creator = ScatterAddPluginCreator()
    advertised = {field.name: field for field in creator.field_names}
    if "overwrite" not in advertised:
        pytest.skip("plugin/scatter_add_plugin.py's creator has no overwrite field in this tree")
    fields = []
    for attribute in node.attribute:
        if attribute.name in advertised:
            assert attribute.type == onnx.AttributeProto.INT and advertised[attribute.name].type == trt.PluginFieldType.INT32
            fields.append(trt.PluginField(attribute.name, np.array([attribute.i], np.int32), trt.PluginFieldType.INT32))
    assert sorted(field.name for field in fields) == ["compute_counts", "overwrite"]
    plugin = trt.IPluginCreatorV3One.create_plugin(creator, node.name, trt.PluginFieldCollection(fields),
                                                   trt.TensorRTPhase.BUILD)
    assert isinstance(plugin, ScatterAddPlugin) and plugin.overwrite is True and plugin.compute_counts is False
    assert plugin.num_outputs == len(node.output) == 1 and plugin.get_aliased_input(0) == 0


# --- which rows --validate compares (onnx_path/overwrite.py), on a recorded original ---------------------------
def oracle_of_copy(states):
    """OverwriteOracle of X_out = ScatterND(X, Unsqueeze(idx, 1), src) (index_copy), its original 'run' by a
    stand-in for ONNX Runtime that keeps the FIRST edge of a repeated index (ONNX leaves which one undefined)."""
    from onnx import TensorProto, helper

    from onnx_path.overwrite import PROBE_SUFFIX, OverwriteOracle

    value = helper.make_tensor_value_info
    nodes = [helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("axes", TensorProto.INT64, [1], [1])),
             helper.make_node("Unsqueeze", ["idx", "axes"], ["column"]),
             helper.make_node("ScatterND", ["X", "column", "src"], ["X_out"], name="copy")]
    graph = helper.make_graph(nodes, "copy", [value("X", TensorProto.FLOAT, [4, 3]), value("src", TensorProto.FLOAT, ["E", 3]),
                                              value("idx", TensorProto.INT64, ["E"])],
                              [value("X_out", TensorProto.FLOAT, [4, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])

    def run_probe(probe):
        assert {output.name for output in probe.graph.output} >= {"column" + PROBE_SUFFIX, "src" + PROBE_SUFFIX}

        def run(feeds):
            out = np.array(feeds["X"], copy=True)
            for edge in reversed(range(len(feeds["idx"]))):
                out[feeds["idx"][edge]] = feeds["src"][edge]
            return {"X_out": out, "column" + PROBE_SUFFIX: feeds["idx"][:, None], "src" + PROBE_SUFFIX: feeds["src"]}
        return run

    return OverwriteOracle(model, run_probe, states)


def validated(oracle, actual, expected):
    from onnx_path.compare import compare_output
    from onnx_path.overwrite import compared

    return compared("Output X_out", "X_out", actual, expected, np.float32, oracle, compare_output)[1].ok


def test_a_row_written_at_an_index_repeated_twice_is_checked_by_the_rule_not_against_onnx_runtime():
    """Row 2 written by two edges: ONNX Runtime kept the first, the plugin the second; both are right (a row
    repeated exactly twice is a repeated index, not a row written once). Another value there fails."""
    oracle = oracle_of_copy({})
    feeds = {"X": np.zeros((4, 3), np.float32), "src": np.arange(9, dtype=np.float32).reshape(3, 3) + 1,
             "idx": np.array([2, 2, 0])}
    expected = oracle.run(feeds)["X_out"]
    plugin = sequential(feeds["X"], feeds["src"], feeds["idx"])  # the last edge wins
    assert not np.array_equal(plugin[2], expected[2])
    assert validated(oracle, plugin, expected)
    plugin[2] += 5.0
    assert not validated(oracle, plugin, expected)


def test_a_row_left_undefined_is_compared_again_once_a_later_run_writes_it_once():
    """--steps with X fed back: run 1 writes row 2 at a repeated index (undefined, not compared after), run 2
    writes it from one edge: ONNX defines it again, so an engine off by 5.0 there fails."""
    oracle = oracle_of_copy({"X_out": "X"})
    src = np.arange(9, dtype=np.float32).reshape(3, 3) + 1
    first = oracle.run({"X": np.zeros((4, 3), np.float32), "src": src, "idx": np.array([2, 2, 0])})["X_out"]
    feeds = {"X": first, "src": src[:1] * 10, "idx": np.array([2])}
    expected = oracle.run(feeds)["X_out"]
    plugin = sequential(feeds["X"], feeds["src"], feeds["idx"])
    assert validated(oracle, plugin, expected)
    plugin[2] += 5.0
    assert not validated(oracle, plugin, expected)
