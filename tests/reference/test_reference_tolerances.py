"""compare()'s tolerances against a numpy emulation of the engine's arithmetic (not TensorRT).

The emulation rounds the inputs to the engine's precision and performs each step in that precision, as
reference/compare.py describes: fp32 adds the incoming rows one at a time in float32 (like the atomics, in a
shuffled order); fp16 sums them in float32 (the kernel's workspace), rounds the sum to half and adds it into
the half state, then divides, multiplies (float32 accumulation, half result) and takes the softmax in float32
rounded to half. The tests check the bounds the docstring derives and that real mistakes fail compare().
"""

import numpy as np
import pytest

from graph import random_graph
from reference import TOLERANCES, compare, gnn_reference

HALF_ROUNDOFF = 2.0**-11


def _emulate(features, edges, weights, state, precision, rng):
    dtype = np.float32 if precision == "fp32" else np.float16
    num_nodes, num_features = features.shape
    order = rng.permutation(len(edges))  # atomics add in no particular order
    source, target = edges[order, 0], edges[order, 1]
    x = features.astype(dtype)
    base = np.zeros((num_nodes, num_features), dtype) if state is None else state.astype(dtype)
    if precision == "fp32":
        aggregated = base.copy()
        np.add.at(aggregated, target, x[source])  # one float32 rounding per added row
    else:
        sums = np.zeros((num_nodes, num_features), np.float32)
        np.add.at(sums, target, x[source].astype(np.float32))
        aggregated = (base + sums.astype(np.float16)).astype(np.float16)
    counts = np.bincount(target, minlength=num_nodes).astype(dtype)[:, None]
    mean = (aggregated / counts).astype(dtype)
    logits = (weights.astype(dtype).astype(np.float32) @ mean.T.astype(np.float32)).astype(dtype)
    relu = np.maximum(logits, 0).astype(np.float32)
    exps = np.exp(relu - relu.max(axis=0))
    return (exps / exps.sum(axis=0)).astype(dtype).astype(np.float64)


def _case(rng, num_nodes, num_edges, num_features, feature_scale, with_state):
    edges = random_graph(num_nodes, num_edges, rng)
    features = rng.uniform(-feature_scale, feature_scale, (num_nodes, num_features))
    state = rng.uniform(-feature_scale, feature_scale, (num_nodes, num_features)) if with_state else None
    weights = rng.standard_normal((3, num_features))
    return features, edges, weights, state


def _logit_scale(features, edges, weights, state):
    """S = max over classes and nodes of sum_f |W[c, f]| |mean[n, f]|, the quantity the bounds grow with."""
    mean = gnn_reference(features, edges, weights, state)["mean"]
    return float((np.abs(weights) @ np.abs(mean).T).max())


CASES = [  # (nodes, edges, features, feature scale, state): S stays <= 20 as the docstring's regime says
    (4, 6, 1, 7.0, False),
    (16, 200, 1, 7.0, True),
    (200, 4000, 3, 3.0, False),
    (300, 20_000, 1, 7.0, True),  # a hub with thousands of incoming edges
    (50, 100, 3, 3.0, True),
]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("case", CASES)
def test_emulated_engine_output_passes_compare_in_the_documented_regime(case, precision):
    rng = np.random.default_rng([CASES.index(case), precision == "fp16"])
    features, edges, weights, state = _case(rng, *case)
    scale = _logit_scale(features, edges, weights, state)
    assert scale <= 20.0, "the case left the regime the tolerances are derived for"
    expected = gnn_reference(features, edges, weights, state)["softmax"]
    actual = _emulate(features, edges, weights, state, precision, rng)
    comparison = compare(actual, expected, precision)
    assert comparison.ok, comparison.summary()
    if precision == "fp16":  # the derived bound |dp| <= 2u S, plus the output's own rounding
        assert comparison.max_abs_error <= 2 * HALF_ROUNDOFF * scale + HALF_ROUNDOFF
    else:
        assert comparison.max_abs_error <= 1e-6


def test_max_in_degree_of_the_hub_case_is_large():
    features, edges, _, _ = _case(np.random.default_rng(0), *CASES[3][:4], False)
    assert np.bincount(edges[:, 1]).max() > 1000


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_real_mistakes_fail_compare(precision):
    rng = np.random.default_rng(42)
    features = rng.uniform(0.0, 7.0, (16, 1)).round()  # integer features, non-integer means
    edges = random_graph(16, 60, rng)
    weights = np.array([[1.0], [-0.5], [0.3]])
    state = rng.uniform(0.0, 2.0, (16, 1))
    good = gnn_reference(features, edges, weights, state)
    assert compare(good["softmax"], good["softmax"], precision).ok

    floored = np.floor(good["aggregated"] / good["counts"])  # the seed's FLOOR_DIV
    logits = np.maximum(weights @ floored.T, 0)
    floor_softmax = np.exp(logits - logits.max(axis=0)) / np.exp(logits - logits.max(axis=0)).sum(axis=0)
    without_state = gnn_reference(features, edges, weights)["softmax"]
    swapped_classes = good["softmax"][[1, 0, 2]]
    for wrong in (floor_softmax, without_state, swapped_classes):
        assert not compare(wrong, good["softmax"], precision).ok


def test_tolerances_are_ordered_by_precision():
    assert TOLERANCES["fp32"]["atol"] < TOLERANCES["fp16"]["atol"]
    assert TOLERANCES["fp32"]["rtol"] < TOLERANCES["fp16"]["rtol"]
