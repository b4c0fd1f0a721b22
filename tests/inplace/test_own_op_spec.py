"""inplace/spec.py: size expressions evaluate with ints, refuse what TensorRT's sizes cannot hold, and name the
sizes they read."""

import pytest

from inplace.spec import Expr, cdiv, expr, maximum, minimum, size


def test_an_expression_evaluates_with_ints_and_names_its_sizes():
    grid = maximum(minimum(cdiv(size("E") * size("F"), 256), 65536), 1)
    assert grid.evaluate({"E": 1000, "F": 3}) == 12
    assert grid.evaluate({"E": 0, "F": 3}) == 1
    assert grid.evaluate({"E": 10**9, "F": 64}) == 65536
    assert grid.sizes() == {"E", "F"}
    assert (2 * size("E") + 1).evaluate({"E": 5}) == 11
    assert (size("N") // 8).evaluate({"N": 17}) == 2


def test_a_missing_size_is_named():
    with pytest.raises(KeyError, match="N"):
        (size("N") + 1).evaluate({"E": 1})


@pytest.mark.parametrize("value", [-1, 1.5, True, "E"])
def test_only_expressions_and_non_negative_ints_are_taken(value):
    with pytest.raises(ValueError, match="non-negative"):
        expr(value)


def test_an_unknown_operation_is_not_silently_evaluated():
    with pytest.raises(AttributeError):
        Expr("sub", args=(size("E"), expr(1))).evaluate({"E": 3})
