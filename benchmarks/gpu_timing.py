"""Timing helpers for the benchmarks (torch is used here only to allocate, fill and time) and their output.

GPU time of one call = CUDA events recorded right before and after it on the current stream. A sleep kernel
is queued before the start event, so the host has finished enqueueing the call (several driver calls for
ours) before the GPU reaches it: the events then measure device time, not Python launch overhead. Each
figure is the median over many calls after warm-up, rotating over several input sets where the inputs would
otherwise stay in L2 between calls. captured() captures calls into CUDA graphs, to time their replays alike.
"""

import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cli.options import EXIT_MISSING_DEPENDENCY  # noqa: E402  (the sample's exit status 3, standard library only)

SLEEP_CYCLES = 200_000  # about 0.1 ms at H200 clocks: longer than enqueueing one call from Python


def time_gpu_ms(call: Callable[[int], Any], *, sets: int = 1, min_reps: int = 5, max_reps: int = 50,
                budget_s: float = 0.4, warmup: int = 2) -> float:
    """Median device time in ms of call(i) (i = input set, rotating), reps sized to about budget_s."""
    import torch

    for i in range(warmup):
        call(i % sets)
    torch.cuda.synchronize()
    probe = _one(call, 0)
    reps = max(min_reps, min(max_reps, int(budget_s * 1e3 / max(probe, 1e-3))))
    times = [_one(call, i % sets) for i in range(reps)]
    return statistics.median(times)


def _one(call: Callable[[int], Any], i: int) -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(SLEEP_CYCLES)
    start.record()
    call(i)
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


@contextmanager
def captured(calls: Sequence[Callable[[], Any]], *, torch_ops: bool = False) -> Iterator[Callable[[int], None]]:
    """Each call (one per input set) captured once into a CUDA graph on the current stream, which must be a created
    one (the legacy default stream cannot be captured); yields replay(i): one launch of call i's graph on that
    stream, as a captured engine runs (trtexec 11.x by default, --useCudaGraph; the sample's --cuda_graph). Each
    call runs once outside its capture first, so that no first-run work (module loading, lazy set-up) happens
    inside it. One way per kind of call: driver-API launches (bench_aot_cells.AotCell's, through cuda-python)
    with plugin.cuda_graph.CapturedGraph, as network/timing.py captures an engine execution; torch ops
    (torch_ops=True) with torch.cuda.CUDAGraph, whose capture also keeps the ops' memory in the graph's own pool
    of torch's allocator. The graphs are freed on leaving the block."""
    import torch

    from plugin.cuda_graph import CapturedGraph

    stream = torch.cuda.current_stream()
    if not int(stream.cuda_stream):
        raise ValueError("captured() needs a created stream (with torch.cuda.stream(torch.cuda.Stream()))")
    graphs: list[Any] = []
    try:
        for call in calls:
            call()  # its first run, outside the capture
            if torch_ops:
                graph = torch.cuda.CUDAGraph()
                graphs.append(graph)
                with torch.cuda.graph(graph, stream=stream):
                    call()
            else:
                graphs.append(CapturedGraph(stream.cuda_stream, call))
        replays = [graph.replay if torch_ops else graph.launch for graph in graphs]
        yield lambda i: replays[i]()
    finally:
        for graph in graphs:
            if torch_ops:
                graph.reset()
            else:
                graph.close()


HOST_SLEEP_CYCLES = 20_000_000  # ~10 ms at H200 boost clocks: longer than queueing a batch of calls


def host_us_per_call(call: Callable[[], Any], *, batch: int = 100, batches: int = 40) -> float:
    """Host time of one call in microseconds: the median over `batches` of (wall time of `batch` calls queued
    back to back) / batch, after a warm-up batch. A sleep kernel queued before each batch keeps the GPU busy
    while the batch is queued, so the figure is the caller's time and never waits for the device (a batch
    stays far below the driver's launch queue depth); the GPU is drained between batches, outside the timing."""
    return host_us_per_call_interleaved({"call": call}, batch=batch, batches=batches)["call"]


def host_us_per_call_interleaved(calls: dict[str, Callable[[], Any]], *, batch: int = 100,
                                 batches: int = 40) -> dict[str, float]:
    """host_us_per_call of each call, the rows interleaved: batch i of every row runs before batch i + 1 of
    any row (the row order rotating by one each round), so that every row sees the same machine state
    (clocks, caches, other processes) instead of one row timed after another; median of batches per row."""
    import torch

    names = list(calls)
    for name in names:  # warm-up batch
        for _ in range(batch):
            calls[name]()
    torch.cuda.synchronize()
    per_call: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(batches):
        shift = round_index % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            call = calls[name]
            torch.cuda._sleep(HOST_SLEEP_CYCLES)
            start = time.perf_counter_ns()
            for _ in range(batch):
                call()
            per_call[name].append((time.perf_counter_ns() - start) / batch / 1e3)
            torch.cuda.synchronize()
    return {name: statistics.median(values) for name, values in per_call.items()}


def wall_us_per_call(call: Callable[[int], Any], *, sets: int = 1, calls: int = 400) -> float:
    """Wall time of one call in microseconds in a loop of `calls` back-to-back calls (call(i), i rotating over
    `sets` input sets), from the first call to the end of the last one on the device: max(host, device) per
    call in steady state."""
    import torch

    for i in range(2 * sets):
        call(i % sets)
    torch.cuda.synchronize()
    start = time.perf_counter_ns()
    for i in range(calls):
        call(i % sets)
    torch.cuda.synchronize()
    return (time.perf_counter_ns() - start) / calls / 1e3


def sync_step_us(call: Callable[[int], Any], *, sets: int = 1, steps: int = 200) -> float:
    """Wall time of one step in microseconds when steps go one at a time, as for an application that reads the
    state after each update: call(i) (i rotating over `sets` input sets) then a synchronisation of the device,
    timed together (host launch + device time + the synchronisation's wake-up); median of `steps`, after
    warm-up. Beside wall_us_per_call (back to back), where host and device work overlap."""
    import torch

    for i in range(2 * sets):
        call(i % sets)
    torch.cuda.synchronize()
    times = []
    for i in range(steps):
        start = time.perf_counter_ns()
        call(i % sets)
        torch.cuda.synchronize()
        times.append((time.perf_counter_ns() - start) / 1e3)
    return statistics.median(times)


def one_step_us_interleaved(calls: dict[str, Callable[[int], Any]], *, sets: int = 1,
                            steps: int = 200) -> dict[str, tuple[float, float]]:
    """One step at a time for several calls, interleaved (step k of every call before step k + 1 of any, the order
    rotating), so that every call sees the same machine state; per call (events, wall) in microseconds, each the
    median of `steps` / 2 steps: events = CUDA events recorded around the call after a synchronisation (host
    launch latency + device time), wall = sync_step_us's (the call and a synchronisation,
    timed on the host clock). Even steps time the one, odd steps the other."""
    import torch

    names = list(calls)
    for name in names:
        for i in range(2 * sets):
            calls[name](i % sets)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    events: dict[str, list[float]] = {name: [] for name in names}
    walls: dict[str, list[float]] = {name: [] for name in names}
    for step in range(steps):
        shift = step % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            call, i = calls[name], step % sets
            torch.cuda.synchronize()
            if step % 2 == 0:
                start.record()
                call(i)
                end.record()
                end.synchronize()
                events[name].append(start.elapsed_time(end) * 1e3)
            else:
                begin = time.perf_counter_ns()
                call(i)
                torch.cuda.synchronize()
                walls[name].append((time.perf_counter_ns() - begin) / 1e3)
    return {name: (statistics.median(events[name]), statistics.median(walls[name])) for name in names}


def copy_bandwidth_bytes_per_s(nbytes: int = 4 << 30) -> float:
    """Device-to-device copy bandwidth counting bytes read plus bytes written (median of 10 copies)."""
    import torch

    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    a.random_()
    ms = time_gpu_ms(lambda i: b.copy_(a), min_reps=10, max_reps=10)
    del a, b
    return 2 * nbytes / (ms * 1e-3)


def ours(state: Any, src: Any, index: Any, counts: Any, workspace: Any, *, algorithm: str = "auto",
         node_passes: int | None = None, **overrides: Any) -> Callable[[], Any]:
    """A call of this repository's kernel on torch tensors (state [N, F], src [E, F], index [E] int64).

    overrides (e.g. paired=False) go to scatter_add_launch as they are, so an older
    version of the kernel package (bench_scatter_add.py --baseline) runs without them.
    """
    import torch

    from plugin.kernels import scatter_add_launch

    num_nodes, num_features = state.shape
    dtype = {torch.float32: "float32", torch.float16: "float16"}[state.dtype]
    # Read once (the tensors and the stream do not change): per call, the timed host work is the launch's own.
    pointers = dict(state=state.data_ptr(), src=src.data_ptr(), index=index.data_ptr(),
                    counts=counts.data_ptr() if counts is not None else 0,
                    workspace=workspace.data_ptr() if workspace is not None else 0)
    sizes = dict(num_nodes=num_nodes, num_edges=index.shape[0], num_features=num_features, dtype=dtype,
                 workspace_size=workspace.numel() if workspace is not None else 0)
    stream = torch.cuda.current_stream().cuda_stream

    def call() -> Any:
        return scatter_add_launch(**pointers, **sizes, stream=stream, algorithm=algorithm, node_passes=node_passes,
                                  **overrides)

    return call


def driver_calls(launch: Any, state: int, src: int, index: int, counts: int, workspace: int,
                 stream: int) -> tuple[tuple[Any, tuple[Any, ...], str], ...]:
    """The driver calls a PreparedScatterAdd issues for these pointers, in order, without issuing them: each
    (cuda.bindings function, its arguments, what it does), bound through the launch's public bind()."""
    from plugin.kernels.launch import bind_driver_calls

    operations = launch.bind(state, src, index, counts, workspace, stream)
    return bind_driver_calls(launch.backend.driver, list(operations), (state, src, index, counts, workspace, 0, stream))


def print_and_save(text: str, out: Path | None, filename: str) -> None:
    """Prints a benchmark's table and, with --out, writes it to out/filename (the folder made if needed)."""
    print(text)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / filename).write_text(text + "\n")


def device_name() -> str:
    import torch

    return torch.cuda.get_device_name()


def require_torch_gpu(script: str) -> None:
    """Exits with status 3 and one line when torch or a CUDA GPU is missing (these benchmarks time the kernel
    on torch tensors); call it after parsing the options, so that --help works anywhere."""
    try:
        import torch
    except ImportError:
        missing = "torch is not installed; this benchmark times the kernel on torch tensors: pip install torch"
    else:
        missing = None if torch.cuda.is_available() else "torch sees no CUDA GPU here; run it on a machine with one"
    if missing:
        print(f"{script}: cannot run: {missing}", file=sys.stderr)
        sys.exit(EXIT_MISSING_DEPENDENCY)
