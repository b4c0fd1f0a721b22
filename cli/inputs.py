"""The inputs a run of aliased_io_plugin.py needs, read and checked before TensorRT or CUDA is imported: the
seed, the graph (from --graph, --random_graph or the list strings), the seeded weights, the --steps batches
and, where the run needs it, the float64 reference. numpy only.
"""

import argparse
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from cli.options import (
    DEFAULT_EDGES,
    DEFAULT_NODE_FEATURES,
    MAX_CLASSES,
    MAX_OUTPUT_ELEMENTS,
    MAX_SEED,
    EngineOptions,
    integer,
    parse_engine_options,
)
from common.errors import InputError
from common.limits import LARGE_FILE_BYTES, MAX_RANDOM_EDGES
from graph import (
    Graph,
    check_precision_range,
    implied_node_count,
    load_graph_file,
    load_node_features_file,
    may_overflow,
    parse_edges,
    parse_node_features,
    random_graph,
    random_node_features,
    validate_graph,
)
from reference import gnn_reference, make_weights

RANDOM_GRAPH_STREAM = 1
"""--random_graph and the features of a --graph file without node_features draw from default_rng((seed, 1)),
apart from the weights' default_rng(seed)."""


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
    reference: dict[str, np.ndarray] | None  # computed for --dry-run, --validate and range checks
    timings: list[str]
    engine: EngineOptions = EngineOptions()
    profile: Any = None  # network.profile.ProfileBounds from --max_nodes/--max_edges, else None (the default)
    steps: StepsPlan | None = None
    features_note: str | None = None  # says so when the node features were drawn from the seed


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


DRAWN_FEATURES_NOTE = "Node features: none given, so {} drawn from the seed, uniform in [0, 10)"


def load_graph(options: argparse.Namespace, seed: int) -> tuple[Graph, str | None]:
    """The graph from --graph, --random_graph or the --node_features/--edges strings, validated, and a note
    when its node features were drawn from the seed (a graph file without them, or --random_graph)."""
    given_features = _given_node_features(options)
    if options.graph is not None:
        arrays = _load_with_progress(load_graph_file, options.graph, "--graph")
        if arrays.node_features is not None and given_features is not None:
            raise InputError(f"--graph {options.graph} holds node_features already; drop --node_features(_file)")
        features = arrays.node_features if arrays.node_features is not None else given_features
        if features is None:  # drawn from the seed, as for --random_graph (one feature, or the state's F)
            num_features = 1 if arrays.state is None or np.ndim(arrays.state) < 2 else np.shape(arrays.state)[1]
            rng = np.random.default_rng((seed, RANDOM_GRAPH_STREAM))
            features = random_node_features(implied_node_count(arrays.edges), num_features, rng)
            note = DRAWN_FEATURES_NOTE.format("one per node is" if num_features == 1 else f"{num_features} per node are")
            return validate_graph(features, arrays.edges, arrays.state), note
        return validate_graph(features, arrays.edges, arrays.state), None

    if options.random_graph is not None:
        num_nodes = integer(options.random_graph[0], "--random_graph NODES", 1, MAX_RANDOM_EDGES)
        num_edges = integer(options.random_graph[1], "--random_graph EDGES", 1, MAX_RANDOM_EDGES)
        rng = np.random.default_rng((seed, RANDOM_GRAPH_STREAM))
        edges = random_graph(num_nodes, num_edges, rng)
        if given_features is None:
            return validate_graph(random_node_features(num_nodes, 1, rng), edges), DRAWN_FEATURES_NOTE.format("one per node is")
        if len(given_features) != num_nodes:
            raise InputError(
                f"the node features describe {len(given_features)} nodes but --random_graph asks for {num_nodes}"
            )
        return validate_graph(given_features, edges), None

    features = given_features if given_features is not None else parse_node_features(DEFAULT_NODE_FEATURES)
    return validate_graph(features, parse_edges(options.edges if options.edges is not None else DEFAULT_EDGES)), None


def prepare(options: argparse.Namespace) -> Prepared:
    """Checks every option and input, draws the seed if none was given, and computes the reference."""
    timings: list[str] = []
    seed = secrets.randbelow(2**32) if options.seed is None else integer(options.seed, "--seed", 0, MAX_SEED)
    num_classes = integer(options.num_classes, "--num_classes", 1, MAX_CLASSES)
    engine = parse_engine_options(options)

    start = time.perf_counter()
    graph, features_note = load_graph(options, seed)
    timings.append(f"Read and validated the graph in {time.perf_counter() - start:.3f} s")
    check_precision_range(graph, options.precision)  # the features and the state themselves
    weights = make_weights(seed, num_classes, graph.num_features)
    if engine.steps is not None:
        steps = prepare_steps(options, engine, graph, seed, timings)
        return Prepared(seed, graph, weights, None, timings, engine, profile_bounds(engine, graph), steps, features_note)

    if num_classes * graph.num_nodes > MAX_OUTPUT_ELEMENTS:
        raise InputError(
            f"--num_classes {num_classes} with {graph.num_nodes:,} nodes gives a [{num_classes}, {graph.num_nodes}] "
            f"output, more than the limit of {MAX_OUTPUT_ELEMENTS:,} values"
        )
    expected = None
    fp16 = options.precision == "fp16"
    if options.dry_run or options.validate or fp16 or may_overflow(graph, weights, options.precision):
        start = time.perf_counter()
        expected = gnn_reference(graph.node_features, graph.edges, weights, graph.state)
        timings.append(f"Computed the float64 reference in {time.perf_counter() - start:.3f} s")
        counts = expected["counts"] if fp16 else None  # fp16 casts the in-degrees before dividing
        check_precision_range(graph, options.precision, expected["aggregated"], expected["logits"], counts)
    return Prepared(seed, graph, weights, expected, timings, engine, profile_bounds(engine, graph),
                    features_note=features_note)


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
    """Draws the --steps batches; checks that the state cannot overflow the precision; for --dry-run and --validate
    computes the final state's reference and its rounding bound."""
    from network.steps import check_state_range, expected_final_state, make_step_batches, state_error_bound

    assert engine.steps is not None and engine.batch_edges is not None
    start = time.perf_counter()
    batches = make_step_batches(graph.num_nodes, engine.steps, engine.batch_edges, seed)
    timings.append(f"Drew {engine.steps:,} batches of {engine.batch_edges:,} edges in {time.perf_counter() - start:.3f} s")
    check_state_range(graph.node_features, batches, graph.state, options.precision)
    final_state = bound = None
    if options.dry_run or options.validate:
        start = time.perf_counter()
        final_state = expected_final_state(graph.node_features, batches, graph.state)
        bound = state_error_bound(graph.node_features, batches, graph.state, options.precision)
        timings.append(f"Computed the float64 reference of the final state in {time.perf_counter() - start:.3f} s")
    return StepsPlan(batches, final_state, bound)
