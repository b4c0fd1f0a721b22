"""The inputs a run of aliased_io_plugin.py needs, read and checked before TensorRT or CUDA is imported: the
seed, the graph (from --graph, --random_graph or the list strings), the seeded weights, the --steps batches
and, where the run needs it, the float64 reference. numpy only.
"""

import argparse
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from cli.options import (
    DEFAULT_EDGES,
    DEFAULT_NODE_FEATURES,
    EngineOptions,
    Settings,
    check_output_size,
)
from common.errors import InputError
from common.progress import human_bytes, progress
from common.text import shown_path
from graph import (
    EdgeInputError,
    Graph,
    check_precision_range,
    edge_list_line,
    implied_node_count,
    load_graph_file,
    load_node_features_file,
    may_overflow,
    parse_edges,
    parse_node_features,
    portable_node_features,
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
class GraphInput:
    """The graph, validated, with a note when its node features were drawn from the seed."""

    graph: Graph
    features_note: str | None


@dataclass(frozen=True)
class Prepared:
    """Everything the run needs, checked before TensorRT or CUDA is imported."""

    seed: int
    graph: Graph
    weights: np.ndarray
    reference: dict[str, np.ndarray] | None  # computed for --dry-run, --validate and range checks
    engine: EngineOptions = EngineOptions()
    profile: Any = None  # network.engine.ProfileBounds from --max_nodes/--max_edges, else None (the default)
    steps: StepsPlan | None = None
    onnx: Any = None  # onnx_path.read.OnnxModel with --onnx (the sample's network)


def _size(path: str) -> str:
    try:
        return human_bytes(os.stat(path).st_size)
    except (OSError, ValueError):  # the loader reports a missing or unreadable file in its own words
        return "?"


DRAWN_FEATURES_NOTE = "Node features: none given, so {} drawn from the seed, uniform in [0, 10)"
STEPS_FEATURES_NOTE = ("Node features: none given, so {} drawn from the seed, multiples of 0.25 in [0, 10) "
                       "(graph.portable_node_features, as cpp/aliased_io_state.cpp draws them)")


def read_graph(options: argparse.Namespace, settings: Settings, show_progress: bool = False) -> GraphInput:
    """The graph from --graph, --random_graph or the --node_features/--edges strings, validated, and a note
    when its node features were drawn from the seed (a graph file without them, or --random_graph)."""
    rng = np.random.default_rng((settings.seed, RANDOM_GRAPH_STREAM))
    note = None
    features = None
    if options.node_features_file is not None:
        path = options.node_features_file
        with progress(f"Reading --node_features_file {shown_path(path)} ({_size(path)})", enabled=show_progress):
            features = load_node_features_file(path)
    elif options.node_features is not None:
        features = parse_node_features(options.node_features)

    state = None
    num_nodes = None  # where no features give N: --random_graph's NODES, or a graph file's largest node id + 1
    nodes_from = None  # what gave N, for the edge checks' messages, where the user may not expect it
    if options.graph is not None:
        shown = shown_path(options.graph)
        with progress(f"Reading --graph {shown} ({_size(options.graph)})", enabled=show_progress) as advance:
            arrays = load_graph_file(options.graph, on_progress=advance)
        if arrays.node_features is not None and features is not None:
            raise InputError(f"--graph {shown} holds node_features already; drop --node_features(_file)")
        edges, state = arrays.edges, arrays.state
        features = arrays.node_features if arrays.node_features is not None else features
        if features is None:
            num_nodes = implied_node_count(edges)
    elif settings.random_graph is not None:
        num_nodes, num_edges = settings.random_graph
        if features is not None and len(features) != num_nodes:  # before the graph is drawn
            raise InputError(f"the node features describe {len(features):,} nodes but --random_graph asks for "
                             f"{num_nodes:,}")
        with progress(f"Drawing a random graph of {num_edges:,} edges", enabled=show_progress) as advance:
            edges = random_graph(num_nodes, num_edges, rng, on_progress=advance)
    else:
        if features is None:
            features = parse_node_features(DEFAULT_NODE_FEATURES)
            nodes_from = f"from the default --node_features {DEFAULT_NODE_FEATURES}, as none were given"
        edges = parse_edges(options.edges if options.edges is not None else DEFAULT_EDGES)

    if features is None:  # a graph file or --random_graph without them: drawn from the seed, one rule for both
        assert num_nodes is not None
        num_features = 1 if state is None or np.ndim(state) < 2 else np.shape(state)[1]  # the state's F, if any
        steps = settings.engine.steps is not None  # --steps draws them as the C++ program does (docs/aot_plugin.md)
        features = (portable_node_features(num_nodes, num_features, settings.seed) if steps
                    else random_node_features(num_nodes, num_features, rng))
        count = "one per node is" if num_features == 1 else f"{num_features} per node are"
        note = (STEPS_FEATURES_NOTE if steps else DRAWN_FEATURES_NOTE).format(count)

    with progress("Validating the graph", enabled=show_progress):
        try:
            graph = validate_graph(features, edges, state, nodes_from=nodes_from)
        except EdgeInputError as error:
            raise with_edge_line(error, options.graph) from None
        check_precision_range(graph, options.precision)  # the features and the state themselves
    return GraphInput(graph, note)


def with_edge_line(error: EdgeInputError, graph_path: str | None) -> InputError:
    """The error about edge `error.edge` (0-based, as every message counts edges), with the 1-based line that
    holds it where the edges came from an edge-list file."""
    if graph_path is None or graph_path.lower().endswith(".npz"):
        return error
    line = edge_list_line(graph_path, error.edge)
    return error if line is None else InputError(f"{error} (line {line} of --graph {shown_path(graph_path)})")


def prepare(options: argparse.Namespace, settings: Settings, graph_input: GraphInput,
            show_progress: bool = False) -> Prepared:
    """The seeded weights, the --steps batches and, where the run needs it, the float64 reference, after the
    checks that need the graph (output size, the precision's range, the engine profile)."""
    graph = graph_input.graph
    weights = make_weights(settings.seed, settings.num_classes, graph.num_features)
    engine = settings.engine
    if engine.steps is not None:
        steps = prepare_steps(options, engine, graph, settings.seed, show_progress)
        return Prepared(settings.seed, graph, weights, None, engine, profile_bounds(engine, graph), steps)

    check_output_size(settings.num_classes, graph.num_nodes)
    expected = None
    fp16 = options.precision == "fp16"
    if options.dry_run or options.validate or fp16 or may_overflow(graph, weights, options.precision):
        with progress("Computing the float64 reference", enabled=show_progress):
            expected = gnn_reference(graph.node_features, graph.edges, weights, graph.state, graph.in_degree)
        counts = expected["counts"] if fp16 else None  # fp16 casts the in-degrees before dividing
        check_precision_range(graph, options.precision, expected["aggregated"], expected["logits"], counts)
    return Prepared(settings.seed, graph, weights, expected, engine, profile_bounds(engine, graph))


def profile_bounds(engine: EngineOptions, graph: Graph) -> Any:
    """network.engine.ProfileBounds from --max_nodes/--max_edges (InputError when the graph, or with --steps a
    batch, exceeds them); None when neither is given (the engine then gets the default profile)."""
    if not engine.sets_profile:
        return None
    from network.engine import requested_profile_bounds

    if engine.batch_edges is not None:
        return requested_profile_bounds(graph.num_nodes, engine.batch_edges, engine.max_nodes, engine.max_edges,
                                        edges_source="each --steps batch")
    return requested_profile_bounds(graph.num_nodes, graph.num_edges, engine.max_nodes, engine.max_edges)


def prepare_steps(options: argparse.Namespace, engine: EngineOptions, graph: Graph, seed: int,
                  show_progress: bool = False) -> StepsPlan:
    """Draws the --steps batches; checks that the state cannot overflow the precision; for --dry-run and --validate
    computes the final state's reference and its rounding bound."""
    from reference.state import check_state_range, expected_final_state, rounding_bound
    from graph import portable_edge_batches

    assert engine.steps is not None and engine.batch_edges is not None
    with progress(f"Drawing {engine.steps:,} batches of {engine.batch_edges:,} edges", enabled=show_progress):
        batches = portable_edge_batches(graph.num_nodes, engine.steps, engine.batch_edges, seed)
    magnitude, additions = check_state_range(graph.node_features, batches, graph.state, options.precision)
    final_state = bound = None
    if options.dry_run or options.validate:
        with progress("Computing the float64 reference of the final state", enabled=show_progress):
            final_state = expected_final_state(graph.node_features, batches, graph.state)
            bound = rounding_bound(magnitude, additions, options.precision)
    return StepsPlan(batches, final_state, bound)
