"""Seeded random graphs for scale tests: skewed (power-law-like) in-degrees, every node with an incoming edge."""

import numbers
from collections.abc import Callable

import numpy as np

from common.errors import InputError
from common.limits import MAX_RANDOM_EDGES  # largest generated graph: 1e8 edges take 1.6 GB as int64 [E, 2]

_CHUNK = 1 << 20  # edges drawn per step, so that temporaries stay at a few MB whatever the graph size


def _count(value, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= int(value) <= high:
        shown = value.item() if isinstance(value, np.generic) else value  # 0, not numpy 2's np.int64(0)
        raise InputError(f"{what} must be an integer from {low:,} to {high:,}, got {shown!r}")
    return int(value)


def random_graph(num_nodes: int, num_edges: int, rng: np.random.Generator,
                 on_progress: Callable[[float], None] | None = None) -> np.ndarray:
    """int64 [num_edges, 2] source -> target pairs; the same rng state gives the same graph.

    The first num_nodes edges point at every node once (in random order), so every mean is defined. The
    other targets follow a Zipf-like law over a random ranking of the nodes: the node of rank r (0-based) is
    drawn with probability log((r + 2) / (r + 1)) / log(N + 1), about 1 / ((r + 1) log N), which gives a
    power-law in-degree tail (a few hubs, many nodes of in-degree 1). Sources are uniform. Self-loops and
    repeated edges occur, as in real edge lists. With num_edges == num_nodes every in-degree is 1.
    `on_progress`, if given, is called with the fraction done after each chunk of edges.
    """
    num_nodes = _count(num_nodes, "random graph NODES", 1, MAX_RANDOM_EDGES)
    num_edges = _count(num_edges, "random graph EDGES", 1, MAX_RANDOM_EDGES)
    if num_edges < num_nodes:
        raise InputError(
            f"random graph: EDGES ({num_edges:,}) must be at least NODES ({num_nodes:,}), "
            "since every node needs an incoming edge"
        )
    edges = np.empty((num_edges, 2), dtype=np.int64)
    ranking = rng.permutation(num_nodes)  # ranking[r]: the node with the r-th largest expected in-degree
    edges[:num_nodes, 1] = ranking
    log_span = np.log(num_nodes + 1.0)
    work = 2 * num_edges - num_nodes  # sources, then the targets after the first num_nodes
    for start in range(0, num_edges, _CHUNK):
        stop = min(start + _CHUNK, num_edges)
        edges[start:stop, 0] = rng.integers(0, num_nodes, size=stop - start, dtype=np.int64)
        if on_progress is not None:
            on_progress(stop / work)
    for start in range(num_nodes, num_edges, _CHUNK):
        stop = min(start + _CHUNK, num_edges)
        rank = np.exp(rng.random(stop - start) * log_span).astype(np.int64) - 1
        np.minimum(rank, num_nodes - 1, out=rank)  # exp() may round up to N + 1 at the very top
        edges[start:stop, 1] = ranking[rank]
        if on_progress is not None:
            on_progress((num_edges + stop - num_nodes) / work)
    return edges


def random_node_features(num_nodes: int, num_features: int, rng: np.random.Generator) -> np.ndarray:
    """float64 [num_nodes, num_features], uniform in [0, 10) like the default graph's features."""
    return rng.uniform(0.0, 10.0, size=(num_nodes, num_features))
