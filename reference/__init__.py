"""The float64 numpy reference of the sample's network and the comparison of engine output against it."""

from reference.compare import TOLERANCES, Comparison, compare
from reference.gnn import gnn_reference, make_weights, scatter_add_rows, softmax_over_classes

__all__ = [
    "TOLERANCES",
    "Comparison",
    "compare",
    "gnn_reference",
    "make_weights",
    "scatter_add_rows",
    "softmax_over_classes",
]
