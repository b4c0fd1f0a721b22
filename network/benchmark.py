"""--benchmark ITERS: time the engine's execution, then the scatter-add kernel alone on the same buffers.

Both are timed the same way (network.timing.EventTimer: CUDA events on one stream right before and after the
call) after the same number of warm-up calls. The engine: ITERS executions of the classifier engine with
execute_async_v3 on the inputs X, src, idx, W. The kernel: ITERS launches of scatter_add_launch, the call the
plugin's enqueue makes, with the same X, src, idx, a counts buffer and (float16) a workspace of its own.
The kernel's share is its median over the engine's median. X keeps accumulating over all these calls (each one
adds the edges again), which does not change what is timed. With --cuda_graph, each of the two calls is captured
once after its warm-up and replayed (network.timing): the rows then time cuGraphLaunch of the captured work.
The host time of each engine call alone is reported too. Only benchmark_engine needs TensorRT and a GPU.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from network.definition import INPUT_INDEX, INPUT_SOURCE, INPUT_STATE
from network.timing import TimingSummary, summarize

if TYPE_CHECKING:
    from tensorrt import ICudaEngine

    from plugin.cuda_graph import CapturedGraph

DEFAULT_WARMUP = 10


@dataclass(frozen=True)
class BenchmarkResult:
    """Timings of the engine's executions and of the kernel alone, after `warmup` untimed calls of each (and as
    many untimed replays with cuda_graph); engine_host: the host time of each engine call alone."""

    warmup: int
    engine: TimingSummary
    kernel: TimingSummary
    engine_host: TimingSummary | None = None
    cuda_graph: bool = False

    @property
    def kernel_share(self) -> float:
        """Kernel median / engine median (can exceed 1 when the engine's own overhead is below the timing noise)."""
        return self.kernel.median_ms / self.engine.median_ms if self.engine.median_ms > 0 else float("nan")


def benchmark_engine(
    trt: Any,
    engine: "ICudaEngine",
    feeds: Mapping[str, np.ndarray],
    iterations: int,
    warmup: int = DEFAULT_WARMUP,
    cuda_graph: bool = False,
) -> BenchmarkResult:
    """Times `iterations` executions of the classifier engine on `feeds` and as many kernel launches alone; with
    cuda_graph, replays of each captured once after its warm-up (EngineError if it cannot be captured)."""
    from network.execution import ExecutionSession
    from network.timing import EventTimer, engine_execution, warm_up
    from plugin.device_array import DeviceArray
    from plugin.kernels import prepare_kernels, scatter_add_launch, scatter_add_workspace_size

    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    buffers = {name: DeviceArray.from_array(array) for name, array in feeds.items()}
    num_nodes, num_features = feeds[INPUT_STATE].shape
    num_edges = len(feeds[INPUT_INDEX])
    dtype = feeds[INPUT_STATE].dtype
    workspace_size = int(scatter_add_workspace_size(num_nodes, num_edges, num_features, dtype))
    kernel_buffers = {
        "counts": DeviceArray((num_nodes, 1), np.dtype(np.int64)),
        "workspace": DeviceArray((workspace_size,), np.dtype(np.uint8)),
    }
    session: ExecutionSession | None = None
    timer: EventTimer | None = None
    graphs: list["CapturedGraph | None"] = []
    try:
        session = ExecutionSession(trt, engine, buffers)
        timer = EventTimer()
        stream = session.stream
        engine_call, graph = warm_up(stream, session.execute, warmup, cuda_graph, engine_execution(trt))
        graphs.append(graph)
        engine_timings = [timer.time_with_host(stream, engine_call) for _ in range(iterations)]

        prepare_kernels(dtype)  # compiled and loaded already by the plugin in this process; cached

        def launch() -> None:
            scatter_add_launch(
                state=buffers[INPUT_STATE].ptr,
                src=buffers[INPUT_SOURCE].ptr,
                index=buffers[INPUT_INDEX].ptr,
                counts=kernel_buffers["counts"].ptr,
                num_nodes=num_nodes,
                num_edges=num_edges,
                num_features=num_features,
                dtype=dtype,
                stream=stream,
                workspace=kernel_buffers["workspace"].ptr if workspace_size else 0,
                workspace_size=workspace_size,
            )

        kernel_call, graph = warm_up(stream, launch, warmup, cuda_graph, "scatter_add_launch (the plugin's kernels)")
        graphs.append(graph)
        session.synchronize()
        kernel_ms = [timer.time(stream, kernel_call) for _ in range(iterations)]
        return BenchmarkResult(
            warmup=warmup, engine=summarize([device for device, _ in engine_timings]), kernel=summarize(kernel_ms),
            engine_host=summarize([host for _, host in engine_timings]), cuda_graph=cuda_graph,
        )
    finally:
        for captured in graphs:
            if captured is not None:
                captured.close()
        if timer is not None:
            timer.close()
        if session is not None:
            session.close()
        for buffer in (*buffers.values(), *kernel_buffers.values()):
            buffer.free()
