"""export/ops.py: torch.ops.aliased_io.scatter_add_ (the in-place custom-op convention) in eager torch, and
through torch.onnx.export(dynamo=True, custom_translation_table=export.ops.custom_translation_table) with the
real exporter in this session: one plugin node written directly, onnx.checker's full check, and the exported
model's values against eager torch on seeded inputs (ONNX Runtime, the node replaced by its standard ONNX
equivalent). The engine built from these models is in tests/onnx/test_e2e_onnx_ops.py, marked tensorrt.
"""

import importlib.util

import numpy as np
import pytest

from tests.support.onnx_helpers import (
    NUM_FEATURES,
    OPS_MODELS,
    needs_export,
    ops_inputs,
    ops_model,
    ops_module,
    ops_program,
    sample_model,
    with_standard_scatter,
)

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed "
                                "(pip install -r requirements-onnx.txt)")

OPS_CASES = [("state", "fp32"), ("state", "fp16"), ("layers", "fp32")]


def test_the_ops_are_registered_with_their_mutation():
    """Importing export.ops registers scatter_add_ (mutates state, returns nothing), its functional form, the
    Functionalize kernel that links them, and the table entry for the functional form."""
    import torch

    import export.ops as ops

    schema = torch.ops.aliased_io.scatter_add_.default._schema
    assert [argument.name for argument in schema.arguments] == ["state", "src", "index"]
    assert [bool(argument.alias_info and argument.alias_info.is_write) for argument in schema.arguments] == \
        [True, False, False]
    assert len(schema.returns) == 0
    functional = torch.ops.aliased_io.scatter_add.default._schema
    assert not any(argument.alias_info for argument in functional.arguments) and len(functional.returns) == 1
    from torch.fx.experimental.proxy_tensor import make_fx

    def step(state, src, index):
        torch.ops.aliased_io.scatter_add_(state, src, index)
        return state

    traced = make_fx(torch.func.functionalize(step))(torch.zeros(4, 2), torch.ones(3, 2), torch.tensor([0, 1, 1]))
    calls = [node.target for node in traced.graph.nodes if node.op == "call_function"]
    assert torch.ops.aliased_io.scatter_add.default in calls  # the Functionalize kernel: the functional form
    assert torch.ops.aliased_io.scatter_add_.default not in calls
    assert list(ops.custom_translation_table) == [torch.ops.aliased_io.scatter_add.default]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_eager_scatter_add_adds_in_place_and_repeated_indices_accumulate(precision):
    import torch

    import export.ops  # noqa: F401

    inputs = ops_inputs("state", precision, num_nodes=4, num_edges=9, seed=1)
    inputs["idx"] = np.array([0, 3, 3, 3, 1, 0, 3, 1, 3], np.int64)  # row 3 five times, row 2 never
    state = torch.from_numpy(inputs["X"].copy())
    address = state.data_ptr()
    assert torch.ops.aliased_io.scatter_add_(state, torch.from_numpy(inputs["src"]), torch.from_numpy(inputs["idx"])) \
        is None
    expected = inputs["X"].astype(np.float64)
    np.add.at(expected, inputs["idx"], inputs["src"].astype(np.float64))
    assert state.data_ptr() == address
    tolerance = 1e-2 if precision == "fp16" else 1e-6
    np.testing.assert_allclose(state.numpy().astype(np.float64), expected, rtol=tolerance, atol=tolerance)
    np.testing.assert_array_equal(state.numpy()[2], inputs["X"][2])  # never indexed: untouched
    updated = torch.ops.aliased_io.scatter_add(torch.from_numpy(inputs["X"]), torch.from_numpy(inputs["src"]),
                                               torch.from_numpy(inputs["idx"]))
    np.testing.assert_array_equal(updated.numpy(), state.numpy())  # the functional form: the same values


@pytest.mark.parametrize("change, message", [
    ({"idx": np.array([0, 1, 1], np.int32)}, "index must be a 1-D int64 tensor [E], got int32 [3]"),
    ({"idx": np.array([[0, 1, 1]], np.int64)}, "index must be a 1-D int64 tensor [E], got int64 [1, 3]"),
    ({"X": np.zeros((4, 2))}, "state must be a 2-D float32 or float16 tensor [N, F], got float64 [4, 2]"),
    ({"X": np.zeros(4, np.float32)}, "state must be a 2-D float32 or float16 tensor [N, F], got float32 [4]"),
    ({"src": np.zeros((3, 2), np.float16)}, "src must be [E, F] of the state's dtype and F (float32 [4, 2]), got "
                                            "float16 [3, 2]"),
    ({"src": np.zeros((3, 5), np.float32)}, "src must be [E, F] of the state's dtype and F (float32 [4, 2]), got "
                                            "float32 [3, 5]"),
    ({"src": np.zeros((2, 2), np.float32)}, "src has 2 rows and index 3 entries; they must agree"),
])
def test_bad_arguments_are_one_line_naming_the_argument_and_the_value(change, message):
    import torch

    import export.ops  # noqa: F401

    arrays = {"X": np.zeros((4, 2), np.float32), "src": np.ones((3, 2), np.float32), "idx": np.array([0, 1, 1])}
    arrays.update(change)
    state = torch.from_numpy(arrays["X"])
    with pytest.raises((TypeError, ValueError, RuntimeError)) as raised:
        torch.ops.aliased_io.scatter_add_(state, torch.from_numpy(arrays["src"]), torch.from_numpy(arrays["idx"]))
    assert str(raised.value) == f"aliased_io::scatter_add_: {message}"
    assert not state.any()  # nothing added


def test_misuse_torch_would_refuse_is_one_line_and_adds_nothing():
    """A leaf that requires grad (as torch's own index_add_ refuses it), indices outside the state's rows (the
    plugin adds row idx[e] unchecked), and an argument that is not a tensor: one line each, nothing added."""
    import torch

    import export.ops  # noqa: F401

    leaf = torch.zeros(4, 2, requires_grad=True)
    cases = [
        ((leaf, torch.ones(2, 2), torch.tensor([0, 1])), RuntimeError, "leaf tensor that requires grad"),
        ((torch.zeros(0, 2), torch.ones(3, 2), torch.tensor([0, 1, 3])), RuntimeError, "the 0 rows of state"),
        ((torch.zeros(4, 2), torch.ones(3, 2), torch.tensor([0, 4, 1])), RuntimeError, "index 4 at position 1"),
        ((torch.zeros(4, 2), torch.ones(1, 2), torch.tensor([-1])), RuntimeError, "index -1 at position 0"),
        ((torch.zeros(4, 2), None, torch.tensor([0])), TypeError, "src must be a tensor, got NoneType"),
    ]
    for args, error, message in cases:
        with pytest.raises(error) as raised:
            torch.ops.aliased_io.scatter_add_(*args)
        assert message in str(raised.value) and len(str(raised.value).splitlines()) == 1
        assert not args[0].detach().any()
    with torch.no_grad():  # where torch's own in-place ops take a leaf
        torch.ops.aliased_io.scatter_add_(leaf, torch.ones(2, 2), torch.tensor([0, 1]))
    assert leaf.detach()[:2].eq(1).all()


def test_the_legacy_exporter_refuses_the_op_instead_of_dropping_the_update(tmp_path):
    """torch.onnx.export(..., dynamo=False) traces the module, which would record no update (the model written
    was one Identity): the trace stops with one line naming the exporter to use, and no file is written."""
    import warnings

    import torch

    inputs = ops_inputs("state", "fp32", 5, 7, seed=0)
    args = tuple(torch.from_numpy(inputs[name]) for name in ("X", "src", "idx"))
    path = tmp_path / "legacy.onnx"
    with warnings.catch_warnings(), pytest.raises(RuntimeError) as raised:
        warnings.simplefilter("ignore")
        torch.onnx.export(ops_module("state"), args, str(path), dynamo=False, input_names=["X", "src", "idx"],
                          output_names=["X_out"])
    assert "dynamo=True" in str(raised.value) and len(str(raised.value).splitlines()) == 1
    assert not path.exists()


@needs_export
def test_an_export_with_a_bad_dtype_fails_with_the_ops_message(tmp_path):
    """The fake checks what the eager op checks: torch.onnx.export of a model passing an int32 index fails, and
    the error names the argument and the value (the exporter keeps the message in its summary)."""
    import torch

    from export.ops import custom_translation_table
    from tests.support.onnx_helpers import export_module

    inputs = ops_inputs("state", "fp32", 5, 7, seed=0)
    args = (torch.from_numpy(inputs["X"]), torch.from_numpy(inputs["src"]), torch.from_numpy(inputs["idx"]).int())
    with pytest.raises(Exception) as raised:
        export_module(tmp_path / "bad.onnx", ops_module("state"), args, ["X", "src", "idx"], ["X_out"],
                      custom_translation_table=custom_translation_table)
    assert "aliased_io::scatter_add_: index must be a 1-D int64 tensor [E], got int32 [7]" in str(raised.value)
    assert not (tmp_path / "bad.onnx").exists()


def attributes(node):
    import onnx

    return {attribute.name: (onnx.helper.get_attribute_value(attribute),
                             onnx.AttributeProto.AttributeType.Name(attribute.type)) for attribute in node.attribute}


@needs_export
@pytest.mark.parametrize("name, precision", OPS_CASES)
def test_the_export_writes_one_plugin_node_in_the_aliased_io_domain(tmp_path_factory, name, precision):
    """Exactly one ScatterAddInPlace in domain aliased_io (declared, version 1) on X, src, idx, with the
    creator's key and compute_counts=0; no Scatter node; N and E dynamic; onnx.checker's full check passes
    (in this process, where no schema of the node is registered with onnx)."""
    import onnx

    path = ops_model(tmp_path_factory, name, precision)
    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path))
    plugin_nodes = [node for node in model.graph.node if node.op_type == "ScatterAddInPlace"]
    assert len(plugin_nodes) == 1
    (node,) = plugin_nodes
    assert node.domain == "aliased_io" and list(node.input) == ["X", "src", "idx"] and len(node.output) == 1
    assert attributes(node) == {"plugin_version": (b"1", "STRING"), "plugin_namespace": (b"", "STRING"),
                                "compute_counts": (0, "INT")}
    assert not [node.op_type for node in model.graph.node if node.op_type.startswith("Scatter")
                and node.op_type != "ScatterAddInPlace"]
    assert {(opset.domain, opset.version) for opset in model.opset_import if opset.domain} == {("aliased_io", 1)}
    inputs, outputs = OPS_MODELS[name]
    assert [value.name for value in model.graph.input] == list(inputs)
    assert [value.name for value in model.graph.output] == list(outputs)
    assert node.output[0] == "X_out"  # the updated state is the model's first output, no copy between
    x, src, idx = (value.type.tensor_type for value in model.graph.input[:3])
    elem = onnx.TensorProto.FLOAT16 if precision == "fp16" else onnx.TensorProto.FLOAT
    assert x.elem_type == src.elem_type == elem and idx.elem_type == onnx.TensorProto.INT64
    assert x.shape.dim[0].dim_param and src.shape.dim[0].dim_param == idx.shape.dim[0].dim_param  # N, E dynamic
    assert x.shape.dim[1].dim_value == NUM_FEATURES
    if name == "layers":  # the rest of the network reads the plugin's output, not X
        assert [consumer.op_type for consumer in model.graph.node if "X" in consumer.input] == ["ScatterAddInPlace"]


def eager_outputs(name: str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The eager module's outputs on `feeds` (a copy of X, which it must update in place and return first)."""
    import torch

    state = torch.from_numpy(feeds["X"].copy())
    with torch.no_grad():
        returned = ops_module(name)(state, *(torch.from_numpy(feeds[input_name]) for input_name in OPS_MODELS[name][0][1:]))
    returned = returned if isinstance(returned, tuple) else (returned,)
    assert returned[0] is state and not np.array_equal(state.numpy(), feeds["X"])  # X itself, updated
    return [value.numpy() for value in returned]


@needs_export
@pytest.mark.parametrize("name, precision", OPS_CASES)
def test_the_exported_model_computes_what_eager_torch_does(tmp_path_factory, name, precision):
    """Seeded inputs of other sizes than the export's example (N=9, E=23, repeated indices): eager torch (the op
    updates X in place, the module returns it) = ONNX Runtime on the exported model with the plugin node
    replaced by its standard equivalent (for float16, summed in float32 and rounded once)."""
    import onnx
    import onnxruntime

    from reference.compare import compare

    model = with_standard_scatter(onnx.load(str(ops_model(tmp_path_factory, name, precision))))
    feeds = ops_inputs(name, precision, num_nodes=9, num_edges=23, seed=7)
    assert len(set(feeds["idx"].tolist())) < len(feeds["idx"])
    eager = eager_outputs(name, feeds)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outputs = dict(zip(OPS_MODELS[name][1], session.run(list(OPS_MODELS[name][1]), feeds)))
    for output, expected in zip(OPS_MODELS[name][1], eager):
        assert outputs[output].dtype == expected.dtype
        comparison = compare(outputs[output], expected.astype(np.float64), precision)
        assert comparison.ok, f"{output}: {comparison.summary()}"


@needs_export
def test_the_translation_writes_the_node_the_rewrite_writes(tmp_path_factory):
    """The node of export.ops and the one onnx_path.rewrite makes from the exported sample state network
    (Python plugin) agree on domain, op_type and attributes: TensorRT's parser finds one creator for both."""
    import onnx

    from onnx_path.rewrite import load_model, rewrite_model

    (rewritten,) = [node for node in rewrite_model(load_model(sample_model(tmp_path_factory, "state", "fp32")),
                                                   "python").model.graph.node if node.op_type == "ScatterAddInPlace"]
    (ours,) = [node for node in onnx.load(str(ops_model(tmp_path_factory, "state"))).graph.node
               if node.op_type == "ScatterAddInPlace"]
    assert (ours.domain, attributes(ours)) == (rewritten.domain, attributes(rewritten))


@needs_export
@pytest.mark.parametrize("name, precision", OPS_CASES)
def test_the_rewrite_passes_the_model_through_and_its_cpu_run_matches_eager_torch(tmp_path_factory, name, precision):
    """rewrite_model keeps the exported plugin node (checked, nothing to rewrite) and reports X_out as X's memory;
    onnx_path.runtime.run_rewritten (the plugin node by its CPU reference, the rest in ONNX Runtime) gives
    what eager torch gives, on the seeded inputs of test_the_exported_model_computes_what_eager_torch_does."""
    from onnx_path.rewrite import load_model, rewrite_model
    from onnx_path.runtime import run_rewritten
    from reference.compare import compare

    result = rewrite_model(load_model(ops_model(tmp_path_factory, name, precision)), "python")
    assert [node.op_type for node in result.model.graph.node if node.domain] == ["ScatterAddInPlace"]
    assert result.aliases == {"X_out": "X"}
    feeds = ops_inputs(name, precision, num_nodes=9, num_edges=23, seed=7)
    outputs = run_rewritten(result.model, feeds)
    for output, expected in zip(OPS_MODELS[name][1], eager_outputs(name, feeds)):
        comparison = compare(outputs[output], expected.astype(np.float64), precision)
        assert comparison.ok, f"{output}: {comparison.summary()}"


@needs_export
def test_an_update_the_model_does_not_return_is_reported(tmp_path):
    """The exporter keeps only what forward returns: a model that updates X and returns something else has no
    plugin node, and check_updates_exported says so in one line naming X; the models that return X pass."""
    import torch

    from export.export_onnx import quiet_exporter
    from export.ops import check_updates_exported, custom_translation_table

    class UpdateNotReturned(torch.nn.Module):
        def forward(self, X, src, idx):
            torch.ops.aliased_io.scatter_add_(X, src, idx)
            return src * 2

    inputs = ops_inputs("state", "fp32", 5, 7, seed=0)
    with quiet_exporter():
        program = torch.onnx.export(UpdateNotReturned(), tuple(torch.from_numpy(array) for array in inputs.values()),
                                    dynamo=True, input_names=["X", "src", "idx"], verbose=False,
                                    custom_translation_table=custom_translation_table)
    assert not [node for node in program.model_proto.graph.node if node.op_type == "ScatterAddInPlace"]
    with pytest.raises(ValueError) as raised:
        check_updates_exported(program)
    assert str(raised.value) == ("1 of the 1 aliased_io::scatter_add_ updates (of X) are not in the ONNX model: "
                                 "torch.onnx.export keeps only what forward returns; return the updated state (or "
                                 "something computed from it)")
    for name in OPS_MODELS:
        check_updates_exported(ops_program(name))


@needs_export
def test_a_model_that_reads_the_state_before_the_update_is_reported():
    """forward reads X, then updates it: the exported Mul reads X beside the plugin node, which writes X in place
    in TensorRT, with nothing ordering the two; check_updates_exported names both in one line."""
    import torch

    from export.export_onnx import quiet_exporter
    from export.ops import check_updates_exported, custom_translation_table

    class ReadBeforeUpdate(torch.nn.Module):
        def forward(self, X, src, idx):
            before = X * 2
            torch.ops.aliased_io.scatter_add_(X, src, idx)
            return X + before

    inputs = ops_inputs("state", "fp32", 5, 7, seed=0)
    with quiet_exporter():
        program = torch.onnx.export(ReadBeforeUpdate(), tuple(torch.from_numpy(array) for array in inputs.values()),
                                    dynamo=True, input_names=["X", "src", "idx"], verbose=False,
                                    custom_translation_table=custom_translation_table)
    (plugin,) = [node for node in program.model_proto.graph.node if node.op_type == "ScatterAddInPlace"]
    (mul,) = [node for node in program.model_proto.graph.node if node.op_type == "Mul"]
    assert "X" in plugin.input and "X" in mul.input
    with pytest.raises(ValueError) as raised:
        check_updates_exported(program)
    assert str(raised.value) == (f"node {plugin.name} (ScatterAddInPlace) adds into X in place, but {mul.name} also "
                                 "read X, in an order the engine need not keep: read the state only after the update "
                                 "(through its result)")
