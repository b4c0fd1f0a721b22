"""Printing a graph: the adjacency matrix for small graphs (as the seed sample did), one summary line otherwise."""

import numpy as np

from graph.model import Graph

MAX_MATRIX_NODES = 16


def describe_graph(graph: Graph) -> list[str]:
    """Lines to print: "Adjacency matrix for graph:" and N rows of 0/1 for N <= 16, else a one-line summary."""
    if graph.num_nodes <= MAX_MATRIX_NODES:
        adjacency = np.zeros((graph.num_nodes, graph.num_nodes), dtype=np.int64)
        adjacency[graph.edges[:, 0], graph.edges[:, 1]] = 1
        return ["Adjacency matrix for graph:"] + [str(row) for row in adjacency.tolist()]
    in_degree = graph.in_degree
    out_degree = np.bincount(graph.edges[:, 0], minlength=graph.num_nodes)
    state = "a given initial state" if graph.state is not None else "a zero initial state"
    return [
        f"Graph: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, {graph.num_features} feature"
        f"{'' if graph.num_features == 1 else 's'} per node, {state}; in-degree {in_degree.min()}..{in_degree.max()} "
        f"(mean {graph.num_edges / graph.num_nodes:.2f}), out-degree {out_degree.min()}..{out_degree.max()} "
        f"(adjacency matrix shown up to {MAX_MATRIX_NODES} nodes)"
    ]
