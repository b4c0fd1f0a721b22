"""The command line's engine options: --save_engine, --load_engine, --max_nodes, --max_edges, --steps,
--batch_edges, --benchmark, --cuda_graph. Their checks run before TensorRT or CUDA is imported: bad values exit 2 with one
line. --dry-run with --steps prints the reference of the final state. No TensorRT or GPU needed. Runs about the
process (imports, exit 3 without TensorRT, a subset of the bad values) go through a subprocess (run_cli), the
others through main() in this process (run_main)."""

import dataclasses
import os

import numpy as np
import pytest

import aliased_io_plugin as cli
from tests.support.import_check import heavy_modules_imported_by
from graph import MAX_RANDOM_EDGES
from common.limits import LARGE_FILE_BYTES, MAX_PROFILE_SIZE, MAX_STEPS

from tests.conftest import full_tensorrt_missing_reason
from tests.cli.test_cli import (
    SEED_FEATURES,
    assert_one_line_error,
    assert_one_line_error_from_subprocess,
    run_cli,
    run_main,
)


@pytest.fixture
def files(tmp_path):
    engine = tmp_path / "saved.engine"
    engine.write_bytes(b"not really an engine")  # only its existence is checked before TensorRT loads
    return {"engine": str(engine), "folder": str(tmp_path), "missing_folder": str(tmp_path / "nope" / "x.engine")}


BAD_ENGINE_OPTIONS = [
    (["--steps", "0", "--batch_edges", "5"], f"--steps must be an integer from 1 to {MAX_STEPS:,}, got '0'"),
    (["--steps", "2.5", "--batch_edges", "5"], "--steps must be an integer from 1 to 1,000,000, got '2.5'"),
    (["--steps", "3"], "--steps 3 needs --batch_edges B"),
    (["--batch_edges", "5"], "--batch_edges needs --steps K"),
    (["--steps", "2", "--batch_edges", "-1"], f"--batch_edges must be an integer from 1 to {MAX_RANDOM_EDGES:,}, got '-1'"),
    (["--steps", "1000", "--batch-edges", "100001"], "adds 100,001,000 edges in all, more than the limit of 100,000,000"),
    (["--benchmark", "0"], "--benchmark must be an integer from 1 to 1,000,000, got '0'"),
    (["--benchmark", "ten"], "got 'ten'"),
    (["--steps", "2", "--batch_edges", "2", "--benchmark", "5"], "--benchmark times the classifier engine"),
    (["--max_nodes", "0"], f"--max_nodes must be an integer from 1 to {MAX_PROFILE_SIZE:,}, got '0'"),
    (["--max-edges", str(MAX_PROFILE_SIZE + 1)], "--max_edges must be an integer from 1 to 2,147,483,647"),
    (["--max_nodes", "3"], "the graph has 4 nodes, more than --max_nodes 3"),
    (["--max_edges", "5"], "the graph has 6 edges, more than --max_edges 5"),
    (["--steps", "2", "--batch_edges", "10", "--max_edges", "9"], "each --steps batch has 10 edges, more than --max_edges 9"),
    (["--steps", "2", "--batch_edges", "10", "--max_nodes", "2"], "the graph has 4 nodes, more than --max_nodes 2"),
    (["--load_engine", "{missing}"], "--load_engine {missing}: file not found"),
    (["--load_engine", "{folder}"], "--load_engine {folder}: not a regular file"),
    (["--load-engine", ""], "--load_engine '': expected a file name"),
    (["--save_engine", "{folder}"], "--save_engine {folder}: is a folder"),
    (["--save_engine", ""], "--save_engine '': expected a file name"),
    (["--save_engine", "no\nsuch/x.engine"], "--save_engine 'no\\nsuch/x.engine': the folder 'no\\nsuch' does not exist"),
    (["--save-engine", "{missing_folder}"], "the folder {missing_folder_parent} does not exist"),
    (["--load_engine", "{engine}", "--save_engine", "{folder}/copy.engine"], "--load_engine and --save_engine: give one"),
    (["--load_engine", "{engine}", "--max_nodes", "100"], "an engine from --load_engine keeps the profile"),
    (["--precision", "fp16", "--node_features", "[60000,60000,60000,60000]", "--steps", "2", "--batch_edges", "8"],
     "beyond the largest fp16 value 65504; use --precision fp32 or fewer --steps"),
    (["--precision", "fp16", "--node_features", "[1,3,5,70000]", "--steps", "1", "--batch_edges", "1"],
     "--precision fp16: node_features at [3, 0] is 70000, beyond float16's range (+-65504)"),
    (["--cuda_graph"], "--cuda_graph replays the executions of --steps K or --benchmark ITERS from a CUDA graph; "
     "give one of them (a single run has nothing to replay)"),
    (["--cuda-graph", "--validate", "--save_engine", "{folder}/g.engine"], "--cuda_graph replays the executions of --steps K"),
    (["--load_engine", "{engine}", "--max_edges", "100"], "an engine from --load_engine keeps the profile"),
    (["--load_engine", "{engine}", "--max-nodes", "7", "--max_edges", "9"], "an engine from --load_engine keeps the profile"),
    (["--steps", "100", "--batch_edges", "1000001"], "adds 100,000,100 edges in all, more than the limit of 100,000,000"),
]


def test_steps_times_batch_edges_at_exactly_the_limit_is_accepted():
    """K * B == MAX_RANDOM_EDGES is allowed (the limit is inclusive); one edge more is not."""
    from cli.options import parse_arguments, parse_engine_options
    from common.errors import InputError

    accepted = parse_engine_options(parse_arguments(["--steps", "100", "--batch_edges", str(MAX_RANDOM_EDGES // 100)]))
    assert accepted.steps * accepted.batch_edges == MAX_RANDOM_EDGES
    assert parse_engine_options(parse_arguments(["--steps", "1", "--batch_edges", str(MAX_RANDOM_EDGES)])).steps == 1
    with pytest.raises(InputError, match="more than the limit"):
        parse_engine_options(parse_arguments(["--steps", "2", "--batch_edges", str(MAX_RANDOM_EDGES // 2 + 1)]))


def fill(args, message, files):
    names = dict(files, missing=os.path.join(files["folder"], "missing.engine"),
                 missing_folder_parent=os.path.dirname(files["missing_folder"]))
    return [arg.format(**names) for arg in args], message.format(**names)


@pytest.mark.parametrize("args, message", BAD_ENGINE_OPTIONS)
def test_bad_engine_option_exits_2_with_one_line(capsys, files, args, message):
    args, message = fill(args, message, files)
    status = cli.main([*args, "--seed", "1"])  # not a dry run: the checks come before any engine work
    assert_one_line_error(status, capsys.readouterr(), message)


@pytest.mark.parametrize("index", [2, 6, 11, 15, 20, 24, 27])
def test_bad_engine_option_through_a_subprocess(files, index):
    args, message = fill(*BAD_ENGINE_OPTIONS[index], files)
    assert_one_line_error_from_subprocess(run_cli(*args, "--seed", "1"), message)


def test_help_lists_the_engine_options():
    result = run_main("--help")
    assert result.returncode == 0
    for option in ("--save_engine", "--load_engine", "--max_nodes", "--max_edges", "--steps", "--batch_edges",
                   "--benchmark", "--cuda_graph"):
        assert option in result.stdout


@pytest.mark.parametrize("args", [["--steps", "2", "--batch_edges", "3"], ["--benchmark", "4"]])
def test_cuda_graph_goes_with_steps_or_benchmark(args):
    from cli.options import parse_arguments, parse_engine_options

    assert parse_engine_options(parse_arguments([*args, "--cuda-graph"])).cuda_graph
    assert not parse_engine_options(parse_arguments(args)).cuda_graph


def printed_state(stdout: str) -> np.ndarray:
    block = stdout.split("Final state X after", 1)[1].split(":\n", 1)[1].split("\n\n", 1)[0]
    return np.array([float(value) for value in block.replace("[", " ").replace("]", " ").split()])


def test_dry_run_with_steps_prints_the_reference_of_all_batches():
    result = run_main("--dry-run", "--seed", "4", "--steps", "3", "--batch_edges", "5", "--node_features", "[1,10,100,1000]")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "the graph gives the 4 nodes, their features and the initial state (its own 6 edges are not used)" in result.stdout
    assert "Final state X after 3 batches:" in result.stdout
    # The contract: batch k is batch k of graph.portable_edge_batches under the seed (what cpp/ draws too).
    from graph import portable_edge_batches

    batches = portable_edge_batches(4, 3, 5, seed=4)
    expected = np.zeros(4)
    for batch in batches:
        np.add.at(expected, batch[:, 1], np.array([1.0, 10.0, 100.0, 1000.0])[batch[:, 0]])
    np.testing.assert_array_equal(printed_state(result.stdout), expected)
    assert "no engine was built" in result.stdout


def test_dry_run_mentions_engine_options_it_cannot_use(files):
    result = run_main("--dry-run", "--seed", "1", "--save_engine", os.path.join(files["folder"], "a.engine"), "--benchmark", "5")
    assert result.returncode == 0, result.stderr
    assert "(--save_engine, --benchmark: no engine to act on in a dry run.)" in result.stdout
    assert not os.path.exists(os.path.join(files["folder"], "a.engine"))


def test_dry_run_takes_cuda_graph_as_it_takes_steps_and_benchmark():
    """Checked the same (with --steps or --benchmark), then named among the options a dry run has no engine for."""
    steps = run_main("--dry-run", "--seed", "4", "--steps", "3", "--batch_edges", "5", "--cuda_graph")
    assert steps.returncode == 0, steps.stderr
    assert "Final state X after 3 batches:" in steps.stdout
    assert "(--cuda_graph: no engine to act on in a dry run.)" in steps.stdout
    benchmark = run_main("--dry-run", "--seed", "1", "--benchmark", "5", "--cuda_graph")
    assert benchmark.returncode == 0, benchmark.stderr
    assert "(--benchmark, --cuda_graph: no engine to act on in a dry run.)" in benchmark.stdout
    alone = run_main("--dry-run", "--seed", "1", "--cuda_graph")
    assert_one_line_error_from_subprocess(alone, "--cuda_graph replays the executions of --steps K or --benchmark ITERS")


def test_dry_run_with_steps_imports_neither_tensorrt_nor_cuda():
    args = ["--dry-run", "--seed", "1", "--steps", "2", "--batch_edges", "3", "--max_nodes", "10", "--precision", "fp16",
            "--validate"]
    assert heavy_modules_imported_by(args, ("tensorrt", "tensorrt_rtx_bindings", "cuda", "polygraphy", "plugin")) == []


def test_progress_on_stderr_only_with_verbose_when_stderr_is_not_a_terminal(tmp_path):
    features = tmp_path / "features.npy"
    np.save(features, np.ones(LARGE_FILE_BYTES // 8 + 1))  # 64 MiB
    # The features describe far more nodes than the default edges reach: loading succeeds, validation fails.
    quiet = run_main("--node_features_file", str(features), "--dry-run", "--seed", "1")
    assert quiet.returncode == 2 and quiet.stderr.count("\n") == 1  # the error line alone
    verbose = run_main("--node_features_file", str(features), "--dry-run", "--seed", "1", "-v")
    assert verbose.returncode == 2
    lines = verbose.stderr.splitlines()
    assert lines[0].startswith(f"Reading --node_features_file {features} (64.0 MiB) ... done in ")
    assert lines[1] == "Validating the graph ..."  # the step's line ends there: the error is the failure's one line
    assert lines[2].startswith("aliased_io_plugin.py: error: ") and len(lines) == 3
    assert "failed" not in verbose.stderr


@pytest.mark.skipif(full_tensorrt_missing_reason() is None, reason="TensorRT and a GPU are here: the engine runs")
@pytest.mark.parametrize("args", [["--steps", "2", "--batch_edges", "3"], ["--benchmark", "3"],
                                  ["--steps", "2", "--batch_edges", "3", "--cuda_graph"], ["--benchmark", "3", "--cuda_graph"]])
def test_without_tensorrt_engine_modes_stop_with_exit_3_and_one_line(args):
    result = run_cli("--seed", "1", *args)
    assert result.returncode == 3
    assert result.stdout.startswith("Setting seed to: 1\n")
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install" in lines[0]


def largest_launched_edges(chain, dtypes, nodes, features):
    """The largest E up to MAX_PROFILE_SIZE at which every step of `chain` launches (inplace.launch
    check_chain_launches), by bisection; None where it launches at none."""
    from inplace.launch import check_chain_launches

    def launches(edges):
        try:
            check_chain_launches(chain, dtypes, {"N": nodes, "E": edges, "F": features})
        except ValueError:
            return False
        return True

    if not launches(0):
        return None
    low, high = 0, MAX_PROFILE_SIZE + 1  # launches(low); high: past the largest --max_edges
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if launches(middle) else (low, middle)
    return low


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_the_aot_edge_limit_is_the_chains_own(capsys, monkeypatch, precision):
    """--plugin aot's limit on the profile is the chosen chain's: every step's launch at the profile's maxima must
    fit int32. The chains the sample's scatter-adds choose launch at every --max_edges (computed: the bisection
    reaches MAX_PROFILE_SIZE); where a chain has a limit (split_table's slots, 2 E past 2^21: forced here as the
    chosen chain), its largest E is accepted and the next refused in one line naming the size and the value."""
    from inplace.spec import BuildFacts
    from plugin import scatter_add_op
    from plugin.scatter_add_op import SCATTER_ADD, SCATTER_ADD_COUNTS, split_chain

    dtype = "float16" if precision == "fp16" else "float32"
    dtypes = {"state": dtype, "src": dtype, "index": "int64"}
    facts = BuildFacts(dtypes, constants={"F": 1}, maxima={"E": MAX_PROFILE_SIZE})
    for op in (SCATTER_ADD, SCATTER_ADD_COUNTS):
        assert largest_launched_edges(op.chain_for(facts), dtypes, MAX_PROFILE_SIZE, 1) == MAX_PROFILE_SIZE
    assert cli.main(["--plugin", "aot", "--precision", precision, "--max_edges", str(MAX_PROFILE_SIZE),
                     "--max_nodes", str(MAX_PROFILE_SIZE), "--dry-run", "--seed", "1"]) == 0
    capsys.readouterr()

    largest = largest_launched_edges(split_chain(), dtypes, MAX_PROFILE_SIZE, 1)
    assert largest is not None and largest < MAX_PROFILE_SIZE
    monkeypatch.setattr(scatter_add_op, "SCATTER_ADD", dataclasses.replace(SCATTER_ADD, choose=lambda _: split_chain()))
    assert cli.main(["--plugin", "aot", "--precision", precision, "--max_edges", str(largest), "--dry-run",
                     "--seed", "1"]) == 0
    capsys.readouterr()
    status = cli.main(["--plugin", "aot", "--precision", precision, "--max_edges", str(largest + 1), "--dry-run",
                       "--seed", "1"])
    slots = max(min(4 * (largest + 1), 2**21), 2 * (largest + 1))  # split_capacity's value at E + 1
    assert_one_line_error(status, capsys.readouterr(), f"--max_edges {largest + 1:,} is more than --plugin aot "
                                                      f"--precision {precision} takes: aot_split_table: extra argument "
                                                      f"{slots} ")
