"""The torch side of each example: eager torch runs the user's implementation and equals the float64 reference;
torch.onnx.export(dynamo=True) with dynamic sizes writes ONE custom node per call (domain op.namespace, op_type
op.name) with no hand-written translation; misuse (a view as the mutated argument, an update the export drops)
is one line. CPU only (tests/inplace/test_own_op_gpu.py: the same on the GPU)."""

import numpy as np
import pytest

from inplace.checks import InplaceOpError
from tests.support.own_ops import EXAMPLES, example_inputs, exported_model, torch_module

torch = pytest.importorskip("torch", reason="torch is needed for the torch op (requirements-onnx.txt)")


def eager(name, inputs):
    module = torch_module(name)
    tensors = [torch.from_numpy(inputs[tensor.name].copy()) for tensor in EXAMPLES[name].op.inputs]
    with torch.no_grad():
        return [value.numpy() for value in module(*tensors)]


def reference(name, inputs):
    op = EXAMPLES[name].op
    return op.reference(*(inputs[tensor.name].copy() for tensor in op.inputs))


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@pytest.mark.parametrize("seed", [0, 1])
def test_eager_torch_equals_the_float64_reference(name, seed):
    inputs = example_inputs(name, seed)
    got, expected = eager(name, inputs), reference(name, inputs)
    assert len(got) == len(expected) == len(EXAMPLES[name].outputs)
    for value, want in zip(got, expected):
        np.testing.assert_allclose(value.astype(np.float64), want, rtol=1e-6, atol=1e-6)


def test_the_mutated_argument_changes_in_place_and_the_op_returns_none():
    inputs = example_inputs("ring", 3, rows=6, batch=9)
    buffer, pos, rows = (torch.from_numpy(inputs[name].copy()) for name in ("buffer", "pos", "rows"))
    address = buffer.data_ptr()
    assert torch.ops.examples.ring_write_(buffer, pos, rows) is None
    expected_buffer, expected_pos = reference("ring", inputs)
    assert buffer.data_ptr() == address
    np.testing.assert_array_equal(buffer.numpy(), expected_buffer.astype(np.float32))
    assert pos.tolist() == expected_pos.tolist()  # 9 rows into 6 slots: the last 6 written, pos advanced by 9


def test_a_view_as_the_mutated_argument_is_refused_in_one_line():
    inputs = example_inputs("ema")
    state = torch.from_numpy(inputs["state"])
    rest = [torch.from_numpy(inputs[name]) for name in ("idx", "rows", "alpha")]
    with pytest.raises(InplaceOpError, match=r"^examples::ema_rows_: mutates state, which is a view of another tensor"):
        torch.ops.examples.ema_rows_(state[:20], *rest)


def test_a_dtype_the_kernel_does_not_take_is_refused_in_one_line():
    inputs = example_inputs("accumulate")
    args = [torch.from_numpy(inputs[name]) for name in ("state", "idx", "delta")]
    with pytest.raises(InplaceOpError, match=r"^examples::accumulate_rows_: state is float64; the kernel takes float32$"):
        torch.ops.examples.accumulate_rows_(args[0].double(), *args[1:])


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_export_writes_one_custom_node_per_call_with_dynamic_sizes(name, tmp_path_factory):
    import onnx

    from inplace.registry import MODULES_KEY

    path = exported_model(name, tmp_path_factory)
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    op = EXAMPLES[name].op
    nodes = [node for node in model.graph.node if node.domain == op.namespace]
    assert [(node.op_type, len(node.input), len(node.output)) for node in nodes] == [
        (op.name, len(op.inputs), len(op.output_names()))]
    assert [value.name for value in model.graph.output] == list(EXAMPLES[name].outputs)
    assert list(nodes[0].output) == list(EXAMPLES[name].outputs)  # the state's new value IS the model's output
    rows = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert rows.dim_param and not rows.dim_value  # dynamic
    assert {entry.key: entry.value for entry in model.metadata_props}[MODULES_KEY] == EXAMPLES[name].module


def test_an_export_that_drops_the_update_is_refused_in_one_line(tmp_path):
    from export.export_onnx import quiet_exporter
    from inplace.torch_op import export_onnx

    class ReturnsRows(torch.nn.Module):
        def forward(self, state, idx, rows, alpha):
            torch.ops.examples.ema_rows_(state, idx, rows, alpha)
            return rows * 2  # the updated state is not returned: the exporter drops the update

    inputs = example_inputs("ema")
    args = tuple(torch.from_numpy(inputs[name]) for name in ("state", "idx", "rows", "alpha"))
    with quiet_exporter(), pytest.raises(InplaceOpError, match=r"^examples::ema_rows_: 1 of its 1 calls are not in the "
                                                              r"ONNX model: .*return the updated state"):
        export_onnx(ReturnsRows().eval(), args, tmp_path / "dropped.onnx", [EXAMPLES["ema"].op])
    assert not (tmp_path / "dropped.onnx").exists()


def test_a_registration_may_name_the_node_the_functional_form_and_check_calls_itself(tmp_path):
    """An op exported as an existing plugin's node (its op_type and fixed attributes), with a functional form of
    its own name and a call check of its own messages (what the project's scatter_add_ needs)."""
    import dataclasses

    import onnx

    import inplace.examples.accumulate as accumulate
    from export.export_onnx import quiet_exporter
    from inplace.registry import CustomNode, find, register
    from inplace.torch_op import export_onnx

    def check(values, eager):
        if values["state"].shape[1] != values["delta"].shape[1]:
            raise InplaceOpError("renamed::norms_: delta must have the state's features")

    op = register(dataclasses.replace(accumulate.OP, namespace="renamed", name="norms_"),
                  eager=accumulate.accumulate_rows_, functional="norms", check=check,
                  node=CustomNode("NormsPlugin", {"plugin_version": "1", "mode": 2}))
    assert find("renamed", "NormsPlugin").op is op and find("renamed", "norms_") is None
    inputs = example_inputs("accumulate")
    args = [torch.from_numpy(inputs[name]) for name in ("state", "idx", "delta")]
    with pytest.raises(InplaceOpError, match=r"^renamed::norms_: delta must have the state's features$"):
        torch.ops.renamed.norms_(args[0], args[1], args[2][:, :2])
    assert len(torch.ops.renamed.norms(*args)) == 2  # the functional form: new state, norms

    class Model(torch.nn.Module):
        def forward(self, state, idx, delta):
            return state, torch.ops.renamed.norms_(state, idx, delta)

    with quiet_exporter():
        path = export_onnx(Model().eval(), tuple(args), tmp_path / "renamed.onnx", [op])
    nodes = [node for node in onnx.load(str(path)).graph.node if node.domain == "renamed"]
    assert [node.op_type for node in nodes] == ["NormsPlugin"]
    assert {a.name: onnx.helper.get_attribute_value(a) for a in nodes[0].attribute} == {"plugin_version": b"1",
                                                                                         "mode": 2}
