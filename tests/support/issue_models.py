"""Small models of one's own written with onnx.helper, as a user would export them (ScatterND(add) of
index_add): for the tests of odd inputs and misuse (tests/cli/test_cli_onnx_misuse.py)."""

from typing import Any


def index_add_model(path: Any, states: dict[str, str] | None = None, dtype: str = "float32", features: int = 2,
                    index: str = "idx", dims: dict[str, Any] | None = None, opset: int = 18) -> str:
    """Each state S [rows, F] of `states` ({name: its rows dimension}) -> S_out = S.index_add(0, idx, src), one
    src [E, F] and one idx [E] shared by all; `dims` overrides an input's shape ({name: shape}). Returns the
    path."""
    from onnx import TensorProto, helper, save

    states = states or {"state": "N"}
    element = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}[dtype]
    dims = dims or {}
    nodes = [helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("axes", TensorProto.INT64, [1], [1])),
             helper.make_node("Unsqueeze", [index, "axes"], ["column"])]
    inputs, outputs = [], []
    for name, rows in states.items():
        nodes.append(helper.make_node("ScatterND", [name, "column", "src"], [f"{name}_out"], name=f"add_{name}",
                                      reduction="add"))
        inputs.append(helper.make_tensor_value_info(name, element, dims.get(name, [rows, features])))
        outputs.append(helper.make_tensor_value_info(f"{name}_out", element, dims.get(name, [rows, features])))
    inputs += [helper.make_tensor_value_info("src", element, dims.get("src", ["E", features])),
               helper.make_tensor_value_info(index, TensorProto.INT64, dims.get(index, ["E"]))]
    graph = helper.make_graph(nodes, "own", inputs, outputs)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return str(path)
