#!/usr/bin/env python3
"""In-place (aliased I/O) TensorRT plugin sample: classify the nodes of a graph by the mean of their
neighbours' features, where the first layer, a scatter-add plugin, adds those features into its input in place.

Flow: parse the options -> read and validate the graph and compute the float64 reference (numpy only) ->
build and run the engine (TensorRT and CUDA are imported only here) -> report and optionally validate.
--dry-run stops before the engine, so it needs neither TensorRT nor a GPU.
"""

import argparse
import re
import secrets
import sys
import time
from dataclasses import dataclass

import numpy as np

from common.errors import InputError, MissingDependencyError
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
    return parser


def _integer(text: str, option: str, low: int, high: int) -> int:
    if not isinstance(text, str) or not _DECIMAL.fullmatch(text.strip()) or not low <= int(text) <= high:
        shown = excerpt(text, 0) if isinstance(text, str) else repr(text)
        raise InputError(f"{option} must be an integer from {low:,} to {high:,}, got {shown}")
    return int(text)


@dataclass(frozen=True)
class Prepared:
    """Everything the run needs, checked before TensorRT or CUDA is imported."""

    seed: int
    graph: Graph
    weights: np.ndarray
    reference: dict[str, np.ndarray] | None  # computed for --dry-run, --validate and fp16 range checks
    timings: list[str]


def _given_node_features(options: argparse.Namespace) -> np.ndarray | None:
    """Node features from --node_features_file or --node_features; None when neither is given."""
    if options.node_features_file is not None:
        return load_node_features_file(options.node_features_file)
    if options.node_features is not None:
        return parse_node_features(options.node_features)
    return None


def load_graph(options: argparse.Namespace, seed: int) -> Graph:
    """The graph from --graph, --random_graph or the --node_features/--edges strings, validated."""
    given_features = _given_node_features(options)
    if options.graph is not None:
        arrays = load_graph_file(options.graph)
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

    start = time.perf_counter()
    graph = load_graph(options, seed)
    timings.append(f"Read and validated the graph in {time.perf_counter() - start:.3f} s")
    if num_classes * graph.num_nodes > MAX_OUTPUT_ELEMENTS:
        raise InputError(
            f"--num_classes {num_classes} with {graph.num_nodes:,} nodes gives a [{num_classes}, {graph.num_nodes}] "
            f"output, more than the limit of {MAX_OUTPUT_ELEMENTS:,} values"
        )
    weights = make_weights(seed, num_classes, graph.num_features)

    expected = None
    if options.dry_run or options.validate or options.precision == "fp16":
        start = time.perf_counter()
        expected = gnn_reference(graph.node_features, graph.edges, weights, graph.state)
        timings.append(f"Computed the float64 reference in {time.perf_counter() - start:.3f} s")
        if options.precision == "fp16":
            check_fp16_range(graph, expected["aggregated"], weights @ expected["mean"].T)
    return Prepared(seed, graph, weights, expected, timings)


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
        assert prepared.reference is not None
        print("Classifier output:")
        print(format_matrix(prepared.reference["softmax"]))
        print()
        print("Dry run: this is the float64 numpy reference; no engine was built.")
        if options.validate:
            print("(--validate has nothing to compare against in a dry run.)")
        return EXIT_OK

    from network.pipeline import run_graph  # TensorRT, polygraphy and cuda-python load inside run_graph

    try:
        result = run_graph(
            prepared.graph,
            prepared.weights,
            options.precision,
            verbose=options.verbose,
            save_engine=None,
            load_engine=None,
        )
    except InputError as error:
        return _error(error, EXIT_BAD_INPUT)
    except MissingDependencyError as error:
        return _error(error, EXIT_MISSING_DEPENDENCY)

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


if __name__ == "__main__":
    sys.exit(main())
