"""export/: the sample's torch modules and python3 -m export.export_onnx, with the real exporter of the installed
torch (models written in this session); the exported models in ONNX Runtime against the float64 reference."""

import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from tests.support.onnx_helpers import (
    NETWORKS,
    NUM_CLASSES,
    NUM_FEATURES,
    PRECISIONS,
    SCRIPT_SAMPLE,
    graph_inputs,
    needs_export,
    sample_model,
    script_export,
)

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]

# What torch.onnx.export(dynamo=True) of torch 2.13 writes for the sample (docs/onnx.md shows them with their
# wiring): index_add_ as Unsqueeze + ScatterND(add); the counts as ones [E, 1] added into zeros [N, 1], both
# Expand of a scalar over Concat(Shape(..)[0:1], [1]), sharing the state's Unsqueeze(idx).
EXPORTED_OPS = {
    "classifier": ["Shape", "Shape", "Unsqueeze", "ScatterND", "Concat", "Expand", "Concat", "Expand", "ScatterND",
                   "Cast", "Div", "Transpose", "MatMul", "Relu", "Softmax"],
    "state": ["Unsqueeze", "ScatterND"],
}


@needs_export
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("network", NETWORKS)
def test_export_script_writes_the_sample_network(tmp_path_factory, network, precision):
    """Inputs X, src, idx (W), output softmax / X_out, N and E dynamic, F and C fixed; the node list as observed."""
    import onnx

    from onnx_path.rewrite import load_model, model_io, sample_network

    model = load_model(sample_model(tmp_path_factory, network, precision))
    inputs, outputs = model_io(model)
    dtype = np.dtype(np.float16 if precision == "fp16" else np.float32)
    names = [spec.name for spec in inputs]
    assert names == (["X", "src", "idx", "W"] if network == "classifier" else ["X", "src", "idx"])
    x, src, idx = inputs[:3]
    assert x.dtype == src.dtype == dtype and idx.dtype == np.int64
    assert isinstance(x.shape[0], str) and x.shape[1] == NUM_FEATURES  # N dynamic (its symbol), F fixed
    assert isinstance(src.shape[0], str) and src.shape[0] == idx.shape[0] != x.shape[0]  # E dynamic, one symbol
    (output,) = outputs
    if network == "classifier":
        assert inputs[3].shape == (NUM_CLASSES, NUM_FEATURES) and inputs[3].dtype == dtype
        assert output.name == "softmax" and output.shape == (NUM_CLASSES, x.shape[0]) and output.dtype == dtype
    else:
        assert output.name == "X_out" and output.shape == x.shape and output.dtype == dtype
    assert [node.op_type for node in model.graph.node] == EXPORTED_OPS[network]
    assert {opset.domain for opset in model.opset_import} == {""}
    assert onnx.defs.onnx_opset_version() >= model.opset_import[0].version >= 18
    found = sample_network(model)
    assert found is not None and found.precision == precision and found.num_features == NUM_FEATURES
    assert found.num_classes == (NUM_CLASSES if network == "classifier" else None)


@needs_export
def test_the_exported_counts_are_shaped_from_x_and_share_the_index(tmp_path_factory):
    """What the rewrite's counts rule relies on, in the exporter's own output: zeros [N, 1] from Shape(X)[0:1],
    ones added at Unsqueeze(idx), the same Unsqueeze output as the state's ScatterND."""
    from onnx_path.rewrite import load_model

    model = load_model(sample_model(tmp_path_factory, "classifier", "fp32"))
    nodes = {output: node for node in model.graph.node for output in node.output}
    state, counts = [node for node in model.graph.node if node.op_type == "ScatterND"]
    assert state.input[0] == "X" and state.input[2] == "src" and counts.input[1] == state.input[1]
    assert nodes[state.input[1]].op_type == "Unsqueeze" and nodes[state.input[1]].input[0] == "idx"
    zeros = nodes[counts.input[0]]
    assert zeros.op_type == "Expand"
    concat = nodes[zeros.input[1]]
    shape = nodes[concat.input[0]]
    assert concat.op_type == "Concat" and shape.op_type == "Shape" and shape.input == ["X"]
    assert {attribute.name: attribute.i for attribute in shape.attribute} == {"start": 0, "end": 1}
    cast = next(node for node in model.graph.node if node.op_type == "Cast")
    assert cast.input == [counts.output[0]]  # true division: counts cast to X's dtype, then Div


@needs_export
@pytest.mark.parametrize("precision", PRECISIONS)
def test_onnxruntime_runs_the_exported_classifier_like_the_reference(tmp_path_factory, precision):
    """ONNX Runtime on the exported (original) classifier = the float64 reference of the same inputs; float16
    runs as the model's float32 copy (ORT's CPU provider has no float16 scatter-add)."""
    from onnx_path.rewrite import load_model
    from onnx_path.runtime import run_onnxruntime
    from reference.compare import compare

    model = load_model(sample_model(tmp_path_factory, "classifier", precision))
    feeds, expected = graph_inputs(precision=precision)
    run = run_onnxruntime(model, feeds)
    assert run.float32_copy is (precision == "fp16")
    comparison = compare(run.outputs["softmax"], expected["softmax"], "fp32")
    assert comparison.ok, comparison.summary()
    assert not np.allclose(run.outputs["softmax"], graph_inputs(precision=precision, state=False)[1]["softmax"],
                           atol=1e-3)  # the state matters: ORT added into X, not into zeros


@needs_export
@pytest.mark.parametrize("precision", PRECISIONS)
def test_onnxruntime_runs_the_exported_state_update_like_the_reference(tmp_path_factory, precision):
    from onnx_path.rewrite import load_model
    from onnx_path.runtime import run_onnxruntime

    model = load_model(sample_model(tmp_path_factory, "state", precision))
    feeds, expected = graph_inputs(precision=precision)
    feeds.pop("W")
    run = run_onnxruntime(model, feeds)
    np.testing.assert_allclose(run.outputs["X_out"], expected["aggregated"], rtol=1e-6, atol=1e-6)


@needs_export
def test_the_torch_modules_compute_the_reference():
    """The modules themselves (eager, float64): the classifier updates X in place and returns the softmax."""
    import torch

    from export.sample_modules import SampleClassifier, SampleStateUpdate, in_degree

    feeds, expected = graph_inputs()
    tensors = {name: torch.from_numpy(value.astype(np.float64) if value.dtype != np.int64 else value)
               for name, value in feeds.items()}
    state = tensors["X"].clone()
    softmax = SampleClassifier()(state, tensors["src"], tensors["idx"], tensors["W"])
    np.testing.assert_allclose(softmax.numpy(), expected["softmax"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state.numpy(), expected["aggregated"], rtol=1e-12)  # in place
    counts = in_degree(state, tensors["idx"])
    assert counts.dtype == torch.int64 and counts.numpy().tolist() == expected["counts"].astype(int).tolist()
    updated = SampleStateUpdate()(tensors["X"], tensors["src"], tensors["idx"])
    np.testing.assert_allclose(updated.numpy(), expected["aggregated"], rtol=1e-12)


def run_script(*argv: str, check_torch: bool = False) -> subprocess.CompletedProcess:
    """python3 -m export.export_onnx ARGV in a fresh process; with check_torch, prints whether torch was imported."""
    code = ("import sys\nfrom export.export_onnx import main\nstatus = main(sys.argv[1:])\n"
            + ("print('torch imported' if 'torch' in sys.modules else 'torch not imported')\n" if check_torch else "")
            + "sys.exit(status)")
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("argv, message", [
    (["--network", "graph", "--out", "m.onnx"], "argument --network: invalid choice: 'graph'"),
    (["--network", "state", "--out", "m.onnx", "--num_features", "0"], "--num_features must be an integer from 1"),
    (["--network", "classifier", "--out", "m.onnx", "--num_classes", "x"], "--num_classes must be an integer from 1"),
    (["--network", "state", "--out", "m.onnx", "--num_classes", "3"], "--num_classes is for --network classifier"),
    (["--network", "state", "--out", "no/such/folder/m.onnx"], "the folder no/such/folder does not exist"),
    (["--network", "state", "--out", "aliased_io_plugin.py"], "--out aliased_io_plugin.py: a Python file's name (.py)"),
    (["--network", "state", "--out", "export/export_onnx.py"], "--out export/export_onnx.py is this script"),
    (["--network", "state", "--out", "/proc/x.onnx"], "--out /proc/x.onnx: cannot write there: the folder /proc"),
    (["--network", "state", "--out", "."], "--out .: is a folder"),
    (["--network", "state", "--precision", "bf16", "--out", "m.onnx"], "argument --precision: invalid choice"),
    (["--network", "state"], "the following arguments are required: --out"),
])
def test_bad_arguments_are_one_line_and_exit_2_before_torch(argv, message, tmp_path):
    result = run_script(*argv, check_torch=True)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python3 -m export.export_onnx: error: ") and message in lines[0]
    assert result.stdout.strip() == "torch not imported"
    assert (ROOT / "aliased_io_plugin.py").read_bytes().startswith(b"#!/usr/bin/env python3")


def test_the_script_runs_from_another_folder(tmp_path):
    """python3 /path/to/export/export_onnx.py from any folder finds the project's modules (it puts the repository
    root on sys.path): --help works, and a refused --out is one line and exit 2, before torch."""
    script = str(ROOT / "export" / "export_onnx.py")
    shown = subprocess.run([sys.executable, script, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "--network" in shown.stdout, shown.stderr
    refused = subprocess.run([sys.executable, script, "--network", "state", "--out", "/proc/x.onnx"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "--out /proc/x.onnx: cannot write there" in refused.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_missing_exporter_is_one_line_and_exit_3(tmp_path, monkeypatch, capsys):
    """torch (or onnx, onnxscript) not importable: one line with the pip line, exit 3, nothing written."""
    import importlib.util

    from export import export_onnx

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name == "onnxscript" else real(name, *rest))
    out = tmp_path / "m.onnx"
    assert export_onnx.main(["--network", "state", "--out", str(out)]) == 3
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "onnxscript not installed" in line and "pip install -r requirements-onnx.txt" in line
    assert not out.exists()


@needs_export
def test_the_script_runs_as_a_module(tmp_path_factory):
    """The command docs/onnx.md shows, in a fresh process: one line on stdout, a loadable model, quiet stderr.
    The run is the session's one export of the fp16 state network (tests/support/onnx_helpers.py, SCRIPT_SAMPLE)."""
    result, out = script_export(tmp_path_factory)
    assert result.args[1:3] == ["-m", "export.export_onnx"] and SCRIPT_SAMPLE == ("state", "fp16")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"Wrote {out} (state, fp16, F={NUM_FEATURES})"
    assert result.stderr == ""
    umask = os.umask(0o022)  # the exporter's child inherited it; reading it means setting it
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask  # a new file's mode, not mkstemp's 0600
    assert sorted(path.name for path in out.parent.iterdir()) == [out.name]  # its folder holds the model alone
    from onnx_path.rewrite import load_model, sample_network

    found = sample_network(load_model(out))
    assert found is not None and (found.kind, found.precision, found.num_features) == ("state update", "fp16",
                                                                                        NUM_FEATURES)
