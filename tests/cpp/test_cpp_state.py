"""cpp/aliased_io_state: built with CMake against TensorRT's real C++ headers (../shared/trt-headers: 10.4.0, 10.16.0,
11.1.0) with -Wall -Wextra and no warning, linked against the stand-in libnvinfer of ../shared/trt-bindings/setup
(whose createInferRuntime returns null), then run: exit 3 and one line without a TensorRT runtime, exit 2 and one
line for bad arguments, before any library or device is touched. --reference-only (no TensorRT runtime, no GPU)
against the Python --steps reference of the same seed. The end-to-end test (`tensorrt`) builds against an
installed TensorRT, saves an AOT state engine with the CLI and runs the program on it.

Stand-in layouts: $TRT_BINDINGS_LAYOUTS/VERSION (.ci/run lays them out), else setup's default /tmp/trt-bindings;
where a tool, the headers or a layout is missing the tests skip, saying why (under TRT_CPP_REQUIRED=1 they fail).
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.plugin_host.build import DEFAULT_HEADERS as HEADERS
from tests.plugin_host.build import RELEASES, header_set

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "cpp"
CLI = str(ROOT / "aliased_io_plugin.py")
LAYOUTS = Path(os.environ.get("TRT_BINDINGS_LAYOUTS", "/tmp/trt-bindings"))
# Header set -> the stand-in libraries of the same release line, as the plugin host is built for them
BUILDS = {header_set(release): release for release in RELEASES}


def cuda_toolkit_missing() -> str | None:
    if shutil.which("nvcc") or Path("/usr/local/cuda/include/cuda_runtime_api.h").exists():
        return None
    return "no CUDA toolkit (nvcc or /usr/local/cuda) for CUDA's runtime headers and libcudart"


def cmake_build(build: Path, *definitions: str) -> subprocess.CompletedProcess:
    """Configures and builds cpp/ into `build`; the result's stdout holds both steps' output."""
    env = dict(os.environ)
    if not shutil.which("nvcc") and Path("/usr/local/cuda/bin/nvcc").exists():
        env["CUDAToolkit_ROOT"] = "/usr/local/cuda"
    configure = subprocess.run(["cmake", "-S", str(SOURCE), "-B", str(build), *definitions], capture_output=True,
                               text=True, env=env)
    if configure.returncode != 0:
        return configure
    built = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True, env=env)
    built.stdout = configure.stdout + built.stdout
    return built


def stand_in_library(headers: str) -> Path:
    version = BUILDS[headers]
    return LAYOUTS / version / "tensorrt_libs" / f"libnvinfer.so.{version.split('.')[0]}"


_builds: dict[str, Path] = {}


def unavailable(reason: str) -> None:
    """Skips, saying why; fails instead under TRT_CPP_REQUIRED=1 (.ci/run), where everything must be there."""
    if os.environ.get("TRT_CPP_REQUIRED") == "1":
        pytest.fail(f"TRT_CPP_REQUIRED=1 but {reason}")
    pytest.skip(reason)


def build_against(headers: str, tmp_path_factory) -> Path:
    """The program built against the header set `headers` and its stand-in libnvinfer (once per session);
    `unavailable` where a tool, the headers or the stand-in is missing."""
    if headers in _builds:
        return _builds[headers]
    missing = [tool for tool in ("cmake", "g++") if shutil.which(tool) is None]
    if missing:
        unavailable(f"{' and '.join(missing)} not found")
    if cuda_toolkit_missing():
        unavailable(cuda_toolkit_missing())
    if not (HEADERS / headers / "NvInferRuntime.h").exists():
        unavailable(f"TensorRT's headers {HEADERS / headers} are not here (the project's ../shared checkout)")
    library = stand_in_library(headers)
    if not library.exists():
        unavailable(f"no stand-in {library}: run ../shared/trt-bindings/setup {BUILDS[headers]} {library.parent.parent}")
    build = tmp_path_factory.mktemp(f"build-{headers}")
    result = cmake_build(build, f"-DTENSORRT_INCLUDE_DIR={HEADERS / headers}", f"-DTENSORRT_LIBRARY={library}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning" not in (result.stdout + result.stderr).lower(), result.stdout + result.stderr
    _builds[headers] = build / "aliased_io_state"
    return _builds[headers]


@pytest.fixture(scope="module", params=sorted(BUILDS))
def program(request, tmp_path_factory) -> tuple[str, Path]:
    """(header set, the program built against it and the matching stand-in libnvinfer)."""
    return request.param, build_against(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def recent_program(tmp_path_factory) -> Path:
    """The program built against the 11.1.0 headers (the reference does not depend on the header set)."""
    return build_against("11.1.0", tmp_path_factory)


def run_program(program: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(program), *args], capture_output=True, text=True, timeout=600, cwd=cwd)


def assert_one_line(result: subprocess.CompletedProcess, status: int, message: str) -> None:
    assert result.returncode == status, result.stdout + result.stderr
    assert result.stdout == "", result.stdout
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("aliased_io_state: error: "), result.stderr
    assert message in result.stderr, result.stderr


def test_without_a_tensorrt_runtime_it_exits_3_with_one_line(program, tmp_path):
    headers, path = program
    engine = tmp_path / "state.engine"
    engine.write_bytes(b"not checked before the runtime exists")
    library = ".".join(BUILDS[headers].split(".")[:3])  # getInferLibVersion has no build number
    assert_one_line(run_program(path, f"--engine={engine}", "--steps=3", "--validate"), 3,
                    f"no TensorRT runtime: createInferRuntime returned null (libnvinfer {library}")


BAD_ARGUMENTS = [
    (["--steps=0"], "--steps must be an integer from 1 to 1,000,000, got '0'"),
    (["--engine", "e", "--batch_edges=2.5"], "--batch_edges must be an integer from 1 to 100,000,000, got '2.5'"),
    (["--seed=-1"], "--seed must be an integer from 0 to 9,223,372,036,854,775,807, got '-1'"),
    (["--engine=e", "--steps=1000", "--batch_edges=100001"], "adds 100,001,000 edges in all, more than the limit"),
    (["--wat"], "unknown argument '--wat' (--help lists the options)"),
    (["--engine"], "--engine needs a value (--engine=VALUE)"),
    (["--validate=yes"], "--validate takes no value, got 'yes'"),
    ([], "--engine=FILE is required"),
    (["--engine=e", "--features=2"], "--features goes with --reference-only"),
    (["--reference-only", "--nodes=5"], "--reference-only needs --nodes=N and --batch_edges=B"),
    (["--reference-only", "--nodes=5", "--batch_edges=2", "--validate"], "--reference-only runs no engine: drop --validate"),
    (["--reference-only", "--nodes=100000000", "--batch_edges=2", "--features=2"], "more than the limit of 100,000,000"),
    (["--engine=does/not/exist.engine"], "cannot read --engine does/not/exist.engine: No such file or directory"),
    # What is not a regular file is refused before anything is allocated for it (a folder was std::bad_alloc, exit 4)
    (["--engine=/tmp"], "--engine /tmp is a folder, not an engine file"),
    (["--engine=/dev/null"], "--engine /dev/null is not a regular file (a FIFO, socket or device)"),
    (["--engine=/proc/version"], "--engine /proc/version is empty, not a TensorRT engine"),
]


@pytest.mark.parametrize("args, message", BAD_ARGUMENTS, ids=[" ".join(args) or "none" for args, _ in BAD_ARGUMENTS])
def test_bad_arguments_exit_2_with_one_line(program, args, message):
    assert_one_line(run_program(program[1], *args), 2, message)


def test_an_empty_engine_file_is_exit_2(program, tmp_path):
    (tmp_path / "empty.engine").write_bytes(b"")
    assert_one_line(run_program(program[1], f"--engine={tmp_path / 'empty.engine'}"), 2, "is empty, not a TensorRT engine")


def test_a_fifo_is_refused_without_waiting_for_a_writer(program, tmp_path):
    fifo = tmp_path / "state.engine"
    os.mkfifo(fifo)
    result = subprocess.run([str(program[1]), f"--engine={fifo}"], capture_output=True, text=True, timeout=60)
    assert_one_line(result, 2, f"--engine {fifo} is not a regular file (a FIFO, socket or device)")


def test_help_lists_the_options(program):
    result = run_program(program[1], "--help")
    assert result.returncode == 0 and result.stderr == ""
    for option in ("--engine=FILE", "--steps=K", "--batch_edges=B", "--nodes=N", "--seed=S", "--validate",
                   "--reference-only", "--features=F", "--verbose", "--help"):
        assert option in result.stdout


# --- the C++ reference against the Python --steps reference of the same seed ------------------------------------


def numbers(text: str) -> np.ndarray:
    return np.array([float(value) for value in text.replace("[", " ").replace("]", " ").split()])


def printed_block(stdout: str, header: str) -> np.ndarray:
    """The numbers of the matrix printed after the line containing `header` (up to a blank line or 'Sum over')."""
    block = stdout.split(header, 1)[1].split("\n", 1)[1]
    return numbers(re.split(r"\n\n|\nSum over", block, maxsplit=1)[0])


def reference_only(program: Path, nodes: int, steps: int, batch_edges: int, seed: int, features: int = 1) -> str:
    result = run_program(program, "--reference-only", f"--nodes={nodes}", f"--steps={steps}",
                         f"--batch_edges={batch_edges}", f"--seed={seed}", f"--features={features}")
    assert result.returncode == 0 and result.stderr == "", result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize("nodes, steps, batch_edges, seed", [(6, 3, 4, 5), (150, 7, 40, 0), (37, 1, 500, 2**63 - 1)])
def test_reference_only_prints_the_state_of_the_python_dry_run(recent_program, nodes, steps, batch_edges, seed):
    cpp = reference_only(recent_program, nodes, steps, batch_edges, seed)
    python = subprocess.run([sys.executable, CLI, "--random_graph", str(nodes), str(nodes), "--steps", str(steps),
                             "--batch_edges", str(batch_edges), "--seed", str(seed), "--dry-run"],
                            capture_output=True, text=True, cwd=ROOT)
    assert python.returncode == 0, python.stderr
    assert "multiples of 0.25 in [0, 10) (graph.portable_node_features" in python.stdout
    expected = printed_block(python.stdout, f"Final state X after {steps} batches:")
    actual = printed_block(cpp, f"Final state X after {steps} batches (float64 reference):")
    assert expected.size == nodes and np.count_nonzero(expected) > 0
    np.testing.assert_array_equal(actual, expected)  # multiples of 0.25: exact in both printouts


def test_reference_only_with_features_matches_an_npz_with_a_zero_state(recent_program, tmp_path):
    """F > 1 from Python: a graph file with edges and a zero state [N, F] gets F drawn features per node."""
    nodes, features, steps, batch_edges, seed = 60, 3, 4, 25, 8
    archive = tmp_path / "zero_state.npz"
    np.savez(archive, edges=np.stack([np.arange(nodes), np.arange(nodes)], axis=1),
             state=np.zeros((nodes, features)))
    python = subprocess.run([sys.executable, CLI, "--graph", str(archive), "--steps", str(steps), "--batch_edges",
                             str(batch_edges), "--seed", str(seed), "--dry-run"], capture_output=True, text=True, cwd=ROOT)
    assert python.returncode == 0, python.stderr
    cpp = reference_only(recent_program, nodes, steps, batch_edges, seed, features)
    expected = printed_block(python.stdout, f"Final state X after {steps} batches:")
    np.testing.assert_array_equal(printed_block(cpp, "(float64 reference):"), expected)
    assert expected.size == nodes * features


def test_reference_only_of_a_large_state_matches_the_python_functions(recent_program):
    """Summarized past 200 values: the first and last three rows and the exact sum, against network.steps."""
    from graph import portable_node_features
    from reference.state import expected_final_state
    from graph import portable_edge_batches

    nodes, features, steps, batch_edges, seed = 100_000, 2, 20, 5_000, 3
    cpp = reference_only(recent_program, nodes, steps, batch_edges, seed, features)
    state = expected_final_state(portable_node_features(nodes, features, seed),
                                 portable_edge_batches(nodes, steps, batch_edges, seed), None)
    head, tail = cpp.split("(float64 reference):\n", 1)[1].split("\n...\n", 1)
    np.testing.assert_array_equal(numbers(head).reshape(3, features), state[:3])
    np.testing.assert_array_equal(numbers(tail.split("\nSum over")[0]).reshape(3, features), state[-3:])
    total = float(re.search(r"Sum over the state: (\S+)", cpp).group(1))
    assert total == state.sum() and total > 0


# --- end to end on the full TensorRT ------------------------------------------------------------------------------


def installed_tensorrt_build(tmp_path: Path) -> Path:
    """The program built against the installed TensorRT (TENSORRT_ROOT, TENSORRT_INCLUDE_DIR, TENSORRT_LIBRARY or
    the system's); skips with CMake's reason when it finds none (the pip wheels carry no C++ headers)."""
    for tool in ("cmake", "g++"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found")
    if cuda_toolkit_missing():
        pytest.skip(cuda_toolkit_missing())
    definitions = [f"-D{name}={os.environ[name]}" for name in ("TENSORRT_INCLUDE_DIR", "TENSORRT_LIBRARY")
                   if os.environ.get(name)]
    result = cmake_build(tmp_path / "build", *definitions)
    if result.returncode != 0 and "TensorRT not found" in result.stderr:
        pytest.skip("TensorRT's C++ headers and libnvinfer not found: set TENSORRT_ROOT (a tarball) or install "
                    "libnvinfer-dev")
    assert result.returncode == 0, result.stdout + result.stderr
    return tmp_path / "build" / "aliased_io_state"


@pytest.mark.tensorrt
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_the_program_runs_an_aot_state_engine_saved_by_the_cli(tmp_path, precision):
    pytest.importorskip("tensorrt.plugin", reason="--plugin aot needs TensorRT >= 10.16 (tensorrt.plugin)")
    path = installed_tensorrt_build(tmp_path)
    engine = tmp_path / f"state_aot_{precision}.engine"
    nodes, steps, batch_edges, seed = 150, 6, 300, 4  # 150 values: both programs print them all
    built = subprocess.run([sys.executable, CLI, "--plugin", "aot", "--precision", precision, "--random_graph",
                            str(nodes), str(nodes), "--steps", str(steps), "--batch_edges", str(batch_edges), "--seed", str(seed),
                            "--validate", "--save_engine", str(engine)], capture_output=True, text=True, cwd=ROOT)
    assert built.returncode == 0, built.stdout + built.stderr
    result = run_program(path, f"--engine={engine}", f"--steps={steps}", f"--seed={seed}", "--validate")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation against reference successful!" in result.stdout
    assert f"Final state against the float64 reference of all {steps} batches: largest absolute error" in result.stdout
    assert "Engine output \"X_out\": getAliasedInputTensor" in result.stdout
    assert re.search(r"Per-step engine time \(CUDA events around enqueueV3\): median .* over 6 runs", result.stdout)
    # The same seed, N = the profile's opt (the graph's nodes) and B = opt E: the Python run's final state
    python_state = printed_block(built.stdout, f"Final state X after {steps} steps:")
    cpp_state = printed_block(result.stdout, f"Final state X after {steps} steps:")
    reference = printed_block(reference_only(path, nodes, steps, batch_edges, seed), "(float64 reference):")
    np.testing.assert_allclose(cpp_state, reference, rtol=2e-3 if precision == "fp16" else 1e-6)
    np.testing.assert_allclose(python_state, reference, rtol=2e-3 if precision == "fp16" else 1e-6)
    # A shape outside the engine's profile is refused before anything runs
    assert_one_line(run_program(path, f"--engine={engine}", "--nodes=100000000"), 2, "is outside the engine's profile")
