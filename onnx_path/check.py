"""Check: what a read model, the run and the inputs must agree on before any engine work, each an InputError
naming the value: the sample's network against the run (its kind, precision, F, C), the feeds of later --steps
runs against the first run's, a float16 state that its updates could carry beyond float16's range, input shapes
against a loaded engine's profile. numpy only."""

from collections.abc import Mapping
from typing import Any

import numpy as np

from common.engine_description import EngineDescription
from common.errors import InputError
from common.text import shown_path
from onnx_path.inputs import check_onnx_inputs
from onnx_path.read import OnnxModel
from reference.gnn import scatter_add_rows


def check_network_kind(model: OnnxModel, steps: int | None, batch_edges: int | None) -> None:
    """InputError unless the sample's network suits the run: the classifier without `steps` (--steps), the
    state update with --steps K --batch_edges B."""
    from network.definition import CLASSIFIER, STATE_UPDATE

    shown, kind, given = f"--onnx {shown_path(model.path)}", model.network.kind, steps is not None
    if kind == CLASSIFIER and given:
        raise InputError(f"{shown} holds the {CLASSIFIER} network; --steps needs the {STATE_UPDATE} network "
                         "(python3 -m export.export_onnx --network state)")
    if kind == STATE_UPDATE and not given:
        raise InputError(f"{shown} holds the {STATE_UPDATE} network; a run without --steps needs the {CLASSIFIER} "
                         "network (python3 -m export.export_onnx --network classifier), or add --steps K "
                         "--batch_edges B to run this one")
    if given and batch_edges is None:
        raise InputError(f"{shown} holds the {STATE_UPDATE} network: --steps {steps} needs --batch_edges B, "
                         "the number of edges each step adds")


def check_against_run(model: OnnxModel, *, precision: str, num_features: int, num_classes: int) -> None:
    """InputError naming the first difference between the sample network of the model and this run
    (--precision, the graph's F, --num_classes), as an engine's are checked against a graph."""
    from network.definition import CLASSIFIER

    network, shown = model.network, f"--onnx {shown_path(model.path)}"
    if network.precision != precision:
        raise InputError(f"{shown} is an {network.precision} model (X, src are "
                         f"{'float16' if network.precision == 'fp16' else 'float32'}); got --precision {precision}")
    if network.num_features != num_features:
        raise InputError(f"{shown} takes F={network.num_features} features per node (X [N, {network.num_features}]), "
                         f"the graph has {num_features}")
    if network.kind == CLASSIFIER and network.num_classes != num_classes:
        raise InputError(f"{shown} has {network.num_classes} classes (W [{network.num_classes}, F]), got "
                         f"--num_classes {num_classes}")


def check_later_runs(given: list[dict[str, np.ndarray]], inputs: tuple[Any, ...], bounds: Any, source: str,
                     shapes: dict[str, tuple[int, ...]], steps: int | None) -> None:
    """--onnx_inputs with the feeds of several runs (polygraphy's JSON): no more runs than --steps K, each
    checked as the first and of its shapes (the engine's buffers keep theirs). InputError."""
    if given and len(given) + 1 > (steps or 1):
        raise InputError(f"{source} holds the inputs of {len(given) + 1} runs; "
                         + (f"--steps {steps} makes {steps}" if steps else f"give --steps {len(given) + 1}"))
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
                             f"({source}); build the engine for these shapes (--onnx ... --save_engine)")
