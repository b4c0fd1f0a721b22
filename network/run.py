"""How the engine runs once: the input arrays from the graph, one inference on buffers the caller owns, and what
it observed; run_graph is the whole classifier run.

For edges (s -> t), src row e is node_features[s] and idx[e] = t, so the plugin adds each source node's
features into its target's row of X (plain numpy). The inputs are uploaded into DeviceArrays (cuda-python) and
bound by an ExecutionSession (network/execution.py, as --steps and --benchmark bind them), so TensorRT reads
and the plugin writes the caller's memory directly; after inference X's buffer is copied back to see whether
the plugin's in-place write reached it (cli/engine_report.py says so). The classifier has no state output to
bind at X: the plugin's aggregated output feeds the mean inside the engine.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from common.errors import InputError
from common.plugin_kind import PluginKind
from common.progress import progress
from network.definition import (
    CLASSIFIER,
    INPUT_INDEX,
    INPUT_SOURCE,
    INPUT_STATE,
    INPUT_WEIGHTS,
    OUTPUT_SOFTMAX,
)
from network.onnx_parse import OnnxSource
from network.engine import EngineOrigin, ProfileBounds, prepare_engine, require_engine_dependencies, tensorrt_log_level
if TYPE_CHECKING:
    from tensorrt import ICudaEngine

PRECISIONS: dict[str, np.dtype] = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16)}


class GraphArrays(Protocol):
    """What make_engine_inputs reads from a graph.Graph."""

    @property
    def node_features(self) -> np.ndarray: ...

    @property
    def edges(self) -> np.ndarray: ...

    @property
    def state(self) -> np.ndarray | None: ...


def feature_dtype(precision: str) -> np.dtype:
    """numpy dtype of X, src, W and the output for "fp32" or "fp16"."""
    try:
        return PRECISIONS[precision]
    except KeyError:
        raise InputError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}") from None


def to_feature_dtype(name: str, values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`values` as `dtype`, C-contiguous; InputError if a finite value does not fit (float16 overflows at 65504)."""
    with np.errstate(over="ignore"):  # overflow is reported below, with the value
        converted = np.ascontiguousarray(values, dtype=dtype)
    overflow = np.isinf(converted) & np.isfinite(values)
    if overflow.any():
        position = tuple(int(i) for i in np.argwhere(overflow)[0])
        value = float(values[position])  # a plain number: numpy 2 would print np.float64(70000.0)
        raise InputError(
            f"{name}{list(position)} = {value} does not fit in {dtype} (largest finite value "
            f"{float(np.finfo(dtype).max):g}); use --precision fp32"
        )
    return converted


def state_and_features(
    node_features: np.ndarray, state: np.ndarray | None, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray]:
    """(X, features) as `dtype`: the state (zeros when None) and the node features ([N] is one feature per
    node); InputError if a value does not fit (to_feature_dtype), the state checked first."""
    features = np.asarray(node_features, dtype=np.float64)
    if features.ndim == 1:
        features = features[:, None]
    state_values = np.zeros(features.shape) if state is None else np.asarray(state, dtype=np.float64)
    return to_feature_dtype("state", state_values, dtype), to_feature_dtype("node_features", features, dtype)


def engine_inputs(
    node_features: np.ndarray,
    edges: np.ndarray,
    weights: np.ndarray,
    precision: str,
    state: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """X [N, F] (state, zeros when None), src [E, F], idx [E] int64, W [C, F]; features in `precision`."""
    dtype = feature_dtype(precision)
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    state_values, features = state_and_features(node_features, state, dtype)
    return {
        INPUT_STATE: state_values,
        INPUT_SOURCE: features[edges[:, 0]],
        INPUT_INDEX: np.ascontiguousarray(edges[:, 1]),
        INPUT_WEIGHTS: to_feature_dtype("weights", np.asarray(weights, dtype=np.float64), dtype),
    }


def make_engine_inputs(graph: GraphArrays, weights: np.ndarray, precision: str) -> dict[str, np.ndarray]:
    """engine_inputs for a validated graph.Graph (node_features [N, F], edges [E, 2], state or None)."""
    return engine_inputs(graph.node_features, graph.edges, weights, precision, state=graph.state)


@dataclass(frozen=True)
class EngineOutputs:
    """The classifier output, X's buffer before and after inference, and each output's engine-level alias
    (None when this TensorRT cannot report it)."""

    softmax: np.ndarray
    state_before: np.ndarray
    state_after: np.ndarray
    aliased_inputs: dict[str, str | None] | None


def run_engine(trt: Any, engine: "ICudaEngine", feeds: Mapping[str, np.ndarray], *, verbose: bool = False) -> EngineOutputs:
    """One inference: upload the feeds, execute once on an ExecutionSession bound to them, return softmax
    (float64) and X read back. EngineError (one line) when TensorRT cannot create the context, take a shape or
    an address, or execute; the buffers are freed either way."""
    from network.execution import ExecutionSession
    from plugin.device_array import DeviceArray

    buffers: dict[str, DeviceArray] = {}
    session: ExecutionSession | None = None
    try:
        for name, array in feeds.items():
            buffers[name] = DeviceArray.from_array(array)
        # Shapes and dtypes were checked against the engine before (network.engine.check_graph_fits).
        with tensorrt_log_level(verbose):
            session = ExecutionSession(trt, engine, buffers)
            session.execute()
            session.synchronize()
        softmax = np.array(session.outputs[OUTPUT_SOFTMAX].download(), dtype=np.float64)
        state_after = buffers[INPUT_STATE].download()
        aliases = session.aliases
    finally:
        if session is not None:
            session.close()
        for buffer in buffers.values():
            buffer.free()
    return EngineOutputs(
        softmax=softmax,
        state_before=np.array(feeds[INPUT_STATE]),
        state_after=state_after,
        aliased_inputs=aliases,
    )


def update_is_zero(src: np.ndarray, index: np.ndarray, num_nodes: int) -> bool:
    """True when adding src rows into their index rows changes no value (e.g. all-zero features): then X's
    buffer looks the same whether or not the plugin wrote to it. O(E*F) with np.bincount, in float64."""
    src64 = np.asarray(src, dtype=np.float64)
    src64 = src64[:, None] if src64.ndim == 1 else src64
    return all(
        not np.any(np.bincount(index, weights=src64[:, column], minlength=num_nodes))
        for column in range(src64.shape[1])
    )


@dataclass(frozen=True)
class EngineRunResult:
    """What one engine run gives the CLI (its report: cli/engine_report.py).

    softmax: [C, N] float64 copy of the engine output. origin: where the engine came from. plugin: the
    scatter-add it was built with (None: loaded from a file). aliased_inputs: what get_aliased_input_tensor
    reported per output (None: this TensorRT cannot tell). state_changed_in_place: the caller's X buffer differs
    after the run; zero_update: the edges add zero everywhere, so that cannot be seen; multi_output_plugin: the
    plugin aliasing X has another output and its aliased one feeds another layer. engine_data: the serialized
    engine built (None when loaded), for --save_engine once the run has succeeded.
    """

    softmax: np.ndarray
    origin: EngineOrigin
    plugin: PluginKind | None
    aliased_inputs: dict[str, str | None] | None
    state_changed_in_place: bool
    zero_update: bool
    multi_output_plugin: bool
    benchmark: Any = None  # network.benchmark.BenchmarkResult with --benchmark
    engine_data: bytes | None = None


def run_graph(
    graph: GraphArrays,
    weights: np.ndarray,
    precision: str,
    *,
    verbose: bool = False,
    load_engine: str | Path | None = None,
    profile: ProfileBounds | None = None,
    show_progress: bool = False,
    benchmark_iterations: int | None = None,
    plugin: PluginKind = PluginKind.PYTHON,
    cuda_graph: bool = False,
    onnx: OnnxSource | None = None,
) -> EngineRunResult:
    """Builds (or loads) the engine, runs it once on `graph` and reports; optionally benchmarks it.

    `profile` bounds N and E of a newly built engine (default: default_profile_bounds); a loaded engine keeps
    its own. InputError when the graph does not fit the engine (precision, F, C, N or E) or a file is bad.
    `show_progress` reports the engine build and the run on stderr (common.progress). `benchmark_iterations` adds that
    many timed executions (and as many timed kernel launches) after the run (network.benchmark). `plugin`
    picks the scatter-add of a new engine; a loaded engine holds its own. `cuda_graph`: the
    benchmark replays one captured execution (and one captured kernel launch) instead of calling them. `onnx`:
    build the engine from that rewritten model instead of the network API.
    """
    trt = require_engine_dependencies(plugin if load_engine is None else PluginKind.PYTHON, onnx=onnx is not None)
    feeds = make_engine_inputs(graph, weights, precision)
    num_nodes, num_features = feeds[INPUT_STATE].shape
    prepared = prepare_engine(
        trt, kind=CLASSIFIER, precision=precision, num_nodes=num_nodes, num_edges=len(feeds[INPUT_INDEX]),
        num_features=num_features, num_classes=int(np.shape(weights)[0]), verbose=verbose, load_engine=load_engine,
        profile=profile, show_progress=show_progress, plugin=plugin, onnx=onnx,
    )
    with progress("Running the engine", enabled=show_progress):
        outputs = run_engine(trt, prepared.engine, feeds, verbose=verbose)
    benchmark = None
    if benchmark_iterations is not None:
        from network.benchmark import benchmark_engine

        with progress(f"Benchmarking {benchmark_iterations:,} executions", enabled=show_progress):
            benchmark = benchmark_engine(trt, prepared.engine, feeds, benchmark_iterations, cuda_graph=cuda_graph)
    return EngineRunResult(
        softmax=outputs.softmax, origin=prepared.origin, plugin=None if load_engine is not None else plugin,
        aliased_inputs=outputs.aliased_inputs,
        state_changed_in_place=not np.array_equal(outputs.state_before, outputs.state_after),
        zero_update=update_is_zero(feeds[INPUT_SOURCE], feeds[INPUT_INDEX], num_nodes),
        # the Python plugin and the float32 AOT plugin also output the counts; float16's round_table has one output
        multi_output_plugin=load_engine is not None or not plugin.aot or precision == "fp32",
        benchmark=benchmark, engine_data=prepared.data,
    )
