"""Graph input: parsing the CLI's list strings, reading files, generating random graphs, validation.

Everything here is numpy only (no TensorRT, no CUDA), so the CLI checks all input before the heavy imports.
"""

from graph.display import MAX_MATRIX_NODES, describe_graph
from graph.files import GraphArrays, edge_list_line, load_graph_file, load_node_features_file, parse_edge_list
from graph.generate import MAX_RANDOM_EDGES, random_graph, random_node_features
from graph.model import Graph
from graph.parse import MAX_INPUT_CHARS, parse_edges, parse_node_features
from graph.portable_random import portable_edge_batches, portable_node_features
from graph.validate import (
    FP16_MAX,
    LARGEST_FINITE,
    EdgeInputError,
    check_precision_range,
    implied_node_count,
    may_overflow,
    validate_graph,
)

__all__ = [
    "EdgeInputError",
    "FP16_MAX",
    "MAX_INPUT_CHARS",
    "MAX_MATRIX_NODES",
    "MAX_RANDOM_EDGES",
    "Graph",
    "GraphArrays",
    "LARGEST_FINITE",
    "check_precision_range",
    "describe_graph",
    "edge_list_line",
    "implied_node_count",
    "load_graph_file",
    "load_node_features_file",
    "may_overflow",
    "parse_edge_list",
    "parse_edges",
    "parse_node_features",
    "portable_edge_batches",
    "portable_node_features",
    "random_graph",
    "random_node_features",
    "validate_graph",
]
