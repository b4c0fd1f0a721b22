#!/usr/bin/env python3
"""In-place (aliased I/O) TensorRT plugin sample: classify the nodes of a graph by the mean of their
neighbours' features, where the first layer, a scatter-add plugin, adds those features into its input in place.

Flow: parse the options -> read and validate the graph and compute the float64 reference (numpy only) ->
build and run the engine (TensorRT and CUDA are imported only here) -> report and optionally validate.
--dry-run stops before the engine, so it needs neither TensorRT nor a GPU.
"""

import argparse
import os
import re
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from common.errors import InputError, MissingDependencyError
from common.limits import LARGE_FILE_BYTES, MAX_BENCHMARK_ITERATIONS, MAX_PROFILE_SIZE, MAX_STEPS
from graph import (
    MAX_RANDOM_EDGES,
    Graph,
    check_fp16_range,
    describe_graph,
    load_graph_file,
    load_node_features_file,
    parse_edges,
    parse_node_features,
    random_graph,
    random_node_features,
    validate_graph,
)
from graph.parse import MAX_INPUT_CHARS, excerpt
from reference import compare, gnn_reference, make_weights

PROG = "aliased_io_plugin.py"
DEFAULT_NODE_FEATURES = "[1.0,3.0,5.0,7.0]"
DEFAULT_EDGES = "[[0,1],[1,2],[2,3],[3,0],[0,2],[1,3]]"
DEFAULT_NUM_CLASSES = "3"

EXIT_OK = 0
EXIT_VALIDATION_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_MISSING_DEPENDENCY = 3

MAX_CLASSES = 4096
MAX_OUTPUT_ELEMENTS = 2**27  # num_classes * num_nodes: the [C, N] output (1 GiB as float64)
MAX_SEED = 2**63 - 1
RANDOM_GRAPH_STREAM = 1  # --random_graph draws from default_rng((seed, 1)), apart from the weights' default_rng(seed)

_DECIMAL = re.compile(r"[+-]?[0-9]{1,19}")

EPILOG = f"""\
inputs:
  --node_features and --edges take the seed sample's list syntax, parsed without eval: at most
  {MAX_INPUT_CHARS:,} characters; larger graphs go in a file (--graph). --graph FILE reads an .npz
  (arrays edges [E,2] integer, optional node_features [N] or [N,F], state [N,F]) or an edge-list text file
  (one "source target" pair per line, separated by spaces or a comma, '#' starts a comment; at most 1 GiB).
  --random_graph NODES EDGES (NODES <= EDGES <= {MAX_RANDOM_EDGES:,}) draws a graph with skewed in-degrees
  from the seed; its node features are drawn too unless given. Every node needs an incoming edge.
  --num_classes is 1..{MAX_CLASSES} with num_classes * nodes <= {MAX_OUTPUT_ELEMENTS:,}; --seed is 0..2**63-1.

engine reuse, state across runs, benchmark:
  --save_engine PATH writes the built engine; --load_engine PATH runs a saved one instead of building (the
  plugin creator is registered first). One engine serves every graph with its precision, F and C (and its
  network: --steps engines hold the state-update network) whose N and E lie in its optimization profile:
  N from 1 to --max_nodes, E from 1 to --max_edges (defaults: max(N, 65,536) and max(E, 1,048,576)); a
  graph outside it stops with exit 2 naming the value and the bound. --max_nodes/--max_edges are 1..2**31-1.
  --steps K --batch_edges B (K <= {MAX_STEPS:,}, K * B <= {MAX_RANDOM_EDGES:,}): K executions on one state
  buffer X (the graph's nodes, features and initial state; its edges are not used), each adding a new batch
  of B random edges drawn from the seed; prints the per-step time and whether TensorRT aliased the output
  X_out to X or the runner copied it back; --validate compares the final state with the float64 reference.
  --benchmark ITERS (1..{MAX_BENCHMARK_ITERATIONS:,}) times ITERS executions after warm-up with CUDA events,
  then the scatter-add kernel alone on the same buffers, and prints median, p90, min and the kernel's share.

exit status:
  0  success
  1  --validate: the engine's output differs from the float64 reference beyond the tolerance
  2  bad input: one line on stderr names the problem and the value
  3  a dependency is missing (TensorRT >= 10.3, cuda-python, polygraphy or a CUDA GPU): one line on stderr
     says what to install; --dry-run needs none of them
"""


class _ArgumentParser(argparse.ArgumentParser):
    """argparse with its usage errors turned into InputError, so that they print as one line with exit 2."""

    def error(self, message: str):
        raise InputError(f"{message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog=PROG,
        description=__doc__.split("\n\n")[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--precision", default="fp32", choices=["fp32", "fp16"], help="Precision for node features")
    features = parser.add_mutually_exclusive_group()
    features.add_argument(
        "--node_features", "--node-features",
        help=f"List of node features: one number per node, or equal-length lists of F numbers per node "
        f"(default: {DEFAULT_NODE_FEATURES}, with the default edges)",
    )
    features.add_argument(
        "--node_features_file", "--node-features-file", metavar="FILE.npy",
        help="Node features from a .npy file of shape [N] or [N, F]",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--edges",
        help=f"Pairs of source->target directed edges. Every node must have at least one incoming edge "
        f"(default: {DEFAULT_EDGES})",
    )
    source.add_argument("--graph", metavar="FILE", help="Read the graph from an .npz archive or an edge-list text file")
    source.add_argument(
        "--random_graph", "--random-graph", nargs=2, metavar=("NODES", "EDGES"),
        help="Generate a seeded random graph with power-law-like in-degrees",
    )
    parser.add_argument(
        "--num_classes", "--num-classes", default=DEFAULT_NUM_CLASSES,
        help=f"Number of classes in the classifier (default: {DEFAULT_NUM_CLASSES})",
    )
    parser.add_argument("--validate", action="store_true", help="Validate result with reference")
    parser.add_argument("--seed", help="Seed to use for weights generation (default: drawn at random and printed)")
    parser.add_argument(
        "--dry-run", "--dry_run", dest="dry_run", action="store_true",
        help="Validate the input, print the graph and the float64 reference output, and exit without TensorRT or CUDA",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="Print timings and the engine build log")
    engine = parser.add_argument_group("engine reuse, state across runs, benchmark")
    engine.add_argument("--save_engine", "--save-engine", metavar="PATH", help="Save the engine to PATH")
    engine.add_argument(
        "--load_engine", "--load-engine", metavar="PATH",
        help="Load the engine from PATH instead of building one (the graph must fit its profile)",
    )
    engine.add_argument(
        "--max_nodes", "--max-nodes", metavar="N", help="Largest N the new engine's profile accepts (default: max(N, 65536))"
    )
    engine.add_argument(
        "--max_edges", "--max-edges", metavar="E",
        help="Largest E (with --steps: B) the new engine's profile accepts (default: max(E, 1048576))",
    )
    engine.add_argument(
        "--steps", metavar="K", help="Run K executions on one state buffer X, each adding --batch_edges random edges"
    )
    engine.add_argument("--batch_edges", "--batch-edges", metavar="B", help="Edges added per --steps execution")
    engine.add_argument(
        "--benchmark", metavar="ITERS",
        help="Time ITERS engine executions (CUDA events, after warm-up) and the kernel alone on the same buffers",
    )
    return parser


def _integer(text: str, option: str, low: int, high: int) -> int:
    if not isinstance(text, str) or not _DECIMAL.fullmatch(text.strip()) or not low <= int(text) <= high:
        shown = excerpt(text, 0) if isinstance(text, str) else repr(text)
        raise InputError(f"{option} must be an integer from {low:,} to {high:,}, got {shown}")
    return int(text)


def _shown_path(path: str) -> str:
    """The path as typed, or its repr() when it holds characters that would break a one-line message."""
    return path if path.isprintable() and path.strip() == path and path else repr(path)


def _readable_file(path: str, option: str) -> str:
    if not path or not Path(path).exists():
        raise InputError(f"{option} {_shown_path(path)}: file not found")
    if not Path(path).is_file():
        raise InputError(f"{option} {_shown_path(path)}: not a regular file")
    if not os.access(path, os.R_OK):
        raise InputError(f"{option} {_shown_path(path)}: not readable")
    return path


def _writable_file(path: str, option: str) -> str:
    target = Path(path)
    if not path:
        raise InputError(f"{option} '': expected a file name")
    if target.is_dir():
        raise InputError(f"{option} {_shown_path(path)}: is a folder, expected a file name")
    folder = target.parent
    if not folder.is_dir():
        raise InputError(f"{option} {_shown_path(path)}: the folder {_shown_path(str(folder))} does not exist")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise InputError(f"{option} {_shown_path(path)}: not writable")
    return path


@dataclass(frozen=True)
class EngineOptions:
    """--save_engine, --load_engine, --max_nodes, --max_edges, --steps, --batch_edges, --benchmark, checked."""

    save_engine: str | None = None
    load_engine: str | None = None
    max_nodes: int | None = None
    max_edges: int | None = None
    steps: int | None = None
    batch_edges: int | None = None
    benchmark: int | None = None

    @property
    def sets_profile(self) -> bool:
        return self.max_nodes is not None or self.max_edges is not None


def parse_engine_options(options: argparse.Namespace) -> EngineOptions:
    """Checks the engine options on their own (the graph is checked against them later); InputError if bad."""

    def optional(name: str, option: str, high: int) -> int | None:
        text = getattr(options, name)
        return None if text is None else _integer(text, option, 1, high)

    parsed = EngineOptions(
        save_engine=None if options.save_engine is None else _writable_file(options.save_engine, "--save_engine"),
        load_engine=None if options.load_engine is None else _readable_file(options.load_engine, "--load_engine"),
        max_nodes=optional("max_nodes", "--max_nodes", MAX_PROFILE_SIZE),
        max_edges=optional("max_edges", "--max_edges", MAX_PROFILE_SIZE),
        steps=optional("steps", "--steps", MAX_STEPS),
        batch_edges=optional("batch_edges", "--batch_edges", MAX_RANDOM_EDGES),
        benchmark=optional("benchmark", "--benchmark", MAX_BENCHMARK_ITERATIONS),
    )
    if parsed.load_engine is not None and parsed.save_engine is not None:
        raise InputError("--load_engine and --save_engine: give one of them (a loaded engine is already saved)")
    if parsed.load_engine is not None and parsed.sets_profile:
        raise InputError(
            "--max_nodes/--max_edges set the profile of a new engine; an engine from --load_engine keeps the profile "
            "it was built with"
        )
    if parsed.steps is not None and parsed.batch_edges is None:
        raise InputError(f"--steps {parsed.steps} needs --batch_edges B, the number of edges each step adds")
    if parsed.batch_edges is not None and parsed.steps is None:
        raise InputError("--batch_edges needs --steps K")
    if parsed.steps is not None and parsed.batch_edges is not None and parsed.steps * parsed.batch_edges > MAX_RANDOM_EDGES:
        raise InputError(
            f"--steps {parsed.steps:,} with --batch_edges {parsed.batch_edges:,} adds "
            f"{parsed.steps * parsed.batch_edges:,} edges in all, more than the limit of {MAX_RANDOM_EDGES:,}"
        )
    if parsed.steps is not None and parsed.benchmark is not None:
        raise InputError("--benchmark times the classifier engine and --steps prints its own per-step times: use one")
    return parsed


@dataclass(frozen=True)
class StepsPlan:
    """--steps: the batches drawn from the seed and, for --dry-run and --validate, the float64 reference of the
    final state with its worst-case rounding bound (network.steps)."""

    batches: list[np.ndarray]
    final_state: np.ndarray | None
    bound: np.ndarray | None


@dataclass(frozen=True)
class Prepared:
    """Everything the run needs, checked before TensorRT or CUDA is imported."""

    seed: int
    graph: Graph
    weights: np.ndarray
    reference: dict[str, np.ndarray] | None  # computed for --dry-run, --validate and fp16 range checks
    timings: list[str]
    engine: EngineOptions = EngineOptions()
    profile: Any = None  # network.profile.ProfileBounds from --max_nodes/--max_edges, else None (the default)
    steps: StepsPlan | None = None


def _load_with_progress(load: Any, path: str, option: str) -> Any:
    """load(path), with a progress line on stderr for files of LARGE_FILE_BYTES or more."""
    try:
        large = os.stat(path).st_size >= LARGE_FILE_BYTES
    except (OSError, ValueError):  # the loader reports a missing or unreadable file in its own words
        large = False
    if not large:
        return load(path)
    from network.progress import file_load_progress

    with file_load_progress(path, option):
        return load(path)


def _given_node_features(options: argparse.Namespace) -> np.ndarray | None:
    """Node features from --node_features_file or --node_features; None when neither is given."""
    if options.node_features_file is not None:
        return _load_with_progress(load_node_features_file, options.node_features_file, "--node_features_file")
    if options.node_features is not None:
        return parse_node_features(options.node_features)
    return None


def load_graph(options: argparse.Namespace, seed: int) -> Graph:
    """The graph from --graph, --random_graph or the --node_features/--edges strings, validated."""
    given_features = _given_node_features(options)
    if options.graph is not None:
        arrays = _load_with_progress(load_graph_file, options.graph, "--graph")
        if arrays.node_features is not None and given_features is not None:
            raise InputError(f"--graph {options.graph} holds node_features already; drop --node_features(_file)")
        features = arrays.node_features if arrays.node_features is not None else given_features
        if features is None:
            raise InputError(
                f"--graph {options.graph} has no node_features: add them to the .npz or pass "
                "--node_features_file FILE.npy or --node_features"
            )
        return validate_graph(features, arrays.edges, arrays.state)

    if options.random_graph is not None:
        num_nodes = _integer(options.random_graph[0], "--random_graph NODES", 1, MAX_RANDOM_EDGES)
        num_edges = _integer(options.random_graph[1], "--random_graph EDGES", 1, MAX_RANDOM_EDGES)
        rng = np.random.default_rng((seed, RANDOM_GRAPH_STREAM))
        edges = random_graph(num_nodes, num_edges, rng)
        features = given_features if given_features is not None else random_node_features(num_nodes, 1, rng)
        if len(features) != num_nodes:
            raise InputError(
                f"the node features describe {len(features)} nodes but --random_graph asks for {num_nodes}"
            )
        return validate_graph(features, edges)

    features = given_features if given_features is not None else parse_node_features(DEFAULT_NODE_FEATURES)
    return validate_graph(features, parse_edges(options.edges if options.edges is not None else DEFAULT_EDGES))


def prepare(options: argparse.Namespace) -> Prepared:
    """Checks every option and input, draws the seed if none was given, and computes the reference."""
    timings: list[str] = []
    seed = secrets.randbelow(2**32) if options.seed is None else _integer(options.seed, "--seed", 0, MAX_SEED)
    num_classes = _integer(options.num_classes, "--num_classes", 1, MAX_CLASSES)
    engine = parse_engine_options(options)

    start = time.perf_counter()
    graph = load_graph(options, seed)
    timings.append(f"Read and validated the graph in {time.perf_counter() - start:.3f} s")
    weights = make_weights(seed, num_classes, graph.num_features)
    if engine.steps is not None:
        steps = prepare_steps(options, engine, graph, seed, timings)
        return Prepared(seed, graph, weights, None, timings, engine, profile_bounds(engine, graph), steps)

    if num_classes * graph.num_nodes > MAX_OUTPUT_ELEMENTS:
        raise InputError(
            f"--num_classes {num_classes} with {graph.num_nodes:,} nodes gives a [{num_classes}, {graph.num_nodes}] "
            f"output, more than the limit of {MAX_OUTPUT_ELEMENTS:,} values"
        )
    expected = None
    if options.dry_run or options.validate or options.precision == "fp16":
        start = time.perf_counter()
        expected = gnn_reference(graph.node_features, graph.edges, weights, graph.state)
        timings.append(f"Computed the float64 reference in {time.perf_counter() - start:.3f} s")
        if options.precision == "fp16":
            check_fp16_range(graph, expected["aggregated"], expected["logits"], expected["counts"])
    return Prepared(seed, graph, weights, expected, timings, engine, profile_bounds(engine, graph))


def profile_bounds(engine: EngineOptions, graph: Graph) -> Any:
    """network.profile.ProfileBounds from --max_nodes/--max_edges (InputError when the graph, or with --steps a
    batch, exceeds them); None when neither is given (the engine then gets the default profile)."""
    if not engine.sets_profile:
        return None
    from network.profile import requested_profile_bounds

    if engine.batch_edges is not None:
        return requested_profile_bounds(graph.num_nodes, engine.batch_edges, engine.max_nodes, engine.max_edges,
                                        edges_source="each --steps batch")
    return requested_profile_bounds(graph.num_nodes, graph.num_edges, engine.max_nodes, engine.max_edges)


def prepare_steps(options: argparse.Namespace, engine: EngineOptions, graph: Graph, seed: int,
                  timings: list[str]) -> StepsPlan:
    """Draws the --steps batches; for fp16 checks that the state cannot overflow; for --dry-run and --validate
    computes the final state's reference and its rounding bound."""
    from network.steps import check_state_range, expected_final_state, make_step_batches, state_error_bound

    assert engine.steps is not None and engine.batch_edges is not None
    start = time.perf_counter()
    batches = make_step_batches(graph.num_nodes, engine.steps, engine.batch_edges, seed)
    timings.append(f"Drew {engine.steps:,} batches of {engine.batch_edges:,} edges in {time.perf_counter() - start:.3f} s")
    if options.precision == "fp16":
        check_state_range(graph.node_features, batches, graph.state, "fp16")
    final_state = bound = None
    if options.dry_run or options.validate:
        start = time.perf_counter()
        final_state = expected_final_state(graph.node_features, batches, graph.state)
        bound = state_error_bound(graph.node_features, batches, graph.state, options.precision)
        timings.append(f"Computed the float64 reference of the final state in {time.perf_counter() - start:.3f} s")
    return StepsPlan(batches, final_state, bound)


def format_matrix(matrix: np.ndarray) -> str:
    """The [C, N] classifier output as numpy prints it (summarized beyond a few hundred values)."""
    with np.printoptions(precision=6, suppress=True, linewidth=110, threshold=200):
        return str(matrix)


def validation_report(actual: np.ndarray, expected: np.ndarray, precision: str) -> tuple[list[str], int]:
    """The --validate lines (the seed's success or failure line, then the errors) and the exit status."""
    comparison = compare(actual, expected, precision)
    verdict = "successful" if comparison.ok else "failed"
    lines = [f"Validation against reference {verdict}!", f"Against the float64 reference: {comparison.summary()}"]
    return lines, EXIT_OK if comparison.ok else EXIT_VALIDATION_FAILED


def _error(message: object, status: int) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return status


def steps_note(graph: Graph, steps: StepsPlan) -> str:
    batch_edges = len(steps.batches[0])
    return (
        f"--steps: {len(steps.batches):,} batches of {batch_edges:,} random edges are added into the state; the graph "
        f"gives the {graph.num_nodes:,} nodes, their features and the initial state (its own {graph.num_edges:,} edges "
        "are not used)"
    )


def dry_run(options: argparse.Namespace, prepared: Prepared) -> int:
    """Prints the float64 reference instead of running the engine."""
    if prepared.steps is not None:
        assert prepared.steps.final_state is not None
        print(steps_note(prepared.graph, prepared.steps))
        print()
        print(f"Final state X after {len(prepared.steps.batches):,} batches:")
        print(format_matrix(prepared.steps.final_state))
    else:
        assert prepared.reference is not None
        print("Classifier output:")
        print(format_matrix(prepared.reference["softmax"]))
    print()
    print("Dry run: this is the float64 numpy reference; no engine was built.")
    if options.validate:
        print("(--validate has nothing to compare against in a dry run.)")
    unused = [name for name, value in (("--save_engine", prepared.engine.save_engine),
                                       ("--load_engine", prepared.engine.load_engine),
                                       ("--benchmark", prepared.engine.benchmark)) if value is not None]
    if unused:
        print(f"({', '.join(unused)}: no engine to act on in a dry run.)")
    return EXIT_OK


def run_steps(options: argparse.Namespace, prepared: Prepared) -> int:
    """--steps: K executions on one state buffer, the report, and with --validate the final state's check."""
    from network.pipeline import run_steps as run_engine_steps  # TensorRT, polygraphy, cuda-python load inside
    from network.steps import compare_state, validation_lines

    assert prepared.steps is not None
    result = run_engine_steps(
        prepared.graph,
        options.precision,
        prepared.steps.batches,
        verbose=options.verbose,
        save_engine=prepared.engine.save_engine,
        load_engine=prepared.engine.load_engine,
        profile=prepared.profile,
        show_progress=True,
    )
    print(steps_note(prepared.graph, prepared.steps))
    print()
    print(f"Final state X after {len(prepared.steps.batches):,} steps:")
    print(format_matrix(result.final_state))
    print()
    for line in result.report_lines:
        print(line)
    if not options.validate:
        return EXIT_OK
    assert prepared.steps.final_state is not None and prepared.steps.bound is not None
    check = compare_state(result.final_state, prepared.steps.final_state, prepared.steps.bound)
    print()
    print("\n".join(validation_lines(check, len(prepared.steps.batches))))
    return EXIT_OK if check.ok else EXIT_VALIDATION_FAILED


def run_once(options: argparse.Namespace, prepared: Prepared) -> int:
    """One run of the classifier engine (and --benchmark), the report, and --validate."""
    from network.pipeline import run_graph  # TensorRT, polygraphy and cuda-python load inside run_graph

    result = run_graph(
        prepared.graph,
        prepared.weights,
        options.precision,
        verbose=options.verbose,
        save_engine=prepared.engine.save_engine,
        load_engine=prepared.engine.load_engine,
        profile=prepared.profile,
        show_progress=True,
        benchmark_iterations=prepared.engine.benchmark,
    )
    print("Classifier output:")
    print(format_matrix(result.softmax))
    print()
    for line in result.report_lines:
        print(line)

    if options.validate:
        assert prepared.reference is not None
        lines, status = validation_report(result.softmax, prepared.reference["softmax"], options.precision)
        print()
        print("\n".join(lines))
        return status
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    try:
        options = build_parser().parse_args(argv)
        prepared = prepare(options)
    except InputError as error:
        return _error(error, EXIT_BAD_INPUT)
    except MemoryError:
        return _error("not enough memory for this graph; try a smaller one", EXIT_BAD_INPUT)

    print(f"Setting seed to: {prepared.seed}")
    print()
    print("\n".join(describe_graph(prepared.graph)))
    print()
    if options.verbose:
        print("\n".join(prepared.timings))
        print()

    if options.dry_run:
        return dry_run(options, prepared)
    try:
        return run_steps(options, prepared) if prepared.steps is not None else run_once(options, prepared)
    except InputError as error:
        return _error(error, EXIT_BAD_INPUT)
    except MissingDependencyError as error:
        return _error(error, EXIT_MISSING_DEPENDENCY)


if __name__ == "__main__":
    sys.exit(main())
