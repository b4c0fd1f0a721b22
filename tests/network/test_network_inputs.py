"""network.run's input arrays, cli.engine_report's aliasing lines, network.engine's profile, signature checks and shapes: plain numpy,
no TensorRT."""

import numpy as np
import pytest

from common.errors import InputError
from network.engine import (
    DEFAULT_MAX_EDGES,
    DEFAULT_MAX_NODES,
    EngineSignature,
    ProfileBounds,
    SizeRange,
    check_graph_fits,
    default_profile_bounds,
    sample_profile_shapes,
)
from cli.engine_report import engine_alias_lines, plugin_alias_line, state_buffer_line
from network.run import engine_inputs, feature_dtype, make_engine_inputs, update_is_zero

SEED_FEATURES = [1.0, 3.0, 5.0, 7.0]
SEED_EDGES = [[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [1, 3]]


@pytest.mark.parametrize("precision, dtype", [("fp32", np.float32), ("fp16", np.float16)])
def test_seed_graph_inputs(precision, dtype):
    weights = np.arange(6, dtype=np.float64).reshape(3, 2) / 10
    features = np.array([[1.0, -1.0], [3.0, -3.0], [5.0, -5.0], [7.0, -7.0]])
    feeds = engine_inputs(features, np.array(SEED_EDGES), weights, precision)
    assert list(feeds) == ["X", "src", "idx", "W"]
    np.testing.assert_array_equal(feeds["X"], np.zeros((4, 2)))
    np.testing.assert_array_equal(feeds["src"][:, 0], [1.0, 3.0, 5.0, 7.0, 1.0, 3.0])  # features of the sources
    np.testing.assert_array_equal(feeds["src"][:, 1], [-1.0, -3.0, -5.0, -7.0, -1.0, -3.0])
    np.testing.assert_array_equal(feeds["idx"], [1, 2, 3, 0, 2, 3])  # the targets
    np.testing.assert_array_equal(feeds["W"], weights.astype(dtype))
    assert {name: array.dtype for name, array in feeds.items()} == {
        "X": dtype, "src": dtype, "idx": np.int64, "W": dtype,
    }
    assert all(array.flags.c_contiguous for array in feeds.values())


def test_flat_features_are_one_feature_per_node_and_state_is_used():
    state = np.array([[0.5], [1.5], [2.5], [3.5]])
    feeds = engine_inputs(np.array(SEED_FEATURES), np.array(SEED_EDGES), np.ones((3, 1)), "fp32", state=state)
    assert feeds["src"].shape == (6, 1)
    np.testing.assert_array_equal(feeds["X"], state.astype(np.float32))


def test_make_engine_inputs_reads_a_graph():
    graph_module = pytest.importorskip("graph", reason="graph/ (issue 2) is not in this tree yet")
    if not hasattr(graph_module, "validate_graph"):
        pytest.skip("graph.validate_graph (issue 2) is not in this tree yet")
    graph = graph_module.validate_graph(np.array(SEED_FEATURES), np.array(SEED_EDGES))
    feeds = make_engine_inputs(graph, np.ones((3, 1)), "fp16")
    np.testing.assert_array_equal(feeds["idx"], [1, 2, 3, 0, 2, 3])
    assert feeds["src"].dtype == np.float16 and feeds["X"].shape == (4, 1)


@pytest.mark.parametrize("name, kwargs", [
    ("node_features", dict(node_features=np.array([1.0, 7e4, 2.0]))),
    ("state", dict(state=np.array([[0.0], [-1e5], [0.0]]))),
    ("weights", dict(weights=np.array([[7e4]]))),
])
def test_fp16_overflow_names_the_array_and_value(name, kwargs):
    arguments = dict(node_features=np.array([1.0, 2.0, 3.0]), edges=np.array([[0, 1], [1, 2], [2, 0]]),
                     weights=np.ones((1, 1)), precision="fp16")
    arguments.update(kwargs)
    with pytest.raises(InputError, match=rf"{name}\[.*\] = .* does not fit in float16"):
        engine_inputs(**arguments)


def test_fp16_overflow_message_prints_plain_numbers():
    """Under numpy 2 a numpy scalar's repr is np.float64(70000.0); the message shows the number itself."""
    with pytest.raises(InputError) as raised:
        engine_inputs(np.array([1.0, 7e4]), np.array([[0, 1]]), np.ones((1, 1)), "fp16")
    assert str(raised.value) == (
        "node_features[1, 0] = 70000.0 does not fit in float16 (largest finite value 65504); use --precision fp32"
    )
    with pytest.raises(InputError, match=r"state\[2, 1\] = -123456.5 does not fit"):
        engine_inputs(np.ones(3), np.array([[0, 1]]), np.ones((1, 2)), "fp16",
                      state=np.array([[0.0, 0.0], [0.0, 0.0], [0.0, -123456.5]]))


def test_fp32_takes_values_beyond_fp16():
    feeds = engine_inputs(np.array([1.0, 7e4]), np.array([[0, 1], [1, 0]]), np.ones((1, 1)), "fp32")
    assert feeds["src"][1, 0] == np.float32(7e4)  # edge 1 -> 0 carries node 1's feature


def test_unknown_precision():
    with pytest.raises(InputError, match="fp64"):
        feature_dtype("fp64")


def test_default_profile_covers_the_graph_and_more():
    bounds = default_profile_bounds(4, 6)
    assert (bounds.nodes.min, bounds.nodes.opt, bounds.nodes.max) == (1, 4, DEFAULT_MAX_NODES)
    assert (bounds.edges.min, bounds.edges.opt, bounds.edges.max) == (1, 6, DEFAULT_MAX_EDGES)
    large = default_profile_bounds(DEFAULT_MAX_NODES + 5, 10 * DEFAULT_MAX_EDGES)
    assert large.nodes.max == DEFAULT_MAX_NODES + 5 and large.edges.max == 10 * DEFAULT_MAX_EDGES


@pytest.mark.parametrize("low, opt, high", [(0, 1, 2), (3, 2, 4), (1, 5, 4)])
def test_size_range_must_be_ordered(low, opt, high):
    with pytest.raises(InputError, match="min <= opt <= max"):
        SizeRange(low, opt, high)


SIGNATURE = EngineSignature("fp16", 2, 3, ProfileBounds(SizeRange(2, 4, 8), SizeRange(1, 6, 16)))


def test_graph_within_the_engine_fits():
    check_graph_fits(SIGNATURE, "fp16", 8, 16, 2, 3)
    check_graph_fits(SIGNATURE, "fp16", np.int64(2), np.int64(1), 2, 3)


@pytest.mark.parametrize("arguments, message", [
    (("fp32", 4, 6, 2, 3), "built for --precision fp16"),
    (("fp16", 4, 6, 1, 3), "2 features per node, the graph has 1"),
    (("fp16", 4, 6, 2, 5), "--num_classes 3, got 5"),
    (("fp16", 9, 6, 2, 3), r"9 nodes, outside the engine's profile \[2, 8\]"),
    (("fp16", 1, 6, 2, 3), r"1 nodes, outside"),
    (("fp16", 4, 17, 2, 3), r"17 edges, outside the engine's profile \[1, 16\]"),
])
def test_graph_outside_the_engine_is_an_input_error(arguments, message):
    with pytest.raises(InputError, match=message):
        check_graph_fits(SIGNATURE, *arguments)


def test_sample_profile_shapes():
    shapes = sample_profile_shapes(SIGNATURE.bounds, 2)
    assert shapes == {
        "X": ((2, 2), (4, 2), (8, 2)),
        "src": ((1, 2), (6, 2), (16, 2)),
        "idx": ((1,), (6,), (16,)),
    }


def test_state_buffer_changed_in_place():
    assert "changed in place" in state_buffer_line(True, zero_update=False)


def test_state_buffer_unchanged():
    line = state_buffer_line(False, zero_update=False)
    assert "unchanged" in line and "TensorRT-owned" in line
    assert "cannot be seen" in state_buffer_line(False, zero_update=True)
    assert "PR #4279" not in state_buffer_line(False, zero_update=False)


def test_an_unchanged_x_under_a_multi_output_plugin_names_the_unconfirmed_copy_claim():
    """The classifier's plugin has two outputs and its aliased one feeds the mean: Torch-TensorRT PR #4279 says
    TensorRT then copies X (unconfirmed by NVIDIA), so "unchanged" is what the default run may show."""
    line = state_buffer_line(False, zero_update=False, multi_output_plugin=True)
    assert line == (
        "Caller's X buffer: unchanged (the plugin's in-place write went to a TensorRT-owned buffer, not the caller's; "
        "expected as Torch-TensorRT PR #4279 states, unconfirmed by NVIDIA, TensorRT copies the aliased input when a "
        "multi-output plugin's aliased output feeds another layer, which is this classifier's shape)")
    assert "PR #4279" not in state_buffer_line(True, zero_update=False, multi_output_plugin=True)
    assert "PR #4279" not in state_buffer_line(False, zero_update=True, multi_output_plugin=True)


def test_update_is_zero_sums_per_target():
    index = np.array([0, 0, 1])
    assert update_is_zero(np.array([[1.0], [-1.0], [0.0]]), index, 3)  # +1 and -1 cancel in row 0
    assert not update_is_zero(np.array([[1.0], [-1.0], [0.5]]), index, 3)
    assert not update_is_zero(np.array([[0.0, 0.0], [0.0, 2.0], [0.0, 0.0]]), index, 2)
    assert update_is_zero(np.zeros((0, 2)), np.zeros(0, np.int64), 2)


def test_plugin_alias_line_with_and_without_counts():
    assert plugin_alias_line(compute_counts=True) == (
        "Plugin: output 0 (aggregated) aliases input 0 (X) -- get_aliased_input(0) == 0, -1 for output 1 (counts)"
    )
    line = plugin_alias_line(compute_counts=False)
    assert line.startswith("Plugin (compute_counts=0): output 0 (aggregated), its only output, aliases input 0 (X)")
    assert "output 1" not in line


def test_engine_alias_lines():
    lines = engine_alias_lines({"softmax": None, "aggregated": "X"})
    assert lines == [
        "Engine output 'softmax': get_aliased_input_tensor -> None (no engine input shares its memory)",
        "Engine output 'aggregated': get_aliased_input_tensor -> 'X'",
    ]
    assert engine_alias_lines(None, "10.13.3.9") == [
        "Engine outputs: TensorRT 10.13.3.9 has no ICudaEngine.get_aliased_input_tensor to report engine I/O aliasing"
    ]
