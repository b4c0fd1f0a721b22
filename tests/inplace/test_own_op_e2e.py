"""An in-place op of one's own from the exported model to a Python-free runtime. The `tensorrt` tests (full
TensorRT >= 10.16 with a GPU, and triton) build each example's engine through --onnx (TensorRT's ONNX parser,
the op's AOT plugins), run it --steps 3 with each mutated input's output bound at that input's address, validate
against torch eager and save the engine with its description; one runs through cpp/aliased_io_state. Without
TensorRT: cpp/aliased_io_state --plan reads the ring buffer's description (its two aliases, as --save_engine
writes them from the rewrite) and the dry run's files, and binds both states in place."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.own_ops import EXAMPLES, example_inputs, exported_model, need_triton

ROOT = Path(__file__).resolve().parents[2]
CLI = str(ROOT / "aliased_io_plugin.py")


def cli(*args):
    return subprocess.run([sys.executable, CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=900)


def inputs_file(tmp_path, name, seed=2):
    path = tmp_path / f"{name}.npz"
    np.savez(path, **example_inputs(name, seed, rows=5000, batch=300, features=5))
    return str(path)


@pytest.mark.tensorrt
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_example_builds_and_runs_its_engine_in_place(name, tmp_path, tmp_path_factory):
    pytest.importorskip("tensorrt.plugin", reason="the AOT plugins need TensorRT >= 10.16 (tensorrt.plugin)")
    need_triton(EXAMPLES[name])
    from common.engine_description import read_description

    model, engine = str(exported_model(name, tmp_path_factory)), tmp_path / f"{name}.engine"
    result = cli("--seed", "1", "--onnx", model, "--onnx_inputs", inputs_file(tmp_path, name), "--steps", "3",
                 "--validate", "--save_engine", str(engine))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Engine built from the rewritten {model} in " in result.stdout
    assert "Validation against reference successful!" in result.stdout
    op = EXAMPLES[name].op
    aliases = dict(zip(EXAMPLES[name].outputs, op.mutates))
    assert read_description(f"{engine}.desc").aliases == aliases


@pytest.mark.tensorrt
def test_the_ring_buffers_engine_runs_from_cpp_with_both_states_in_place(tmp_path, tmp_path_factory):
    pytest.importorskip("tensorrt.plugin", reason="the AOT plugins need TensorRT >= 10.16 (tensorrt.plugin)")
    from tests.cpp.test_cpp_state import installed_tensorrt_build, run_program

    program = installed_tensorrt_build(tmp_path)
    model, engine, saved = str(exported_model("ring", tmp_path_factory)), tmp_path / "ring.engine", tmp_path / "run"
    inputs = inputs_file(tmp_path, "ring")
    built = cli("--seed", "1", "--onnx", model, "--onnx_inputs", inputs, "--steps", "4", "--save_engine", str(engine))
    assert built.returncode == 0, built.stdout + built.stderr
    dry = cli("--dry-run", "--seed", "1", "--onnx", model, "--onnx_inputs", inputs, "--steps", "4", "--validate",
              "--save_outputs", str(saved))
    assert dry.returncode == 0, dry.stdout + dry.stderr
    result = run_program(program, f"--engine={engine}", f"--inputs={saved}/inputs", f"--expected={saved}/outputs")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "bound at input buffer's address" in result.stdout and "bound at input pos's address" in result.stdout
    assert "Validation against reference successful!" in result.stdout


def test_cpp_binds_both_ring_buffer_states_at_their_inputs_from_the_description(tmp_path, tmp_path_factory):
    pytest.importorskip("onnxruntime", reason="onnxruntime is needed for the dry run (requirements-onnx.txt)")
    import onnx

    from common.engine_description import TensorDescription, describe_engine, format_description
    from onnx_path.rewrite import model_io, rewrite_model
    from tests.cpp.test_cpp_state import build_against, run_program

    model = str(exported_model("ring", tmp_path_factory))
    saved = tmp_path / "run"
    import aliased_io_plugin

    status = aliased_io_plugin.main(["--dry-run", "--seed", "1", "--onnx", model, "--onnx_inputs",
                                     inputs_file(tmp_path, "ring"), "--steps", "3", "--validate", "--save_outputs",
                                     str(saved)])
    assert status == 0
    rewritten = rewrite_model(onnx.load(model))
    inputs, outputs = model_io(rewritten.model)

    def described(specs):
        return [TensorDescription(spec.name, str(spec.dtype), tuple(spec.shape)) for spec in specs]

    description = tmp_path / "ring.engine.desc"
    description.write_text(format_description(describe_engine(rewritten.plugin, described(inputs), described(outputs),
                                                              rewritten.aliases)))
    assert rewritten.aliases == {"buffer_out": "buffer", "pos_out": "pos"}
    program = build_against("11.1.0", tmp_path_factory)
    out = tmp_path / "out"
    result = run_program(program, "--plan", f"--description={description}", f"--inputs={saved}/inputs",
                         f"--save_outputs={out}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "output buffer_out float32 [rows,5]: bound at input buffer's address" in result.stdout
    assert "output pos_out int64 [1]: bound at input pos's address" in result.stdout
