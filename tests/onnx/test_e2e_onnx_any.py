"""End to end on the full TensorRT with a GPU: --onnx with models of one's own (not the sample's network),
rewritten into the Python or the AOT plugin, parsed by TensorRT's ONNX parser, built for the run's shapes, run
once or --steps K times with each output that aliases an input bound at that input's address, and validated
against ONNX Runtime on the original model. Skipped (with the reason) where TensorRT, a GPU or the ONNX packages
are missing: `python3 -m pytest -m tensorrt tests/onnx/test_e2e_onnx_any.py` on such a machine.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.onnx_helpers import REWRITE_MISSING, needs_export, ops_inputs, ops_model
from tests.support.onnx_models import SIZES, zoo_feeds, zoo_path
from tests.cli.test_cli_onnx_any import aggregation_model, good_inputs, npz, own_state_model

ROOT = Path(__file__).resolve().parents[2]
CLI = str(ROOT / "aliased_io_plugin.py")

pytestmark = [pytest.mark.tensorrt, pytest.mark.skipif(REWRITE_MISSING is not None, reason=REWRITE_MISSING or "")]


def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def assert_validated(result: subprocess.CompletedProcess, model: str) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Engine built from the rewritten {model} in " in result.stdout
    assert "Validation against reference successful!" in result.stdout
    assert f"against ONNX Runtime (the original {model}" in result.stdout


@pytest.mark.parametrize("plugin", ["python", "aot"])
def test_a_state_update_of_ones_own_runs_on_its_inputs_with_the_state_bound_in_place(tmp_path, plugin):
    model, rewritten = own_state_model(tmp_path), tmp_path / "rewritten.onnx"
    result = run("--seed", "1", "--plugin", plugin, "--onnx", model, "--onnx_inputs", npz(tmp_path, **good_inputs()),
                 "--save_onnx", str(rewritten), "--validate")
    assert_validated(result, model)
    assert "Engine output 'X_out': get_aliased_input_tensor -> " in result.stdout
    assert "the runner binds X_out at state's address" in result.stdout
    assert rewritten.exists()


@pytest.mark.parametrize("plugin", ["python", "aot"])
def test_steps_on_a_model_of_ones_own_keep_the_state_in_place(tmp_path, plugin):
    model = own_state_model(tmp_path)
    result = run("--seed", "3", "--plugin", plugin, "--onnx", model, "--onnx_shapes", "state:20000x3,src:5000x3",
                 "--steps", "6", "--validate")
    assert_validated(result, model)
    assert "Output X_out float32 [20000, 3] after 6 runs:" in result.stdout
    assert "Runs: 6 executions, the states kept in their input buffers" in result.stdout


def test_an_aggregation_with_no_state_output_runs_with_every_output_its_own_buffer(tmp_path):
    model = aggregation_model(tmp_path / "agg.onnx")
    inputs = good_inputs(np.random.default_rng(5))
    result = run("--seed", "1", "--onnx", model, "--onnx_inputs", npz(tmp_path, **inputs), "--validate")
    assert_validated(result, model)
    assert "No engine output aliases an input: every output has a buffer of its own" in result.stdout


@needs_export
@pytest.mark.parametrize("plugin", ["python", "aot"])
@pytest.mark.parametrize("name", ["gnn_zeros", "two_states", "heads_state", "update_then_layers", "alpha"])
def test_users_models_build_run_and_validate_against_onnx_runtime(tmp_path_factory, tmp_path, name, plugin):
    """Issue 24's models of one's own (tests/support/onnx_models.py), exported in this session: each engine's outputs
    against ONNX Runtime on the original, the states bound at their inputs."""
    model = str(zoo_path(tmp_path_factory, name))
    result = run("--seed", "1", "--plugin", plugin, "--onnx", model, "--onnx_inputs",
                 npz(tmp_path, **zoo_feeds(name)), "--validate")
    assert_validated(result, model)
    for output, state in {"two_states": {"X_out": "X", "Y_out": "Y"}}.get(name, {}).items():
        assert f"the runner binds {output} at {state}'s address" in result.stdout


@needs_export
def test_two_states_run_in_steps_on_the_engine(tmp_path_factory):
    model = str(zoo_path(tmp_path_factory, "two_states"))
    result = run("--seed", "2", "--onnx", model, "--onnx_shapes", "X:5000x3,Y:300x2,src_x:800x3,src_y:50x2",
                 "--steps", "5", "--validate")
    assert_validated(result, model)
    assert "Runs: 5 executions, the states kept in their input buffers" in result.stdout


@needs_export
def test_a_model_calling_the_in_place_custom_op_runs_in_steps_on_the_engine(tmp_path_factory, tmp_path):
    """torch.ops.aliased_io.scatter_add_ exported through export.ops (the plugin node already in the model),
    three runs on the engine with X_out bound at X, against ONNX Runtime with the node's CPU reference."""
    model = str(ops_model(tmp_path_factory, "layers"))
    result = run("--seed", "1", "--onnx", model, "--onnx_inputs",
                 npz(tmp_path, **ops_inputs("layers", "fp32", 900, 4000, seed=3)), "--steps", "3", "--validate")
    assert_validated(result, model)
    assert "the runner binds X_out at X's address" in result.stdout


@needs_export
@pytest.mark.parametrize("plugin", ["python", "aot"])
@pytest.mark.parametrize("name, repeats", [("index_copy_", False), ("copy_and_add", True)])
def test_row_overwrites_run_in_place_on_the_engine_and_validate(tmp_path_factory, tmp_path, name, repeats, plugin):
    """Issue 36's overwrites (tests/support/onnx_models.py): the plugin's overwrite mode in an engine, X_out bound at X;
    with repeated indices the rows written there checked against their edges, the rest against ONNX Runtime."""
    model = str(zoo_path(tmp_path_factory, name))
    feeds = zoo_feeds(name, 0, {**SIZES, "K": 23}, repeats=True) if repeats else zoo_feeds(name)
    result = run("--seed", "1", "--plugin", plugin, "--onnx", model, "--onnx_inputs", npz(tmp_path, **feeds),
                 "--validate")
    assert_validated(result, model)
    assert "rows of X overwritten) -> " in result.stdout and "the runner binds X_out at X's address" in result.stdout
    assert ("written at a repeated index: against the nearest of its edges' rows" in result.stdout) == repeats


@needs_export
@pytest.mark.parametrize("plugin", ["python", "aot"])
def test_a_row_overwrite_runs_in_steps_on_a_large_state_on_the_engine(tmp_path_factory, plugin):
    """2,000 rows, 5,000 random edges per run (more edges than rows: indices repeat), 3 runs with X kept in
    place."""
    model = str(zoo_path(tmp_path_factory, "index_copy_"))
    result = run("--seed", "5", "--plugin", plugin, "--onnx", model, "--onnx_shapes", "X:2000x3,src:5000x3",
                 "--steps", "3", "--validate")
    assert_validated(result, model)
    assert "Runs: 3 executions, the states kept in their input buffers" in result.stdout
    assert "written at a repeated index: against the nearest of its edges' rows" in result.stdout
