"""run_graph: the whole engine path for one graph (check dependencies, build or load, run, report).

The CLI (aliased_io_plugin.py) calls run_graph after validating the graph and computing the reference.
"""

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from common.errors import MissingDependencyError
from common.imports import import_module, import_tensorrt, is_full_tensorrt
from network.builder import INPUT_INDEX, INPUT_SOURCE, INPUT_STATE, populate_network
from network.inputs import GraphArrays, make_engine_inputs
from network.profile import EngineSignature, ProfileBounds, check_graph_fits, default_profile_bounds
from network import report


@dataclass(frozen=True)
class EngineRunResult:
    """What one engine run gives the CLI.

    softmax: [C, N] float64 copy of the engine output. report_lines: build or load time, aliasing as TensorRT
    reports it, whether X changed in place. state_changed_in_place: the caller's X buffer differs after the
    run. build_seconds: engine build time, None when the engine was loaded from a file.
    """

    softmax: np.ndarray
    report_lines: list[str]
    state_changed_in_place: bool
    build_seconds: float | None


def require_engine_dependencies() -> Any:
    """The full TensorRT module, after checking polygraphy, cuda-python and a GPU; MissingDependencyError if not."""
    trt = import_tensorrt()
    if not is_full_tensorrt(trt):
        raise MissingDependencyError(
            f"this tensorrt ({getattr(trt, '__version__', '?')}) cannot add Python plugins to a network "
            "(no INetworkDefinition.add_plugin_v3; TensorRT-RTX is not enough): pip install 'tensorrt>=10.3'"
        )
    import_module("polygraphy")
    from network.device import require_cuda_device

    require_cuda_device()
    return trt


def run_graph(
    graph: GraphArrays,
    weights: np.ndarray,
    precision: str,
    *,
    verbose: bool = False,
    save_engine: str | Path | None = None,
    load_engine: str | Path | None = None,
    profile: ProfileBounds | None = None,
) -> EngineRunResult:
    """Builds (or loads) the engine, runs it once on `graph` and reports.

    `profile` bounds N and E of a newly built engine (default: default_profile_bounds); a loaded engine keeps
    its own. InputError when the graph does not fit the engine (precision, F, C, N or E) or a file is bad.
    """
    trt = require_engine_dependencies()
    from network.loaders import (
        build_engine_bytes,
        deserialize_engine,
        engine_signature,
        read_engine_file,
        sample_profile_shapes,
        save_engine_file,
        trt_feature_dtype,
    )
    from network.runner import run_engine

    feeds = make_engine_inputs(graph, weights, precision)
    num_nodes, num_features = feeds[INPUT_STATE].shape
    num_edges = len(feeds[INPUT_INDEX])
    num_classes = int(np.shape(weights)[0])
    lines: list[str] = []
    build_seconds: float | None = None

    if load_engine is not None:
        data = read_engine_file(load_engine)
        engine = deserialize_engine(data, str(load_engine), verbose=verbose)
        signature = engine_signature(trt, engine, str(load_engine))
        check_graph_fits(signature, precision, num_nodes, num_edges, num_features, num_classes)
        lines.append(report.load_line(str(load_engine), signature))
    else:
        signature = EngineSignature(precision, num_features, num_classes, profile or default_profile_bounds(num_nodes, num_edges))
        check_graph_fits(signature, precision, num_nodes, num_edges, num_features, num_classes)
        populate = functools.partial(
            populate_network, dtype=trt_feature_dtype(trt, precision), num_features=num_features, num_classes=num_classes
        )
        data, build_seconds = build_engine_bytes(populate, sample_profile_shapes(signature.bounds, num_features), verbose=verbose)
        engine = deserialize_engine(data, "the engine just built", verbose=verbose)
        lines.append(report.build_line(build_seconds, signature))
    if save_engine is not None:
        save_engine_file(data, save_engine)
        lines.append(f"Engine saved to {save_engine}")

    outputs = run_engine(trt, engine, feeds, verbose=verbose)
    lines.append(report.plugin_alias_line())
    lines.extend(report.engine_alias_lines(outputs.aliased_inputs, getattr(trt, "__version__", "?")))
    zero_update = report.update_is_zero(feeds[INPUT_SOURCE], feeds[INPUT_INDEX], num_nodes)
    changed, state_line = report.state_buffer_line(outputs.state_before, outputs.state_after, zero_update)
    lines.append(state_line)
    return EngineRunResult(
        softmax=outputs.softmax, report_lines=lines, state_changed_in_place=changed, build_seconds=build_seconds
    )
