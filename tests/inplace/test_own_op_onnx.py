"""--onnx with a model holding an in-place op of one's own: the custom node rewritten into the op's chain of AOT
plugin nodes, `--dry-run --onnx M --onnx_inputs I --save_onnx O --validate` proving the rewritten model in ONNX
Runtime (the step nodes by the op's reference) against the original (its custom node by torch eager), O passing
onnx.checker's full check, and the outputs that are a mutated input's memory named for the engine's bindings."""

import numpy as np
import pytest

from tests.support.own_ops import EXAMPLES, example_inputs, exported_model

pytest.importorskip("onnxruntime", reason="onnxruntime is needed for the dry run (requirements-onnx.txt)")
pytest.importorskip("onnx_graphsurgeon", reason="onnx-graphsurgeon is needed for the rewrite (requirements-onnx.txt)")


def dry_run(tmp_path, model, name, *extra, seed=0):
    import aliased_io_plugin as cli

    inputs = tmp_path / f"{name}_inputs.npz"
    np.savez(inputs, **example_inputs(name, seed))
    saved = tmp_path / f"{name}_rewritten.onnx"
    status = cli.main(["--dry-run", "--onnx", str(model), "--onnx_inputs", str(inputs), "--save_onnx", str(saved),
                       "--validate", "--seed", "1", *extra])
    return status, saved


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_dry_run_proves_the_rewritten_model_against_torch_eager(name, tmp_path, tmp_path_factory, capsys):
    import onnx

    example = EXAMPLES[name]
    op = example.op
    status, saved = dry_run(tmp_path, exported_model(name, tmp_path_factory), name)
    out = capsys.readouterr().out
    assert status == 0, out
    assert "Validation against reference successful!" in out
    for output in example.outputs:
        assert f"Output {output} against ONNX Runtime (" in out and f"its {op.namespace}::{op.name} node(s) by torch " \
            "eager (CPU), same inputs)" in out
    values = {tensor.name: tensor.name for tensor in op.inputs}
    for state, output in zip(op.mutates, example.outputs):
        assert f"output {output} is input {values[state]}'s memory (bind it at {state}'s address)" in out
    rewritten = onnx.load(str(saved))
    onnx.checker.check_model(rewritten, full_check=True)
    steps = [node for node in rewritten.graph.node if node.domain == op.namespace]
    assert [node.op_type for node in steps] == [step.plugin for step in op.chains[0].steps]
    attributes = {attribute.name: onnx.helper.get_attribute_value(attribute) for attribute in steps[0].attribute}
    assert attributes == {"plugin_namespace": op.namespace.encode(), "plugin_version": b"1", "aot": 1}
    assert list(steps[-1].output) == list(example.outputs)


def test_the_dry_run_keeps_the_states_in_place_over_steps(tmp_path, tmp_path_factory, capsys):
    status, _ = dry_run(tmp_path, exported_model("ring", tmp_path_factory), "ring", "--steps", "4")
    out = capsys.readouterr().out
    assert status == 0, out
    assert "--steps: 4 runs; the states (buffer, pos) stay in place" in out
    assert "Validation against reference successful!" in out


def test_a_wrong_reference_fails_the_validation(tmp_path, tmp_path_factory, capsys, monkeypatch):
    """The proof can fail: a reference that forgets (1 - alpha) disagrees with torch eager."""
    import dataclasses

    import inplace.examples.ema as ema
    from inplace import registry

    def wrong(state, idx, rows, alpha):
        new = state.astype(np.float64)
        new[idx] = alpha[0] * new[idx] + rows
        return (new,)

    entry = registry.find("examples", "ema_rows_")
    monkeypatch.setitem(registry.OPS, "examples::ema_rows_",
                        dataclasses.replace(entry, op=dataclasses.replace(ema.OP, reference=wrong)))
    status, _ = dry_run(tmp_path, exported_model("ema", tmp_path_factory), "ema")
    out = capsys.readouterr().out
    assert status != 0 and "Validation against reference successful!" not in out


def test_a_mutated_input_read_by_another_node_is_refused_in_one_line(tmp_path_factory):
    import onnx

    from common.errors import InputError
    from onnx_path.rewrite import rewrite_model

    model = onnx.load(str(exported_model("ema", tmp_path_factory)))
    reader = onnx.helper.make_node("Neg", ["state"], ["negated"], name="reads_state")
    model.graph.node.insert(0, reader)
    model.graph.output.append(onnx.helper.make_tensor_value_info("negated", onnx.TensorProto.FLOAT, None))
    with pytest.raises(InputError, match=r"examples::ema_rows_\) updates state in place, but reads_state also read it"):
        rewrite_model(model)


def test_a_model_naming_a_module_that_is_not_there_is_refused_in_one_line(tmp_path_factory):
    import onnx

    from common.errors import InputError
    from inplace.registry import MODULES_KEY
    from onnx_path.rewrite import rewrite_model

    model = onnx.load(str(exported_model("ema", tmp_path_factory)))
    for entry in model.metadata_props:
        if entry.key == MODULES_KEY:
            entry.value = "my_missing_ops.ema"
    with pytest.raises(InputError, match=r"module my_missing_ops.ema .* which is not importable"):
        rewrite_model(model)
