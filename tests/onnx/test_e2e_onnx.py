"""End to end on the full TensorRT with a GPU: --onnx with models the real exporter writes in this session,
rewritten into the Python or the AOT plugin, parsed by TensorRT's ONNX parser, built, run and validated against
ONNX Runtime on the original model and against the float64 reference (the classifier, --steps), saved and
loaded by another process, benchmarked. Skipped (with the reason) where TensorRT, a GPU or the ONNX packages
are missing: `python3 -m pytest -m tensorrt tests/onnx/test_e2e_onnx.py` on such a machine.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.onnx_helpers import NUM_CLASSES, NUM_FEATURES, needs_export, sample_model
from tests.network.test_e2e_state import assert_state_report_is_consistent

ROOT = Path(__file__).resolve().parents[2]
CLI = str(ROOT / "aliased_io_plugin.py")

pytestmark = [pytest.mark.tensorrt, needs_export]


def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def graph_args(tmp_path: Path, nodes: int, edges: int, seed: int) -> list[str]:
    """A random graph of `nodes` and `edges` with F = NUM_FEATURES features per node from a .npy file (the
    exported models' F)."""
    features = tmp_path / f"features_{nodes}.npy"
    np.save(features, np.random.default_rng(seed).uniform(0.0, 4.0, (nodes, NUM_FEATURES)))
    return ["--random_graph", str(nodes), str(edges), "--node_features_file", str(features), "--seed", str(seed)]


def assert_onnx_run(stdout: str, model: Path, plugin: str) -> None:
    """The model was rewritten for `plugin`, the engine built from it, and validated against both references."""
    assert f"rewritten for the {plugin} plugin:" in stdout, stdout
    assert f"Engine built from the rewritten {model} in " in stdout, stdout
    assert "Validation against reference successful!" in stdout, stdout
    assert f"Against ONNX Runtime (the original {model}, same inputs" in stdout, stdout


@pytest.mark.parametrize("plugin", ["python", "aot"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_onnx_classifier_validates_against_onnx_runtime_and_the_reference(tmp_path_factory, tmp_path, plugin,
                                                                          precision):
    model = sample_model(tmp_path_factory, "classifier", precision)
    result = run(*graph_args(tmp_path, 500, 3000, 3), "--num_classes", str(NUM_CLASSES), "--precision", precision,
                 "--plugin", plugin, "--onnx", str(model), "--validate")
    assert result.returncode == 0, result.stdout + result.stderr
    assert_onnx_run(result.stdout, model, plugin)
    assert "Against the float64 reference: " in result.stdout
    assert "Caller's X buffer" in result.stdout


@pytest.mark.parametrize("plugin", ["python", "aot"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_onnx_steps_validate_the_final_state(tmp_path_factory, tmp_path, plugin, precision):
    model = sample_model(tmp_path_factory, "state", precision)
    result = run(*graph_args(tmp_path, 500, 1000, 4), "--steps", "6", "--batch_edges", "300", "--precision", precision,
                 "--plugin", plugin, "--onnx", str(model), "--validate")
    assert result.returncode == 0, result.stdout + result.stderr
    assert_onnx_run(result.stdout, model, plugin)
    assert "Final state against the float64 reference of all 6 batches" in result.stdout
    assert_state_report_is_consistent(result.stdout, 6)


@pytest.mark.parametrize("network, plugin, precision", [("classifier", "python", "fp32"), ("state", "aot", "fp16")])
def test_onnx_engine_saved_serves_another_graph_in_a_new_process(tmp_path_factory, tmp_path, network, plugin,
                                                                 precision):
    """--save_engine of an engine built from --onnx, --save_onnx of the rewritten model; another process loads
    the engine (no --onnx: it holds the plugin) for a larger graph and validates it."""
    model = sample_model(tmp_path_factory, network, precision)
    engine, rewritten = tmp_path / "onnx.engine", tmp_path / "rewritten.onnx"
    steps = ["--steps", "3", "--batch_edges", "200"] if network == "state" else ["--num_classes", str(NUM_CLASSES)]
    built = run(*graph_args(tmp_path, 300, 1200, 5), *steps, "--precision", precision, "--plugin", plugin,
                "--onnx", str(model), "--save_onnx", str(rewritten), "--save_engine", str(engine), "--validate")
    assert built.returncode == 0, built.stdout + built.stderr
    assert f"Engine saved to {engine}" in built.stdout and f"Rewritten model saved to {rewritten}" in built.stdout
    loaded = run(*graph_args(tmp_path, 3000, 12000, 6), *steps, "--precision", precision, "--load_engine", str(engine),
                 "--validate")
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert f"Engine loaded from {engine}" in loaded.stdout
    assert "Validation against reference successful!" in loaded.stdout


def test_onnx_classifier_benchmark(tmp_path_factory, tmp_path):
    model = sample_model(tmp_path_factory, "classifier", "fp32")
    result = run(*graph_args(tmp_path, 2000, 20000, 7), "--num_classes", str(NUM_CLASSES), "--onnx", str(model),
                 "--benchmark", "50")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Benchmark: 50 timed executions" in result.stdout
    assert "kernel share: kernel median / engine median" in result.stdout


@pytest.mark.parametrize("plugin", ["python", "aot"])
@pytest.mark.parametrize("name", ["two_states", "gnn_zeros", "heads_state"])
def test_a_users_model_builds_and_agrees_with_onnx_runtime(tmp_path_factory, name, plugin):
    """A model other than the sample's (tests/support/onnx_models.py), rewritten, parsed by TensorRT's ONNX parser with the
    plugin's creator registered, built with the aliased-I/O preview feature, run with each aliased output bound
    at its input's address (Rewritten.aliases: TensorRT reports no alias for a plugin), against ONNX Runtime on
    the original model; an aliased output is read from its input's buffer, which now holds the new state."""
    from common.imports import import_tensorrt
    from network.onnx_parse import OnnxSource, populate_from_onnx
    from network.engine import build_engine_bytes, deserialize_engine
    from network.execution import ExecutionSession
    from onnx_path.rewrite import model_io, rewrite_model
    from onnx_path.runtime import run_onnxruntime
    from plugin.device_array import DeviceArray
    from tests.support.onnx_models import zoo_feeds, zoo_model

    original = zoo_model(tmp_path_factory, name)
    rewritten = rewrite_model(original, plugin)
    feeds = zoo_feeds(name)
    expected = run_onnxruntime(original, feeds).outputs
    source = OnnxSource(rewritten.model.SerializeToString(), name, rewritten.plugin)
    dynamic = {spec.name for spec in model_io(original)[0] if any(isinstance(dim, str) for dim in spec.shape)}
    shapes = {input_name: (array.shape,) * 3 for input_name, array in feeds.items() if input_name in dynamic}
    data, _ = build_engine_bytes(lambda trt, network: populate_from_onnx(trt, network, source), shapes)
    trt = import_tensorrt()
    engine = deserialize_engine(data, name, just_built=True)
    inputs = {input_name: DeviceArray.from_array(array) for input_name, array in feeds.items()}
    session = ExecutionSession(trt, engine, inputs, outputs_at_inputs=rewritten.aliases)
    try:
        session.execute()
        session.synchronize()
        assert session.bound_to_input == rewritten.aliases
        for output, value in expected.items():
            buffer = inputs[rewritten.aliases[output]] if output in rewritten.aliases else session.outputs[output]
            np.testing.assert_allclose(buffer.download(), value, rtol=1e-4, atol=1e-4, err_msg=output)
    finally:
        session.close()
        for buffer in inputs.values():
            buffer.free()


def custom_nodes(path: Path) -> list[str]:
    import onnx

    return [node.op_type for node in onnx.load(str(path)).graph.node if node.domain == "aliased_io"]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("network", ["classifier", "state"])
def test_the_aot_chains_build_run_and_match_the_reference(tmp_path_factory, tmp_path, network, precision):
    """--plugin aot through the project ops' chains (plugin/scatter_add_op.py): the scatter-add with counts (the
    classifier) and without (the state update), float32 (the state chain) and float16 (the table chain); the
    engine is built from the saved model's step nodes, run, and validated against the float64 reference and ONNX
    Runtime on the original."""
    from tests.onnx.test_onnx_rewrite import AOT_EXPECTED

    model = sample_model(tmp_path_factory, network, precision)
    rewritten = tmp_path / "rewritten.onnx"
    mode = ["--num_classes", str(NUM_CLASSES)] if network == "classifier" else ["--steps", "3", "--batch_edges", "400"]
    result = run(*graph_args(tmp_path, 700, 2500, 8), *mode, "--precision", precision, "--plugin", "aot",
                 "--onnx", str(model), "--save_onnx", str(rewritten), "--validate")
    assert result.returncode == 0, result.stdout + result.stderr
    assert_onnx_run(result.stdout, model, "aot")
    assert custom_nodes(rewritten) == [op_type for op_type, _ in AOT_EXPECTED[(network, precision)]]
    if network == "classifier":
        assert "Against the float64 reference: " in result.stdout
    else:
        assert "Final state against the float64 reference of all 3 batches" in result.stdout
        assert_state_report_is_consistent(result.stdout, 3)


def test_the_aot_overwrite_chain_builds_runs_and_matches_onnx_runtime(tmp_path_factory, tmp_path):
    """--plugin aot on an overwrite (index_copy_): OVERWRITE_ROWS's one step in the saved model, the engine run with
    X_out bound at X and validated against ONNX Runtime on the original."""
    from tests.onnx.test_e2e_onnx_any import assert_validated
    from tests.support.onnx_models import zoo_feeds, zoo_path
    from tests.cli.test_cli_onnx_any import npz

    model = str(zoo_path(tmp_path_factory, "index_copy_"))
    rewritten = tmp_path / "rewritten.onnx"
    result = run("--seed", "1", "--plugin", "aot", "--onnx", model, "--onnx_inputs",
                 npz(tmp_path, **zoo_feeds("index_copy_")), "--save_onnx", str(rewritten), "--validate")
    assert_validated(result, model)
    assert custom_nodes(rewritten) == ["overwrite_rows"]
    assert "the runner binds X_out at X's address" in result.stdout
