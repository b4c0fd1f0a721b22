"""--steps K --batch_edges B: K executions of the state-update engine on one state buffer X, each adding a new
batch of B random edges, then the final state against the float64 reference of all batches.

The graph gives the nodes, their features and the initial state (zeros unless the graph has one); its own
edges are not used in this mode. Batch k is B uniform random (source, target) pairs over the N nodes
(graph.portable_edge_batches: SplitMix64 words of the seed, which cpp/aliased_io_state.cpp draws alike); src
holds the sources' features and idx the targets, so each execution adds B feature rows into X.

The state persists across executions because the engine's output "X_out" is bound at X's own address, as
NVIDIA's in-place sample (quickly_deployable_plugins/qdp_runner.py) binds its output: whatever TensorRT does
inside the engine, the updated state ends in X, and nothing is copied back (a copy of X_out into X would cost
O(N*F) per step, what in-place updates exist to avoid). If TensorRT runs the plugin on X's buffer, the update
is in place; if it copied X first, its write of X_out lands in X. The report still says what
ICudaEngine.get_aliased_input_tensor("X_out") answers (TensorRT >= 10.15). With --cuda_graph, one execution is
captured after the warm-up and each step replays it (network.timing): the batches are uploaded into the same
buffers, whose addresses the graph holds. The float64 reference of the final state and its rounding bound are
reference/state.py's; everything here except run_state_steps and run_steps is plain numpy.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from common.errors import InputError
from common.plugin_kind import PluginKind
from common.progress import progress
from network.definition import (
    INPUT_INDEX,
    INPUT_SOURCE,
    INPUT_STATE,
    STATE_UPDATE,
)
from network.onnx_parse import OnnxSource
from network.engine import EngineOrigin, ProfileBounds, prepare_engine, require_engine_dependencies
from network.timing import TimingSummary, summarize

if TYPE_CHECKING:
    from tensorrt import ICudaEngine

    from network.run import GraphArrays
    from plugin.cuda_graph import CapturedGraph

# Untimed executions before the steps (adding zeros): the first loads the kernels (the plugin's on_shape_change),
# the second has the plugin's launch capture its own graph of its driver calls (PreparedScatterAdd.graph_replay)
WARMUP_EXECUTIONS = 2

def step_inputs(features: np.ndarray, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """src [B, F] (the sources' rows of `features`, in its dtype) and idx [B] int64 (the targets) of one batch."""
    return np.ascontiguousarray(features[batch[:, 0]]), np.ascontiguousarray(batch[:, 1], dtype=np.int64)



@dataclass(frozen=True)
class StepsRun:
    """What run_state_steps observed.

    final_state: X read back after the last step (precision dtype). step_ms: per-step execution time (CUDA
    events). aliases: what get_aliased_input_tensor reported per output (None: this TensorRT cannot tell); X_out
    is bound at X's address either way. first_step_changed_state: X's buffer differed after the first execution
    (None when the first batch adds zero everywhere, so it cannot be told). host_ms: per step, the host time of
    the call that issued it (execute_async_v3, or cuGraphLaunch when cuda_graph: the execution captured once
    after the warm-up, replayed).
    """

    final_state: np.ndarray
    step_ms: list[float]
    aliases: dict[str, str | None] | None
    first_step_changed_state: bool | None
    warmup_executions: int
    host_ms: list[float] = field(default_factory=list)
    cuda_graph: bool = False

    def host_summary(self) -> TimingSummary | None:
        """Statistics of host_ms (None when no host times were taken)."""
        return summarize(self.host_ms) if self.host_ms else None


def run_state_steps(
    trt: Any,
    engine: "ICudaEngine",
    initial_state: np.ndarray,
    features: np.ndarray,
    batches: Sequence[np.ndarray],
    *,
    warmup: int = WARMUP_EXECUTIONS,
    observe_first_step: bool = True,
    cuda_graph: bool = False,
) -> StepsRun:
    """Executes the state-update engine once per batch on one X buffer and times each execution.

    initial_state [N, F] and features [N, F] in the engine's dtype; batches: equal-length int64 [B, 2] arrays.
    Before the timed steps, `warmup` executions add an all-zero src (X keeps its values) so that first-run costs
    (the plugin's kernel compilation at shape change) stay out of the timings. cuda_graph: after the warm-up,
    one execution is captured into a CUDA graph (network.timing; EngineError if it cannot be) and each step
    replays it; the batches go into the same buffers either way. Needs TensorRT, cuda-python, a GPU.
    """
    from network.execution import STATE_OUTPUT_AT_INPUT, ExecutionSession
    from network.timing import EventTimer, engine_execution, warm_up
    from network.run import update_is_zero
    from plugin.device_array import DeviceArray

    if not batches:
        raise ValueError("no batches to run")
    batch_edges = len(batches[0])
    if any(len(batch) != batch_edges for batch in batches):
        raise ValueError("all batches must have the same number of edges")
    num_nodes, num_features = initial_state.shape
    dtype = initial_state.dtype
    buffers = {
        INPUT_STATE: DeviceArray.from_array(initial_state),
        INPUT_SOURCE: DeviceArray((batch_edges, num_features), dtype),
        INPUT_INDEX: DeviceArray((batch_edges,), np.dtype(np.int64)),
    }
    session: ExecutionSession | None = None
    timer: EventTimer | None = None
    graph: "CapturedGraph | None" = None
    step_ms: list[float] = []
    host_ms: list[float] = []
    first_changed: bool | None = None
    try:
        session = ExecutionSession(trt, engine, buffers, outputs_at_inputs=STATE_OUTPUT_AT_INPUT)
        timer = EventTimer()
        state = buffers[INPUT_STATE]
        stream = session.stream

        buffers[INPUT_SOURCE].upload(np.zeros((batch_edges, num_features), dtype))
        buffers[INPUT_INDEX].upload(batches[0][:, 1])
        # Executions (then replays) that add zeros; TensorRT's and the plugin's first-run work stays out of a capture.
        step_call, graph = warm_up(stream, session.execute, warmup, cuda_graph, engine_execution(trt))
        session.synchronize()

        for step, batch in enumerate(batches):
            src, index = step_inputs(features, batch)
            buffers[INPUT_SOURCE].upload(src)
            buffers[INPUT_INDEX].upload(index)
            device_ms, call_ms = timer.time_with_host(stream, step_call)
            step_ms.append(device_ms)
            host_ms.append(call_ms)
            if step == 0 and observe_first_step:
                if not update_is_zero(src, index, num_nodes):
                    first_changed = not np.array_equal(state.download(), initial_state)
        final_state = state.download()
        return StepsRun(
            final_state=final_state,
            step_ms=step_ms,
            aliases=session.aliases,
            first_step_changed_state=first_changed,
            warmup_executions=warmup,
            host_ms=host_ms,
            cuda_graph=cuda_graph,
        )
    finally:
        if graph is not None:
            graph.close()
        if timer is not None:
            timer.close()
        if session is not None:
            session.close()
        for buffer in buffers.values():
            buffer.free()


@dataclass(frozen=True)
class StepsResult:
    """What run_steps gives the CLI: the final state X (float64 copy), the observations (StepsRun), where the
    engine came from, the scatter-add it was built with (None: loaded from a file, whichever it holds) and the
    serialized engine built (None when loaded), for --save_engine once the run has succeeded."""

    final_state: np.ndarray
    run: StepsRun
    origin: EngineOrigin
    plugin: PluginKind | None
    engine_data: bytes | None = None


def run_steps(
    graph: "GraphArrays",
    precision: str,
    batches: Sequence[np.ndarray],
    *,
    verbose: bool = False,
    load_engine: str | Path | None = None,
    profile: ProfileBounds | None = None,
    show_progress: bool = False,
    plugin: PluginKind = PluginKind.PYTHON,
    cuda_graph: bool = False,
    onnx: OnnxSource | None = None,
) -> StepsResult:
    """--steps: builds (or loads) the state-update engine and executes it once per batch on one X buffer.

    The graph gives N, the node features and the initial state; `batches` (graph.portable_edge_batches)
    are equal-length int64 [B, 2] edge arrays. `profile` bounds N and the edges per batch E = B of a new
    engine. Call check_state_range first (the state must not overflow the precision). `plugin`
    picks the scatter-add of a new engine. `cuda_graph`: each step replays one execution
    captured after the warm-up (network.timing). `onnx`: build the engine from that rewritten model.
    """
    from network.run import feature_dtype, state_and_features

    trt = require_engine_dependencies(plugin if load_engine is None else PluginKind.PYTHON, onnx=onnx is not None)
    if not batches:
        raise InputError("--steps needs at least one batch")
    dtype = feature_dtype(precision)
    initial_state, features = state_and_features(graph.node_features, graph.state, dtype)
    num_nodes, num_features = features.shape
    prepared = prepare_engine(
        trt, kind=STATE_UPDATE, precision=precision, num_nodes=num_nodes, num_edges=len(batches[0]),
        num_features=num_features, num_classes=0, verbose=verbose, load_engine=load_engine,
        profile=profile, show_progress=show_progress, edges_source="each --steps batch", plugin=plugin,
        onnx=onnx,
    )
    with progress(f"Running {len(batches):,} steps", enabled=show_progress):
        run = run_state_steps(trt, prepared.engine, initial_state, features, batches, cuda_graph=cuda_graph)
    return StepsResult(
        final_state=np.asarray(run.final_state, dtype=np.float64), run=run, origin=prepared.origin,
        plugin=None if load_engine is not None else plugin, engine_data=prepared.data,
    )
