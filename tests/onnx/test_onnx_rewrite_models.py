"""The rewrite on the models users bring (tests/support/onnx_models.py, exported by the real exporter once per session):
each accepted model rewritten for both plugins, passing onnx.checker's full check, and validated by the round
trip (the rewritten model with the CPU reference of the plugin nodes against ONNX Runtime on the original, on
seeded inputs); what each output aliases and what each index bounds; every refusal in one line; plugin nodes
already in a model; and the checks the mutation trial showed missing (each test says which bug it catches)."""

import re

import numpy as np
import pytest

from common.errors import InputError
from tests.support.onnx_helpers import REWRITE_MISSING, needs_export, sample_model
from tests.support.onnx_models import ACCEPTED, REFUSED, zoo_feeds, zoo_model

pytestmark = pytest.mark.skipif(REWRITE_MISSING is not None, reason=REWRITE_MISSING or "")

PLUGINS = ("python", "aot")
SCATTERS = ("ScatterND", "ScatterElements", "Scatter")
# name -> (plugin nodes of the Python rewrite with compute_counts, aliases, index bounds as (rows, input, axis))
EXPECTED = {
    "gnn_zeros": ([1], {}, {"edge_index": (None, "X", 0)}),  # through Gather(edge_index, 1)
    "two_states": ([0, 0], {"X_out": "X", "Y_out": "Y"}, {"idx_x": (None, "X", 0), "idx_y": (None, "Y", 0)}),
    "heads_state": ([0], {"X_out": "X"}, {"idx": (None, "X", 0)}),
    "update_then_layers": ([0], {"X_out": "X"}, {"idx": (None, "X", 0)}),
    "alpha": ([0], {"X_out": "X"}, {"idx": (None, "X", 0)}),
    "scatter_add_state": ([0], {"X_out": "X"}, {"idx": (None, "X", 0)}),
    "scatter_add_classifier": ([1], {}, {"idx": (None, "X", 0)}),
    "float_counts": ([1], {}, {"idx": (None, "X", 0)}),
    "index_put": ([0], {"X_out": "X"}, {"idx": (None, "X", 0)}),
    "computed": ([0], {}, {"idx": (None, "X", 0)}),
}


def attributes(node):
    import onnx

    return {attribute.name: onnx.helper.get_attribute_value(attribute) for attribute in node.attribute}


def round_trip(original, rewritten, feeds, rtol=1e-5, atol=1e-5):
    """The rewritten model (plugin nodes on the CPU) against ONNX Runtime on the original, output by output."""
    from onnx_path.runtime import run_onnxruntime, run_rewritten

    expected = run_onnxruntime(original, feeds).outputs
    actual = run_rewritten(rewritten, feeds)
    assert sorted(actual) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(actual[name], value, rtol=rtol, atol=atol, err_msg=name)
    return actual


@needs_export
@pytest.mark.parametrize("plugin", PLUGINS)
@pytest.mark.parametrize("name", ACCEPTED)
def test_each_users_model_is_rewritten_and_validated(tmp_path_factory, name, plugin):
    """No Scatter* left, the plugin nodes in their declared domain, onnx.checker's full check passes, the
    aliases and index bounds as the model says, and the round trip agrees with ONNX Runtime on the original."""
    import onnx

    from onnx_path.rewrite import IndexBound, model_io, rewrite_model

    original = zoo_model(tmp_path_factory, name)
    result = rewrite_model(original, plugin)
    model = result.model
    onnx.checker.check_model(model, full_check=True)
    assert not [node for node in model.graph.node if node.op_type in SCATTERS]
    assert {(opset.domain, opset.version) for opset in model.opset_import} >= {("aliased_io", 1)}
    assert model_io(model) == model_io(original)
    counts, aliases, bounds = EXPECTED[name]
    plugins = [node for node in model.graph.node if node.domain == "aliased_io"]
    if plugin == "python":
        assert [node.op_type for node in plugins] == ["ScatterAddInPlace"] * len(counts)
        assert [attributes(node)["compute_counts"] for node in plugins] == counts
        assert [len(node.output) for node in plugins] == [1 + flag for flag in counts]
    else:
        ops = ["add_rows_counts" if flag else "add_rows" for flag in counts]  # the float32 state chain's one step
        assert [node.op_type for node in plugins] == ops
    assert result.aliases == aliases
    assert result.index_bounds == {key: IndexBound(rows, source, axis) for key, (rows, source, axis) in bounds.items()}
    assert len(result.scatters) == len(counts) and len(result.summary()) == len(counts) + len(aliases)
    for seed in (0, 1):
        round_trip(original, model, zoo_feeds(name, seed))


@needs_export
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_cannot_be_rewritten_is_one_line_naming_the_node(tmp_path_factory, name):
    """Each model written by the real exporter (the legacy one for "legacy": dynamo=False): InputError, one line,
    for either plugin."""
    from onnx_path.rewrite import rewrite_model

    model = zoo_model(tmp_path_factory, name)
    for plugin in PLUGINS:
        with pytest.raises(InputError) as raised:
            rewrite_model(model, plugin)
        message = str(raised.value)
        assert "\n" not in message
        for part in REFUSED[name]:
            assert part in message, message


@needs_export
def test_the_narrow_index_is_what_torch_adds_only_in_part(tmp_path_factory):
    """Why a narrow index is refused (before, it was rewritten into whole-row adds and saved): torch adds src's
    column 0 only, and the exported model is not even valid ONNX (ONNX Runtime refuses to run it)."""
    import torch

    from onnx_path.runtime import run_onnxruntime

    X, src, idx = torch.zeros(2, 4), torch.ones(3, 4), torch.tensor([0, 0, 1])
    assert X.scatter_add(0, idx[:, None], src).tolist() == [[2, 0, 0, 0], [1, 0, 0, 0]]
    feeds = {"X": X.numpy(), "src": src.numpy(), "idx": idx.numpy()}
    with pytest.raises(InputError, match="Indices vs updates dimensions differ"):
        run_onnxruntime(zoo_model(tmp_path_factory, "narrow"), feeds)


@needs_export
def test_the_legacy_export_loses_rows_at_a_repeated_index(tmp_path_factory):
    """Why the legacy pattern is refused: ONNX Runtime on it keeps one of the rows added at a repeated index."""
    from onnx_path.runtime import run_onnxruntime

    feeds = {"X": np.zeros((2, 3), np.float32), "src": np.ones((3, 3), np.float32), "idx": np.array([0, 0, 1])}
    (out,) = run_onnxruntime(zoo_model(tmp_path_factory, "legacy"), feeds).outputs.values()
    assert out[1].tolist() == [1.0] * 3 and out[0].tolist() == [1.0] * 3  # index_add gives 2 in row 0


# --- the sample's own network, by its graph -------------------------------------------------------------------------
@needs_export
def test_a_model_with_the_samples_names_but_another_graph_is_not_the_sample(tmp_path_factory):
    """index_add(..., alpha=0.5) under the sample's names and shapes (X, src, idx -> X_out): not the sample's
    state update, so the CLI does not validate it against the sample's formula; the sample's own export is."""
    from onnx_path.rewrite import model_io, sample_network

    alpha = zoo_model(tmp_path_factory, "alpha")
    sample = sample_model(tmp_path_factory, "state", "fp32")
    from onnx_path.rewrite import load_model

    state = load_model(sample)
    assert [spec.name for spec in model_io(alpha)[0]] == ["X", "src", "idx"]
    assert sample_network(alpha) is None
    assert sample_network(state) is not None
    assert sample_network(zoo_model(tmp_path_factory, "index_put")) is not None  # the same graph from index_put


# --- plugin nodes already in the model --------------------------------------------------------------------------
@needs_export
def test_a_model_with_plugin_nodes_passes_through_checked(tmp_path_factory):
    """A rewritten model (as export/ops.py's translation table would write it: plugin nodes, no Scatter*) is
    accepted again: nodes checked, aliases reported; for "aot" the Python node becomes the AOT nodes, and the
    round trip still agrees. Attributes left out where the parser's default is right are fine; a node whose
    attribute differs is refused naming it."""
    import onnx

    from onnx_path.rewrite import rewrite_model

    original = zoo_model(tmp_path_factory, "two_states")
    once = rewrite_model(original, "python").model
    again = rewrite_model(once, "python")
    assert [node.op_type for node in again.model.graph.node] == ["ScatterAddInPlace"] * 2
    assert again.aliases == {"X_out": "X", "Y_out": "Y"}
    assert [scatter.form for scatter in again.scatters] == ["plugin node"] * 2
    aot = rewrite_model(once, "aot")
    assert [node.op_type for node in aot.model.graph.node if node.domain] == ["add_rows"] * 2
    onnx.checker.check_model(aot.model, full_check=True)
    round_trip(original, aot.model, zoo_feeds("two_states"))
    bare = onnx.ModelProto()  # plugin_version and plugin_namespace left out: the parser's defaults are the creator's
    bare.CopyFrom(once)
    for node in bare.graph.node:
        kept = [attribute for attribute in node.attribute if attribute.name == "compute_counts"]
        del node.attribute[:]
        node.attribute.extend(kept)
    assert rewrite_model(bare, "python").aliases == {"X_out": "X", "Y_out": "Y"}
    broken = onnx.ModelProto()
    broken.CopyFrom(once)
    node = broken.graph.node[0]
    next(attribute for attribute in node.attribute if attribute.name == "plugin_version").s = b"2"
    with pytest.raises(InputError, match=rf"node {node.name} \(ScatterAddInPlace\): attribute plugin_version is '2'"):
        rewrite_model(broken, "python")


@needs_export
def test_a_plugin_node_whose_state_another_node_reads_is_refused(tmp_path_factory):
    """A plugin node already in the model adds into its input 0 in place, as a rewritten scatter does: another
    reader of that input (here a Mul, as `y = X * 2` before torch.ops.aliased_io.scatter_add_(X, ...) exports)
    would see the added rows, so the model is refused naming the node and the reader."""
    import onnx

    from onnx_path.rewrite import rewrite_model

    once = rewrite_model(zoo_model(tmp_path_factory, "two_states"), "python").model
    node = once.graph.node[0]
    state = node.input[0]
    once.graph.node.append(onnx.helper.make_node("Mul", [state, state], ["state_squared"], name="reads_the_state"))
    with pytest.raises(InputError, match=rf"node {re.escape(node.name)} \(ScatterAddInPlace\): its data {state} .* has other "
                                         r"consumers \(reads_the_state\)"):
        rewrite_model(once, "python")


# --- the CPU reference of the plugin nodes ------------------------------------------------------------------------
@needs_export
def test_the_reference_refuses_an_index_out_of_range_and_keeps_state_across_runs(tmp_path_factory):
    """run_rewritten: an index past the state's rows is one line naming the node and the value; a
    RewrittenSession run three times with its outputs fed back equals ONNX Runtime's original fed back."""
    from onnx_path.rewrite import rewrite_model
    from onnx_path.runtime import OnnxRuntimeSession, RewrittenSession, run_rewritten

    original = zoo_model(tmp_path_factory, "two_states")
    model = rewrite_model(original, "python").model
    feeds = zoo_feeds("two_states")
    feeds["idx_y"] = feeds["idx_y"].copy()
    feeds["idx_y"][3] = feeds["Y"].shape[0]
    with pytest.raises(InputError, match=rf"ScatterAddInPlace\): index {feeds['Y'].shape[0]} at position 3 is "
                                         rf"outside the {feeds['Y'].shape[0]} rows of its state") as raised:
        run_rewritten(model, feeds)
    assert "\n" not in str(raised.value)
    session, reference = RewrittenSession(model), OnnxRuntimeSession(original)
    ours, theirs = zoo_feeds("two_states"), zoo_feeds("two_states")
    for seed in range(3):
        step = zoo_feeds("two_states", seed + 5)
        outs = session.run({**step, "X": ours["X"], "Y": ours["Y"]})
        expected = reference.run({**step, "X": theirs["X"], "Y": theirs["Y"]})
        ours, theirs = {"X": outs["X_out"], "Y": outs["Y_out"]}, {"X": expected["X_out"], "Y": expected["Y_out"]}
    np.testing.assert_allclose(ours["X"], theirs["X"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours["Y"], theirs["Y"], rtol=1e-5, atol=1e-5)


@needs_export
@pytest.mark.parametrize("network", ("classifier", "state"))
def test_the_float16_sample_round_trips_through_the_aot_table(tmp_path_factory, network):
    """The float16 AOT path (the table chain: add_into_table + round_table and their fills) on the CPU against ONNX Runtime on the
    original (both run as their float32 copies)."""
    from onnx_path.rewrite import IndexBound, load_model, rewrite_model
    from onnx_path.runtime import RewrittenSession
    from tests.support.onnx_helpers import graph_inputs

    original = load_model(sample_model(tmp_path_factory, network, "fp16"))
    result = rewrite_model(original, "aot")
    model = result.model
    assert result.index_bounds == {"idx": IndexBound(input="X", axis=0)}  # through round_table's state
    assert result.aliases == ({} if network == "classifier" else {"X_out": "X"})
    assert [node.op_type for node in model.graph.node if node.domain][-1] == "round_table"
    feeds, _ = graph_inputs(num_nodes=7, num_edges=19, precision="fp16")
    names = ["X", "src", "idx"] + (["W"] if network == "classifier" else [])
    outputs = round_trip(original, model, {name: feeds[name] for name in names})
    assert all(value.dtype == np.float32 for value in outputs.values()) and RewrittenSession(model).float32_copy


# --- what the mutation trial found unchecked (issue 27) -----------------------------------------------------------
@needs_export
def test_data_that_is_also_a_graph_output_is_refused(tmp_path_factory):
    """Catches: dropping the graph-output refusal. The state X also returned as it came in (hand-edited: the
    exporter writes no such graph), and a computed tensor also returned: adding in place would change them."""
    import onnx

    from onnx_path.rewrite import rewrite_model

    for name, data in (("scatter_add_state", "X"), ("computed", None)):
        model = zoo_model(tmp_path_factory, name)
        scatter = next(node for node in model.graph.node if node.op_type in SCATTERS)
        data = data or scatter.input[0]
        model.graph.output.append(onnx.helper.make_tensor_value_info(data, onnx.TensorProto.FLOAT, None))
        with pytest.raises(InputError, match=rf"its data {data} is also a graph output; adding into it in place"):
            rewrite_model(model)


@needs_export
def test_scatter_elements_with_a_negative_axis(tmp_path_factory):
    """Catches: taking any negative axis for rows. axis -2 of a 2-D tensor is axis 0 (accepted, and validated);
    -1 is its columns (refused). Hand-edited axis of the exported scatter_add."""
    from onnx_path.rewrite import rewrite_model

    for axis in (-2, -1):
        model = zoo_model(tmp_path_factory, "scatter_add_state")
        scatter = next(node for node in model.graph.node if node.op_type == "ScatterElements")
        next(attribute for attribute in scatter.attribute if attribute.name == "axis").i = axis
        if axis == -2:
            round_trip(model, rewrite_model(model).model, zoo_feeds("scatter_add_state"))
        else:
            with pytest.raises(InputError, match=r"\(ScatterElements\): axis -1 of a 2-D tensor; the plugin adds rows"):
                rewrite_model(model)


@needs_export
def test_a_constant_of_shape_without_value_is_a_zero_fill(tmp_path_factory):
    """Catches: reading ConstantOfShape without `value` as no fill. The float counts' zeros made by
    ConstantOfShape with no value attribute (the ONNX default: float32 zeros) are still the counts' zeros:
    one plugin node computes both (compute_counts=1), and the round trip agrees."""
    import onnx

    from onnx_path.rewrite import rewrite_model

    model = zoo_model(tmp_path_factory, "float_counts")
    scatters = [node for node in model.graph.node if node.op_type in SCATTERS]
    zeros = scatters[-1].input[0]
    position, maker = next((index, node) for index, node in enumerate(model.graph.node) if zeros in node.output)
    assert maker.op_type in ("Expand", "ConstantOfShape"), maker.op_type
    shape = maker.input[1] if maker.op_type == "Expand" else maker.input[0]
    model.graph.node.remove(maker)
    model.graph.node.insert(position, onnx.helper.make_node("ConstantOfShape", [shape], [zeros], name="zeros_default"))
    onnx.checker.check_model(model)
    result = rewrite_model(model)
    (plugin,) = [node for node in result.model.graph.node if node.domain == "aliased_io"]
    assert attributes(plugin)["compute_counts"] == 1 and result.scatters[0].counts_node == scatters[-1].name
    round_trip(model, result.model, zoo_feeds("float_counts"))


def test_float32_copy_converts_dtype_attributes():
    """Catches: converting Cast's `to` only. EyeLike(dtype=float16) becomes float32 in the copy, so ONNX Runtime
    runs it (else Add(float32, float16) is refused at load)."""
    import onnxruntime
    from onnx import TensorProto, helper

    from onnx_path.runtime import float32_copy

    nodes = [helper.make_node("EyeLike", ["x"], ["eye"], dtype=TensorProto.FLOAT16),
             helper.make_node("Add", ["x", "eye"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    copy = float32_copy(model)
    assert attributes(copy.graph.node[0])["dtype"] == TensorProto.FLOAT
    session = onnxruntime.InferenceSession(copy.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": np.full((2, 2), 2.0, np.float32)})
    assert y.dtype == np.float32 and y.tolist() == [[3.0, 2.0], [2.0, 3.0]]


def scatter_pair_model(into_zeros: bool):
    """Two index_adds, as the exporter writes them (Unsqueeze + ScatterND), either chained into X (X.index_add_
    twice) or both into one zeros fill the exporter shares (Shape + ConstantOfShape), summed. Hand-built: the
    exporter merges or reorders such graphs unpredictably."""
    import onnx
    from onnx import TensorProto, helper

    def info(name, kind, shape):
        return helper.make_tensor_value_info(name, kind, shape)

    inputs = [info("X", TensorProto.FLOAT, ["N", 3]), info("s1", TensorProto.FLOAT, ["E", 3]),
              info("i1", TensorProto.INT64, ["E"]), info("s2", TensorProto.FLOAT, ["B", 3]),
              info("i2", TensorProto.INT64, ["B"])]
    axes = onnx.numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [helper.make_node("Unsqueeze", ["i1", "axes"], ["c1"], name="u1"),
             helper.make_node("Unsqueeze", ["i2", "axes"], ["c2"], name="u2")]
    if into_zeros:
        nodes += [helper.make_node("Shape", ["X"], ["shape"], name="shape"),
                  helper.make_node("ConstantOfShape", ["shape"], ["zeros"], name="zeros"),
                  helper.make_node("ScatterND", ["zeros", "c1", "s1"], ["a"], name="first", reduction="add"),
                  helper.make_node("ScatterND", ["zeros", "c2", "s2"], ["b"], name="second", reduction="add"),
                  helper.make_node("Add", ["a", "b"], ["X_out"], name="sum")]
    else:
        nodes += [helper.make_node("ScatterND", ["X", "c1", "s1"], ["a"], name="first", reduction="add"),
                  helper.make_node("ScatterND", ["a", "c2", "s2"], ["X_out"], name="second", reduction="add")]
    graph = helper.make_graph(nodes, "pair", inputs, [info("X_out", TensorProto.FLOAT, ["N", 3])], [axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(model, full_check=True)
    return model


def test_two_scatters_into_one_tensor_refused_and_a_shared_fill_cloned():
    """Chained into one state: refused (two scatter-adds into one tensor). Into one zeros fill the model shares:
    each plugin node adds into its own copy of the fill, and the round trip agrees."""
    from onnx_path.rewrite import rewrite_model

    with pytest.raises(InputError, match=r"node second \(ScatterND\): its data a is the output of first \(ScatterND\): "
                                         "two scatter-adds into one tensor"):
        rewrite_model(scatter_pair_model(into_zeros=False))
    model = scatter_pair_model(into_zeros=True)
    rng = np.random.default_rng(3)
    feeds = {"X": rng.standard_normal((4, 3)).astype(np.float32), "s1": rng.standard_normal((6, 3)).astype(np.float32),
             "i1": rng.integers(0, 4, 6), "s2": rng.standard_normal((5, 3)).astype(np.float32),
             "i2": rng.integers(0, 4, 5)}
    for plugin in PLUGINS:
        result = rewrite_model(model, plugin)
        plugins = [node for node in result.model.graph.node if node.domain == "aliased_io"]
        fills = {node.input[0] for node in plugins}
        assert len(plugins) == 2 and len(fills) == 2 and "zeros" not in fills
        assert [scatter.kind for scatter in result.scatters] == ["fill", "fill"]
        round_trip(model, result.model, feeds)
        del result.model.graph.value_info[:]  # nothing recorded between the stages: ONNX Runtime infers the types
        round_trip(model, result.model, feeds)


def test_a_view_of_a_state_is_judged_as_the_state():
    """data = Reshape(X) (a view TensorRT may give X's buffer): in place into X, the output aliases X; with X read
    by another node too, refused naming X (the view would let the plugin change what that node reads)."""
    import onnx
    from onnx import TensorProto, helper

    from onnx_path.rewrite import rewrite_model

    def model(read_again: bool):
        inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3]),
                  helper.make_tensor_value_info("src", TensorProto.FLOAT, ["E", 3]),
                  helper.make_tensor_value_info("idx", TensorProto.INT64, ["E"])]
        constants = [onnx.numpy_helper.from_array(np.array([1], np.int64), "axes"),
                     onnx.numpy_helper.from_array(np.array([0, 3], np.int64), "rows")]
        nodes = [helper.make_node("Reshape", ["X", "rows"], ["view"], name="view"),
                 helper.make_node("Unsqueeze", ["idx", "axes"], ["column"], name="column"),
                 helper.make_node("ScatterND", ["view", "column", "src"], ["added"], name="add", reduction="add")]
        outputs = [helper.make_tensor_value_info("X_out", TensorProto.FLOAT, ["N", 3])]
        if read_again:
            nodes.append(helper.make_node("Add", ["added", "X"], ["X_out"], name="again"))
        else:
            nodes.append(helper.make_node("Identity", ["added"], ["X_out"], name="out"))
        graph = helper.make_graph(nodes, "view", inputs, outputs, constants)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])

    result = rewrite_model(model(read_again=False))
    assert result.aliases == {"X_out": "X"} and result.scatters[0].kind == "graph input"
    feeds = {"X": np.ones((4, 3), np.float32), "src": np.ones((5, 3), np.float32), "idx": np.array([0, 1, 1, 3, 3])}
    round_trip(model(read_again=False), result.model, feeds)
    with pytest.raises(InputError, match=r"node add \(ScatterND\): its data X \(a graph input\) has other consumers "
                                         r"\(again\)"):
        rewrite_model(model(read_again=True))
