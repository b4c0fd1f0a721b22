"""plugin.rules: the plugin's type, format, shape and aliasing rules as plain functions (no TensorRT)."""

import numpy as np
import pytest

from plugin import rules

F32, F16, I64, I32 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.int64), np.dtype(np.int32)


def combination(state, src=None, index=I64, aggregated=None, counts=I64, *, compute_counts=True):
    """dtypes at every position: (state, src, index, aggregated, counts), or without counts."""
    src = state if src is None else src
    aggregated = state if aggregated is None else aggregated
    return [state, src, index, aggregated, counts] if compute_counts else [state, src, index, aggregated]


def supports(pos, dtypes, linear=None, *, compute_counts):
    """What the plugin asks: the choices at positions 0..pos, and how many positions TensorRT passed."""
    linear = [True] * len(dtypes) if linear is None else linear
    return rules.supports_combination(pos, dtypes[: pos + 1], linear[: pos + 1], num_io=len(dtypes),
                                      compute_counts=compute_counts)


WITH_AND_WITHOUT_COUNTS = pytest.mark.parametrize("compute_counts", [True, False], ids=["counts", "no_counts"])


def test_number_of_outputs():
    assert rules.num_outputs(compute_counts=True) == 2
    assert rules.num_outputs(compute_counts=False) == 1


@WITH_AND_WITHOUT_COUNTS
@pytest.mark.parametrize("feature", [F32, F16])
def test_consistent_combination_is_accepted_at_every_position(feature, compute_counts):
    dtypes = combination(feature, compute_counts=compute_counts)
    assert len(dtypes) == 3 + rules.num_outputs(compute_counts=compute_counts)
    assert all(supports(pos, dtypes, compute_counts=compute_counts) for pos in range(len(dtypes)))


@WITH_AND_WITHOUT_COUNTS
def test_non_linear_format_is_refused_at_every_position(compute_counts):
    dtypes = combination(F32, compute_counts=compute_counts)
    for pos in range(len(dtypes)):
        linear = [True] * len(dtypes)
        linear[pos] = False
        assert not supports(pos, dtypes, linear, compute_counts=compute_counts)


@WITH_AND_WITHOUT_COUNTS
@pytest.mark.parametrize("state", [np.dtype(np.float64), I32, I64, np.dtype(np.int8), None])
def test_state_must_be_float32_or_float16(state, compute_counts):
    assert not supports(rules.STATE, combination(state, compute_counts=compute_counts), compute_counts=compute_counts)


@WITH_AND_WITHOUT_COUNTS
@pytest.mark.parametrize("pos", [rules.SOURCE, rules.NUM_INPUTS + rules.AGGREGATED])
def test_src_and_aggregated_follow_the_state_dtype(pos, compute_counts):
    dtypes = combination(F32, compute_counts=compute_counts)
    dtypes[pos] = F16
    assert not supports(pos, dtypes, compute_counts=compute_counts)
    dtypes[rules.STATE] = F16
    assert supports(pos, dtypes, compute_counts=compute_counts)


@pytest.mark.parametrize("pos", [rules.INDEX, rules.NUM_INPUTS + rules.COUNTS])
@pytest.mark.parametrize("dtype", [I32, F32, None])
def test_index_and_counts_are_int64(pos, dtype):
    dtypes = combination(F16)
    dtypes[pos] = dtype
    assert not supports(pos, dtypes, compute_counts=True)


def test_without_counts_index_is_still_int64():
    dtypes = combination(F16, compute_counts=False)
    dtypes[rules.INDEX] = I32
    assert not supports(rules.INDEX, dtypes, compute_counts=False)


@WITH_AND_WITHOUT_COUNTS
def test_rules_take_only_the_positions_up_to_pos(compute_counts):
    """TensorRT has not chosen the positions after `pos` yet: the rules are given positions 0..pos, and refuse
    a call that hands them more or fewer."""
    dtypes = combination(F16, compute_counts=compute_counts)
    total = len(dtypes)
    for pos in range(total):
        assert rules.supports_combination(pos, dtypes[: pos + 1], [True] * (pos + 1), num_io=total,
                                          compute_counts=compute_counts)
        for count in {0, pos, total} - {pos + 1}:
            assert not rules.supports_combination(pos, dtypes[:count], [True] * count, num_io=total,
                                                  compute_counts=compute_counts)


def test_out_of_range_position_is_refused():
    assert not supports(5, combination(F32), compute_counts=True)
    assert not supports(-1, combination(F32), compute_counts=True)
    assert not supports(4, combination(F32, compute_counts=False) + [I64], compute_counts=False)


def test_the_number_of_positions_must_match_the_outputs():
    """Four positions for the plugin with counts, or five for the one without, are not its I/O."""
    assert not supports(0, combination(F32, compute_counts=False), compute_counts=True)
    assert not supports(0, combination(F32, compute_counts=True), compute_counts=False)


@pytest.mark.parametrize("feature", [F32, F16])
def test_output_dtypes(feature):
    assert rules.output_dtypes([feature, feature, I64], compute_counts=True) == [feature, I64]
    assert rules.output_dtypes([feature, feature, I64], compute_counts=False) == [feature]


@WITH_AND_WITHOUT_COUNTS
@pytest.mark.parametrize(
    "inputs, message",
    [
        ([np.dtype(np.float64), np.dtype(np.float64), I64], "state"),
        ([F32, F16, I64], "src"),
        ([F16, F16, I32], "index"),
        ([F32, F32], "3 inputs"),
    ],
)
def test_output_dtypes_name_the_bad_input(inputs, message, compute_counts):
    with pytest.raises(ValueError, match=message):
        rules.output_dtypes(inputs, compute_counts=compute_counts)


def test_output_shapes():
    assert rules.output_shapes(7, 3, 1, compute_counts=True) == [[7, 3], [7, 1]]
    assert rules.output_shapes(7, 3, 1, compute_counts=False) == [[7, 3]]


# --- the compute_counts attribute and its plugin field -----------------------------------------------------


@pytest.mark.parametrize("value, expected", [(True, True), (False, False), (1, True), (0, False), (np.int32(0), False)])
def test_compute_counts_accepts_bools_and_0_or_1(value, expected):
    assert rules.as_compute_counts(value) is expected


@pytest.mark.parametrize("value, shown", [(2, "got 2"), (-1, "got -1"), (np.int64(7), "got 7"), (1.0, "got 1.0"),
                                          (np.float64(0.5), "got 0.5"),
                                          ("1", "got '1'"), (None, "got None")])
def test_compute_counts_refuses_other_values(value, shown):
    with pytest.raises(ValueError, match=f"compute_counts must be 0 or 1, {shown}$"):
        rules.as_compute_counts(value)


@pytest.mark.parametrize("compute_counts", [True, False])
def test_fields_round_trip(compute_counts):
    fields = rules.fields_to_serialize(compute_counts=compute_counts)
    assert list(fields) == ["compute_counts"]
    values = fields["compute_counts"]
    assert values.dtype == np.int32 and values.tolist() == [int(compute_counts)]
    assert rules.compute_counts_from_fields(fields) is compute_counts


def test_missing_field_means_counts_as_before_the_field_existed():
    assert rules.compute_counts_from_fields({}) is True


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"num_nodes": np.array([4], np.int32)},
         r"unknown plugin field\(s\) \['num_nodes'\]; .* only \['compute_counts', 'overwrite'\]"),
        ({"compute_counts": np.array([2], np.int32)}, "compute_counts must be 0 or 1, got 2$"),
        ({"compute_counts": np.array([-1], np.int32)}, "compute_counts must be 0 or 1, got -1$"),
        ({"compute_counts": np.array([1, 0], np.int32)}, "one int32 value .* got 2 value"),
        ({"compute_counts": np.array([], np.int32)}, "one int32 value .* got 0 value"),
        ({"compute_counts": np.array([1], np.int64)}, "of type int64"),
        ({"compute_counts": np.array([1.0], np.float32)}, "of type float32"),
    ],
)
def test_bad_fields_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        rules.compute_counts_from_fields(fields)


def test_field_names_unknown_or_repeated():
    rules.check_field_names(["compute_counts"])
    rules.check_field_names([])
    with pytest.raises(ValueError, match=r"\['Compute_counts'\]"):
        rules.check_field_names(["Compute_counts"])
    with pytest.raises(ValueError, match=r"\['compute_counts'\] given more than once"):
        rules.check_field_names(["compute_counts", "compute_counts"])


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
