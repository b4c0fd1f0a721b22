"""Check: what a read model and its inputs must agree on before any engine work, each an InputError naming the
value: the feeds of later runs against the first run's, a float16 state that its updates could carry beyond
float16's range, input shapes against a loaded engine's profile. numpy only."""

from collections.abc import Mapping
from typing import Any

import numpy as np

from common.engine_description import EngineDescription
from common.errors import InputError
from onnx_path.inputs import check_onnx_inputs
from onnx_path.read import OnnxModel
from reference.gnn import scatter_add_rows


def check_later_runs(given: list[dict[str, np.ndarray]], inputs: tuple[Any, ...], bounds: Any, source: str,
                     shapes: dict[str, tuple[int, ...]]) -> None:
    """The feeds of the runs after the first (polygraphy's JSON holds several) checked as the first and of its
    shapes (the engine's buffers keep theirs). InputError naming `source` and the run."""
    for run, feeds in enumerate(given, start=1):
        check_onnx_inputs(inputs, feeds, bounds, f"{source} (run {run})")
        changed = [name for name, array in feeds.items() if tuple(array.shape) != shapes[name]]
        if changed:
            raise InputError(f"{source} (run {run}): {changed[0]} {list(feeds[changed[0]].shape)}, but "
                             f"{list(shapes[changed[0]])} in run 0; every run keeps the first run's shapes")


FLOAT16_LARGEST = float(np.finfo(np.float16).max)


def check_float16_updates(model: OnnxModel, runs: list[Mapping[str, np.ndarray]], source: str) -> None:
    """InputError, before any run, where a float16 state that the model takes as a graph input, together with
    the rows its scatter adds from graph inputs (every run's, --steps), could reach beyond float16's largest
    value: the engine's float16 state would be inf (the sample's network refuses the same range). An overwrite
    adds nothing: its rows are the given float16 values, finite (check_onnx_inputs), so it is not checked."""
    first = runs[0]
    for scatter in model.rewritten.scatters:
        state = first.get(scatter.state)
        if state is None or state.dtype != np.float16 or state.ndim != 2 or scatter.kind != "graph input" or \
                scatter.overwrite or any(
                scatter.source not in feeds or scatter.index not in feeds for feeds in runs):
            continue
        magnitude = np.abs(state.astype(np.float64))
        for feeds in runs:
            src, idx = feeds[scatter.source].astype(np.float64), feeds[scatter.index]
            if src.shape != (idx.shape[0], state.shape[1]):
                break
            magnitude = scatter_add_rows(np.abs(src), None, np.clip(idx, 0, state.shape[0] - 1), state.shape[0],
                                         start=magnitude)
        else:
            if magnitude.size and magnitude.max() > FLOAT16_LARGEST:
                row = int(np.unravel_index(int(np.argmax(magnitude)), magnitude.shape)[0])
                raise InputError(f"{source}: row {row} of the float16 state {scatter.state} could reach "
                                 f"{magnitude.max():.6g} (|{scatter.state}| plus the |{scatter.source}| rows added "
                                 f"into it over {len(runs)} run(s)), beyond the largest float16 value "
                                 f"{FLOAT16_LARGEST:g}: the engine's state would be inf; use smaller values")


def check_profile(description: EngineDescription, shapes: Mapping[str, tuple[int, ...]], source: str) -> None:
    """InputError for an input shape outside the engine's optimization profile (the description's)."""
    for name, (low, _, high) in description.profile.items():
        shape = tuple(shapes[name])
        if len(shape) != len(low) or any(not lo <= size <= hi for size, lo, hi in zip(shape, low, high)):
            raise InputError(f"input {name} {list(shape)} is outside the engine's profile {list(low)}..{list(high)} "
                             f"({source}); build the engine for these shapes")
