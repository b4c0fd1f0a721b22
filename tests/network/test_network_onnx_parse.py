"""network.onnx_parse.populate_from_onnx through polygraphy on TensorRT-RTX's ONNX parser and builder (the CPU
stand-in, POLYGRAPHY_USE_TENSORRT_RTX=1): a plugin-free model with the sample's state-update tensors builds over
the sample's profile with the aliasing preview feature, and a model the parser refuses is one line naming the
node. The plugin nodes themselves need the full TensorRT (tests/onnx/test_e2e_onnx.py): TensorRT-RTX aborts the
process when the parser creates a Python plugin.
"""

import json
import textwrap

import pytest

from network.onnx_parse import parser_error_line
from tests.support.onnx_helpers import NUM_FEATURES, REWRITE_MISSING
from tests.network.test_network_builder import run_on_tensorrt_rtx

PARSE_AND_BUILD = textwrap.dedent(
    """
    import json, sys
    import tensorrt_rtx_bindings
    sys.modules["tensorrt"] = tensorrt_rtx_bindings
    from common.errors import InputError
    from common.plugin_kind import PluginKind
    from network.onnx_parse import OnnxSource, populate_from_onnx
    from network.engine import build_engine_bytes, default_profile_bounds, sample_profile_shapes

    path, num_features = sys.argv[1], int(sys.argv[2])
    source = OnnxSource(open(path, "rb").read(), path, PluginKind.PYTHON)
    inputs = {}

    def populate(trt, network):
        parser = populate_from_onnx(trt, network, source)
        for i in range(network.num_inputs):
            tensor = network.get_input(i)
            inputs[tensor.name] = [str(tensor.dtype), list(tensor.shape)]
        inputs["strongly typed"] = network.get_flag(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
        return parser

    try:
        data, _ = build_engine_bytes(populate, sample_profile_shapes(default_profile_bounds(5, 7), num_features))
        print(json.dumps({"engine_bytes": len(data), "inputs": inputs}))
    except InputError as error:
        print(json.dumps({"error": str(error)}))
    """
)


def build_with_tensorrt_rtx(tmp_path, model_path) -> tuple[dict, str]:
    """(what PARSE_AND_BUILD printed, its stderr), in a subprocess: polygraphy picks its TensorRT once."""
    result = run_on_tensorrt_rtx(tmp_path, PARSE_AND_BUILD, str(model_path), str(NUM_FEATURES))
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


def state_io_model(path, scatter: bool, reduction: str = "add", state: str = "X") -> str:
    """`state` [N, F], src [E, F], idx [E] int64 -> X_out [N, F] (the sample's state-update tensors when `state`
    is X): with scatter, X_out = ScatterND(X, idx[:, None], src, `reduction`) as torch.onnx.export writes
    index_add (before the rewrite); else a plugin-free stand-in, X_out = X + sum over the edges of src[idx].
    Written with onnx.helper; returns the path."""
    from onnx import TensorProto, helper, save

    axes = helper.make_node("Constant", [], ["axes"], name="axes",
                            value=helper.make_tensor("axes_value", TensorProto.INT64, [1], [1 if scatter else 0]))
    if scatter:
        nodes = [axes, helper.make_node("Unsqueeze", ["idx", "axes"], ["index"], name="unsqueeze_idx"),
                 helper.make_node("ScatterND", [state, "index", "src"], ["X_out"], name="index_add_into_X",
                                  reduction=reduction)]
    else:
        nodes = [axes, helper.make_node("Gather", ["src", "idx"], ["gathered"], name="gather", axis=0),
                 helper.make_node("ReduceSum", ["gathered", "axes"], ["summed"], name="sum", keepdims=1),
                 helper.make_node("Add", [state, "summed"], ["X_out"], name="add")]
    graph = helper.make_graph(nodes, "state_io", [
        helper.make_tensor_value_info(state, TensorProto.FLOAT, ["N", NUM_FEATURES]),
        helper.make_tensor_value_info("src", TensorProto.FLOAT, ["E", NUM_FEATURES]),
        helper.make_tensor_value_info("idx", TensorProto.INT64, ["E"]),
    ], [helper.make_tensor_value_info("X_out", TensorProto.FLOAT, ["N", NUM_FEATURES])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return str(path)


@pytest.mark.skipif(REWRITE_MISSING is not None, reason=REWRITE_MISSING or "")
def test_a_parsed_model_builds_strongly_typed_over_the_sample_profile(tmp_path):
    model = tmp_path / "plugin_free.onnx"
    state_io_model(model, scatter=False)
    printed, stderr = build_with_tensorrt_rtx(tmp_path, model)
    assert printed.get("engine_bytes", 0) > 0, (printed, stderr)
    assert printed["inputs"] == {"X": ["DataType.FLOAT", [-1, NUM_FEATURES]],
                                 "src": ["DataType.FLOAT", [-1, NUM_FEATURES]],
                                 "idx": ["DataType.INT64", [-1]], "strongly typed": True}


@pytest.mark.skipif(REWRITE_MISSING is not None, reason=REWRITE_MISSING or "")
def test_a_refused_model_is_one_line_naming_the_node_and_the_parser_logs_nothing(tmp_path):
    """TensorRT-RTX's parser refuses the exported index_add (ScatterND with a reduction) itself: what the rewrite
    replaces. The refusal names the node and its operator; the parser's own error lines stay out of the log."""
    model = tmp_path / "exported.onnx"
    state_io_model(model, scatter=True)
    printed, stderr = build_with_tensorrt_rtx(tmp_path, model)
    assert printed["error"].startswith(f"{model}: TensorRT's ONNX parser refused node index_add_into_X (ScatterND): ")
    assert "\n" not in printed["error"]
    assert "ModelImporter" not in stderr and "[E]" not in stderr, stderr


def test_parser_error_line_without_an_error_object():
    assert parser_error_line("m.onnx", None) == ("m.onnx: TensorRT's ONNX parser could not parse the model "
                                                 "(-v shows TensorRT's log)")

    class Unnamed:
        def desc(self):
            return "\n  first line\nsecond line"

        def node_name(self):
            return ""

        def node(self):
            return 7

        def node_operator(self):
            return ""

    assert parser_error_line("m.onnx", Unnamed()) == "m.onnx: TensorRT's ONNX parser refused node #7: first line"
