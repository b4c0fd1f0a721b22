"""The benchmark scripts as a user without their dependencies meets them: --help works, a run prints one line
and exits 3, and no message suggests an option the script does not have; and run_gpu.sh, the one command
for BENCHMARKS.md's GPU figures, runs them all. No GPU needed."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NO_TORCH_SCRIPTS = {"bench_parse.py", "bench_engine_state.py"}  # CPU only; TensorRT, not torch
TORCH_SCRIPTS = sorted(f"benchmarks/{path.name}" for path in (ROOT / "benchmarks").glob("bench_*.py")
                       if path.name not in NO_TORCH_SCRIPTS)


def run_without(modules: list[str], script: str, *args: str) -> subprocess.CompletedProcess:
    """`script` run as a user would, in an interpreter where importing each of `modules` fails."""
    path = str(ROOT / script)
    code = (f"import runpy, sys; sys.modules.update(dict.fromkeys({modules!r})); sys.argv = [{path!r}, *{list(args)!r}]; "
            f"runpy.run_path({path!r}, run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


def assert_options_exist(message: str, script: str) -> None:
    """Every --option the message names is one of the script's own."""
    help_text = run_without([], script, "--help").stdout
    for option in re.findall(r"(?<![\w-])--[a-z][\w-]*", message):
        assert option in help_text, f"{script} suggests {option}, which it does not have"


@pytest.mark.parametrize("script", TORCH_SCRIPTS)
def test_without_torch_help_works_and_a_run_is_one_line_with_exit_3(script):
    help_result = run_without(["torch"], script, "--help")
    assert help_result.returncode == 0 and "usage:" in help_result.stdout, help_result.stderr
    result = run_without(["torch"], script)
    assert result.returncode == 3, result.stderr
    assert result.stderr.count("\n") == 1 and "pip install torch" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("script", ["benchmarks/bench_engine_state.py", "aliased_io_plugin.py"])
def test_without_tensorrt_the_one_line_names_only_options_that_exist(script):
    result = run_without(["tensorrt"], script)
    assert result.returncode == 3, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert_options_exist(result.stderr, script)


def test_run_gpu_sh_runs_every_gpu_test_file_and_every_torch_benchmark_with_out():
    """benchmarks/run_gpu.sh reproduces BENCHMARKS.md's GPU figures with one command: its test step names every
    test file marked gpu, and its benchmark step runs every torch benchmark with --out (once; --quick picks the sizes)."""
    script = (ROOT / "benchmarks" / "run_gpu.sh").read_text()
    test_step = next(line for line in script.splitlines() if line.strip().startswith("gpu_tests="))
    assert "pytest -m gpu $gpu_tests" in script
    gpu_files = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")
                       if re.search(r"pytest\.mark\.gpu\b", path.read_text()))
    assert gpu_files and all(name in test_step for name in gpu_files), (gpu_files, test_step)
    for name in TORCH_SCRIPTS:
        runs = re.findall(rf"python3 {re.escape(name)} .*--out \"\$out\"", script)
        assert len(runs) == 1, f"run_gpu.sh runs {name} --out {len(runs)} times (expected once, sized by --quick)"


def test_bench_breakdown_plan_option_takes_only_plan_py_integer_constants():
    # --plan NAME=VALUE sets one of plan.py's constants for a run; anything else is a usage error (exit 2,
    # one line naming the value), before torch or a GPU is needed
    from benchmarks.bench_breakdown import plan_constant

    assert plan_constant("SORT_MAX_PLACE_PASSES=2") == ("SORT_MAX_PLACE_PASSES", 2)
    for bad in ("NOT_A_CONSTANT=1", "describe=1", "SORT_MAX_PLACE_PASSES=two", "ALGORITHMS=1"):
        with pytest.raises(ValueError):
            plan_constant(bad)
    result = run_without([], "benchmarks/bench_breakdown.py", "--plan", "NOT_A_CONSTANT=1")
    assert result.returncode == 2 and "NOT_A_CONSTANT=1" in result.stderr and "Traceback" not in result.stderr


BAD_ARGUMENTS = {  # one bad value per script, each of a kind its parser must refuse before the torch check
    "benchmarks/auto_cells.py": (["--cells", "missing.csv"], "cannot read the cells: FileNotFoundError"),
    "benchmarks/bench_aot.py": (["--batches", "0"], "argument --batches: expected a positive integer, got '0'"),
    "benchmarks/bench_breakdown.py": (["--dtypes", "float64"], "argument --dtypes: expected float32 and/or float16"),
    "benchmarks/bench_engine_state.py": (["--steps", "-3"], "argument --steps: expected a positive integer, got '-3'"),
    "benchmarks/bench_enqueue.py": (["--edges", "1.5"], "argument --edges: expected a positive integer, got '1.5'"),
    "benchmarks/bench_overwrite.py": (["--features", "0"], "argument --features: expected a positive integer, got '0'"),
    "benchmarks/bench_parse.py": (["--repeat", "x"], "argument --repeat: expected a positive integer, got 'x'"),
    "benchmarks/bench_scatter_add.py": (["--sizes", "1e6:inf:1"], "N, E and F must be positive integers"),
    "benchmarks/bench_state_update.py": (["--batch"], "unrecognized arguments: --batch"),
}


@pytest.mark.parametrize("script", sorted(BAD_ARGUMENTS))
def test_a_bad_argument_is_one_line_and_exit_2_before_the_torch_check(script):
    args, message = BAD_ARGUMENTS[script]
    result = run_without(["torch", "tensorrt"], script, *args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"{Path(script).name}: error: ") and "usage:" not in result.stderr
