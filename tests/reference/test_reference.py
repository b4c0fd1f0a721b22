"""The float64 reference: the seed's graph by hand, property tests against a plain Python loop, compare()."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference import TOLERANCES, compare, gnn_reference, make_weights, scatter_add_rows

SEED_FEATURES = [1.0, 3.0, 5.0, 7.0]
SEED_EDGES = [[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [1, 3]]


def test_seed_graph_by_hand():
    # Node 0 receives from 3 (7); node 1 from 0 (1); node 2 from 1 and 0 (3 + 1); node 3 from 2 and 1 (5 + 3).
    weights = np.array([[1.0], [-1.0], [0.5]])
    result = gnn_reference(SEED_FEATURES, SEED_EDGES, weights)
    np.testing.assert_array_equal(result["aggregated"], [[7.0], [1.0], [4.0], [8.0]])
    np.testing.assert_array_equal(result["counts"], [[1.0], [1.0], [2.0], [2.0]])
    np.testing.assert_array_equal(result["mean"], [[7.0], [1.0], [2.0], [4.0]])
    # logits [C, N] = W @ mean.T (before ReLU), then ReLU: class 0 -> mean, class 1 -> 0, class 2 -> mean / 2.
    np.testing.assert_array_equal(result["logits"], [[7.0, 1.0, 2.0, 4.0], [-7.0, -1.0, -2.0, -4.0], [3.5, 0.5, 1.0, 2.0]])
    for node, mean in enumerate([7.0, 1.0, 2.0, 4.0]):
        exps = [math.exp(mean), math.exp(0.0), math.exp(mean / 2)]
        expected = [value / sum(exps) for value in exps]
        np.testing.assert_allclose(result["softmax"][:, node], expected, rtol=1e-14)
    assert all(result[key].dtype == np.float64 for key in ("aggregated", "counts", "mean", "logits", "softmax"))
    assert result["softmax"].shape == (3, 4) and result["counts"].shape == (4, 1)


def test_state_is_added_before_the_mean():
    state = [[10.0], [0.0], [-4.0], [2.0]]
    result = gnn_reference(SEED_FEATURES, SEED_EDGES, np.ones((1, 1)), state=state)
    np.testing.assert_array_equal(result["aggregated"], [[17.0], [1.0], [0.0], [10.0]])
    np.testing.assert_array_equal(result["mean"], [[17.0], [1.0], [0.0], [5.0]])
    np.testing.assert_array_equal(result["softmax"], np.ones((1, 4)))  # one class: softmax is 1


def test_true_division_not_floor_division():
    # Node 1 receives 1 and 2: mean 1.5 (the seed's FLOOR_DIV would give 1).
    result = gnn_reference([1.0, 2.0], [[0, 1], [1, 1], [1, 0]], np.ones((2, 1)))
    np.testing.assert_array_equal(result["mean"], [[2.0], [1.5]])


def test_in_degrees_counted_once_by_the_graph_give_the_same_reference():
    from graph import validate_graph

    graph = validate_graph(SEED_FEATURES, SEED_EDGES)
    np.testing.assert_array_equal(graph.in_degree, [1, 1, 2, 2])
    weights = np.array([[1.0], [-1.0], [0.5]])
    given = gnn_reference(graph.node_features, graph.edges, weights, in_degree=graph.in_degree)
    counted = gnn_reference(SEED_FEATURES, SEED_EDGES, weights)
    for key in ("aggregated", "counts", "mean", "logits", "softmax"):
        np.testing.assert_array_equal(given[key], counted[key])
        assert given[key].shape == counted[key].shape


def test_make_weights_is_seeded_standard_normal():
    weights = make_weights(123, 4, 3)
    assert weights.shape == (4, 3) and weights.dtype == np.float64
    np.testing.assert_array_equal(weights, np.random.default_rng(123).standard_normal((4, 3)))
    assert not np.array_equal(weights, make_weights(124, 4, 3))


def _loop_reference(features, edges, weights, state):
    """The network, one edge and one node at a time in Python floats."""
    num_nodes, num_features = len(features), len(features[0])
    aggregated = [list(row) for row in state]
    counts = [0] * num_nodes
    for source, target in edges:
        counts[target] += 1
        for f in range(num_features):
            aggregated[target][f] += features[source][f]
    mean = [[aggregated[n][f] / counts[n] for f in range(num_features)] for n in range(num_nodes)]
    softmax = [[0.0] * num_nodes for _ in weights]
    for n in range(num_nodes):
        logits = [max(0.0, sum(w[f] * mean[n][f] for f in range(num_features))) for w in weights]
        top = max(logits)
        exps = [math.exp(z - top) for z in logits]
        for c, value in enumerate(exps):
            softmax[c][n] = value / sum(exps)
    return aggregated, counts, mean, softmax


_values = st.floats(-100.0, 100.0, allow_nan=False, allow_infinity=False)


@st.composite
def _graphs(draw):
    num_nodes = draw(st.integers(1, 12))
    num_features = draw(st.sampled_from([1, 3]))
    num_classes = draw(st.integers(1, 4))
    extra = draw(st.lists(st.tuples(st.integers(0, num_nodes - 1), st.integers(0, num_nodes - 1)), max_size=30))
    sources = draw(st.lists(st.integers(0, num_nodes - 1), min_size=num_nodes, max_size=num_nodes))
    edges = [(source, target) for target, source in enumerate(sources)] + extra  # every node has an in-edge
    edges = draw(st.permutations(edges))
    rows = st.lists(_values, min_size=num_features, max_size=num_features)
    features = draw(st.lists(rows, min_size=num_nodes, max_size=num_nodes))
    state = draw(st.lists(rows, min_size=num_nodes, max_size=num_nodes).filter(lambda s: any(any(r) for r in s)))
    weights = draw(st.lists(st.lists(st.floats(-3.0, 3.0), min_size=num_features, max_size=num_features),
                            min_size=num_classes, max_size=num_classes))
    return features, edges, weights, state


@settings(max_examples=150, deadline=None)
@given(_graphs())
def test_reference_matches_a_plain_python_loop(graph):
    features, edges, weights, state = graph
    aggregated, counts, mean, softmax = _loop_reference(features, edges, weights, state)
    result = gnn_reference(np.array(features), np.array(edges), np.array(weights), state=np.array(state))
    np.testing.assert_allclose(result["aggregated"], aggregated, rtol=1e-12, atol=1e-9)
    np.testing.assert_array_equal(result["counts"][:, 0], counts)
    np.testing.assert_allclose(result["mean"], mean, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(result["softmax"], softmax, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(result["softmax"].sum(axis=0), 1.0, rtol=1e-12)


def test_flat_features_equal_single_column_features():
    flat = gnn_reference(SEED_FEATURES, SEED_EDGES, np.ones((2, 1)))
    column = gnn_reference(np.array(SEED_FEATURES)[:, None], np.array(SEED_EDGES), np.ones((2, 1)))
    for key in flat:
        np.testing.assert_array_equal(flat[key], column[key])


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("num_rows, num_edges, num_features", [(5, 0, 3), (7, 40, 1), (300, 5000, 4)])
def test_scatter_add_rows_equals_np_add_at_bit_for_bit(dtype, num_rows, num_edges, num_features):
    """The one float64 scatter-add (the reference's and the plugin nodes' CPU reference's) adds in edge order, as
    np.add.at does: the same sums bit for bit, from zeros, from a start state, and through a gather by source."""
    rng = np.random.default_rng(num_edges)
    state = rng.standard_normal((num_rows, num_features)).astype(dtype)
    src = (rng.standard_normal((num_edges, num_features)) * 1e3).astype(dtype)
    idx = rng.integers(0, num_rows, num_edges)
    from_zero = np.zeros((num_rows, num_features))
    np.add.at(from_zero, idx, src.astype(np.float64))
    from_state = state.astype(np.float64)
    np.add.at(from_state, idx, src.astype(np.float64))
    assert np.array_equal(scatter_add_rows(src, None, idx, num_rows), from_zero)
    assert np.array_equal(scatter_add_rows(src, None, idx, num_rows, start=state), from_state)
    order = rng.permutation(num_edges)
    gathered = np.zeros((num_rows, num_features))
    np.add.at(gathered, idx, src[order].astype(np.float64))
    assert np.array_equal(scatter_add_rows(src, order, idx, num_rows), gathered)


def test_compare_passes_within_and_fails_beyond_the_tolerance():
    expected = np.array([[0.2, 0.5], [0.8, 0.5]])
    for precision, tolerance in TOLERANCES.items():
        atol, rtol = tolerance["atol"], tolerance["rtol"]
        limit = atol + rtol * expected
        inside = compare(expected + 0.9 * limit, expected, precision)
        assert inside.ok and inside.atol == atol and inside.rtol == rtol
        assert inside.max_abs_error == pytest.approx(0.9 * limit.max())
        outside = compare(expected - 1.1 * limit, expected, precision)
        assert not outside.ok
        assert outside.max_rel_error == pytest.approx((1.1 * limit / expected).max())


@pytest.mark.parametrize("precision", sorted(TOLERANCES))
def test_scale_widens_both_the_absolute_and_the_relative_tolerance(precision):
    atol, rtol = TOLERANCES[precision]["atol"], TOLERANCES[precision]["rtol"]
    # where the reference is 0 only atol counts; where it is large, rtol * |reference| is most of the limit
    for expected in (np.zeros(2), np.full(2, 100 * atol / rtol)):
        limit = atol + rtol * expected
        for factor, within_twice in ((1.5, True), (2.5, False)):
            actual = expected + factor * limit
            assert not compare(actual, expected, precision).ok
            doubled = compare(actual, expected, precision, scale=2.0)
            assert doubled.ok == within_twice and (doubled.atol, doubled.rtol) == (2 * atol, 2 * rtol)


def test_compare_fails_on_nan_and_refuses_shape_mismatch_and_unknown_precision():
    expected = np.full((3, 2), 1 / 3)
    broken = expected.copy()
    broken[1, 1] = np.nan
    assert not compare(broken, expected, "fp32").ok
    with pytest.raises(ValueError, match="shapes differ"):
        compare(expected[:, :1], expected, "fp32")
    with pytest.raises(ValueError, match="precision must be one of"):
        compare(expected, expected, "int8")


def test_comparison_summary_names_errors_and_tolerance():
    summary = compare([[0.5]], [[0.5 + 1e-3]], "fp16").summary()
    assert "largest absolute error 0.001" in summary and "atol 0.02" in summary
