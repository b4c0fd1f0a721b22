"""The validated graph that every later stage (reference, engine inputs, plugin) receives."""

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Graph:
    """A directed graph with node features; build it with `graph.validate_graph`, which checks every field.

    node_features: float64 [N, F] (a flat list of N numbers becomes [N, 1]).
    edges: int64 [E, 2]; column 0 is the source, column 1 the target; every node is the target of an edge.
    state: float64 [N, F] that the scatter-add adds into in place, or None for zeros.
    in_degree: int64 [N], the incoming edges per node (the counts the mean divides by), counted once on first
    use and shared by validation, the summary line, the range checks and the reference.
    """

    node_features: np.ndarray
    edges: np.ndarray
    state: np.ndarray | None = None

    @property
    def num_nodes(self) -> int:
        return int(self.node_features.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.edges.shape[0])

    @property
    def num_features(self) -> int:
        return int(self.node_features.shape[1])

    @cached_property
    def in_degree(self) -> np.ndarray:
        return np.bincount(self.edges[:, 1], minlength=self.num_nodes)
