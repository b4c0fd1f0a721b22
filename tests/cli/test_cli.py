"""The command line: output lines, exit codes, --dry-run, --help, aliases, files and bad input.

What is about the process goes through a subprocess, as a user starts the sample: the sample output, --help,
the imports a run makes, exit 3 without TensorRT or numpy, a closed pipe, a subset of the bad inputs without
--dry-run. The rest (outputs compared between runs, files, aliases, the long list of bad inputs) runs main()
in this process through run_main, the same code with its stdout, stderr and exit status, without an
interpreter's start (0.3 s of CPU each).
"""

import contextlib
import io
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aliased_io_plugin as cli
from tests.support.import_check import heavy_modules_imported_by
from reference import gnn_reference, make_weights
from tests.conftest import full_tensorrt_missing_reason

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "aliased_io_plugin.py")
SEED_FEATURES = [1.0, 3.0, 5.0, 7.0]
SEED_EDGES = [[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [1, 3]]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, SCRIPT, *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def run_main(*args: str) -> subprocess.CompletedProcess:
    """main(args) in this process, from the folder run_cli runs in: its exit status and what it wrote to stdout
    and stderr, as run_cli returns them. For tests that are not about the process (its imports, signals, exit)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = cli.main(list(args))
    return subprocess.CompletedProcess([SCRIPT, *args], status, stdout.getvalue(), stderr.getvalue())


def run_main_fd(capfd: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess:
    """run_main, with stdout and stderr read from file descriptors 1 and 2 (capfd), as a child's pipes get them:
    what a library writes there itself (ONNX Runtime's log) is in them too."""
    capfd.readouterr()
    with contextlib.chdir(ROOT):
        status = cli.main(list(args))
    captured = capfd.readouterr()
    return subprocess.CompletedProcess([SCRIPT, *args], status, captured.out, captured.err)


def assert_no_results(stdout: str) -> None:
    """Before an input error stdout holds at most the seed and the graph header, never a result."""
    assert stdout == "" or stdout.startswith("Setting seed to: ")
    assert "Classifier output" not in stdout and "Final state" not in stdout


def assert_one_line_error(status: int, captured, message: str) -> None:
    """main() returned 2, printed no result on stdout and one line on stderr that contains `message`."""
    assert status == 2
    assert_no_results(captured.out)
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("aliased_io_plugin.py: error: ")
    assert message in lines[0]


def assert_one_line_error_from_subprocess(result: subprocess.CompletedProcess, message: str) -> None:
    """The script (run_cli, or main() through run_main) exited 2 with nothing on stdout, one line on stderr that
    contains `message`, no traceback."""
    assert result.returncode == 2
    assert_no_results(result.stdout)
    assert result.stderr.count("\n") == 1 and message in result.stderr
    assert "Traceback" not in result.stderr


def printed_matrix(stdout: str) -> np.ndarray:
    """The numbers printed between "Classifier output:" and the next blank line, as a [C, N] array."""
    block = stdout.split("Classifier output:\n", 1)[1].split("\n\n", 1)[0]
    rows = [row for row in block.replace("[[", "[").split("]") if row.strip()]
    return np.array([[float(value) for value in row.replace("[", " ").split()] for row in rows])


def test_dry_run_prints_the_seed_sample_output():
    result = run_cli("--dry-run", "--seed", "5")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[:8] == [
        "Setting seed to: 5",
        "",
        "Adjacency matrix for graph:",
        "[0, 1, 1, 0]",
        "[0, 0, 1, 1]",
        "[0, 0, 0, 1]",
        "[1, 0, 0, 0]",
        "",
    ]
    assert lines[8] == "Classifier output:"
    expected = gnn_reference(SEED_FEATURES, SEED_EDGES, make_weights(5, 3, 1))["softmax"]
    np.testing.assert_allclose(printed_matrix(result.stdout), expected, atol=1e-6)
    assert "no engine was built" in result.stdout


def test_seed_is_drawn_and_printed_when_absent_and_reproduces_the_run():
    first = run_main("--dry-run")
    assert first.returncode == 0, first.stderr
    seed = re.match(r"Setting seed to: (\d+)\n", first.stdout).group(1)
    again = run_main("--dry-run", "--seed", seed)
    assert again.stdout == first.stdout


def test_hyphenated_aliases_match_the_underscore_spellings(tmp_path):
    features = tmp_path / "features.npy"
    np.save(features, np.arange(1.0, 31.0))
    common = ["--seed", "3", "--random_graph", "30", "90"]
    underscore = run_main(*common, "--node_features_file", str(features), "--num_classes", "2", "--dry_run")
    hyphen = run_main(
        "--seed", "3", "--random-graph", "30", "90", "--node-features-file", str(features), "--num-classes", "2",
        "--dry-run",
    )
    assert underscore.returncode == 0, underscore.stderr
    assert hyphen.stdout == underscore.stdout
    string_form = run_main("--node-features", "[[1,2],[3,4],[5,6],[7,8]]", "--seed", "1", "--dry-run")
    assert string_form.returncode == 0, string_form.stderr
    assert printed_matrix(string_form.stdout).shape == (3, 4)


def test_help_lists_the_options_and_the_exit_codes():
    result = run_cli("--help")
    assert result.returncode == 0
    for option in (
        "--precision {fp32,fp16}", "--node_features", "--edges", "--num_classes", "--validate", "--seed", "--dry-run", "--graph FILE", "--node_features_file", "--random_graph NODES EDGES",
        "--verbose",
    ):
        assert option in result.stdout, option
    words = " ".join(result.stdout.split())  # the epilog is wrapped to the width: compare its words
    for code in ("0 success", "1 --validate", "2 bad input", "3 a dependency is missing or too old (numpy;",
                 "74 the output could not be written", "130 interrupted"):
        assert code in words
    assert "33,554,432 characters" in words


@pytest.mark.parametrize("columns", ["300", "100", "60"])
def test_help_fits_100_columns_on_any_terminal(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)  # what argparse reads the width from (shutil.get_terminal_size)
    result = run_main("--help")
    assert result.returncode == 0 and result.stdout.count("\n") > 40
    assert max(len(line) for line in result.stdout.splitlines()) <= 100


def test_features_with_several_columns_and_state_from_an_npz(tmp_path):
    path = tmp_path / "graph.npz"
    features = np.arange(8.0).reshape(4, 2)
    state = np.full((4, 2), 0.25)
    np.savez(path, edges=np.array(SEED_EDGES), node_features=features, state=state)
    result = run_main("--graph", str(path), "--seed", "9", "--dry-run", "--num_classes", "4")
    assert result.returncode == 0, result.stderr
    expected = gnn_reference(features, SEED_EDGES, make_weights(9, 4, 2), state)["softmax"]
    np.testing.assert_allclose(printed_matrix(result.stdout), expected, atol=1e-6)


def test_edge_list_file_with_features_file(tmp_path):
    edges = tmp_path / "graph.txt"
    edges.write_text("# source target\n" + "\n".join(f"{s},{t}" for s, t in SEED_EDGES) + "\n")
    features = tmp_path / "features.npy"
    np.save(features, np.array(SEED_FEATURES))
    from_file = run_main("--graph", str(edges), "--node_features_file", str(features), "--seed", "4", "--dry-run")
    from_strings = run_main("--seed", "4", "--dry-run")
    assert from_file.returncode == 0, from_file.stderr
    assert from_file.stdout == from_strings.stdout


def test_large_random_graph_prints_a_summary_not_a_matrix():
    result = run_main("--random_graph", "2000", "20000", "--seed", "2", "--dry-run", "--verbose")
    assert result.returncode == 0, result.stderr
    assert "Adjacency matrix" not in result.stdout
    summary = [line for line in result.stdout.splitlines() if line.startswith("Graph: ")]
    assert len(summary) == 1 and summary[0].startswith("Graph: 2,000 nodes, 20,000 edges, 1 feature per node")
    assert "Computing the float64 reference ... done in " in result.stderr  # -v: every step, with its time
    assert "..." in result.stdout.split("Classifier output:")[1]  # numpy summarizes a [3, 2000] matrix


def test_dry_run_imports_neither_tensorrt_nor_cuda():
    assert heavy_modules_imported_by(["--dry-run", "--seed", "1", "--precision", "fp16"]) == []


@pytest.mark.skipif(full_tensorrt_missing_reason() is None, reason="TensorRT and a GPU are here: the engine runs")
def test_without_tensorrt_a_run_stops_with_exit_3_and_one_line_naming_what_to_install():
    result = run_cli("--seed", "1")
    assert result.returncode == 3
    assert result.stdout.startswith("Setting seed to: 1\n")  # input was checked and printed first
    error_lines = result.stderr.strip().splitlines()
    assert len(error_lines) == 1, result.stderr
    assert error_lines[0].startswith("aliased_io_plugin.py: error: ")
    assert "pip install" in error_lines[0] and "tensorrt" in error_lines[0].lower()
    assert "Traceback" not in result.stderr


@pytest.mark.tensorrt
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_end_to_end_validate_succeeds(precision):
    result = run_cli("--seed", "1", "--precision", precision, "--validate")
    assert result.returncode == 0, result.stderr
    assert "Validation against reference successful!" in result.stdout
    expected = gnn_reference(SEED_FEATURES, SEED_EDGES, make_weights(1, 3, 1))["softmax"]
    np.testing.assert_allclose(printed_matrix(result.stdout), expected, atol=2e-2)


BAD_INPUTS = [
    (["--node_features", "5"], "node_features: expected a list"),
    (["--node_features", "[1,abc,3,4]"], "'abc' at position 3 is not a number"),
    (["--node_features", "[1,nan,3,4]"], "node 1 feature 0 is nan"),
    (["--node_features", "[1,3,5,inf]"], "node 3 feature 0 is inf"),
    (["--node_features", "[[1,2],[3],[5,6],[7,8]]"], "node 1 (position 7) has 1 feature but node 0 has 2"),
    (["--node_features", "[]"], "the node list is empty"),
    (["--edges", "[[0,1],[1]]"], "edge 1 '[1]' at position 7 has 1 value"),
    (["--edges", "[[0,1],[1,2.5]]"], "'2.5' at position 10 is not a node id"),
    (["--edges", "{0: 1}"], "unexpected character '{'"),
    (["--edges", "[[0,1],[1,2],[2,3],[3,-1]]"], "edge 3 (3 -> -1) has a negative node id"),
    (["--edges", "[[0,1],[1,2],[2,3],[3,0],[0,4]]"], "edge 4 (0 -> 4) refers to a node that does not exist"),
    (["--edges", "[[0,1],[1,2],[2,3],[0,2]]"], "node 0 of 4 has no incoming edge"),
    (["--edges", "[" * 50_000 + "]" * 50_000], "nested deeper than 2 levels"),
    (["--num_classes", "0"], "--num_classes must be an integer from 1 to 4,096, got '0'"),
    (["--num_classes", "abc"], "got 'abc'"),
    (["--num-classes", "5000"], "got '5000'"),
    (["--seed", "-1"], "--seed must be an integer from 0 to 9,223,372,036,854,775,807, got '-1'"),
    (["--seed", "1e5"], "got '1e5'"),
    (["--seed", str(2**64)], "--seed must be an integer"),
    (["--precision", "fp64"], "argument --precision: invalid choice: 'fp64'"),
    (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["--edges", "[[0,1]]", "--graph", "g.npz"], "argument --graph: not allowed with argument --edges"),
    (["--graph", "does-not-exist.npz"], "--graph does-not-exist.npz: file not found"),
    (["--node_features_file", "does-not-exist.npy"], "--node_features_file does-not-exist.npy: file not found"),
    (["--random_graph", "10", "5"], "EDGES (5) must be at least NODES (10)"),
    (["--random_graph", "1e3", "5000"], "--random_graph NODES must be an integer from 1 to 100,000,000, got '1e3'"),
    (["--random_graph", "100", "200", "--node_features", "[1,2]"], "describe 2 nodes but --random_graph asks for 100"),
    (["--random_graph", "40000", "40000", "--num_classes", "4096"], "more than the limit of 134,217,728 values"),
    (["--precision", "fp16", "--node_features", "[1,3,5,70000]"], "node_features at [3, 0] is 70000, beyond float16"),
    (["--node_features", "[1e39,3,5,7]"], "--precision fp32: node_features at [0, 0] is 1e+39, beyond float32's range"),
    (["--node_features", "[3e38,3e38,5,7]"],  # node 2 adds nodes 0 and 1
     "--precision fp32: aggregated features (state + sum of incoming neighbours) at [2, 0] is 6e+38"),
    (["--node_features", "[1e39,3,5,7]", "--steps", "2", "--batch_edges", "2"],
     "--precision fp32: node_features at [0, 0] is 1e+39, beyond float32's range"),
]


@pytest.mark.parametrize("args, message", BAD_INPUTS)
def test_bad_input_exits_2_with_one_line(capsys, args, message):
    assert_one_line_error(cli.main([*args, "--dry-run"]), capsys.readouterr(), message)


@pytest.mark.parametrize("index", [0, 3, 9, 12, 13, 18, 20, 25])
def test_bad_input_through_a_subprocess(index):
    args, message = BAD_INPUTS[index]
    result = run_cli(*args)  # no --dry-run: validation must stop the run before any engine work
    assert_one_line_error_from_subprocess(result, message)


def test_corrupt_and_pickled_files_exit_2_with_the_samples_own_one_line(tmp_path):
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"PK\x03\x04 broken archive")
    pickled = tmp_path / "pickled.npy"
    np.save(pickled, np.array([{"a": 1}, 2], dtype=object), allow_pickle=True)
    header = tmp_path / "header.npy"  # an unfinished header: numpy raised tokenize.TokenError, a traceback before
    header.write_bytes(b"\x93NUMPY\x01\x00\x60\x00{'descr': '<f8', 'fortran_order': False, 'shape': (3,), "
                       b"'a_key_numpy_does_not_know': 'with a long value'}  \n")
    for args, message in (
        (["--graph", str(corrupt)], "not a readable .npz archive: not a zip archive, or a damaged one"),
        (["--node_features_file", str(pickled)], "holds an array of Python objects (pickled), which the sample never loads"),
        (["--node_features_file", str(header)], "not a readable .npy file: the file is truncated or damaged"),
    ):
        result = run_main(*args, "--dry-run")
        assert_one_line_error_from_subprocess(result, message)
        assert "allow_pickle" not in result.stderr and "Error" not in result.stderr  # no numpy words
        assert not result.stderr.rstrip().endswith("...")  # whole, not cut off

    with_features = tmp_path / "graph.npz"
    np.savez(with_features, edges=np.array(SEED_EDGES), node_features=np.ones(4))
    result = run_main("--graph", str(with_features), "--node_features", "[1,2,3,4]", "--dry-run")
    assert result.returncode == 2 and "holds node_features already" in result.stderr

    wrong_dtype = tmp_path / "float_edges.npz"
    np.savez(wrong_dtype, edges=np.array(SEED_EDGES, dtype=np.float32), node_features=np.ones(4))
    result = run_main("--graph", str(wrong_dtype), "--dry-run")
    assert result.returncode == 2 and "node ids must be integers, got an array of dtype float32" in result.stderr


def test_graph_files_without_features_all_follow_one_rule_drawn_from_the_seed(tmp_path):
    """An edge list, an edges-only .npz and --random_graph: features drawn from the seed, uniform in [0, 10),
    the same for the same edges and seed whatever the file, and the run says so."""
    text = tmp_path / "edges.txt"
    text.write_bytes(b"\xef\xbb\xbf" + "\n".join(f"{s} {t}" for s, t in SEED_EDGES).encode())  # with a BOM
    archive = tmp_path / "edges.npz"
    np.savez(archive, edges=np.array(SEED_EDGES))
    from_text = run_main("--graph", str(text), "--seed", "6", "--dry-run")
    from_archive = run_main("--graph", str(archive), "--seed", "6", "--dry-run")
    assert from_text.returncode == 0, from_text.stderr
    assert from_text.stdout == from_archive.stdout
    assert "Node features: none given, so one per node is drawn from the seed, uniform in [0, 10)" in from_text.stdout
    features = np.random.default_rng((6, 1)).uniform(0.0, 10.0, size=(4, 1))
    expected = gnn_reference(features, SEED_EDGES, make_weights(6, 3, 1))["softmax"]
    np.testing.assert_allclose(printed_matrix(from_text.stdout), expected, atol=1e-6)
    assert "Node features: none given" in run_main("--random_graph", "20", "40", "--dry-run").stdout
    assert "Node features" not in run_main("--graph", str(text), "--node_features", "[1,2,3,4]", "--dry-run").stdout

    too_few = tmp_path / "sparse.txt"
    too_few.write_text("0 1\n1 999999999999\n")  # N would be 1e12: refused before anything of size N
    assert_one_line_error_from_subprocess(run_main("--graph", str(too_few), "--dry-run"),
                                          "2 edges with node ids up to 999999999999 cannot give each of")
    (tmp_path / "empty.txt").write_text("# no edges\n")
    np.savez(tmp_path / "empty.npz", edges=np.zeros((0, 2), np.int64))
    for no_edges in (tmp_path / "empty.txt", tmp_path / "empty.npz"):
        assert_one_line_error_from_subprocess(run_main("--graph", str(no_edges), "--dry-run"),
                                              "edges: there are none, so no node has an incoming edge")
    assert "drawn from the seed" in run_main("--help").stdout


def test_validation_report_lines_and_status():
    expected = gnn_reference(SEED_FEATURES, SEED_EDGES, make_weights(0, 3, 1))["softmax"]
    lines, status = cli.validation_report(expected.astype(np.float16), expected, "fp16")
    assert status == 0 and lines[0] == "Validation against reference successful!"
    assert lines[1].startswith("Against the float64 reference: largest absolute error")
    wrong = expected[::-1]
    lines, status = cli.validation_report(wrong, expected, "fp32")
    assert status == 1 and lines[0] == "Validation against reference failed!"


def test_steps_validation_lines_and_status():
    from reference.state import StateCheck

    good, status = cli.verdict((cli.state_label(5), StateCheck(True, 1e-6, 2e-6, 0, 10)))
    assert status == 0 and good[0] == "Validation against reference successful!"
    assert "all 5 batches" in good[1] and "0 of 10 elements beyond" in good[1]
    lines, status = cli.verdict((cli.state_label(5), StateCheck(False, 1.0, 2e-6, 3, 10)))
    assert status == 1 and lines[0] == "Validation against reference failed!"


def run_cli_without(module: str, *args: str) -> subprocess.CompletedProcess:
    """The script run as a user would, in an interpreter where importing `module` fails as if not installed."""
    code = (f"import runpy, sys; sys.modules[{module!r}] = None; sys.argv = [{SCRIPT!r}, *{list(args)!r}]; "
            f"runpy.run_path({SCRIPT!r}, run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_without_numpy_a_run_stops_with_exit_3_and_one_line_but_help_works():
    result = run_cli_without("numpy", "--dry-run")
    assert result.returncode == 3 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "numpy is not installed" in result.stderr and "pip install" in result.stderr
    assert "Traceback" not in result.stderr
    help_text = run_cli_without("numpy", "--help")
    assert help_text.returncode == 0 and "--dry-run" in help_text.stdout
    usage_error = run_cli_without("numpy", "--precision", "fp64")  # the parser needs no numpy either
    assert usage_error.returncode == 2 and "invalid choice: 'fp64'" in usage_error.stderr


def test_output_into_a_closed_pipe_ends_quietly_like_other_tools():
    """`aliased_io_plugin.py --dry-run ... | head -1`: the reader is gone before the output is written."""
    process = subprocess.Popen([sys.executable, SCRIPT, "--dry-run", "--random_graph", "2000", "20000"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()
    stderr = process.stderr.read()
    process.stderr.close()
    assert process.wait(timeout=120) == -signal.SIGPIPE  # what `head` does to `cat` and every C tool
    assert stderr == b""


@pytest.mark.parametrize("steps", [False, True])
def test_engine_failure_is_one_line_and_exit_4(monkeypatch, capsys, steps):
    """When TensorRT cannot add the plugin, build or execute (network/ raises EngineError, e.g. add_plugin_v3
    returned None), the CLI prints one line and exits 4 after the input lines, with no traceback."""
    import network.run
    import network.steps
    from common.errors import EngineError

    def refuse(*args, **kwargs):
        raise EngineError("TensorRT could not add the ScatterAddInPlace plugin (version 1, classifier network)")

    module, name = (network.steps, "run_steps") if steps else (network.run, "run_graph")
    monkeypatch.setattr(module, name, refuse)
    extra = ["--steps", "2", "--batch_edges", "3"] if steps else []
    status = cli.main(["--seed", "1", *extra])
    captured = capsys.readouterr()
    assert status == 4
    assert captured.err.splitlines() == [
        "aliased_io_plugin.py: error: TensorRT could not add the ScatterAddInPlace plugin (version 1, classifier network)"
    ]
    assert "Classifier output" not in captured.out and "Final state" not in captured.out


def test_a_failed_cuda_call_is_one_line_and_exit_4(monkeypatch, capsys):
    """A CUDA error on the way (out of device memory, a launch refused) names the call and exits 4, no traceback."""
    import network.steps
    from common.cuda_check import CudaError

    def out_of_memory(*args, **kwargs):
        raise CudaError("CUDA_ERROR_OUT_OF_MEMORY: out of memory (in cuMemAlloc)", "CUDA_ERROR_OUT_OF_MEMORY")

    monkeypatch.setattr(network.steps, "run_steps", out_of_memory)
    status = cli.main(["--seed", "1", "--steps", "2", "--batch_edges", "3"])
    assert status == 4
    assert capsys.readouterr().err.splitlines() == [
        "aliased_io_plugin.py: error: CUDA: CUDA_ERROR_OUT_OF_MEMORY: out of memory (in cuMemAlloc)"]


@pytest.mark.parametrize("wrong", [False, True])
def test_steps_validate_fails_with_exit_1_when_the_final_state_is_wrong(monkeypatch, capsys, wrong):
    """--steps --validate compares the engine's final state with the float64 reference: exit 1 and the failure
    line when one value is off, exit 0 when it is right (network.steps.run_steps stands in for the engine)."""
    import network.steps
    import reference.state
    from tests.support.engine_stand_ins import steps_result

    def engine_steps(graph, precision, batches, **kwargs):
        final_state = reference.state.expected_final_state(graph.node_features, batches, graph.state)
        if wrong:
            final_state[2, 0] += 1.0
        return steps_result(final_state)

    monkeypatch.setattr(network.steps, "run_steps", engine_steps)
    status = cli.main(["--seed", "1", "--steps", "3", "--batch_edges", "5", "--validate"])
    out = capsys.readouterr().out
    assert status == (1 if wrong else 0)
    assert f"Validation against reference {'failed' if wrong else 'successful'}!" in out
