"""Shared by the ONNX tests: why they skip, models exported by the real exporter (once per session), inputs.

Every model here is written by torch.onnx.export in the test session itself (torch==2.13.0 and onnxscript from
requirements-test.txt), never stored: the tests check what the exporter of the installed torch writes.
"""

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

NUM_FEATURES, NUM_CLASSES = 3, 4
NETWORKS = ("classifier", "state")
PRECISIONS = ("fp32", "fp16")


def missing_reason(*names: str) -> str | None:
    """Why the ONNX tests cannot run here (a package of requirements-onnx.txt is absent), else None."""
    absent = [name for name in names if importlib.util.find_spec(name) is None]
    return f"{', '.join(absent)} not installed (pip install -r requirements-onnx.txt)" if absent else None


REWRITE_MISSING = missing_reason("onnx", "onnx_graphsurgeon", "onnxruntime")
EXPORT_MISSING = missing_reason("torch", "onnx", "onnxscript", "onnx_graphsurgeon", "onnxruntime")
needs_export = pytest.mark.skipif(EXPORT_MISSING is not None, reason=EXPORT_MISSING or "")

_SAMPLES: dict[tuple[str, str], Path] = {}


def sample_model(tmp_path_factory: pytest.TempPathFactory, network: str, precision: str) -> Path:
    """The sample network exported by `python3 -m export.export_onnx` (its main, in this process), F = 3,
    C = 4; each (network, precision) once per session."""
    key = (network, precision)
    if key not in _SAMPLES:
        from export.export_onnx import main

        path = tmp_path_factory.mktemp(f"{network}_{precision}") / "model.onnx"
        argv = ["--network", network, "--precision", precision, "--num_features", str(NUM_FEATURES), "--out", str(path)]
        if network == "classifier":
            argv += ["--num_classes", str(NUM_CLASSES)]
        assert main(argv) == 0
        _SAMPLES[key] = path
    return _SAMPLES[key]


def export_module(path: Path, module: Any, args: tuple[Any, ...], input_names: list[str],
                  output_names: list[str], dynamic: dict[str, dict[int, str] | None] | None = None,
                  dynamo: bool = True) -> Path:
    """Exports `module` with torch.onnx.export to `path`; `dynamic` names each input's dynamic axes (the names
    become torch.export.Dim objects for dynamo, dynamic_axes for the legacy exporter)."""
    import torch

    from export.export_onnx import quiet_exporter

    with quiet_exporter():
        if dynamo:
            dims: dict[str, Any] = {}
            shapes = None if dynamic is None else {
                name: None if axes is None else {axis: dims.setdefault(dim, torch.export.Dim(dim))
                                                 for axis, dim in axes.items()}
                for name, axes in dynamic.items()}
            program = torch.onnx.export(module.eval(), args, dynamo=True, dynamic_shapes=shapes,
                                        input_names=input_names, output_names=output_names, verbose=False)
            program.save(str(path))
        else:
            torch.onnx.export(module.eval(), args, str(path), dynamo=False, input_names=input_names,
                              output_names=output_names, dynamic_axes=dynamic)
    return path


def graph_inputs(num_nodes: int = 6, num_edges: int = 15, seed: int = 0, precision: str = "fp32",
                 state: bool = True) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(feeds X, src, idx, W in `precision`, the float64 reference) for a random graph where every node has an
    incoming edge and an index repeats; X is a random state (zeros when state is False)."""
    from network.run import engine_inputs
    from reference.gnn import gnn_reference

    rng = np.random.default_rng(seed)
    targets = np.concatenate([np.arange(num_nodes), rng.integers(0, num_nodes, num_edges - num_nodes)])
    edges = np.stack([rng.integers(0, num_nodes, num_edges), targets], axis=1)
    features = rng.uniform(0.0, 4.0, (num_nodes, NUM_FEATURES))
    weights = rng.standard_normal((NUM_CLASSES, NUM_FEATURES))
    initial = rng.uniform(-1.0, 1.0, (num_nodes, NUM_FEATURES)) if state else None
    feeds = engine_inputs(features, edges, weights, precision, state=initial)
    dtype = feeds["X"].dtype  # the reference of the inputs as the model gets them, rounded to `precision` first
    expected = gnn_reference(features.astype(dtype).astype(np.float64), edges, feeds["W"].astype(np.float64),
                             state=feeds["X"].astype(np.float64))
    return feeds, expected
