"""The seeded random graph generator and its node features (the --steps batches: test_portable_random.py)."""

import numpy as np
import pytest

from common.errors import InputError
from graph import MAX_RANDOM_EDGES, random_graph, random_node_features, validate_graph


def test_random_graph_is_valid_int64_and_reproducible():
    edges = random_graph(1000, 5000, np.random.default_rng(7))
    assert edges.dtype == np.int64 and edges.shape == (5000, 2)
    assert edges.min() >= 0 and edges.max() < 1000
    assert np.bincount(edges[:, 1], minlength=1000).min() >= 1  # every node has an incoming edge
    validate_graph(np.ones(1000), edges)
    np.testing.assert_array_equal(edges, random_graph(1000, 5000, np.random.default_rng(7)))
    assert not np.array_equal(edges, random_graph(1000, 5000, np.random.default_rng(8)))


def test_in_degrees_are_skewed_out_degrees_are_not():
    num_nodes, num_edges = 10_000, 200_000
    edges = random_graph(num_nodes, num_edges, np.random.default_rng(0))
    in_degree = np.sort(np.bincount(edges[:, 1], minlength=num_nodes))[::-1]
    out_degree = np.bincount(edges[:, 0], minlength=num_nodes)
    mean = num_edges / num_nodes
    # Zipf-like: the busiest node draws about log(2) / log(N + 1) of the extra edges, the top 1% of nodes
    # about log(101) / log(N + 1) of them; uniform sources stay near the mean.
    extra = num_edges - num_nodes
    assert in_degree[0] > 0.5 * extra * np.log(2) / np.log(num_nodes + 1)
    assert in_degree[: num_nodes // 100].sum() > 0.4 * extra
    assert np.median(in_degree) < mean / 2
    assert out_degree.max() < 3 * mean


def test_hubs_are_spread_over_the_node_ids():
    edges = random_graph(10_000, 100_000, np.random.default_rng(3))
    hubs = np.argsort(np.bincount(edges[:, 1]))[-20:]
    assert hubs.max() > 1000  # the ranking is a permutation, not node 0, 1, 2, ...


def test_as_many_edges_as_nodes_gives_every_node_in_degree_one():
    edges = random_graph(500, 500, np.random.default_rng(1))
    np.testing.assert_array_equal(np.sort(edges[:, 1]), np.arange(500))


def test_chunked_generation_covers_more_than_one_chunk():
    num_nodes, num_edges = 1000, (1 << 20) + 12345  # crosses the generator's 2**20-edge chunk boundary
    edges = random_graph(num_nodes, num_edges, np.random.default_rng(5))
    assert edges.min() >= 0 and edges.max() < num_nodes
    assert np.bincount(edges[:, 1], minlength=num_nodes).min() >= 1
    tail = edges[-12345:, 1]
    assert np.unique(tail).size > 100  # the last partial chunk was filled, not left as np.empty garbage


@pytest.mark.parametrize(
    "nodes, edges, message",
    [
        (10, 5, "EDGES (5) must be at least NODES (10)"),
        (0, 5, "NODES must be an integer from 1 to 100,000,000, got 0"),
        (5, MAX_RANDOM_EDGES + 1, "EDGES must be an integer from 1"),
        (5.0, 10, "got 5.0"),
        (True, 10, "got True"),
    ],
)
def test_random_graph_rejects_bad_sizes(nodes, edges, message):
    with pytest.raises(InputError) as error:
        random_graph(nodes, edges, np.random.default_rng(0))
    assert message in str(error.value)


def test_random_node_features_shape_and_range():
    features = random_node_features(50, 3, np.random.default_rng(0))
    assert features.shape == (50, 3) and features.dtype == np.float64
    assert features.min() >= 0.0 and features.max() < 10.0


@pytest.mark.parametrize("value, shown", [(np.int64(0), "got 0"), (np.float64(3.5), "got 3.5"), (2.5, "got 2.5"),
                                          ("7", "got '7'"), (np.int32(10**9), "got 1000000000")])
def test_bad_counts_are_shown_as_plain_values(value, shown):
    """numpy 2 reprs numpy scalars as np.int64(0); the message shows the value itself."""
    with pytest.raises(InputError) as error:
        random_graph(value, 5, np.random.default_rng(0))
    assert str(error.value) == f"random graph NODES must be an integer from 1 to 100,000,000, {shown}"
