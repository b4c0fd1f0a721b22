"""The float64 numpy reference of the sample's network: scatter-add, mean, linear classifier, ReLU, softmax."""

import numpy as np


def make_weights(seed: int, num_classes: int, num_features: int) -> np.ndarray:
    """Classifier weights float64 [C, F], standard normal from np.random.default_rng(seed)."""
    return np.random.default_rng(seed).standard_normal((num_classes, num_features))


def scatter_add_rows(features: np.ndarray, source: np.ndarray | None, target: np.ndarray, num_rows: int,
                     start: np.ndarray | None = None) -> np.ndarray:
    """float64 [num_rows, F]: row r is start[r] (zeros where start is None) plus features[source[i]] (features[i]
    where source is None) for every edge i with target[i] == r, added one at a time in edge order. The sample's
    one float64 scatter-add: the network's reference, the state's bounds and the plugin nodes' CPU reference
    (onnx_path.runtime) all call it. target must lie in [0, num_rows).

    One np.bincount per feature column: O(E * F) in compiled loops, several times faster than np.add.at into
    `start` and equal to it bit for bit (both add in the same order, start first); one [E] temporary at a time.
    """
    if start is not None:
        target = np.concatenate([np.arange(num_rows), target])
    sums = np.empty((num_rows, features.shape[1]), dtype=np.float64)
    for feature in range(features.shape[1]):
        column = np.ascontiguousarray(features[:, feature])
        weights = column if source is None else column[source]
        if start is not None:
            weights = np.concatenate([np.asarray(start[:, feature], dtype=np.float64), weights])
        sums[:, feature] = np.bincount(target, weights=weights, minlength=num_rows)
    return sums


def softmax_over_classes(logits: np.ndarray) -> np.ndarray:
    """Softmax along axis 0 (the classes of a [C, N] matrix), shifted by the column maximum for stability."""
    shifted = np.exp(logits - logits.max(axis=0, keepdims=True))
    return shifted / shifted.sum(axis=0, keepdims=True)


def gnn_reference(node_features, edges, weights, state=None, in_degree=None) -> dict[str, np.ndarray]:
    """What the engine computes, in float64.

    node_features [N] or [N, F]; edges [E, 2] integer (source, target) pairs; weights [C, F];
    state None (zeros) or [N, F] (or [N] when F = 1), the buffer that the plugin adds into in place;
    in_degree [N], the incoming edges per node where the caller has them (Graph.in_degree), else counted here.
    Returns float64 arrays:
      aggregated [N, F] = state + sum over edges s -> t of node_features[s], added into row t;
      counts [N, 1] = incoming edges per node;
      mean [N, F] = aggregated / counts (true division; NaN or Inf for a node without incoming edges,
        which validate_graph rejects);
      logits [C, N] = weights @ mean.T (before ReLU);
      softmax [C, N] = softmax over the classes (axis 0) of relu(logits).
    """
    features = np.asarray(node_features, dtype=np.float64)
    if features.ndim == 1:
        features = features[:, None]
    num_nodes = features.shape[0]
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    source, target = edges[:, 0], edges[:, 1]

    aggregated = scatter_add_rows(features, source, target, num_nodes)
    if state is not None:
        aggregated += np.asarray(state, dtype=np.float64).reshape(features.shape)
    if in_degree is None:
        in_degree = np.bincount(target, minlength=num_nodes)
    counts = np.asarray(in_degree, dtype=np.float64).reshape(num_nodes, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = aggregated / counts
    logits = np.asarray(weights, dtype=np.float64) @ mean.T
    softmax = softmax_over_classes(np.maximum(logits, 0.0))
    return {"aggregated": aggregated, "counts": counts, "mean": mean, "logits": logits, "softmax": softmax}


def last_edges(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct rows of idx, ascending; the last edge e writing each): the winners of a sequential loop
    `state[idx[e]] = src[e]`. O(E log E): one np.unique over the reversed indices."""
    rows, from_end = np.unique(idx[::-1], return_index=True)
    return rows, idx.size - 1 - from_end


def scatter_overwrite_numpy(state: np.ndarray, src: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """A copy of state [N, ...] after `for e in range(E): state[idx[e]] = src[e]`: where an index repeats the
    LAST edge wins (last_edges; the overwrite kernels may keep any of its edges), and rows are copied exactly
    (same dtype as state, no arithmetic). Indices outside [0, N) are skipped, as the overwrite kernels skip them."""
    out = np.array(state, copy=True)
    idx = np.asarray(idx, dtype=np.int64).reshape(-1)
    src = np.asarray(src, dtype=out.dtype).reshape((idx.size,) + out.shape[1:])
    edges = np.flatnonzero((idx >= 0) & (idx < out.shape[0]))
    rows, winners = last_edges(idx[edges])
    out[rows] = src[edges[winners]]
    return out
