"""The float64 reference of a --steps run: the final state after every batch, the worst-case rounding bound of
an engine's final state against it, the range check that keeps a state within its precision, and the comparison.

A batch is an int64 [B, 2] array of (source, target) pairs (graph.portable_edge_batches); batch k adds the
sources' feature rows into the targets' rows of the state. Plain numpy.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from common.errors import InputError
from graph.validate import LARGEST_FINITE, check_values_in_range
from reference.gnn import gnn_reference, scatter_add_rows

UNIT_ROUNDOFF = {"fp32": 2.0**-24, "fp16": 2.0**-11}
SMALLEST_SUBNORMAL = {"fp32": 2.0**-149, "fp16": 2.0**-24}


def _as_matrix(values: np.ndarray) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    return array[:, None] if array.ndim == 1 else array


def _all_edges(batches: Sequence[np.ndarray]) -> np.ndarray:
    """Every batch's (source, target) pairs in one [sum of B, 2] array."""
    return np.concatenate(list(batches)) if batches else np.zeros((0, 2), np.int64)


def expected_final_state(node_features: np.ndarray, batches: Sequence[np.ndarray], state: np.ndarray | None) -> np.ndarray:
    """float64 [N, F]: the initial state (zeros when None) plus every batch's source features added into its
    targets: reference.gnn_reference's "aggregated" for all batches' edges at once."""
    features = _as_matrix(node_features)
    edges = _all_edges(batches)
    no_classes = np.zeros((1, features.shape[1]))  # only the aggregated sums are used
    with np.errstate(invalid="ignore", over="ignore"):  # the mean of a node no batch reaches is NaN; unused here
        return gnn_reference(features, edges, no_classes, state)["aggregated"]


def accumulated_magnitude(node_features: np.ndarray, batches: Sequence[np.ndarray],
                          state: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(S [N, F], additions [N, 1]): S = |initial state| + the sum of |added values| per element, the largest
    magnitude any partial sum can reach; additions = how many rows were added into each node."""
    features = _as_matrix(node_features)
    num_nodes = features.shape[0]
    edges = _all_edges(batches)
    magnitude = scatter_add_rows(np.abs(features), edges[:, 0], edges[:, 1], num_nodes)
    if state is not None:
        magnitude += np.abs(_as_matrix(state)).reshape(magnitude.shape)
    additions = np.bincount(edges[:, 1], minlength=num_nodes)[:, None]
    return magnitude, additions


def state_error_bound(node_features: np.ndarray, batches: Sequence[np.ndarray], state: np.ndarray | None,
                      precision: str) -> np.ndarray:
    """Worst-case |engine - float64 reference| per element of the final state, for `precision`
    (rounding_bound of accumulated_magnitude)."""
    return rounding_bound(*accumulated_magnitude(node_features, batches, state), precision)


def rounding_bound(magnitude: np.ndarray, additions: np.ndarray, precision: str) -> np.ndarray:
    """Worst-case |engine - float64 reference| per element of the final state, from accumulated_magnitude's
    (S, additions) (which check_state_range returns).

    Element (n, f) ends as the floating-point sum of the initial state and k_n added values, each rounded to
    the precision once when uploaded (relative error <= u). However the additions are ordered or grouped
    (atomics in any order; float16 partial sums kept in float32 before they reach the state), each rounds to
    a format at least as precise, so the classic bound for recursive summation holds:
        |error| <= gamma(k_n + 1) * S_n + (k_n + 1) * tiny,   gamma(m) = m u / (1 - m u),
    with S_n from accumulated_magnitude, u the unit roundoff (2^-24 for fp32, 2^-11 for fp16) and tiny the
    smallest subnormal (for results that underflow). It is a worst case: typical errors are far smaller, and
    the bound loosens as nodes receive more additions (for fp16, about 5e-4 * k_n * S_n).
    """
    if precision not in UNIT_ROUNDOFF:
        raise InputError(f"precision must be one of {sorted(UNIT_ROUNDOFF)}, got {precision!r}")
    unit, tiny = UNIT_ROUNDOFF[precision], SMALLEST_SUBNORMAL[precision]
    roundings = (additions + 1).astype(np.float64)
    with np.errstate(divide="ignore"):
        gamma = np.where(roundings * unit < 1.0, roundings * unit / (1.0 - roundings * unit), np.inf)
    return gamma * magnitude + roundings * tiny


def check_state_range(node_features: np.ndarray, batches: Sequence[np.ndarray], state: np.ndarray | None,
                      precision: str) -> tuple[np.ndarray, np.ndarray]:
    """InputError when a feature, the initial state or a partial sum of the state could exceed the precision's
    largest finite value (float16: 65504), naming the node and the value. Returns accumulated_magnitude's
    (S, additions), so that rounding_bound need not add up every batch again."""
    check_values_in_range(precision, (
        ("node_features", _as_matrix(node_features)),
        ("state", None if state is None else _as_matrix(state)),
    ))
    largest = LARGEST_FINITE[precision]
    magnitude, additions = accumulated_magnitude(node_features, batches, state)
    if magnitude.size == 0:
        return magnitude, additions
    position = np.unravel_index(int(np.argmax(magnitude)), magnitude.shape)
    if magnitude[position] > largest:
        raise InputError(
            f"with --precision {precision} the state of node {int(position[0])} could reach "
            f"{magnitude[position]:.6g} (sum of magnitudes over its initial state and {len(batches)} batches), "
            f"beyond the largest {precision} value {largest:g}; "
            + ("use fewer --steps or smaller values" if precision == "fp32" else "use --precision fp32 or fewer --steps")
        )
    return magnitude, additions


@dataclass(frozen=True)
class StateCheck:
    """The final state against the reference: ok when every element is within its rounding bound."""

    ok: bool
    max_abs_error: float
    bound_at_max_error: float
    elements_beyond_bound: int
    elements: int

    def summary(self) -> str:
        return (
            f"largest absolute error {self.max_abs_error:.3g} (worst-case rounding bound there "
            f"{self.bound_at_max_error:.3g}); {self.elements_beyond_bound} of {self.elements} elements beyond "
            "their bound"
        )


def compare_state(actual: np.ndarray, expected: np.ndarray, bound: np.ndarray) -> StateCheck:
    """Elementwise |actual - expected| <= bound (NaN fails); shapes must match."""
    actual64 = _as_matrix(actual)
    expected64 = _as_matrix(expected)
    if actual64.shape != expected64.shape or bound.shape != expected64.shape:
        raise ValueError(f"shapes differ: actual {actual64.shape}, expected {expected64.shape}, bound {bound.shape}")
    if expected64.size == 0:
        return StateCheck(True, 0.0, 0.0, 0, 0)
    error = np.abs(actual64 - expected64)
    within = error <= bound  # False where the error is NaN
    worst = np.unravel_index(int(np.argmax(np.where(np.isnan(error), np.inf, error))), error.shape)
    return StateCheck(
        ok=bool(within.all()),
        max_abs_error=float(error[worst]),
        bound_at_max_error=float(bound[worst]),
        elements_beyond_bound=int(np.count_nonzero(~within)),
        elements=int(error.size),
    )
