"""The list-string parser: the seed's forms, every class of malformed input, and round trips."""

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from common.errors import InputError
from graph import MAX_INPUT_CHARS, parse_edges, parse_node_features

SEED_FEATURES = "[1.0,3.0,5.0,7.0]"
SEED_EDGES = "[[0,1],[1,2],[2,3],[3,0],[0,2],[1,3]]"


def test_seed_defaults_parse():
    np.testing.assert_array_equal(parse_node_features(SEED_FEATURES), [[1.0], [3.0], [5.0], [7.0]])
    edges = parse_edges(SEED_EDGES)
    assert edges.dtype == np.int64
    np.testing.assert_array_equal(edges, [[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [1, 3]])


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[1, 2.5, -3e2, +.5]", [[1.0], [2.5], [-300.0], [0.5]]),
        ("[[1, 2], [3, 4]]", [[1.0, 2.0], [3.0, 4.0]]),
        (" [\n[1,2,3],\t[4,5,6] ] ", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
        ("[7,]", [[7.0]]),  # a trailing comma, as Python's literal syntax allows
    ],
)
def test_feature_forms(text, expected):
    parsed = parse_node_features(text)
    assert parsed.dtype == np.float64
    np.testing.assert_array_equal(parsed, expected)


def test_nan_and_inf_parse_for_validation_to_reject():
    parsed = parse_node_features("[nan, inf, -Infinity, 1e999]")
    assert np.isnan(parsed[0, 0]) and parsed[1, 0] == np.inf and parsed[2, 0] == -np.inf and parsed[3, 0] == np.inf


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[]", np.empty((0, 2))),
        ("[[0,1],]", [[0, 1]]),
        ("[ [ 0 , -1 ] , [+2,3] ]", [[0, -1], [2, 3]]),
        ("[[123456789012345678, 0]]", [[123456789012345678, 0]]),
    ],
)
def test_edge_forms(text, expected):
    np.testing.assert_array_equal(parse_edges(text), np.asarray(expected).reshape(-1, 2))


@pytest.mark.parametrize(
    "text, message",
    [
        ("5", "expected a list"),
        ("", "empty"),
        ("   ", "empty"),
        ("abc", "expected a list"),
        ("{0: 1}", "unexpected character '{' at position 0"),
        ("[(0,1)]", "unexpected character '('"),
        ("[[0,1]", "never closed"),
        ("[[0,1]]]", "after the list's closing ']'"),
        ("[[0,1]],[[1,2]]", "after the list's closing ']'"),
        ("[[0,1][1,2]]", "expected ',' or ']' at position 6"),
        ("[[0 1]]", "expected ',' or ']' at position 4, got '1'"),
        ("[,]", "at position 1, got ','"),
        ("[[0,1,2]]", "edge 0 '[0,1,2]' at position 1 has 3 values"),
        ("[[0,1],[2]]", "edge 1 '[2]' at position 7 has 1 value;"),
        ("[[]]", "has 0 values"),
        ("[0,1]", "bare number '0' at position 1"),
        ("[[0,1.5]]", "'1.5' at position 4 is not a node id"),
        ("[[0,True]]", "'True' at position 4 is not a node id"),
        ("[[0,-]]", "'-' at position 4 is not a node id"),
        ("[[0,99999999999999999999]]", "is not a node id (an integer of at most 18 digits)"),
        ("[[0,'1']]", "unexpected character \"'\" at position 4"),
        ("[[0,é]]", "unexpected character 'é' at position 4"),
        ("[[[0,1]]]", "nested deeper than 2 levels at position 2"),
    ],
)
def test_bad_edges_name_the_problem(text, message):
    with pytest.raises(InputError, match="^edges: ") as error:
        parse_edges(text)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "text, message",
    [
        ("[]", "the node list is empty"),
        ("[[]]", "node 0 has no features"),
        ("[[1,2],[3]]", "node 1 (position 7) has 1 feature but node 0 has 2"),
        ("[1,[2]]", "mixes numbers and lists"),
        ("[[1],2]", "the number '2' at position 5"),
        ("[1,abc]", "'abc' at position 3 is not a number"),
        ("[1..2]", "'1..2' at position 1 is not a number"),
        ("[--1]", "'--1' at position 1 is not a number"),
        ("[1_0]", "unexpected character '_'"),
        ("1,2", "expected a list"),
        ("[" + "1" * 100 + "]", "longer than 64 characters"),
    ],
)
def test_bad_node_features_name_the_problem(text, message):
    with pytest.raises(InputError, match="^node_features: ") as error:
        parse_node_features(text)
    assert message in str(error.value)


@pytest.mark.parametrize("parse", [parse_edges, parse_node_features])
def test_deep_nesting_is_an_input_error_not_a_recursion_error(parse):
    depth = 200_000
    with pytest.raises(InputError, match="nested deeper than 2 levels"):
        parse("[" * depth + "]" * depth)
    with pytest.raises(InputError, match="never closed"):
        parse("[" * depth)


@pytest.mark.parametrize("parse", [parse_edges, parse_node_features])
def test_strings_beyond_the_length_limit_are_refused_before_parsing(parse):
    text = "[" + " " * MAX_INPUT_CHARS + "]"
    start = time.perf_counter()
    with pytest.raises(InputError, match="more than the limit of 33,554,432"):
        parse(text)
    assert time.perf_counter() - start < 1.0  # refused by its length, not parsed


@pytest.mark.parametrize("parse", [parse_edges, parse_node_features])
def test_non_strings_are_input_errors(parse):
    with pytest.raises(InputError, match="expected a string"):
        parse([[0, 1]])


_separators = st.sampled_from(["", " ", "\n", "\t ", "  "])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-(10**17), 10**17), st.integers(0, 10**17)), max_size=20),
    _separators,
    _separators,
)
def test_edges_round_trip(pairs, space, other_space):
    text = "[" + ",".join(f"{space}[{s},{other_space}{t}]" for s, t in pairs) + "]"
    np.testing.assert_array_equal(parse_edges(text), np.asarray(pairs, dtype=np.int64).reshape(-1, 2))


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 4)), elements=st.floats(allow_nan=False, allow_infinity=False)),
    _separators,
)
def test_features_round_trip(values, space):
    text = "[" + f",{space}".join("[" + ",".join(repr(v) for v in row) + "]" for row in values.tolist()) + "]"
    np.testing.assert_array_equal(parse_node_features(text), values)
    flat = "[" + ",".join(repr(v) for v in values[:, 0].tolist()) + "]"
    np.testing.assert_array_equal(parse_node_features(flat), values[:, :1])
