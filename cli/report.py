"""What aliased_io_plugin.py prints besides the graph: the [C, N] output, the --validate verdict, the
--steps note. numpy only."""

import numpy as np

from cli.options import EXIT_OK, EXIT_VALIDATION_FAILED
from graph import Graph
from reference import compare


def format_matrix(matrix: np.ndarray) -> str:
    """The [C, N] classifier output as numpy prints it (summarized beyond a few hundred values)."""
    with np.printoptions(precision=6, suppress=True, linewidth=110, threshold=200):
        return str(matrix)


def validation_report(actual: np.ndarray, expected: np.ndarray, precision: str) -> tuple[list[str], int]:
    """The --validate lines (the seed's success or failure line, then the errors) and the exit status."""
    comparison = compare(actual, expected, precision)
    verdict = "successful" if comparison.ok else "failed"
    lines = [f"Validation against reference {verdict}!", f"Against the float64 reference: {comparison.summary()}"]
    return lines, EXIT_OK if comparison.ok else EXIT_VALIDATION_FAILED


def steps_note(graph: Graph, batches: list[np.ndarray]) -> str:
    """The line that says what --steps adds and what it takes from the graph."""
    batch_edges = len(batches[0])
    return (
        f"--steps: {len(batches):,} batches of {batch_edges:,} random edges are added into the state; the graph "
        f"gives the {graph.num_nodes:,} nodes, their features and the initial state (its own {graph.num_edges:,} edges "
        "are not used)"
    )
