"""validate_graph: the Graph it returns, and one InputError per class of bad array input."""

import dataclasses

import numpy as np
import pytest

from common.errors import InputError
from graph import FP16_MAX, Graph, check_precision_range, describe_graph, implied_node_count, may_overflow, validate_graph
from reference import gnn_reference

SEED_EDGES = [[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [1, 3]]


def test_seed_graph_becomes_a_graph_of_float64_and_int64():
    graph = validate_graph([1.0, 3.0, 5.0, 7.0], SEED_EDGES)
    assert isinstance(graph, Graph)
    assert (graph.num_nodes, graph.num_edges, graph.num_features) == (4, 6, 1)
    assert graph.node_features.dtype == np.float64 and graph.node_features.shape == (4, 1)
    assert graph.edges.dtype == np.int64 and graph.edges.flags.c_contiguous
    assert graph.state is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        graph.state = np.zeros((4, 1))  # type: ignore[misc]


def test_integer_features_and_unsigned_edges_convert():
    graph = validate_graph(np.array([[1, 2], [3, 4]], dtype=np.int32), np.array([[0, 1], [1, 0]], dtype=np.uint16))
    assert graph.node_features.dtype == np.float64 and graph.edges.dtype == np.int64
    assert graph.num_features == 2


def test_node_count_implied_by_edges_refuses_ids_beyond_int64_and_no_edges():
    assert implied_node_count(np.array([[0, 1], [1, 0]], dtype=np.uint64)) == 2
    beyond = np.array([[0, 1], [1, 2**63]], dtype=np.uint64)  # int64 would wrap it to a negative id
    with pytest.raises(InputError, match=r"^edges: edge 1 \(1 -> 9223372036854775808\) has a node id beyond int64's range$"):
        implied_node_count(beyond)
    with pytest.raises(InputError, match="edges: there are none"):
        implied_node_count(np.zeros((0, 2), np.int64))


def test_state_of_a_single_feature_may_be_flat():
    graph = validate_graph([1.0, 2.0], [[0, 1], [1, 0]], state=[0.5, -0.5])
    np.testing.assert_array_equal(graph.state, [[0.5], [-0.5]])


@pytest.mark.parametrize(
    "features, edges, state, message",
    [
        ([1.0, float("nan")], [[0, 1], [1, 0]], None, "node_features: node 1 feature 0 is nan (1 value not finite)"),
        ([[1.0, np.inf], [2.0, -np.inf]], [[0, 1], [1, 0]], None, "node 0 feature 1 is inf (2 values not finite)"),
        ([], [], None, "node_features: the node list is empty"),
        (np.zeros((2, 0)), [[0, 1], [1, 0]], None, "the nodes have no features"),
        (np.zeros((2, 1, 1)), [[0, 1], [1, 0]], None, "expected shape [N] or [N, F], got shape [2, 1, 1]"),
        ([[1.0, 2.0], [3.0]], [[0, 1], [1, 0]], None, "not a rectangular array"),
        (["a", "b"], [[0, 1], [1, 0]], None, "expected numbers, got an array of dtype <U1"),
        ([True, False], [[0, 1], [1, 0]], None, "expected numbers, got an array of dtype bool"),
        ([1.0, 2.0], [[0, 1], [1, 0.0]], None, "edges: node ids must be integers, got an array of dtype float64"),
        ([1.0, 2.0], [[0, 1, 1]], None, "edges: expected shape [E, 2] (source, target), got shape [1, 3]"),
        ([1.0, 2.0], [0, 1], None, "got shape [2]"),
        ([1.0, 2.0], [[0, 1], [1, -1]], None, "edges: edge 1 (1 -> -1) has a negative node id"),
        ([1.0, 2.0], [[0, 1], [2, 0]], None, "edge 1 (2 -> 0) refers to a node that does not exist; there are 2 nodes"),
        ([1.0, 2.0], np.array([[0, 1], [1, 2**63]], dtype=np.uint64), None, "edge 1 (1 -> 9223372036854775808)"),
        ([1.0, 2.0, 3.0], [[0, 1], [1, 0]], None, "edges: node 2 of 3 has no incoming edge"),
        ([1.0, 2.0], [[0, 1], [1, 0]], [1.0, np.nan], "state: node 1 feature 0 is nan"),
        ([1.0, 2.0], [[0, 1], [1, 0]], [[1.0, 2.0], [3.0, 4.0]], "state: shape [2, 2] differs from node_features' [2, 1]"),
    ],
)
def test_bad_arrays_name_the_problem(features, edges, state, message):
    with pytest.raises(InputError) as error:
        validate_graph(features, edges, state)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_nodes_without_incoming_edges_are_named_first_five_then_counted():
    with pytest.raises(InputError) as error:
        validate_graph(np.ones(10), [[0, 1], [1, 0]])
    assert "nodes 2, 3, 4, 5, 6 and 3 more of 10 have no incoming edge" in str(error.value)


def test_empty_edge_list_leaves_every_node_without_incoming_edge():
    with pytest.raises(InputError, match="nodes 0, 1 of 2 have no incoming edge"):
        validate_graph([1.0, 2.0], np.empty((0, 2), dtype=np.int64))


def test_fp16_range_check_names_the_value_beyond_65504():
    graph = validate_graph([1.0, 70000.0], [[0, 1], [1, 0]])
    with pytest.raises(InputError, match=r"node_features at \[1, 0\] is 70000, beyond float16's range"):
        check_precision_range(graph, "fp16", np.zeros((2, 1)), np.zeros((3, 2)))
    small = validate_graph([1.0, 2.0], [[0, 1], [1, 0]])
    with pytest.raises(InputError, match=r"aggregated features .* at \[0, 0\]"):
        check_precision_range(small, "fp16", np.array([[FP16_MAX * 1.01], [1.0]]), np.zeros((3, 2)))
    with pytest.raises(InputError, match=r"logits .* at \[2, 1\] is 70000"):
        check_precision_range(small, "fp16", np.ones((2, 1)), np.array([[0, 0], [0, 0], [0, 70000.0]]))
    check_precision_range(small, "fp16", np.full((2, 1), FP16_MAX), np.full((3, 2), FP16_MAX))  # the limit itself is fine
    check_precision_range(small, "fp16", np.ones((2, 1)), np.full((3, 2), -1e6))  # ReLU turns -Inf logits into 0
    with pytest.raises(InputError, match=r"in-degree .* at \[1, 0\] is 70000"):
        check_precision_range(small, "fp16", np.ones((2, 1)), np.zeros((3, 2)), np.array([[1], [70000]]))
    check_precision_range(small, "fp16", np.ones((2, 1)), np.zeros((3, 2)), np.array([[1], [int(FP16_MAX)]]))


def test_fp32_range_check_names_the_value_beyond_float32():
    graph = validate_graph([1.0, 1e39], [[0, 1], [1, 0]])  # finite in float64, Inf in float32
    with pytest.raises(InputError, match=r"--precision fp32: node_features at \[1, 0\] is 1e\+39, beyond float32's range"):
        check_precision_range(graph, "fp32")
    large = validate_graph([3e38, 3e38], [[1, 0], [0, 1], [1, 1]])  # node 1 sums to 6e38
    check_precision_range(large, "fp32")
    weights = np.ones((2, 1))
    assert may_overflow(large, weights, "fp32")
    reference = gnn_reference(large.node_features, large.edges, weights)
    with pytest.raises(InputError, match=r"aggregated features .* at \[1, 0\] is 6e\+38"):
        check_precision_range(large, "fp32", reference["aggregated"], reference["logits"])
    small = validate_graph([1.0, 2.0], [[0, 1], [1, 0]])
    assert not may_overflow(small, weights, "fp32") and may_overflow(validate_graph([6e4, 1.0], [[0, 1], [0, 0], [1, 1]]), weights, "fp16")


def test_cli_refuses_fp16_in_degree_beyond_65504():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, str(root / "aliased_io_plugin.py"), "--precision", "fp16", "--dry-run",
               "--random_graph", "1", "70000", "--node_features", "[0.001]", "--seed", "0"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=root)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "in-degree" in result.stderr and "beyond float16's range" in result.stderr


def test_small_graphs_print_the_adjacency_matrix_large_ones_a_summary():
    small = validate_graph([1.0, 3.0, 5.0, 7.0], SEED_EDGES)
    assert describe_graph(small) == [
        "Adjacency matrix for graph:",
        "[0, 1, 1, 0]",
        "[0, 0, 1, 1]",
        "[0, 0, 0, 1]",
        "[1, 0, 0, 0]",
    ]
    n = 17
    ring = [[i, (i + 1) % n] for i in range(n)] + [[0, 5], [1, 5]]
    (line,) = describe_graph(validate_graph(np.ones((n, 2)), ring))
    assert line.startswith("Graph: 17 nodes, 19 edges, 2 features per node, a zero initial state; in-degree 1..3")
    assert "out-degree 1..2" in line


def test_may_overflow_bounds_each_logit_by_its_row_of_weights_over_the_features():
    """logit c = sum over f of W[c, f] * mean[f]: the bound sums |W| over the features of each class (axis 1).
    With more features than classes, a sum over the classes (axis 0) underestimates it."""
    graph = validate_graph(np.full((2, 4), 1e38), [[0, 1], [1, 0]])  # aggregated 1e38: within float32
    weights = np.ones((1, 4))  # the logit is 4e38, beyond float32's 3.4e38
    logits = gnn_reference(graph.node_features, graph.edges, weights)["logits"]
    assert logits.max() > np.finfo(np.float32).max
    assert may_overflow(graph, weights, "fp32")
    assert not may_overflow(graph, np.full((3, 4), 0.5), "fp32")  # 2e38 per class, however many classes
    assert may_overflow(validate_graph(np.full((2, 1), 1e38), [[0, 1], [1, 0]]), np.full((4, 1), 4.0), "fp32")


def test_an_fp32_run_whose_logits_overflow_is_refused_without_validate(capsys):
    """The CLI computes the reference (and refuses) only where may_overflow says a value may not fit: a run with
    8 features and one class whose logit overflows float32 must stop with exit 2 before any engine work."""
    import aliased_io_plugin as cli

    row = "[" + ",".join(["1.3e38"] * 8) + "]"  # seed 0's weights: sum 2.816, largest |w| 1.304
    status = cli.main(["--node_features", f"[{row},{row}]", "--edges", "[[0,1],[1,0]]", "--num_classes", "1",
                       "--seed", "0"])  # no --validate, no --dry-run
    error = capsys.readouterr().err
    assert status == 2 and error.count("\n") == 1
    assert "--precision fp32: logits (weights @ mean, after ReLU) at [0, 0] is 3.66" in error
