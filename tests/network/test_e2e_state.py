"""End to end on the full TensorRT with a GPU: --steps with --validate, --benchmark (both also with --cuda_graph),
an engine saved by one process and loaded by another for a different graph within its profile, a graph beyond
it, and the engine-level state benchmark. Skipped (with the reason) where TensorRT or a GPU is missing; the last
test checks what the benchmark does there instead. No timing is asserted: only that the runs succeed and report
consistently.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import full_tensorrt_missing_reason

ROOT = Path(__file__).resolve().parents[2]
CLI = str(ROOT / "aliased_io_plugin.py")
BENCH = str(ROOT / "benchmarks" / "bench_engine_state.py")


def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def assert_state_report_is_consistent(stdout: str, steps: int, cuda_graph: bool = False) -> None:
    """What TensorRT said about X_out, X_out bound at X's address whatever it said, nothing copied back, X
    changed by the first step, and how each step was issued (execute_async_v3, or with --cuda_graph the
    replay of the execution captured after the warm-up) with its host time."""
    alias_lines = [line for line in stdout.splitlines() if line.startswith("Engine output 'X_out'")]
    assert len(alias_lines) == 1, stdout
    assert re.search(r"get_aliased_input_tensor -> ('X'|None)|has no ICudaEngine.get_aliased_input_tensor", alias_lines[0])
    assert alias_lines[0].endswith("the runner binds X_out at X's address, so every execution leaves the state in X "
                                   "and nothing is copied back")
    assert "copied X_out into X" not in stdout
    assert "X's buffer after the first execution: changed (the update reached X)" in stdout
    timed = "cuGraphLaunch of the execution captured once after the warm-up" if cuda_graph else "execute_async_v3"
    assert re.search(rf"Per-step engine time \(CUDA events around {timed}\): median .* over {steps} runs", stdout), stdout
    host = re.search(r"Host time to issue one step: median ([0-9.]+) (us|ms) \((.*)\)", stdout)
    assert host and float(host.group(1)) > 0, stdout
    assert host.group(3).startswith("cuGraphLaunch" if cuda_graph else "execute_async_v3"), stdout


@pytest.mark.tensorrt
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_steps_validate_the_final_state(precision):
    result = run(CLI, "--random_graph", "500", "1000", "--steps", "6", "--batch_edges", "300", "--precision", precision,
                 "--validate", "--seed", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation against reference successful!" in result.stdout
    assert "Final state against the float64 reference of all 6 batches" in result.stdout
    assert "Building the state update engine ... done in" in result.stderr
    assert_state_report_is_consistent(result.stdout, 6)


@pytest.mark.tensorrt
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_steps_replayed_from_a_cuda_graph_validate_the_final_state(precision):
    """--cuda_graph: one execution captured after the warm-up, replayed for each of the 6 batches uploaded into
    the same buffers; the final state must still hold every batch."""
    result = run(CLI, "--random_graph", "500", "1000", "--steps", "6", "--batch_edges", "300", "--precision", precision,
                 "--cuda_graph", "--validate", "--seed", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation against reference successful!" in result.stdout
    assert "then as many replays of the captured one" in result.stdout
    assert_state_report_is_consistent(result.stdout, 6, cuda_graph=True)


@pytest.mark.tensorrt
def test_steps_with_an_initial_state_and_several_features(tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    graph = tmp_path / "graph.npz"
    num_nodes = 64
    edges = np.stack([rng.integers(0, num_nodes, 2 * num_nodes), np.tile(np.arange(num_nodes), 2)], axis=1)
    np.savez(graph, edges=edges, node_features=rng.standard_normal((num_nodes, 3)), state=rng.standard_normal((num_nodes, 3)))
    result = run(CLI, "--graph", str(graph), "--steps", "4", "--batch_edges", "50", "--validate", "--seed", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation against reference successful!" in result.stdout
    assert_state_report_is_consistent(result.stdout, 4)


@pytest.mark.tensorrt
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_benchmark_prints_engine_and_kernel_timings(precision):
    result = run(CLI, "--random_graph", "2000", "20000", "--precision", precision, "--benchmark", "20", "--validate",
                 "--seed", "5")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation against reference successful!" in result.stdout
    assert "Benchmark: 20 timed executions after 10 warm-up ones" in result.stdout
    engine = re.search(r"engine \(execute_async_v3\): median ([0-9.]+) (us|ms), p90 .*, min .* over 20 runs", result.stdout)
    kernel = re.search(r"scatter_add_launch alone, same buffers: median ([0-9.]+) (us|ms)", result.stdout)
    assert engine and kernel, result.stdout
    assert float(engine.group(1)) > 0 and float(kernel.group(1)) > 0
    assert re.search(r"kernel share: kernel median / engine median = [0-9]+%", result.stdout)
    assert re.search(r"Host time to issue one execution: median [0-9.]+ (us|ms) \(execute_async_v3", result.stdout)


@pytest.mark.tensorrt
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_benchmark_replays_captured_executions_with_cuda_graph(precision):
    result = run(CLI, "--random_graph", "2000", "20000", "--precision", precision, "--benchmark", "20", "--cuda_graph",
                 "--validate", "--seed", "5")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation against reference successful!" in result.stdout  # the single run before the benchmark
    assert "Benchmark: 20 timed executions after 10 warm-up executions and 10 warm-up replays" in result.stdout
    engine = re.search(r"engine \(cuGraphLaunch of the execution captured once after the warm-up\): median ([0-9.]+) "
                       r"(us|ms), p90 .*, min .* over 20 runs", result.stdout)
    kernel = re.search(r"scatter_add_launch alone, captured and replayed the same way, same buffers: median ([0-9.]+) "
                       r"(us|ms)", result.stdout)
    assert engine and kernel, result.stdout
    assert float(engine.group(1)) > 0 and float(kernel.group(1)) > 0
    assert re.search(r"Host time to issue one execution: median [0-9.]+ (us|ms) \(cuGraphLaunch of the captured "
                     r"execution\)", result.stdout)


@pytest.mark.tensorrt
def test_saved_engine_serves_another_graph_in_a_new_process_and_refuses_one_beyond_its_profile(tmp_path):
    engine = tmp_path / "family.engine"
    built = run(CLI, "--random_graph", "100", "400", "--max_nodes", "5000", "--max_edges", "20000", "--save_engine",
                str(engine), "--validate", "--seed", "1")
    assert built.returncode == 0, built.stdout + built.stderr
    assert f"Engine saved to {engine}" in built.stdout and engine.stat().st_size > 0
    assert "N in [1, 5000] (opt 100), E in [1, 20000] (opt 400)" in built.stdout

    loaded = run(CLI, "--random_graph", "3000", "15000", "--load_engine", str(engine), "--validate", "--seed", "2")
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert f"Engine loaded from {engine}" in loaded.stdout
    assert "Validation against reference successful!" in loaded.stdout
    assert "Building" not in loaded.stderr

    beyond = run(CLI, "--random_graph", "6000", "7000", "--load_engine", str(engine), "--seed", "3")
    assert beyond.returncode == 2
    lines = beyond.stderr.strip().splitlines()
    assert len(lines) == 1 and "the graph has 6000 nodes, outside the engine's profile [1, 5000]" in lines[0]

    too_many_edges = run(CLI, "--random_graph", "1000", "30000", "--load_engine", str(engine), "--seed", "3")
    assert too_many_edges.returncode == 2
    assert "the graph has 30000 edges, outside the engine's profile [1, 20000]" in too_many_edges.stderr


@pytest.mark.tensorrt
def test_saved_state_engine_serves_another_state_size_and_only_steps(tmp_path):
    engine = tmp_path / "state.engine"
    built = run(CLI, "--random_graph", "200", "200", "--steps", "3", "--batch_edges", "100", "--max_nodes", "100000",
                "--max_edges", "1000", "--save_engine", str(engine), "--validate", "--seed", "1")
    assert built.returncode == 0, built.stdout + built.stderr
    loaded = run(CLI, "--random_graph", "50000", "50000", "--steps", "5", "--batch_edges", "1000", "--load_engine",
                 str(engine), "--validate", "--seed", "2")
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert "Validation against reference successful!" in loaded.stdout
    assert_state_report_is_consistent(loaded.stdout, 5)

    big_batch = run(CLI, "--random_graph", "200", "200", "--steps", "2", "--batch_edges", "1001", "--load_engine",
                    str(engine), "--seed", "3")
    assert big_batch.returncode == 2
    assert "each --steps batch has 1001 edges, outside the engine's profile [1, 1000]" in big_batch.stderr

    classifier_run = run(CLI, "--random_graph", "200", "200", "--load_engine", str(engine), "--seed", "3")
    assert classifier_run.returncode == 2
    assert "holds the state update network, which --steps uses" in classifier_run.stderr


@pytest.mark.tensorrt
def test_engine_state_benchmark_runs_and_reports_the_engine_boundary():
    result = run(BENCH, "--nodes", "1000", "100000", "--steps", "5", "--batch_edges", "500")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| 1e+0")]
    assert len(rows) == 2, result.stdout
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[4] in ("'X'", "None", "method missing")
        assert cells[5:] == ["True", "True"]  # X changed by step 1 (X_out is bound at X), final state ok


@pytest.mark.skipif(full_tensorrt_missing_reason() is None, reason="TensorRT and a GPU are here: the benchmark runs")
def test_engine_state_benchmark_says_why_it_cannot_run():
    result = run(BENCH, "--nodes", "1000", timeout=120)
    assert result.returncode == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench_engine_state.py: cannot run: ")
