"""run_graph and run_steps: the whole engine path (check dependencies, build or load, run, report).

The CLI (aliased_io_plugin.py) calls run_graph (one run of the classifier, optionally --benchmark) or, with
--steps, run_steps, after validating the input and computing the reference.
"""

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from common.errors import InputError, MissingDependencyError
from common.imports import import_module, import_tensorrt, is_full_tensorrt
from common.progress import file_load_progress, progress
from common.versions import TENSORRT_FLOOR, check_polygraphy_version, check_tensorrt_version
from network.builder import (
    AOT_PLUGIN,
    INPUT_INDEX,
    INPUT_SOURCE,
    INPUT_STATE,
    PYTHON_PLUGIN,
    populate_network,
    populate_state_network,
)
from network.inputs import GraphArrays, make_engine_inputs
from network.profile import (
    CLASSIFIER,
    STATE_UPDATE,
    EngineSignature,
    ProfileBounds,
    check_graph_fits,
    default_profile_bounds,
)
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
    benchmark: Any = None  # network.benchmark.BenchmarkResult with --benchmark


def require_engine_dependencies(plugin: str = PYTHON_PLUGIN) -> Any:
    """The full TensorRT module, after checking its version (>= 10.4), polygraphy (>= 0.53.6), cuda-python and
    a GPU, in that order and before any CUDA work (to build with plugin="aot", also tensorrt.plugin's
    aot_impl); MissingDependencyError (one line, exit 3) if not."""
    trt = import_tensorrt()
    if not is_full_tensorrt(trt):
        raise MissingDependencyError(
            f"this tensorrt ({getattr(trt, '__version__', '?')}) cannot add Python plugins to a network "
            f"(no INetworkDefinition.add_plugin_v3; TensorRT-RTX is not enough): pip install 'tensorrt>={TENSORRT_FLOOR}'"
        )
    check_tensorrt_version(getattr(trt, "__version__", None))
    if plugin == AOT_PLUGIN:
        import_module("plugin.scatter_add_aot")  # MissingDependencyError without tensorrt.plugin.aot_impl
    check_polygraphy_version(getattr(import_module("polygraphy"), "__version__", None))
    from network.device import require_cuda_device

    require_cuda_device()
    return trt


@dataclass(frozen=True)
class PreparedEngine:
    """A deserialized engine, what it is fixed to, its build time (None when loaded) and the lines to print."""

    engine: Any
    signature: EngineSignature
    build_seconds: float | None
    lines: list[str]


def prepare_engine(
    trt: Any,
    *,
    kind: str,
    precision: str,
    num_nodes: int,
    num_edges: int,
    num_features: int,
    num_classes: int,
    verbose: bool = False,
    save_engine: str | Path | None = None,
    load_engine: str | Path | None = None,
    profile: ProfileBounds | None = None,
    show_progress: bool = False,
    edges_source: str = "the graph",
    plugin: str = PYTHON_PLUGIN,
) -> PreparedEngine:
    """Loads the engine from `load_engine` or builds one for `kind` (CLASSIFIER or STATE_UPDATE) with the
    scatter-add `plugin` ("python" or "aot"); saves it to `save_engine` if given. InputError when the sizes do
    not fit the engine (loaded or requested)."""
    from network.loaders import (
        build_engine_bytes,
        deserialize_engine,
        engine_signature,
        read_engine_file,
        sample_profile_shapes,
        save_engine_file,
        trt_feature_dtype,
    )

    lines: list[str] = []
    build_seconds: float | None = None

    def check_fits(signature: EngineSignature) -> None:
        check_graph_fits(signature, precision, num_nodes, num_edges, num_features, num_classes, kind, edges_source)

    if load_engine is not None:
        with file_load_progress(str(load_engine), "--load_engine", enabled=show_progress):
            data = read_engine_file(load_engine)
        engine = deserialize_engine(data, str(load_engine), verbose=verbose)
        signature = engine_signature(trt, engine, str(load_engine))
        check_fits(signature)
        lines.append(report.load_line(str(load_engine), signature))
    else:
        bounds = profile or default_profile_bounds(num_nodes, num_edges)
        signature = EngineSignature(precision, num_features, num_classes if kind == CLASSIFIER else 0, bounds, kind)
        check_fits(signature)
        dtype = trt_feature_dtype(trt, precision)
        if kind == CLASSIFIER:
            populate = functools.partial(populate_network, dtype=dtype, num_features=num_features,
                                         num_classes=num_classes, plugin=plugin)
        else:
            populate = functools.partial(populate_state_network, dtype=dtype, num_features=num_features, plugin=plugin)
        with progress(f"Building the {kind} engine", enabled=show_progress):
            data, build_seconds = build_engine_bytes(populate, sample_profile_shapes(bounds, num_features), verbose=verbose)
        engine = deserialize_engine(data, "the engine just built", verbose=verbose)
        lines.append(report.build_line(build_seconds, signature))
    if save_engine is not None:
        save_engine_file(data, save_engine)
        lines.append(f"Engine saved to {save_engine}")
    return PreparedEngine(engine=engine, signature=signature, build_seconds=build_seconds, lines=lines)


def run_graph(
    graph: GraphArrays,
    weights: np.ndarray,
    precision: str,
    *,
    verbose: bool = False,
    save_engine: str | Path | None = None,
    load_engine: str | Path | None = None,
    profile: ProfileBounds | None = None,
    show_progress: bool = False,
    benchmark_iterations: int | None = None,
    plugin: str = PYTHON_PLUGIN,
    cuda_graph: bool = False,
) -> EngineRunResult:
    """Builds (or loads) the engine, runs it once on `graph` and reports; optionally benchmarks it.

    `profile` bounds N and E of a newly built engine (default: default_profile_bounds); a loaded engine keeps
    its own. InputError when the graph does not fit the engine (precision, F, C, N or E) or a file is bad.
    `show_progress` reports the engine build and the run on stderr (common.progress). `benchmark_iterations` adds that
    many timed executions (and as many timed kernel launches) after the run (network.benchmark). `plugin`
    ("python" or "aot") picks the scatter-add of a new engine; a loaded engine holds its own. `cuda_graph`: the
    benchmark replays one captured execution (and one captured kernel launch) instead of calling them.
    """
    trt = require_engine_dependencies(plugin if load_engine is None else PYTHON_PLUGIN)
    from network.runner import run_engine

    feeds = make_engine_inputs(graph, weights, precision)
    num_nodes, num_features = feeds[INPUT_STATE].shape
    prepared = prepare_engine(
        trt, kind=CLASSIFIER, precision=precision, num_nodes=num_nodes, num_edges=len(feeds[INPUT_INDEX]),
        num_features=num_features, num_classes=int(np.shape(weights)[0]), verbose=verbose, save_engine=save_engine,
        load_engine=load_engine, profile=profile, show_progress=show_progress, plugin=plugin,
    )
    lines = list(prepared.lines)

    with progress("Running the engine", enabled=show_progress):
        outputs = run_engine(trt, prepared.engine, feeds, verbose=verbose)
    lines.append(report.plugin_alias_line(compute_counts=True, plugin=plugin, loaded=load_engine is not None))
    lines.extend(report.engine_alias_lines(outputs.aliased_inputs, getattr(trt, "__version__", "?")))
    zero_update = report.update_is_zero(feeds[INPUT_SOURCE], feeds[INPUT_INDEX], num_nodes)
    changed, state_line = report.state_buffer_line(outputs.state_before, outputs.state_after, zero_update)
    lines.append(state_line)

    benchmark = None
    if benchmark_iterations is not None:
        from network.benchmark import benchmark_engine, benchmark_lines

        with progress(f"Benchmarking {benchmark_iterations:,} executions", enabled=show_progress):
            benchmark = benchmark_engine(trt, prepared.engine, feeds, benchmark_iterations, cuda_graph=cuda_graph)
        lines.extend(benchmark_lines(benchmark, plugin=None if load_engine is not None else plugin))
    return EngineRunResult(
        softmax=outputs.softmax, report_lines=lines, state_changed_in_place=changed,
        build_seconds=prepared.build_seconds, benchmark=benchmark,
    )


@dataclass(frozen=True)
class StepsResult:
    """What run_steps gives the CLI: the final state X (float64 copy), the lines to print, the build time
    (None when loaded), and the raw observations (network.steps.StepsRun)."""

    final_state: np.ndarray
    report_lines: list[str]
    build_seconds: float | None
    run: Any


def run_steps(
    graph: GraphArrays,
    precision: str,
    batches: Sequence[np.ndarray],
    *,
    verbose: bool = False,
    save_engine: str | Path | None = None,
    load_engine: str | Path | None = None,
    profile: ProfileBounds | None = None,
    show_progress: bool = False,
    plugin: str = PYTHON_PLUGIN,
    cuda_graph: bool = False,
) -> StepsResult:
    """--steps: builds (or loads) the state-update engine and executes it once per batch on one X buffer.

    The graph gives N, the node features and the initial state; `batches` (network.steps.make_step_batches)
    are equal-length int64 [B, 2] edge arrays. `profile` bounds N and the edges per batch E = B of a new
    engine. Call network.steps.check_state_range first (the state must not overflow the precision). `plugin`
    ("python" or "aot") picks the scatter-add of a new engine. `cuda_graph`: each step replays one execution
    captured after the warm-up (network.capture).
    """
    from network.inputs import feature_dtype, state_and_features
    from network.steps import run_state_steps, steps_report_lines

    trt = require_engine_dependencies(plugin if load_engine is None else PYTHON_PLUGIN)
    if not batches:
        raise InputError("--steps needs at least one batch")
    dtype = feature_dtype(precision)
    initial_state, features = state_and_features(graph.node_features, graph.state, dtype)
    num_nodes, num_features = features.shape
    batch_edges = len(batches[0])
    prepared = prepare_engine(
        trt, kind=STATE_UPDATE, precision=precision, num_nodes=num_nodes, num_edges=batch_edges,
        num_features=num_features, num_classes=0, verbose=verbose, save_engine=save_engine, load_engine=load_engine,
        profile=profile, show_progress=show_progress, edges_source="each --steps batch", plugin=plugin,
    )
    with progress(f"Running {len(batches):,} steps", enabled=show_progress):
        run = run_state_steps(trt, prepared.engine, initial_state, features, batches, cuda_graph=cuda_graph)
    lines = list(prepared.lines)
    lines.append(report.plugin_alias_line(compute_counts=False, plugin=plugin, loaded=load_engine is not None))
    lines.extend(steps_report_lines(run, num_nodes, num_features, batch_edges, getattr(trt, "__version__", "?"),
                                    plugin=None if load_engine is not None else plugin))
    return StepsResult(
        final_state=np.asarray(run.final_state, dtype=np.float64), report_lines=lines,
        build_seconds=prepared.build_seconds, run=run,
    )
