"""aliased_io_plugin.py --onnx on the CPU with the sample's network: models the real exporter (torch 2.13,
dynamo) writes in this session, rewritten, saved with --save_onnx and, by --dry-run, the rewritten model run in
ONNX Runtime with the plugin node's CPU reference (against ONNX Runtime on the original and the float64
reference with --validate), without TensorRT or CUDA; every refusal exits 2 with one line and writes nothing.
Models of one's own: tests/cli/test_cli_onnx_any.py. The engine itself (TensorRT's ONNX parser) is in
tests/onnx/test_e2e_onnx.py, marked tensorrt.
"""

import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import aliased_io_plugin as cli
from tests.support.import_check import heavy_modules_imported_by
from tests.support.onnx_helpers import NUM_CLASSES, NUM_FEATURES, REWRITE_MISSING, needs_export, sample_model
from tests.cli.test_cli import ROOT, SCRIPT, assert_one_line_error, run_cli, run_cli_without, run_main_fd
from tests.network.test_network_onnx_parse import state_io_model

# Four nodes with F = 3 features each, for the default edges (every node has an incoming edge).
FEATURES = "[[1,2,3],[4,5,6],[7,8,9],[1,0,2]]"
CLASSIFIER_ARGS = ("--seed", "5", "--node_features", FEATURES, "--num_classes", str(NUM_CLASSES))
STEPS_ARGS = ("--seed", "5", "--node_features", FEATURES, "--steps", "4", "--batch_edges", "6")


def onnx_ops(path) -> list[str]:
    import onnx

    return [node.op_type for node in onnx.load(str(path)).graph.node]


@needs_export
@pytest.mark.parametrize("plugin", ["python", "aot"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_dry_run_rewrites_saves_and_runs_the_original_classifier_in_onnx_runtime(tmp_path_factory, tmp_path, capfd,
                                                                               plugin, precision):
    """--dry-run --onnx M --save_onnx O on a CPU-only machine writes a model with the plugin node and no Scatter
    node; the rewritten model in ONNX Runtime matches ONNX Runtime on the original and the float64 reference.
    fp32 with the Python plugin through the script, the others through main() in this process (run_main_fd)."""
    model = sample_model(tmp_path_factory, "classifier", precision)
    out = tmp_path / "rewritten.onnx"
    run = run_cli if (precision, plugin) == ("fp32", "python") else lambda *args: run_main_fd(capfd, *args)
    result = run("--dry-run", *CLASSIFIER_ARGS, "--precision", precision, "--plugin", plugin, "--onnx", str(model),
                     "--save_onnx", str(out), "--validate")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    assert f"ONNX model {model}: the sample's classifier network ({precision}, F={NUM_FEATURES}, C={NUM_CLASSES}), " \
           f"rewritten for the {plugin} plugin:" in result.stdout
    assert f"Rewritten model saved to {out}" in result.stdout
    assert f"Classifier output (ONNX Runtime, the rewritten {model}):" in result.stdout
    assert "Dry run: ONNX Runtime ran the rewritten model, the plugin node by its CPU reference; no engine was " \
           "built." in result.stdout
    assert "Validation against reference successful!" in result.stdout
    assert f"Against ONNX Runtime (the original {model}, same inputs, twice the reference's tolerance): largest " \
           "absolute error" in result.stdout
    assert "Against the float64 reference: largest absolute error" in result.stdout
    ops = onnx_ops(out)
    assert not [op for op in ops if op.startswith("Scatter") and op != "ScatterAddInPlace"], ops
    expected = ["ScatterAddInPlace"] if plugin == "python" else (  # SCATTER_ADD_COUNTS's state or table chain
        ["add_rows_counts"] if precision == "fp32" else ["add_into_table_counts", "round_table"])
    assert [op for op in ops if op in ("ScatterAddInPlace", "add_rows_counts", "add_into_table_counts",
                                       "round_table")] == expected


@needs_export
def test_dry_run_output_is_onnx_runtimes_and_matches_the_reference_printed_without_onnx(tmp_path_factory, capfd):
    """The matrix a dry run prints with --onnx (the rewritten model in ONNX Runtime) is the float64 reference a
    plain dry run prints, to the printed digits."""
    from tests.cli.test_cli import printed_matrix

    model = sample_model(tmp_path_factory, "classifier", "fp32")
    with_onnx = run_main_fd(capfd, "--dry-run", *CLASSIFIER_ARGS, "--onnx", str(model))
    plain = run_main_fd(capfd, "--dry-run", *CLASSIFIER_ARGS)
    assert with_onnx.returncode == 0 and plain.returncode == 0, with_onnx.stderr + plain.stderr
    heading = f"Classifier output (ONNX Runtime, the rewritten {model}):\n"
    onnx_matrix = printed_matrix(with_onnx.stdout.replace(heading, "Classifier output:\n"))
    np.testing.assert_allclose(onnx_matrix, printed_matrix(plain.stdout), atol=2e-6)
    assert onnx_matrix.shape == (NUM_CLASSES, 4)


@needs_export
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_dry_run_steps_runs_the_state_model_once_per_batch(tmp_path_factory, tmp_path, capfd, precision):
    """--steps with the exported state-update model: ONNX Runtime runs the rewritten model once per batch with
    X_out fed back, and the final state lies within the rounding bound of the float64 reference of all batches
    and twice that of ONNX Runtime's on the original."""
    model = sample_model(tmp_path_factory, "state", precision)
    out = tmp_path / "state.onnx"
    result = run_main_fd(capfd, "--dry-run", *STEPS_ARGS, "--precision", precision, "--onnx", str(model),
                         "--save_onnx", str(out), "--validate")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Final state X after 4 batches (ONNX Runtime, the rewritten {model}):" in result.stdout
    assert "Final state against the float64 reference of all 4 batches: largest absolute error" in result.stdout
    assert result.stdout.count("0 of 12 elements beyond their bound") == 2
    assert onnx_ops(out) == ["ScatterAddInPlace"]


@needs_export
def test_dry_run_with_onnx_imports_neither_tensorrt_nor_cuda_nor_polygraphy(tmp_path_factory, tmp_path):
    model = sample_model(tmp_path_factory, "state", "fp16")
    args = ["--dry-run", *STEPS_ARGS, "--precision", "fp16", "--plugin", "aot", "--onnx", str(model),
            "--save_onnx", str(tmp_path / "out.onnx"), "--validate"]
    assert heavy_modules_imported_by(args, ("tensorrt", "tensorrt_rtx_bindings", "cuda", "polygraphy")) == []


@needs_export
@pytest.mark.parametrize("case, message", [
    ("classifier with --steps", "holds the classifier network; --steps needs the state update network "
                                "(python3 -m export.export_onnx --network state)"),
    ("state without --steps", "holds the state update network; a run without --steps needs the classifier network "
                              "(python3 -m export.export_onnx --network classifier), or add --steps K --batch_edges B "
                              "to run this one"),
    ("other precision", "is an fp32 model (X, src are float32); got --precision fp16"),
    ("other classes", f"has {NUM_CLASSES} classes (W [{NUM_CLASSES}, F]), got --num_classes 3"),
    ("other features", f"takes F={NUM_FEATURES} features per node (X [N, {NUM_FEATURES}]), the graph has 1"),
])
def test_a_model_that_does_not_fit_the_run_is_one_line_and_writes_nothing(tmp_path_factory, tmp_path, capsys, case,
                                                                           message):
    network = "state" if case == "state without --steps" else "classifier"
    model = sample_model(tmp_path_factory, network, "fp32")
    args = {
        "classifier with --steps": STEPS_ARGS,
        "state without --steps": CLASSIFIER_ARGS,
        "other precision": (*CLASSIFIER_ARGS, "--precision", "fp16"),
        "other classes": ("--seed", "5", "--node_features", FEATURES),
        "other features": ("--seed", "5", "--num_classes", str(NUM_CLASSES)),
    }[case]
    out = tmp_path / "out.onnx"
    status = cli.main(["--dry-run", *args, "--onnx", str(model), "--save_onnx", str(out)])
    assert_one_line_error(status, capsys.readouterr(), f"--onnx {model} {message}")
    assert not out.exists()


@pytest.mark.skipif(REWRITE_MISSING is not None, reason=REWRITE_MISSING or "")
@pytest.mark.parametrize("case, message", [
    ("not onnx", "not an ONNX model"),
    ("other reduction", "node index_add_into_X (ScatterND): reduction 'mul' (TensorRT's ONNX parser refuses ScatterND"),
])
def test_a_model_the_cli_cannot_take_is_one_line_naming_the_node_or_the_value(tmp_path, capsys, case, message):
    if case == "not onnx":
        model = tmp_path / "model.onnx"
        model.write_text("not a model\n")
    else:
        model = state_io_model(tmp_path / "model.onnx", scatter=True, reduction="mul")
    out = tmp_path / "out.onnx"
    status = cli.main(["--dry-run", *STEPS_ARGS, "--onnx", str(model), "--save_onnx", str(out)])
    captured = capsys.readouterr()
    assert_one_line_error(status, captured, message)
    assert f"--onnx {model}: " in captured.err
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (["--save_onnx", "OUT.onnx"], "--save_onnx writes the rewritten --onnx model; give --onnx MODEL.onnx"),
    (["--onnx", "SAME", "--save_onnx", "SAME"], "--save_onnx SAME is the --onnx file; writing there would overwrite "
                                                "it"),
    (["--onnx", "SAME", "--load_engine", "SAME"], "--onnx builds a new engine from the model and --load_engine runs a "
                                                  "saved one: give one of them"),
    (["--onnx", "MISSING.onnx"], "--onnx MISSING.onnx: file not found"),
    (["--onnx", "SAME", "--save_onnx", "NO_FOLDER/out.onnx"], "--save_onnx NO_FOLDER/out.onnx: the folder NO_FOLDER "
                                                              "does not exist"),
    (["--onnx_inputs", "SAME"], "--onnx_inputs describes the inputs of an --onnx model; give --onnx MODEL.onnx"),
    (["--onnx", "SAME", "--onnx_shapes", "X:4xq"], "--onnx_shapes: 'X:4xq' is not NAME:D0xD1..."),
    (["--onnx", "SAME", "--onnx_inputs", "SAME", "--onnx_shapes", "X:4"], "--onnx_inputs gives the inputs with their "
                                                                          "shapes; --onnx_shapes shapes inputs made"),
    (["--onnx", "SAME", "--onnx_inputs", "SAME", "--edges", "[[0,1]]"], "--edges gives the sample network's graph and "
                                                                        "--onnx_inputs the inputs of an --onnx model"),
    (["--onnx", "SAME", "--onnx_inputs", "IN.npz", "--save_onnx", "IN.npz"], "--save_onnx IN.npz is the --onnx_inputs "
                                                                             "file; writing there would overwrite it"),
])
def test_options_alone_decide_before_any_work(tmp_path, monkeypatch, capsys, args, message):
    """What the arguments alone decide stops before the seed is drawn or any file is read (no output at all)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "SAME").write_bytes(b"unread")
    (tmp_path / "IN.npz").write_bytes(b"unread")
    status = cli.main(["--dry-run", *args])
    captured = capsys.readouterr()
    assert_one_line_error(status, captured, message)
    assert captured.out == ""
    assert sorted(path.name for path in tmp_path.iterdir()) == ["IN.npz", "SAME"]


@pytest.mark.parametrize("missing, needs", [("onnxruntime", "--onnx with --validate or --dry-run needs"),
                                            ("onnx_graphsurgeon", "--onnx needs")])
def test_missing_onnx_packages_are_exit_3_and_one_line(tmp_path, missing, needs):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"unread")
    args = ["--seed", "1", "--onnx", str(model)] + (["--dry-run"] if missing == "onnxruntime" else [])
    result = run_cli_without(missing, *args)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"{missing.replace('_', '-')} not installed; {needs}" in result.stderr
    assert "pip install -r requirements-onnx.txt" in result.stderr
    assert "Adjacency matrix" not in result.stdout  # before the graph is read


@needs_export
def test_without_tensorrt_the_run_stops_with_exit_3_and_writes_nothing(tmp_path_factory, tmp_path):
    """The rewrite needs no TensorRT, but --save_onnx is written only by a run that succeeded: the engine step
    says what to install, and neither the model nor a temporary file is left behind."""
    from tests.conftest import full_tensorrt_missing_reason

    if full_tensorrt_missing_reason() is None:
        pytest.skip("TensorRT and a GPU are here: the engine runs (tests/onnx/test_e2e_onnx.py)")
    model = sample_model(tmp_path_factory, "classifier", "fp32")
    out = tmp_path / "out.onnx"
    result = run_cli(*CLASSIFIER_ARGS, "--onnx", str(model), "--save_onnx", str(out))
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "pip install" in result.stderr
    assert list(tmp_path.iterdir()) == []
    assert "Classifier output" not in result.stdout


def test_help_names_the_onnx_options():
    result = subprocess.run([sys.executable, SCRIPT, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert "--onnx MODEL.onnx" in result.stdout and "--save_onnx OUT.onnx" in result.stdout
    assert "from PyTorch through ONNX (docs/onnx.md):" in result.stdout


def test_validation_against_onnx_runtime_doubles_the_tolerance_and_needs_both_comparisons():
    """The engine passes against ONNX Runtime within twice the float64 reference's tolerance (each lies within
    it of the exact result) and must also pass against the float64 reference itself."""
    from cli.onnx_sample import classifier_validation, steps_validation
    from onnx_path.read import OnnxModel
    from reference import TOLERANCES

    model = OnnxModel("m.onnx", SimpleNamespace(graph=SimpleNamespace(node=[])), None, None)  # no plugin node
    reference = np.full((2, 3), 0.5)
    atol = TOLERANCES["fp16"]["atol"]
    within_twice = reference + 1.9 * atol  # beyond the tolerance of ORT's output, within twice of it
    lines, status = classifier_validation(model, reference + 0.9 * atol, within_twice, reference, "fp16")
    assert status == 0 and lines[0] == "Validation against reference successful!"
    assert lines[1].startswith("Against ONNX Runtime (the original m.onnx, same inputs, twice the reference's "
                               "tolerance): largest absolute error")
    assert lines[2].startswith("Against the float64 reference: ")
    _, status = classifier_validation(model, reference + 0.9 * atol, reference - 1.2 * atol, reference, "fp16")
    assert status == 1  # 2.1 atol from ONNX Runtime
    lines, status = classifier_validation(model, reference + 1.5 * atol, reference + 1.5 * atol, reference, "fp16")
    assert status == 1 and lines[0] == "Validation against reference failed!"  # ORT agrees, the reference does not
    bound = np.full((2, 3), 1e-3)
    _, status = steps_validation(model, reference + 9e-4, reference - 9e-4, reference, bound, 4)
    assert status == 0
    lines, status = steps_validation(model, reference + 9e-4, reference - 1.2e-3, reference, bound, 4)
    assert status == 1 and "6 of 6 elements beyond their bound" in lines[1]
