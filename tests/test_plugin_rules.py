"""plugin.rules: the plugin's type, format, shape and aliasing rules as plain functions (no TensorRT)."""

import numpy as np
import pytest

from plugin import rules

F32, F16, I64, I32 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.int64), np.dtype(np.int32)


def combination(state, src=None, index=I64, aggregated=None, counts=I64):
    src = state if src is None else src
    aggregated = state if aggregated is None else aggregated
    return [state, src, index, aggregated, counts]


@pytest.mark.parametrize("feature", [F32, F16])
def test_consistent_combination_is_accepted_at_every_position(feature):
    dtypes = combination(feature)
    assert all(rules.supports_combination(pos, dtypes, [True] * 5) for pos in range(5))


@pytest.mark.parametrize("pos", range(5))
def test_non_linear_format_is_refused_at_every_position(pos):
    linear = [True] * 5
    linear[pos] = False
    assert not rules.supports_combination(pos, combination(F32), linear)


@pytest.mark.parametrize("state", [np.dtype(np.float64), I32, I64, np.dtype(np.int8), None])
def test_state_must_be_float32_or_float16(state):
    assert not rules.supports_combination(rules.STATE, combination(state), [True] * 5)


@pytest.mark.parametrize("pos", [rules.SOURCE, rules.NUM_INPUTS + rules.AGGREGATED])
def test_src_and_aggregated_follow_the_state_dtype(pos):
    dtypes = combination(F32)
    dtypes[pos] = F16
    assert not rules.supports_combination(pos, dtypes, [True] * 5)
    dtypes[rules.STATE] = F16
    assert rules.supports_combination(pos, dtypes, [True] * 5)


@pytest.mark.parametrize("pos", [rules.INDEX, rules.NUM_INPUTS + rules.COUNTS])
@pytest.mark.parametrize("dtype", [I32, F32, None])
def test_index_and_counts_are_int64(pos, dtype):
    dtypes = combination(F16)
    dtypes[pos] = dtype
    assert not rules.supports_combination(pos, dtypes, [True] * 5)


def test_rules_never_look_at_later_positions():
    """TensorRT has not chosen the positions after `pos` yet; garbage there must not change the answer."""
    for pos in range(5):
        dtypes = combination(F16)
        garbage = dtypes[: pos + 1] + [np.dtype(np.bool_)] * (4 - pos)
        linear = [True] * (pos + 1) + [False] * (4 - pos)
        assert rules.supports_combination(pos, garbage, linear)


def test_out_of_range_position_is_refused():
    assert not rules.supports_combination(5, combination(F32), [True] * 5)
    assert not rules.supports_combination(-1, combination(F32), [True] * 5)


@pytest.mark.parametrize("feature", [F32, F16])
def test_output_dtypes(feature):
    assert rules.output_dtypes([feature, feature, I64]) == [feature, I64]


@pytest.mark.parametrize(
    "inputs, message",
    [
        ([np.dtype(np.float64), np.dtype(np.float64), I64], "state"),
        ([F32, F16, I64], "src"),
        ([F16, F16, I32], "index"),
        ([F32, F32], "3 inputs"),
    ],
)
def test_output_dtypes_name_the_bad_input(inputs, message):
    with pytest.raises(ValueError, match=message):
        rules.output_dtypes(inputs)


def test_only_output_0_aliases_input_0():
    assert rules.aliased_input(0) == 0
    assert [rules.aliased_input(i) for i in (1, 2, -1)] == [-1, -1, -1]


def test_launch_sizes_from_concrete_shapes():
    sizes = rules.launch_sizes([(7, 3), (11, 3), (11,)])
    assert (sizes.num_nodes, sizes.num_edges, sizes.num_features) == (7, 11, 3)
    assert rules.state_nbytes(sizes, F16) == 7 * 3 * 2


def test_zero_edges_is_a_valid_launch():
    assert rules.launch_sizes([(4, 1), (0, 1), (0,)]).num_edges == 0


@pytest.mark.parametrize(
    "shapes, message",
    [
        ([(4, 2), (6, 3), (6,)], "features"),
        ([(4, 2), (6, 2), (5,)], "edges"),
        ([(4,), (6, 2), (6,)], "expected state"),
        ([(4, 2), (6, 2), (6, 1)], "expected state"),
        ([(4, 2), (6, 2)], "3 inputs"),
    ],
)
def test_inconsistent_shapes_are_refused(shapes, message):
    with pytest.raises(ValueError, match=message):
        rules.launch_sizes(shapes)


def test_build_time_check_accepts_dynamic_dimensions_but_launch_needs_concrete_ones():
    shapes = [(-1, 3), (-1, 3), (-1,)]
    rules.check_input_ranks(shapes)
    with pytest.raises(ValueError, match="concrete"):
        rules.launch_sizes(shapes)
