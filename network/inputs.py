"""The engine's input arrays from a validated graph: X (state), src, idx, W, in the chosen precision.

Plain numpy, no TensorRT: for edges (s -> t), src row e is node_features[s] and idx[e] = t, so the plugin
adds each source node's features into its target's row of X.
"""

from typing import Protocol

import numpy as np

from common.errors import InputError
from network.builder import INPUT_INDEX, INPUT_SOURCE, INPUT_STATE, INPUT_WEIGHTS

PRECISIONS: dict[str, np.dtype] = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16)}


class GraphArrays(Protocol):
    """What make_engine_inputs reads from a graph.Graph."""

    @property
    def node_features(self) -> np.ndarray: ...

    @property
    def edges(self) -> np.ndarray: ...

    @property
    def state(self) -> np.ndarray | None: ...


def feature_dtype(precision: str) -> np.dtype:
    """numpy dtype of X, src, W and the output for "fp32" or "fp16"."""
    try:
        return PRECISIONS[precision]
    except KeyError:
        raise InputError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}") from None


def to_feature_dtype(name: str, values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`values` as `dtype`, C-contiguous; InputError if a finite value does not fit (float16 overflows at 65504)."""
    with np.errstate(over="ignore"):  # overflow is reported below, with the value
        converted = np.ascontiguousarray(values, dtype=dtype)
    overflow = np.isinf(converted) & np.isfinite(values)
    if overflow.any():
        position = tuple(int(i) for i in np.argwhere(overflow)[0])
        value = float(values[position])  # a plain number: numpy 2 would print np.float64(70000.0)
        raise InputError(
            f"{name}{list(position)} = {value} does not fit in {dtype} (largest finite value "
            f"{float(np.finfo(dtype).max):g}); use --precision fp32"
        )
    return converted


def state_and_features(
    node_features: np.ndarray, state: np.ndarray | None, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray]:
    """(X, features) as `dtype`: the state (zeros when None) and the node features ([N] is one feature per
    node); InputError if a value does not fit (to_feature_dtype), the state checked first."""
    features = np.asarray(node_features, dtype=np.float64)
    if features.ndim == 1:
        features = features[:, None]
    state_values = np.zeros(features.shape) if state is None else np.asarray(state, dtype=np.float64)
    return to_feature_dtype("state", state_values, dtype), to_feature_dtype("node_features", features, dtype)


def engine_inputs(
    node_features: np.ndarray,
    edges: np.ndarray,
    weights: np.ndarray,
    precision: str,
    state: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """X [N, F] (state, zeros when None), src [E, F], idx [E] int64, W [C, F]; features in `precision`."""
    dtype = feature_dtype(precision)
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    state_values, features = state_and_features(node_features, state, dtype)
    return {
        INPUT_STATE: state_values,
        INPUT_SOURCE: features[edges[:, 0]],
        INPUT_INDEX: np.ascontiguousarray(edges[:, 1]),
        INPUT_WEIGHTS: to_feature_dtype("weights", np.asarray(weights, dtype=np.float64), dtype),
    }


def make_engine_inputs(graph: GraphArrays, weights: np.ndarray, precision: str) -> dict[str, np.ndarray]:
    """engine_inputs for a validated graph.Graph (node_features [N, F], edges [E, 2], state or None)."""
    return engine_inputs(graph.node_features, graph.edges, weights, precision, state=graph.state)
