"""onnx_path/rewrite.py on models the real exporter wrote in this session: the rewritten graphs (Python and
AOT plugin nodes), every refusal, loading, saving, ONNX Runtime, the sample's own network; and (marked
trt_bindings) the rewritten node against the real plugin creator and the AOT plugins' registered signatures."""

import inspect
import typing

import numpy as np
import pytest

from common.errors import InputError
from tests.support.onnx_helpers import (
    NETWORKS,
    NUM_CLASSES,
    NUM_FEATURES,
    PRECISIONS,
    REWRITE_MISSING,
    graph_inputs,
    needs_export,
    sample_model,
)

pytestmark = pytest.mark.skipif(REWRITE_MISSING is not None, reason=REWRITE_MISSING or "")

STATE_NAMES = ["X", "src", "idx"]


def attributes(node):
    import onnx

    return {attribute.name: onnx.helper.get_attribute_value(attribute) for attribute in node.attribute}


def attribute_types(node):
    import onnx

    return {attribute.name: onnx.AttributeProto.AttributeType.Name(attribute.type) for attribute in node.attribute}


def rewritten(tmp_path_factory, network, precision, plugin):
    from onnx_path.rewrite import load_model, rewrite_model

    return rewrite_model(load_model(sample_model(tmp_path_factory, network, precision)), plugin)


def producers(model):
    return {output: node for node in model.graph.node for output in node.output}


def consumers(model, tensor):
    return [node for node in model.graph.node if tensor in node.input]


# --- the Python plugin ---------------------------------------------------------------------------------------
@needs_export
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("network", NETWORKS)
def test_python_plugin_node_replaces_the_scatters(tmp_path_factory, network, precision):
    """One ScatterAddInPlace node on (X, src, idx), outputs the scatters' own tensors, no Scatter* and no index
    plumbing left, the rest of the graph and its inputs/outputs as exported."""
    from onnx_path.rewrite import load_model, model_io

    original = load_model(sample_model(tmp_path_factory, network, precision))
    result = rewritten(tmp_path_factory, network, precision, "python")
    model = result.model
    ops = [node.op_type for node in model.graph.node]
    tail = ["Cast", "Div", "Transpose", "MatMul", "Relu", "Softmax"] if network == "classifier" else []
    assert ops == ["ScatterAddInPlace", *tail]
    (plugin,) = [node for node in model.graph.node if node.op_type == "ScatterAddInPlace"]
    assert list(plugin.input) == STATE_NAMES and plugin.domain == "aliased_io"
    assert attributes(plugin) == {"plugin_version": b"1", "plugin_namespace": b"",
                                  "compute_counts": int(network == "classifier")}
    assert attribute_types(plugin) == {"plugin_version": "STRING", "plugin_namespace": "STRING", "compute_counts": "INT"}
    scatters = [node for node in original.graph.node if node.op_type == "ScatterND"]
    assert list(plugin.output) == [scatter.output[0] for scatter in scatters]  # (aggregated[, counts]) kept by name
    if network == "classifier":
        aggregated, counts = plugin.output
        assert [node.op_type for node in consumers(model, aggregated)] == ["Div"]
        assert [node.op_type for node in consumers(model, counts)] == ["Cast"]
    else:
        assert list(plugin.output) == ["X_out"]
    assert model_io(model) == model_io(original)
    import onnx

    onnx.checker.check_model(model, full_check=True)  # the plugin node's domain is declared (version 1)
    assert [(opset.domain, opset.version) for opset in model.opset_import if opset.domain] == [("aliased_io", 1)]
    (scatter,) = result.scatters
    assert (scatter.form, scatter.state, scatter.source, scatter.index) == ("index_add", "X", "src", "idx")
    assert scatter.plugin_nodes == (plugin.name,) and scatter.node == scatters[0].name
    assert (scatter.counts is not None) is (network == "classifier")
    assert result.summary() == [f"{scatter.node} (index_add into X"
                                + (f", counts {scatter.counts} from {scatter.counts_node}" if scatter.counts else "")
                                + f") -> {plugin.name} (python plugin, in place)"] + (
        [] if network == "classifier" else ["output X_out is input X's memory (bind it at X's address)"])


@needs_export
def test_rewrite_leaves_the_input_model_unchanged(tmp_path_factory):
    from onnx_path.rewrite import load_model, rewrite_model

    model = load_model(sample_model(tmp_path_factory, "classifier", "fp32"))
    before = model.SerializeToString()
    rewrite_model(model, "python")
    rewrite_model(model, "aot")
    assert model.SerializeToString() == before


# --- the AOT plugins -----------------------------------------------------------------------------------------
AOT_EXPECTED = {  # (network, precision) -> the chain's step nodes in order, with their inputs by role
    ("classifier", "fp32"): [("add_rows_counts", ["X", "src", "idx", "counts"])],
    ("state", "fp32"): [("add_rows", ["X", "src", "idx"])],
    ("classifier", "fp16"): [("add_into_table_counts", ["X", "src", "idx", "keys", "values", "counts"]),
                             ("round_table", ["X", "idx", "table_keys", "table_values"])],
    ("state", "fp16"): [("add_into_table", ["X", "src", "idx", "keys", "values"]),
                        ("round_table", ["X", "idx", "table_keys", "table_values"])],
}
FILLS = {"counts": "ConstantOfShape", "keys": "ConstantOfShape", "values": "ConstantOfShape"}


@needs_export
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("network", NETWORKS)
def test_aot_plugin_nodes_replace_the_scatters(tmp_path_factory, network, precision):
    """The steps of plugin/scatter_add_op.py's chains in their domain with aot=1, wired as network/aot_layers.py
    wires them; their filled scratch inputs are ConstantOfShape nodes; no Scatter* left; outputs kept."""
    from onnx_path.rewrite import load_model, model_io

    original = load_model(sample_model(tmp_path_factory, network, precision))
    model = rewritten(tmp_path_factory, network, precision, "aot").model
    made_by = producers(model)
    plugins = [node for node in model.graph.node if node.domain == "aliased_io"]
    assert [node.op_type for node in plugins] == [op for op, _ in AOT_EXPECTED[(network, precision)]]
    assert not [node for node in model.graph.node if node.op_type in ("ScatterND", "ScatterElements", "Scatter")]
    for node, (_, roles) in zip(plugins, AOT_EXPECTED[(network, precision)]):
        assert attributes(node) == {"plugin_namespace": b"aliased_io", "plugin_version": b"1", "aot": 1}
        for tensor, role in zip(node.input, roles, strict=True):
            if role in STATE_NAMES:
                assert tensor == role
            elif role in FILLS:
                assert made_by[tensor].op_type == FILLS[role]
            else:  # the table written by the first plugin, read by apply_table
                assert made_by[tensor] is plugins[0]
    scatters = [node.output[0] for node in original.graph.node if node.op_type == "ScatterND"]
    assert plugins[-1].output[0] == scatters[0]  # aggregated: the state scatter's own output
    if network == "classifier":
        assert plugins[0].output[-1] == scatters[1]  # counts: the counts scatter's
    assert model_io(model) == model_io(original)
    assert any(opset.domain == "aliased_io" for opset in model.opset_import)
    import onnx

    onnx.checker.check_model(model, full_check=True)  # custom-domain nodes pass; the standard ones are well formed


@needs_export
@pytest.mark.parametrize("network", NETWORKS)
def test_aot_fills_compute_what_the_kernels_expect(tmp_path_factory, network):
    """The fill nodes run in ONNX Runtime (cut out of the rewritten float16 model): the table chain's scratch, keys
    int32 -1 [K] and values float32 zeros [C, F] (C, K: plugin/scatter_add_op.py's table_capacity and table_keys
    of N and E), and with counts int64 zeros [N, 1]."""
    import onnx
    import onnxruntime

    from plugin.scatter_add_op import table_capacity, table_keys

    model = rewritten(tmp_path_factory, network, "fp16", "aot").model
    table = next(node for node in model.graph.node if node.op_type.startswith("add_into_table"))
    fills = list(table.input[3:])
    cut = onnx.utils.Extractor(model).extract_model(STATE_NAMES, fills)
    session = onnxruntime.InferenceSession(cut.SerializeToString(), providers=["CPUExecutionProvider"])
    for nodes, edges in ((7, 19), (20, 20)):  # one slot per node (no keys: C = N)
        feeds, _ = graph_inputs(num_nodes=nodes, num_edges=edges, precision="fp16")
        needed = [tensor.name for tensor in session.get_inputs()]
        values = dict(zip(fills, session.run(fills, {name: feeds[name] for name in needed})))
        sizes = {"N": nodes, "E": edges, "F": NUM_FEATURES}
        capacity, keys_size = table_capacity().evaluate(sizes), table_keys().evaluate(sizes)
        keys, table_values = values[fills[0]], values[fills[1]]
        assert keys.dtype == np.int32 and keys.shape == (keys_size,) and (keys == -1).all()
        assert table_values.dtype == np.float32 and table_values.shape == (capacity, NUM_FEATURES)
        assert not table_values.any()
        if network == "classifier":
            counts = values[fills[2]]
            assert counts.dtype == np.int64 and counts.shape == (nodes, 1) and not counts.any()
        else:
            assert len(fills) == 2


# --- other forms the rewrite takes ---------------------------------------------------------------------------
HEAD = ["Div", "Transpose", "MatMul", "Relu", "Softmax"]


@needs_export
@pytest.mark.parametrize("plugin", ["python", "aot"])
@pytest.mark.parametrize("name, exported, python_rewrite", [
    ("scatter_add_state", ["Shape", "Unsqueeze", "Concat", "Expand", "ScatterElements"], ["ScatterAddInPlace"]),
    ("scatter_add_classifier",
     ["Shape", "Shape", "Unsqueeze", "Concat", "Expand", "ScatterElements", "Shape", "Expand", "Unsqueeze", "Concat",
      "Expand", "ScatterElements", "Cast", *HEAD], ["ScatterAddInPlace", "Cast", *HEAD]),
    ("float_counts",  # no Cast exported (float counts); the rewrite casts the plugin's int64 counts
     ["Shape", "Shape", "Unsqueeze", "ScatterND", "Concat", "Expand", "Concat", "Expand", "ScatterND", *HEAD],
     ["ScatterAddInPlace", "Cast", *HEAD]),
    ("index_put", ["Unsqueeze", "ScatterND"], ["ScatterAddInPlace"]),
])
def test_other_exported_forms_are_rewritten(tmp_path_factory, name, exported, python_rewrite, plugin):
    """scatter_add (ScatterElements) for the state and for the counts, float counts, index_put: the exporter's
    nodes as listed, and after the rewrite the plugin on X, src, idx and no Scatter*; ONNX Runtime on the
    original agrees with the reference."""
    from onnx_path.patterns import SCATTER_OPS
    from onnx_path.rewrite import model_io, rewrite_model
    from onnx_path.runtime import run_onnxruntime
    from reference.compare import compare
    from tests.support.onnx_models import zoo_model

    classes = name in ("scatter_add_classifier", "float_counts")
    original = zoo_model(tmp_path_factory, name)
    assert [node.op_type for node in original.graph.node] == exported
    result = rewrite_model(original, plugin)
    model = result.model
    assert not [node for node in model.graph.node if node.op_type in SCATTER_OPS]
    if plugin == "python":
        assert [node.op_type for node in model.graph.node] == python_rewrite
        plugin_node = model.graph.node[0]
        assert list(plugin_node.input) == STATE_NAMES
        assert attributes(plugin_node)["compute_counts"] == int(classes)
    else:
        assert [node.op_type for node in model.graph.node if node.domain] == (
            ["add_rows_counts"] if classes else ["add_rows"])
    (scatter,) = result.scatters
    assert scatter.form == ("scatter_add" if name.startswith("scatter_add") else "index_add")
    assert model_io(model) == model_io(original)
    if name == "float_counts":  # the plugin's int64 counts cast to float32 where the model had float counts
        counts_cast = next(node for node in model.graph.node if node.output[0] == scatter.counts)
        assert counts_cast.op_type == "Cast" and attributes(counts_cast) == {"to": 1}
    feeds, expected = graph_inputs()
    names = STATE_NAMES + (["W"] if classes else [])
    run = run_onnxruntime(original, {name: feeds[name] for name in names})
    if classes:
        assert compare(run.outputs["softmax"], expected["softmax"], "fp32").ok
    else:
        np.testing.assert_allclose(run.outputs["X_out"], expected["aggregated"], rtol=1e-6)


# --- refusals (tests/onnx/test_onnx_rewrite_models.py has those of the exporter's models) ---------------------------
@needs_export
def test_a_second_counts_scatter_is_refused(tmp_path_factory):
    """Hand-edited: the exporter merges equal subgraphs, so a second counts scatter (a copy of the first) is made here."""
    import onnx

    from onnx_path.rewrite import load_model, rewrite_model

    model = load_model(sample_model(tmp_path_factory, "classifier", "fp32"))
    counts = [node for node in model.graph.node if node.op_type == "ScatterND"][1]
    twin = onnx.NodeProto()
    twin.CopyFrom(counts)
    twin.name, twin.output[0] = "twin_counts", "twin_counts_out"
    model.graph.node.append(twin)
    model.graph.output.append(onnx.helper.make_tensor_value_info("twin_counts_out", onnx.TensorProto.INT64, ["N", 1]))
    with pytest.raises(InputError, match=r"node twin_counts \(ScatterND\): a second counts scatter for X \(the first "):
        rewrite_model(model)


@needs_export
def test_a_shape_consumer_of_x_is_allowed_a_value_consumer_is_not(tmp_path_factory):
    """Shape(X) reads X's shape only (the counts' zeros are shaped from it); any other reader of X is refused.
    Hand-edited: a Shape node of X made a graph output, then an Identity of X."""
    import onnx

    from onnx_path.rewrite import load_model, rewrite_model

    model = load_model(sample_model(tmp_path_factory, "state", "fp32"))
    model.graph.node.append(onnx.helper.make_node("Shape", ["X"], ["x_shape"], name="x_shape"))
    model.graph.output.append(onnx.helper.make_tensor_value_info("x_shape", onnx.TensorProto.INT64, [2]))
    result = rewrite_model(model)
    assert sorted(node.op_type for node in result.model.graph.node) == ["ScatterAddInPlace", "Shape"]
    model.graph.node.append(onnx.helper.make_node("Identity", ["X"], ["x_copy"], name="x_copy"))
    model.graph.output.append(onnx.helper.make_tensor_value_info("x_copy", onnx.TensorProto.FLOAT, ["N", 3]))
    with pytest.raises(InputError, match=r"its data X \(a graph input\) has other consumers \(x_copy\)"):
        rewrite_model(model)


@needs_export
def test_a_scatter_in_a_subgraph_is_refused_and_unnamed_nodes_are_named(tmp_path_factory):
    """Hand-edited (torch.cond would export a local function, not this): the exported state graph as both
    branches of an If; then the exported scatter without a name."""
    import onnx
    from onnx import helper

    from onnx_path.rewrite import load_model, rewrite_model

    model = load_model(sample_model(tmp_path_factory, "state", "fp32"))
    branch = helper.make_graph(list(model.graph.node), "branch", [], list(model.graph.output),
                               list(model.graph.initializer))
    wrapped = onnx.ModelProto()
    wrapped.CopyFrom(model)
    del wrapped.graph.node[:]
    wrapped.graph.node.append(helper.make_node("If", ["flag"], ["X_out"], name="choose", then_branch=branch,
                                               else_branch=branch))
    wrapped.graph.input.append(helper.make_tensor_value_info("flag", onnx.TensorProto.BOOL, []))
    with pytest.raises(InputError, match=r"node node_ScatterND_\d+ in choose: a scatter inside a subgraph"):
        rewrite_model(wrapped)
    unnamed = onnx.ModelProto()
    unnamed.CopyFrom(model)
    for node in unnamed.graph.node:
        node.name = ""
    result = rewrite_model(unnamed)
    assert result.scatters[0].node == "ScatterND_1" and result.model.graph.node[0].name == "ScatterND_1/ScatterAddInPlace"


def test_an_unknown_plugin_is_refused():
    import onnx

    from onnx_path.rewrite import rewrite_model

    with pytest.raises(InputError, match="plugin must be one of python, aot, got 'cpp'"):
        rewrite_model(onnx.ModelProto(), "cpp")


# --- load, save, ONNX Runtime, the sample's own network ------------------------------------------------------
def test_load_model_refuses_bad_files_in_one_line(tmp_path):
    import onnx

    from onnx_path.rewrite import load_model

    text = tmp_path / "notes.txt"
    text.write_text("not a model\n" * 10)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    invalid = tmp_path / "invalid.onnx"  # parses, but onnx.checker rejects it: a node reads an undefined tensor
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["nowhere"], ["y"])], "g", [],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
    onnx.save(onnx.helper.make_model(graph), invalid)
    cases = {tmp_path / "missing.onnx": "file not found", tmp_path: "not a regular file",
             text: "not an ONNX model", empty: "not an ONNX model (no operator set or no nodes)",
             invalid: "onnx.checker rejects the model: "}
    for path, message in cases.items():
        with pytest.raises(InputError) as raised:
            load_model(path)
        assert message in str(raised.value) and str(path) in str(raised.value) and "\n" not in str(raised.value)


@needs_export
def test_onnxruntime_refuses_bad_feeds_and_the_rewritten_model(tmp_path_factory):
    from onnx_path.rewrite import load_model, rewrite_model
    from onnx_path.runtime import run_onnxruntime

    model = load_model(sample_model(tmp_path_factory, "state", "fp32"))
    feeds, _ = graph_inputs()
    with pytest.raises(InputError, match=r"missing \['idx'\], unknown \['W'\]; the model's inputs are"):
        run_onnxruntime(model, {"X": feeds["X"], "src": feeds["src"], "W": feeds["W"]})
    with pytest.raises(InputError, match="ONNX Runtime could not load the model: ") as raised:
        run_onnxruntime(rewrite_model(model).model, {name: feeds[name] for name in STATE_NAMES})
    assert "\n" not in str(raised.value)
    with pytest.raises(InputError, match="ONNX Runtime could not run the model: ") as raised:
        run_onnxruntime(model, {"X": feeds["X"], "src": feeds["src"][:, :2], "idx": feeds["idx"]})  # F = 2, not 3
    assert "\n" not in str(raised.value)


@needs_export
@pytest.mark.parametrize("precision", PRECISIONS)
def test_one_session_runs_the_state_update_in_steps(tmp_path_factory, precision):
    """OnnxRuntimeSession: X_out fed back as X over three batches = the float64 sum of all of them."""
    from onnx_path.rewrite import load_model
    from onnx_path.runtime import OnnxRuntimeSession

    session = OnnxRuntimeSession(load_model(sample_model(tmp_path_factory, "state", precision)))
    assert session.float32_copy is (precision == "fp16") and session.output_names == ["X_out"]
    state, expected = None, None
    for seed in range(3):
        feeds, _ = graph_inputs(seed=seed, precision=precision, state=False)
        rows = np.zeros((6, NUM_FEATURES))
        np.add.at(rows, feeds["idx"], feeds["src"].astype(np.float64))
        state = feeds["X"] if state is None else state
        expected = rows if expected is None else expected + rows
        state = session.run({"X": state, "src": feeds["src"], "idx": feeds["idx"]})["X_out"]
    np.testing.assert_allclose(state, expected, rtol=1e-6, atol=1e-6)


def test_float32_copy_raises_every_float16_tensor():
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from onnx_path.runtime import float32_copy

    weights = numpy_helper.from_array(np.array([0.5, 2.0], np.float16), "w")
    nodes = [helper.make_node("Cast", ["x"], ["x16"], to=TensorProto.FLOAT16),
             helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array([1.5], np.float16))),
             helper.make_node("Mul", ["x16", "w"], ["m"]), helper.make_node("Add", ["m", "c"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2])], [weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    copy = float32_copy(model)
    onnx.checker.check_model(copy)
    assert model.graph.initializer[0].data_type == TensorProto.FLOAT16  # the original is untouched
    import onnxruntime

    session = onnxruntime.InferenceSession(copy.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": np.array([1.0, 3.0], np.float32)})
    assert y.dtype == np.float32 and y.tolist() == [2.0, 7.5]


@needs_export
def test_sample_network_needs_the_samples_names_and_shapes(tmp_path_factory):
    import onnx

    from onnx_path.rewrite import load_model, sample_network

    model = load_model(sample_model(tmp_path_factory, "classifier", "fp16"))
    found = sample_network(model)
    assert found is not None
    assert (found.kind, found.precision, found.num_features, found.num_classes) == ("classifier", "fp16", 3, 4)
    renamed = onnx.ModelProto()
    renamed.CopyFrom(model)
    renamed.graph.output[0].name = "probabilities"
    assert sample_network(renamed) is None
    wrong_classes = onnx.ModelProto()
    wrong_classes.CopyFrom(model)
    wrong_classes.graph.output[0].type.tensor_type.shape.dim[0].dim_value = NUM_CLASSES + 1
    assert sample_network(wrong_classes) is None
    state = sample_network(load_model(sample_model(tmp_path_factory, "state", "fp32")))
    assert state is not None and (state.kind, state.precision, state.num_classes) == ("state update", "fp32", None)


# --- against TensorRT's real Python types --------------------------------------------------------------------
@needs_export
@pytest.mark.trt_standin
@pytest.mark.trt_bindings
@pytest.mark.parametrize("network", NETWORKS)
def test_the_rewritten_node_creates_the_plugin_through_the_real_creator(trt, tmp_path_factory, network):
    """What TensorRT's ONNX parser does with the node (onnx-tensorrt's FallbackPluginImporter): find the creator
    by op_type, plugin_version and plugin_namespace, turn each attribute the creator's field_names list into a
    field (an INT attribute -> one INT32 value), then create_plugin through TensorRT's C++ entry point. The
    plugin has the node's number of outputs and compute_counts."""
    import onnx

    from plugin.scatter_add_plugin import PLUGIN_NAME, ScatterAddPlugin, ScatterAddPluginCreator

    node = next(n for n in rewritten(tmp_path_factory, network, "fp32", "python").model.graph.node
                if n.op_type == PLUGIN_NAME)
    creator = ScatterAddPluginCreator()
    attrs = {attribute.name: attribute for attribute in node.attribute}
    key = (creator.name, creator.plugin_version, creator.plugin_namespace)
    assert (node.op_type, attrs["plugin_version"].s.decode(), attrs["plugin_namespace"].s.decode()) == key
    fields = []
    assert "compute_counts" in attrs
    for advertised in creator.field_names:
        if advertised.name not in attrs:  # the parser passes only the attributes the node has
            continue
        attribute = attrs[advertised.name]
        assert attribute.type == onnx.AttributeProto.INT and advertised.type == trt.PluginFieldType.INT32
        fields.append(trt.PluginField(advertised.name, np.array([attribute.i], np.int32), trt.PluginFieldType.INT32))
    plugin = trt.IPluginCreatorV3One.create_plugin(creator, node.name, trt.PluginFieldCollection(fields),
                                                   trt.TensorRTPhase.BUILD)
    assert isinstance(plugin, ScatterAddPlugin)
    assert plugin.num_outputs == len(node.output) and plugin.compute_counts is (network == "classifier")
    assert plugin.get_aliased_input(0) == 0  # output 0 (the scatter's output) is X's memory


@needs_export
@pytest.mark.trt_bindings
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("network", NETWORKS)
def test_the_aot_nodes_match_the_registered_aot_plugins(tmp_path_factory, network, precision):
    """Each AOT node names a plugin the project's ops registered (namespace::op_type, inplace.registry's
    register_aot_plugins, as --onnx --plugin aot registers them before parsing) and has as many inputs and outputs
    as its registered descriptor function takes and returns (TensorRT >= 10.16's tensorrt.plugin)."""
    from common.errors import MissingDependencyError
    from inplace.registry import register_aot_plugins
    from plugin.inplace_ops import PROJECT_OPS  # noqa: F401 (registers them)
    from tests.support.trt_plugin_internals import qdp_registry

    try:
        ids = register_aot_plugins()
    except MissingDependencyError as error:
        pytest.skip(str(error))
    model = rewritten(tmp_path_factory, network, precision, "aot").model
    for node in (n for n in model.graph.node if n.domain):
        attrs = {attribute.name: attribute for attribute in node.attribute}
        plugin_id = f"{attrs['plugin_namespace'].s.decode()}::{node.op_type}"
        assert node.domain == "aliased_io" and plugin_id in ids
        signature = inspect.signature(qdp_registry()[plugin_id].register_func)
        assert len(node.input) == len(signature.parameters)
        returned = signature.return_annotation
        assert len(node.output) == (len(typing.get_args(returned)) if typing.get_origin(returned) is tuple else 1)
