"""What aliased_io_plugin.py prints besides the graph: the [C, N] output, the --validate verdict, the
--steps note, what a dry run did not do. numpy only."""

from typing import Any

import numpy as np

from cli.options import EXIT_OK, EXIT_VALIDATION_FAILED
from graph import Graph
from reference import compare

DRY_RUN_LINE = ("Dry run: ONNX Runtime ran the rewritten model, the plugin node by its CPU reference; no engine was "
                "built.")


def format_matrix(matrix: np.ndarray) -> str:
    """The [C, N] classifier output as numpy prints it (summarized beyond a few hundred values)."""
    with np.printoptions(precision=6, suppress=True, linewidth=110, threshold=200):
        return str(matrix)


def verdict(*comparisons: tuple[str, Any]) -> tuple[list[str], int]:
    """The --validate lines and the exit status: the seed's verdict line (every comparison must pass), then one
    line per (label, comparison): the label and the comparison's summary."""
    ok = all(comparison.ok for _, comparison in comparisons)
    return [f"Validation against reference {'successful' if ok else 'failed'}!",
            *(f"{label}: {comparison.summary()}" for label, comparison in comparisons)], \
        EXIT_OK if ok else EXIT_VALIDATION_FAILED


def validation_report(actual: np.ndarray, expected: np.ndarray, precision: str) -> tuple[list[str], int]:
    """--validate of the classifier: the engine's softmax against the float64 reference."""
    return verdict(("Against the float64 reference", compare(actual, expected, precision)))


def state_label(steps: int) -> str:
    """How the final state's comparison with the float64 reference is named (--steps --validate)."""
    return f"Final state against the float64 reference of all {steps} batches"


def steps_note(graph: Graph, batches: list[np.ndarray]) -> str:
    """The line that says what --steps adds and what it takes from the graph."""
    batch_edges = len(batches[0])
    return (
        f"--steps: {len(batches):,} batches of {batch_edges:,} random edges are added into the state; the graph "
        f"gives the {graph.num_nodes:,} nodes, their features and the initial state (its own {graph.num_edges:,} edges "
        "are not used)"
    )


def unused_in_dry_run(engine: Any) -> list[str]:
    """The line naming the engine options (cli.options.EngineOptions) a dry run has no engine to act on, if any."""
    unused = [name for name, value in (("--save_engine", engine.save_engine), ("--load_engine", engine.load_engine),
                                       ("--benchmark", engine.benchmark), ("--cuda_graph", engine.cuda_graph or None))
              if value is not None]
    return [f"({', '.join(unused)}: no engine to act on in a dry run.)"] if unused else []
