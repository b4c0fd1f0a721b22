"""Checks that turn user arrays into a Graph, with one-line errors that name the offending value.

Every check is a whole-array numpy operation (min/max, isfinite, bincount); only the error message looks at
single elements. Validating 10 million edges takes a fraction of a second.
"""

from collections.abc import Iterable

import numpy as np

from common.errors import InputError
from graph.model import Graph

FP16_MAX = float(np.finfo(np.float16).max)  # 65504
LARGEST_FINITE = {"fp32": float(np.finfo(np.float32).max), "fp16": FP16_MAX}
TYPE_NAME = {"fp32": "float32", "fp16": "float16"}
MAX_NAMED_NODES = 5  # how many nodes without an incoming edge an error message lists


class EdgeInputError(InputError):
    """An InputError about one edge, `edge` counted from 0 (its row in the edge array), as every message
    counts edges; the CLI adds the 1-based line where the edges came from an edge-list file."""

    def __init__(self, message: str, edge: int) -> None:
        super().__init__(message)
        self.edge = edge


def _as_feature_matrix(values, what: str) -> np.ndarray:
    """A finite float64 [N, F] copy-free view where possible; a 1-D input becomes [N, 1]."""
    try:
        array = np.asarray(values)
    except ValueError as error:  # ragged nested lists
        raise InputError(f"{what}: not a rectangular array of numbers ({error})") from None
    if array.dtype.kind not in "iuf":
        raise InputError(f"{what}: expected numbers, got an array of dtype {array.dtype}")
    if array.ndim == 1:
        array = array.reshape(-1, 1)
    if array.ndim != 2:
        raise InputError(f"{what}: expected shape [N] or [N, F], got shape {list(array.shape)}")
    if array.shape[0] == 0:
        raise InputError(f"{what}: the node list is empty")
    if array.shape[1] == 0:
        raise InputError(f"{what}: the nodes have no features (shape {list(array.shape)})")
    array = np.ascontiguousarray(array, dtype=np.float64)
    not_finite = ~np.isfinite(array)
    if not_finite.any():
        node, feature = (int(i) for i in np.argwhere(not_finite)[0])
        count = int(np.count_nonzero(not_finite))
        raise InputError(
            f"{what}: node {node} feature {feature} is {array[node, feature]} ({count} value"
            f"{'' if count == 1 else 's'} not finite); values must be finite numbers"
        )
    return array


def _as_edge_array(values, num_nodes: int | None, nodes_from: str | None = None) -> np.ndarray:
    """int64 [E, 2] with every id in [0, num_nodes) (num_nodes None: every id that int64 holds); `nodes_from`
    says where num_nodes came from when the user may not expect it (the default features)."""
    try:
        array = np.asarray(values)
    except ValueError as error:
        raise InputError(f"edges: not a rectangular array of pairs ({error})") from None
    if array.shape in ((0,), (0, 2)):
        return np.empty((0, 2), dtype=np.int64)
    if array.dtype.kind not in "iu":
        raise InputError(f"edges: node ids must be integers, got an array of dtype {array.dtype}")
    if array.ndim != 2 or array.shape[1] != 2:
        raise InputError(f"edges: expected shape [E, 2] (source, target), got shape {list(array.shape)}")
    if array.min() < 0:
        edge = int(np.argmax((array < 0).any(axis=1)))
        raise EdgeInputError(f"edges: edge {edge} ({array[edge, 0]} -> {array[edge, 1]}) has a negative node id", edge)
    limit = np.iinfo(np.int64).max if num_nodes is None else num_nodes
    if array.max() >= limit:
        edge = int(np.argmax((array >= limit).any(axis=1)))
        problem = ("has a node id beyond int64's range" if num_nodes is None else
                   f"refers to a node that does not exist; there are {num_nodes} nodes (ids 0..{num_nodes - 1})")
        if nodes_from is not None:
            problem += f", {nodes_from}"
        raise EdgeInputError(f"edges: edge {edge} ({array[edge, 0]} -> {array[edge, 1]}) {problem}", edge)
    return np.ascontiguousarray(array, dtype=np.int64)


def implied_node_count(edges) -> int:
    """N for a graph given without node features: the largest node id + 1. InputError, before anything of
    size N is allocated, when the edges are malformed or too few to give each of those nodes an incoming edge."""
    array = _as_edge_array(edges, None)
    if not array.size:
        raise InputError("edges: there are none, so no node has an incoming edge; every node must be the target of an edge")
    num_nodes = int(array.max()) + 1
    if num_nodes > len(array):
        raise InputError(
            f"edges: {len(array):,} edge{'' if len(array) == 1 else 's'} with node ids up to {num_nodes - 1} cannot "
            f"give each of {num_nodes:,} nodes an incoming edge; every node must be the target of an edge"
        )
    return num_nodes


def _check_incoming_edges(graph: Graph, nodes_from: str | None = None) -> None:
    """Every node needs an incoming edge: its mean (aggregated / count) is undefined otherwise."""
    num_nodes = graph.num_nodes
    missing = np.flatnonzero(graph.in_degree == 0)
    if missing.size:
        named = ", ".join(str(node) for node in missing[:MAX_NAMED_NODES])
        more = f" and {missing.size - MAX_NAMED_NODES} more" if missing.size > MAX_NAMED_NODES else ""
        one = missing.size == 1
        where = "" if nodes_from is None else f" ({num_nodes} nodes, {nodes_from})"
        raise InputError(
            f"edges: node{'' if one else 's'} {named}{more} of {num_nodes} ha{'s' if one else 've'} no incoming "
            f"edge (the mean is undefined); every node must be the target of an edge{where}"
        )


def validate_graph(node_features, edges, state=None, nodes_from: str | None = None) -> Graph:
    """Checks and converts the inputs: features [N] or [N, F] finite numbers, edges [E, 2] integer ids in
    [0, N) with every node the target of at least one edge, state None or finite [N, F] (or [N] when F = 1).

    Raises InputError naming the first problem (EdgeInputError where it is one edge); returns a Graph of
    contiguous float64/int64 arrays. `nodes_from`, when given, says where N came from in the edges' messages.
    """
    features = _as_feature_matrix(node_features, "node_features")
    num_nodes = features.shape[0]
    edge_array = _as_edge_array(edges, num_nodes, nodes_from)
    state_array = None
    if state is not None:
        state_array = _as_feature_matrix(state, "state")
        if state_array.shape != features.shape:
            raise InputError(
                f"state: shape {list(state_array.shape)} differs from node_features' {list(features.shape)}"
            )
    graph = Graph(node_features=features, edges=edge_array, state=state_array)
    _check_incoming_edges(graph, nodes_from)
    return graph


def check_precision_range(
    graph: Graph,
    precision: str,
    aggregated: np.ndarray | None = None,
    logits: np.ndarray | None = None,
    counts: np.ndarray | None = None,
) -> None:
    """The features and the state must fit the precision's type (float32: +-3.4e38, float16: +-65504), and so
    must, when given, the float64 reference's aggregated sums, its logits and (for fp16, which casts the
    counts before dividing) the in-degrees `counts`. A value beyond would become Inf in the engine (a negative
    logit may, since ReLU maps -Inf to 0). (Partial sums of mixed-sign features may exceed the final sum; the
    kernel's accumulation precision decides whether that matters.)
    """
    check_values_in_range(precision, (
        ("node_features", graph.node_features),
        ("state", graph.state),
        ("aggregated features (state + sum of incoming neighbours)", aggregated),
        ("logits (weights @ mean, after ReLU)", None if logits is None else np.maximum(logits, 0.0)),
        ("in-degree (the edge count the mean divides by)", counts),
    ))


def check_values_in_range(precision: str, named_values: Iterable[tuple[str, np.ndarray | None]]) -> None:
    """InputError naming the first element, of the first array in (what, values or None) pairs, beyond the
    precision's largest finite value, with its index and value and what to change."""
    largest = LARGEST_FINITE[precision]
    for what, values in named_values:
        if values is None:
            continue
        too_large = np.abs(values) > largest
        if too_large.any():
            index = tuple(int(i) for i in np.argwhere(too_large)[0])
            advice = "use smaller values" if precision == "fp32" else "use --precision fp32"
            if precision == "fp16" and not what.startswith("in-degree"):
                advice += " or smaller features"
            raise InputError(
                f"--precision {precision}: {what} at {list(index)} is {values[index]:.6g}, beyond {TYPE_NAME[precision]}'s "
                f"range (+-{largest:.6g}); {advice}"
            )


def may_overflow(graph: Graph, weights: np.ndarray, precision: str) -> bool:
    """False when no aggregated sum or logit can exceed the precision's range, by a bound from the largest
    feature, state value, in-degree and weights (O(N·F + E), no reference needed); True when only the float64
    reference can tell."""
    largest = LARGEST_FINITE[precision]
    state = 0.0 if graph.state is None else float(np.abs(graph.state).max())
    aggregated = state + int(graph.in_degree.max()) * float(np.abs(graph.node_features).max())
    logits = float(np.abs(weights).sum(axis=1).max()) * aggregated  # |mean| <= |aggregated| (in-degree >= 1)
    return not (aggregated <= largest and logits <= largest)
