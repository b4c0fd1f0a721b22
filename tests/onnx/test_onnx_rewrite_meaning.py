"""The rewrite decides by meaning: hand-built models (onnx.helper, as the exporter writes them) for what issue 37's
mutation trial showed no test caught, each test naming the bug it catches (planted, each fails it), and the
shapes the rewrite proves or refuses to guess (issue 34)."""

import numpy as np
import pytest

from common.errors import InputError
from tests.support.onnx_helpers import REWRITE_MISSING

pytestmark = pytest.mark.skipif(REWRITE_MISSING is not None, reason=REWRITE_MISSING or "")

F = 3


def info(name, kind, shape):
    from onnx import helper

    return helper.make_tensor_value_info(name, kind, shape)


def const(name, values):
    import onnx

    return onnx.numpy_helper.from_array(np.asarray(values), name)


def make(nodes, inputs, outputs, initializers=(), value_info=()):
    import onnx
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers), value_info=list(value_info))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model, full_check=True)
    return model


def round_trip(original, rewritten, feeds):
    from onnx_path.runtime import run_onnxruntime, run_rewritten

    expected = run_onnxruntime(original, feeds).outputs
    actual = run_rewritten(rewritten, feeds)
    for name, value in expected.items():
        np.testing.assert_allclose(actual[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def feeds(rows=6, edges=11, seed=0, **more):
    rng = np.random.default_rng(seed)
    arrays = {"X": rng.standard_normal((rows, F)).astype(np.float32),
              "src": rng.standard_normal((edges, F)).astype(np.float32),
              "idx": rng.integers(0, rows - 1, edges).astype(np.int64)}  # the last row has no in-edge
    for name, kind in more.items():
        arrays[name] = rng.integers(0, rows - 1, edges).astype(np.int64) if kind == "index" else kind
    return arrays


def state_and_counts(counts_value=1.0, counts_index="idx", state_reduction="add", counts_rows="X"):
    """X.index_add_(0, idx, src) (X.index_copy_ for state_reduction "none") and counts = zeros [R, 1].index_add(0,
    `counts_index`, full((E, 1), counts_value)), R the rows of `counts_rows`; outputs X_out and counts (ScatterND,
    as torch 2.13's exporter writes index_add)."""
    from onnx import TensorProto, helper

    from onnx.helper import make_node as node

    nodes = [node("Unsqueeze", ["idx", "axes"], ["column"]),
             node("ScatterND", ["X", "column", "src"], ["X_out"], name="state_add", reduction=state_reduction),
             node("Shape", [counts_rows], ["rows"], start=0, end=1),
             node("Concat", ["rows", "one"], ["counts_shape"], axis=0),
             node("ConstantOfShape", ["counts_shape"], ["zeros"],
                  value=helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0])),
             node("Shape", [counts_index], ["edges"], start=0, end=1),
             node("Concat", ["edges", "one"], ["ones_shape"], axis=0),
             node("Expand", ["value", "ones_shape"], ["ones"]),
             node("Unsqueeze", [counts_index, "axes"], ["counts_column"]),
             node("ScatterND", ["zeros", "counts_column", "ones"], ["counts"], name="counts_add", reduction="add")]
    inputs = [info("X", TensorProto.FLOAT, ["N", F]), info("src", TensorProto.FLOAT, ["E", F]),
              info("idx", TensorProto.INT64, ["E"])]
    if counts_index != "idx":
        inputs.append(info(counts_index, TensorProto.INT64, ["E"]))
    if counts_rows != "X":
        inputs.append(info(counts_rows, TensorProto.FLOAT, ["M", F]))
    counts_dims = ["N" if counts_rows == "X" else "M", 1]
    return make(nodes, inputs, [info("X_out", TensorProto.FLOAT, ["N", F]), info("counts", TensorProto.FLOAT, counts_dims)],
                [const("axes", np.array([1], np.int64)), const("one", np.array([1], np.int64)),
                 const("value", np.array(counts_value, np.float32))])


def test_ones_into_zeros_of_the_same_index_are_the_plugins_counts():
    """The form the next three tests vary: paired, one plugin node with compute_counts=1, and right."""
    from onnx_path.rewrite import rewrite_model

    model = state_and_counts()
    result = rewrite_model(model)
    assert [scatter.counts_node for scatter in result.scatters] == ["counts_add"]
    round_trip(model, result.model, feeds())


def test_other_values_into_zeros_are_not_counts():
    """Catches: any constant added into zeros [N, 1] taken for counts (the 2.0s would become the plugin's
    counts, half of what the model computes). Each scatter gets its own plugin node, and the round trip agrees."""
    from onnx_path.rewrite import rewrite_model

    model = state_and_counts(counts_value=2.0)
    result = rewrite_model(model)
    assert [scatter.counts_node for scatter in result.scatters] == [None, None]
    round_trip(model, result.model, feeds())


def test_counts_of_another_index_are_not_the_states_counts():
    """Catches: a counts scatter paired with a state scatter of another index (the plugin would count idx's
    edges where the model counts other's)."""
    from onnx_path.rewrite import rewrite_model

    model = state_and_counts(counts_index="other")
    result = rewrite_model(model)
    assert [scatter.counts_node for scatter in result.scatters] == [None, None]
    round_trip(model, result.model, feeds(other="index"))


def test_a_degree_beside_an_overwrite_of_the_same_index_is_not_its_counts():
    """Catches: ones into zeros of idx paired with X.index_copy_(0, idx, src) (an overwrite has no counts
    output: the degree would be a tensor nothing makes). Each scatter gets its own node; the round trip
    agrees (distinct indices: the overwrite is defined)."""
    from onnx_path.rewrite import rewrite_model

    model = state_and_counts(state_reduction="none")
    result = rewrite_model(model)
    assert [scatter.counts_node for scatter in result.scatters] == [None, None]
    round_trip(model, result.model, dict(feeds(edges=5), idx=np.array([4, 0, 2, 1, 3])))


def test_counts_of_the_same_index_into_another_tensors_rows_are_not_the_states_counts():
    """Catches: counts = zeros [M, 1] of Y's rows paired with X [N]'s scatter of the same index (the plugin's
    counts have X's rows: [4, 1] where the model makes [6, 1])."""
    from onnx_path.rewrite import rewrite_model

    model = state_and_counts(counts_rows="Y")
    result = rewrite_model(model)
    assert [scatter.counts_node for scatter in result.scatters] == [None, None]
    round_trip(model, result.model, dict(feeds(rows=4), Y=np.zeros((6, F), np.float32)))


@pytest.mark.parametrize("values", [[0.0, 5.0, 0.0], [5.0, 5.0, 5.0]])
def test_a_constant_is_a_fill_only_where_every_value_is_the_same(values):
    """Catches: a non-uniform constant taken for a fill of its first value ([0, 5, 0] added into as zeros). A
    constant [3, 1] of different values is the model's weights: refused; one of a single value is a fill, cloned
    for the plugin, and the round trip agrees."""
    from onnx import TensorProto, helper

    from onnx_path.rewrite import rewrite_model

    nodes = [helper.make_node("Unsqueeze", ["idx", "axes"], ["column"]),
             helper.make_node("ScatterND", ["base", "column", "src"], ["out"], name="add_into_constant", reduction="add")]
    model = make(nodes, [info("src", TensorProto.FLOAT, ["E", 1]), info("idx", TensorProto.INT64, ["E"])],
                 [info("out", TensorProto.FLOAT, [3, 1])],
                 [const("axes", np.array([1], np.int64)), const("base", np.array(values, np.float32).reshape(3, 1))])
    inputs = {"src": np.arange(1.0, 6.0, dtype=np.float32).reshape(5, 1), "idx": np.array([0, 1, 1, 2, 0])}
    if len(set(values)) > 1:
        with pytest.raises(InputError, match=r"node add_into_constant \(ScatterND\): its data base is a constant of "
                                             "different values"):
            rewrite_model(model)
    else:
        result = rewrite_model(model)
        assert [scatter.kind for scatter in result.scatters] == ["fill"]
        round_trip(model, result.model, inputs)


def heads_scatter_elements(axis):
    """X [N, 2, F].scatter_add(axis, Expand(Reshape(idx, [-1, 1, 1]), Shape(src)), src) (ScatterElements)."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Reshape", ["idx", "column_shape"], ["column"]),
             helper.make_node("Shape", ["src"], ["src_shape"]),
             helper.make_node("Expand", ["column", "src_shape"], ["indices"]),
             helper.make_node("ScatterElements", ["X", "indices", "src"], ["X_out"], name="heads_add", axis=axis,
                              reduction="add")]
    return make(nodes, [info("X", TensorProto.FLOAT, ["N", 2, F]), info("src", TensorProto.FLOAT, ["E", 2, F]),
                        info("idx", TensorProto.INT64, ["E"])], [info("X_out", TensorProto.FLOAT, ["N", 2, F])],
                [const("column_shape", np.array([-1, 1, 1], np.int64))])


@pytest.mark.parametrize("axis", [-3, 0, -2, -1, 1])
def test_a_negative_axis_is_normalised_by_the_datas_own_rank(axis):
    """Catches: a negative ScatterElements axis normalised as if the data were 2-D (-2 of [N, H, F] taken for
    rows). -3 and 0 are the rows of a 3-D state (rewritten, round trip); -2, -1, 1 are not (refused)."""
    from onnx_path.rewrite import rewrite_model

    model = heads_scatter_elements(axis)
    if axis in (-3, 0):
        result = rewrite_model(model)
        assert result.aliases == {"X_out": "X"}
        rng = np.random.default_rng(2)
        round_trip(model, result.model, {"X": rng.standard_normal((4, 2, F)).astype(np.float32),
                                         "src": rng.standard_normal((7, 2, F)).astype(np.float32),
                                         "idx": rng.integers(0, 4, 7)})
    else:
        with pytest.raises(InputError, match=rf"node heads_add \(ScatterElements\): axis {axis} of a 3-D tensor; "
                                             r"the plugin adds rows \(axis 0\) only"):
            rewrite_model(model)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("plugin", ["python", "aot"])
def test_each_aliased_output_is_the_memory_of_an_input_of_its_shape(plugin, dtype):
    """Catches: the AOT counts output aliased to idx instead of the counts zeros (the scratch fill) in
    node_aliases. The alias map, by its meaning: an output that is an input's memory has that input's dtype
    and shape (as the rewrite records them), that input is a graph input, state or a fill made for the node,
    and it is never the index or the src the node reads; every output of a plugin node that is not aliased
    is a fresh buffer."""
    import onnx_graphsurgeon as gs
    from onnx import TensorProto, helper

    from onnx_path.nodes import node_aliases, step_of
    from onnx_path.rewrite import rewrite_model

    kind = TensorProto.FLOAT if dtype == "float32" else TensorProto.FLOAT16
    model = state_and_counts()
    for value in [*model.graph.input[:2], *model.graph.output]:
        value.type.tensor_type.elem_type = kind if value.name != "counts" else TensorProto.INT64
    for tensor in model.graph.node:
        for attribute in tensor.attribute:
            if attribute.name == "value" and attribute.t.data_type == TensorProto.FLOAT:
                attribute.t.CopyFrom(helper.make_tensor("zero", TensorProto.INT64, [1], [0]))
    model.graph.initializer[-1].CopyFrom(const("value", np.array(1, np.int64)))
    result = rewrite_model(model, plugin)
    graph = gs.import_onnx(result.model)
    plugins = [node for node in graph.nodes if node.domain == "aliased_io"]
    assert {"counts" in [tensor.name for tensor in node.outputs] for node in plugins} >= {True}
    for node in plugins:
        for out, into in node_aliases(node.domain, node.op).items():
            output, source = node.outputs[out], node.inputs[into]
            assert source.name not in ("idx", "src"), (node.op, out, into)
            assert np.dtype(output.dtype) == np.dtype(source.dtype), (node.op, out, into)
            assert output.shape is not None and list(output.shape) == list(source.shape), (node.op, out, into)
            maker = source.inputs[0] if source.inputs else None
            made_by = "graph input" if maker is None else maker.op
            # a graph input, a fill, or an earlier step of the same chain (its table)
            assert made_by in ("graph input", "ConstantOfShape", "Reshape") or (
                step_of(maker.domain, maker.op) is not None), (node.op, into, made_by)


@pytest.mark.parametrize("outputs, accepted", [(1, False), (2, True)])
def test_a_left_out_attribute_is_judged_by_the_parsers_default(outputs, accepted):
    """Catches: a left-out node attribute accepted whatever TensorRT's parser defaults it to. Without
    compute_counts the parser passes no field and the creator makes counts (compute_counts = 1): a node of two
    outputs is right, one of one output is not (the engine would have an output the model lacks)."""
    from onnx import TensorProto, helper

    from onnx_path.nodes import PLUGIN_DOMAIN
    from onnx_path.rewrite import rewrite_model

    names = ["X_out", "counts"][:outputs]
    node = helper.make_node("ScatterAddInPlace", ["X", "src", "idx"], names, name="plugin", domain=PLUGIN_DOMAIN,
                            plugin_version="1", plugin_namespace="")
    graph = helper.make_graph([node], "g", [info("X", TensorProto.FLOAT, ["N", F]), info("src", TensorProto.FLOAT, ["E", F]),
                                            info("idx", TensorProto.INT64, ["E"])],
                              [info("X_out", TensorProto.FLOAT, ["N", F]), info("counts", TensorProto.INT64, ["N", 1])][:outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(PLUGIN_DOMAIN, 1)])
    if accepted:
        assert [scatter.form for scatter in rewrite_model(model).scatters] == ["plugin node"]
    else:
        with pytest.raises(InputError, match=r"node plugin \(ScatterAddInPlace\): attribute compute_counts is missing; "
                                             r"the plugin node has compute_counts=0"):
            rewrite_model(model)


def edge_row_model(take, target_axis=1):
    """out = zeros [N, F] .scatter_add(0, Expand(Reshape(row, [-1, 1]), Concat(Shape(edge_index, a, a + 1), [F])),
    X[source]) with row edge_index[1] taken by `take` (Gather, Slice + Squeeze, Split + Squeeze), as PyG's
    layers export; every dimension of the inputs unnamed, no value_info: only the graph tells the shapes."""
    from onnx import TensorProto, helper

    node = helper.make_node
    take_row = {
        "gather": [node("Gather", ["edge_index", "one"], ["row"], axis=0)],
        "slice": [node("Slice", ["edge_index", "one_1d", "two_1d", "zero_1d"], ["row_2d"]),
                  node("Squeeze", ["row_2d", "zero_1d"], ["row"])],
        "split": [node("Split", ["edge_index"], ["row_0", "row_2d"], axis=0, num_outputs=2),
                  node("Squeeze", ["row_2d", "zero_1d"], ["row"])],
        "slice_edges": [node("Slice", ["edge_index", "zero_1d", "two_1d", "one_1d"], ["first_edges"]),  # [2, 2]
                        node("Gather", ["first_edges", "one"], ["row"], axis=0)],
    }[take]
    nodes = [*take_row,
             node("Gather", ["edge_index", "zero"], ["source"], axis=0),
             node("Gather", ["X", "source"], ["messages"], axis=0),
             node("Reshape", ["row", "column_shape"], ["column"], allowzero=1),
             node("Shape", ["edge_index"], ["edges"], start=target_axis, end=target_axis + 1),
             node("Concat", ["edges", "width"], ["target"], axis=0),
             node("Expand", ["column", "target"], ["indices"]),
             node("Shape", ["X"], ["rows"], start=0, end=1),
             node("Concat", ["rows", "width"], ["zeros_shape"], axis=0),
             node("ConstantOfShape", ["zeros_shape"], ["zeros"]),
             node("ScatterElements", ["zeros", "indices", "messages"], ["out"], name="aggregate", axis=0,
                  reduction="add")]
    model = make(nodes, [info("X", TensorProto.FLOAT, [None, F]), info("edge_index", TensorProto.INT64, [None, None])],
                 [info("out", TensorProto.FLOAT, [None, F])],
                 [const("zero", np.array(0, np.int64)), const("one", np.array(1, np.int64)),
                  const("zero_1d", np.array([0], np.int64)), const("one_1d", np.array([1], np.int64)),
                  const("two_1d", np.array([2], np.int64)), const("column_shape", np.array([-1, 1], np.int64)),
                  const("width", np.array([F], np.int64))])
    for value in [*model.graph.input, *model.graph.output]:
        for dim in value.type.tensor_type.shape.dim:
            dim.Clear()
    return model


@pytest.mark.parametrize("take", ["gather", "slice", "split"])
def test_an_index_taken_from_edge_index_is_proved_to_cover_every_column(take):
    """Catches: deciding by one node pattern (before: an AttributeError on Concat(Shape(edge_index, 1, 2), [F])).
    The row of edge_index [2, E] by Gather, Slice + Squeeze or Split + Squeeze, the Expand's rows from
    Shape(edge_index, 1, 2): proved E = the index's length, rewritten and right. Taken from edge_index's dimension
    0 instead (2 rows of indices, whatever E is), nothing proves it: refused, one line naming the node."""
    from onnx_path.rewrite import rewrite_model

    model = edge_row_model(take)
    result = rewrite_model(model)
    assert [scatter.kind for scatter in result.scatters] == ["fill"]
    rng = np.random.default_rng(4)
    round_trip(model, result.model, {"X": rng.standard_normal((6, F)).astype(np.float32),
                                     "edge_index": rng.integers(0, 5, (2, 9)).astype(np.int64)})
    with pytest.raises(InputError, match=r"^node aggregate \(ScatterElements\): could not prove that its indices "
                                         r"indices \(Expand, .*\) repeat the index row .* over every column"):
        rewrite_model(edge_row_model(take, target_axis=0))


def test_an_index_row_sliced_along_the_edge_axis_is_not_proved_to_cover_every_column():
    """Catches: a Slice along edge_index's edge axis (its first 2 edges) taken to keep that dimension E, so the
    Expand to [E, F] seems to repeat the row over every column: accepted, then failing at run time. Nothing
    proves it: refused in one line naming the node."""
    from onnx_path.rewrite import rewrite_model

    with pytest.raises(InputError, match=r"^node aggregate \(ScatterElements\)"):
        rewrite_model(edge_row_model("slice_edges"))


@pytest.mark.parametrize("column", ["unsqueeze", "raw"])
def test_a_one_dimensional_index_add_into_a_graph_input_goes_in_place_as_rows(column):
    """w [N].index_add_(0, idx, weights [E]) (ScatterND over Unsqueeze(idx, [1])): the plugin adds rows [N, 1]
    into w's own buffer (the output aliases w) and the round trip agrees. ScatterND over an index not built so
    (idx itself, which ONNX reads as [E] coordinates of a 1-D tensor) is refused in one line, not a traceback."""
    from onnx import TensorProto, helper

    from onnx_path.rewrite import rewrite_model

    nodes = [helper.make_node("Unsqueeze", ["idx", "axes"], ["col"])] if column == "unsqueeze" else \
        [helper.make_node("Identity", ["idx"], ["col"])]
    nodes.append(helper.make_node("ScatterND", ["w", "col", "weights"], ["w_out"], name="degree", reduction="add"))
    model = make(nodes, [info("w", TensorProto.FLOAT, ["N"]), info("weights", TensorProto.FLOAT, ["E"]),
                         info("idx", TensorProto.INT64, ["E"])], [info("w_out", TensorProto.FLOAT, ["N"])],
                 [const("axes", np.array([1], np.int64))])
    if column == "raw":
        with pytest.raises(InputError, match=r"^node degree \(ScatterND\): its indices col .* are not Unsqueeze"):
            rewrite_model(model)
        return
    for plugin in ("python", "aot"):
        result = rewrite_model(model, plugin)
        assert result.aliases == {"w_out": "w"}
        round_trip(model, result.model, {"w": np.arange(5, dtype=np.float32), "weights": np.full(8, 0.5, np.float32),
                                         "idx": np.array([0, 1, 1, 3, 3, 3, 0, 1])})


@pytest.mark.parametrize("w_dims", [[8, 3, 4], ["N", "M", 4]])
def test_a_fill_shaped_like_the_tail_of_a_tensor_bounds_its_index_by_that_dimension_not_the_rows(w_dims):
    """out = zeros(W.shape[1:]).index_add(0, idx, src) with W [8, 3, 4]: idx indexes 3 rows (W's dimension 1),
    never W's 8: inputs made up for it stay below 3 (a bound of 8 would make the engine write past the state),
    and a given 3 is refused."""
    from onnx import TensorProto, helper

    from onnx_path.inputs import check_onnx_inputs, make_onnx_inputs
    from onnx_path.rewrite import model_io, rewrite_model

    node = helper.make_node
    nodes = [node("Shape", ["W"], ["tail"], start=1),
             node("ConstantOfShape", ["tail"], ["zeros"], value=helper.make_tensor("z", TensorProto.FLOAT, [1], [0.0])),
             node("Unsqueeze", ["idx", "axes"], ["column"]),
             node("ScatterND", ["zeros", "column", "src"], ["out"], name="add", reduction="add")]
    model = make(nodes, [info("W", TensorProto.FLOAT, w_dims), info("src", TensorProto.FLOAT, ["E", 4]),
                         info("idx", TensorProto.INT64, ["E"])],
                 [info("out", TensorProto.FLOAT, [None, 4])], [const("axes", np.array([1], np.int64))])
    result = rewrite_model(model)
    specs, _ = model_io(result.model)
    made = make_onnx_inputs(specs, {"W": (8, 3, 4), "src": (50, 4), "idx": (50,)}, result.index_bounds, seed=1)
    assert made["idx"].min() >= 0 and made["idx"].max() == 2  # 50 draws from 3 rows
    round_trip(model, result.model, made)
    with pytest.raises(InputError, match="3"):
        check_onnx_inputs(specs, dict(made, idx=np.full(50, 3)), result.index_bounds, "the inputs")


@pytest.mark.parametrize("plugin", ["python", "aot"])
def test_a_fill_that_is_also_a_graph_output_is_not_the_buffer_the_plugin_writes(plugin):
    """Catches: zeros returned by the model AND added into taken as the plugin's in-place state (the engine's
    zeros output would hold the sums). The plugin writes into a fresh fill: no buffer a plugin node writes in
    place (node_aliases) is a graph output, and the round trip agrees."""
    from onnx import TensorProto, helper

    from onnx_path.nodes import node_aliases
    from onnx_path.rewrite import rewrite_model

    node = helper.make_node
    nodes = [node("Shape", ["X"], ["rows"], start=0, end=1),
             node("Concat", ["rows", "width"], ["zeros_shape"], axis=0),
             node("ConstantOfShape", ["zeros_shape"], ["zeros"],
                  value=helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0])),
             node("Unsqueeze", ["idx", "axes"], ["column"]),
             node("ScatterND", ["zeros", "column", "src"], ["out"], name="aggregate", reduction="add")]
    model = make(nodes, [info("X", TensorProto.FLOAT, ["N", F]), info("src", TensorProto.FLOAT, ["E", F]),
                         info("idx", TensorProto.INT64, ["E"])],
                 [info("out", TensorProto.FLOAT, ["N", F]), info("zeros", TensorProto.FLOAT, ["N", F])],
                 [const("axes", np.array([1], np.int64)), const("width", np.array([F], np.int64))])
    result = rewrite_model(model, plugin)
    outputs = {value.name for value in result.model.graph.output}
    written = [node.input[into] for node in result.model.graph.node if node.domain == "aliased_io"
               for into in node_aliases(node.domain, node.op_type).values()]
    assert written and not outputs & set(written)
    round_trip(model, result.model, feeds())
