"""Per-step time of adding a fixed batch of B edges into a state of N = 1e3 ... 1e8 nodes: it must stay flat.

    python3 benchmarks/bench_state_update.py [--out DIR] [--batches 10000 1000000]

The in-place use case: a large state on the GPU, a small update per step. Each step launches
scatter_add_launch for a new batch (rotating over 8 pre-generated random batches: values standard normal,
targets uniform over the N nodes) into the same state buffer, F = 1, counts skipped (counts = 0), so nothing
in the launch is O(N). Device time per step from CUDA events (benchmarks/gpu_timing.py), median of many
steps. The column "with counts" repeats the step with counts requested, whose zeroing is O(N) by nature.
Host time per step: what the caller's thread spends issuing one step (the same batch buffers every step, as
an engine's bindings are; gpu_timing.host_us_per_call). Wall time per step: 400 steps back to back over the
rotating batches, first call to the last one's end, divided by 400 (max of host and device in steady state).
One step at a time: each step issued and the device synchronised before the next (an application that reads
the state after every update; host launch, device time and the synchronisation), with torch's index_add_
timed the same way beside it, the two interleaved step by step (gpu_timing.one_step_us_interleaved). The same again with each batch's step captured once
into a CUDA graph (plugin.cuda_graph, on a side stream) and replayed with one cuGraphLaunch per step, as a
captured engine runs (--cuda_graph).
"""

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.arguments import ArgumentParser, positive_int  # noqa: E402
from benchmarks.gpu_timing import (  # noqa: E402
    device_name,
    host_us_per_call,
    one_step_us_interleaved,
    ours,
    print_and_save,
    require_torch_gpu,
    sync_step_us,
    time_gpu_ms,
    wall_us_per_call,
)

NODES = [10**3, 10**4, 10**5, 10**6, 10**7, 10**8]
BATCHES_IN_ROTATION = 8


def step_times(num_nodes: int, batch: int, dtype_name: str) -> dict:
    import torch

    from plugin.kernels import scatter_add_workspace_size
    from plugin.kernels.plan import describe

    dtype = getattr(torch, dtype_name)
    state = torch.randn(num_nodes, 1, device="cuda", dtype=dtype)
    batches = [(torch.randn(batch, 1, device="cuda", dtype=dtype),
                torch.randint(0, num_nodes, (batch,), device="cuda", dtype=torch.int64))
               for _ in range(BATCHES_IN_ROTATION)]
    size = max(scatter_add_workspace_size(num_nodes, batch, 1, dtype_name, with_counts=with_counts)
               for with_counts in (False, True))  # the steps without counts and those with them
    workspace = torch.empty(size, device="cuda", dtype=torch.uint8) if size else None
    counts = torch.empty(num_nodes, 1, device="cuda", dtype=torch.int64)
    steps = [ours(state, src, index, None, workspace) for src, index in batches]
    steps_with_counts = [ours(state, src, index, counts, workspace) for src, index in batches]
    plan = describe(steps[0]())
    row = dict(dtype=dtype_name, N=num_nodes, B=batch, plan=plan, workspace_bytes=size,
               step_ms=time_gpu_ms(lambda i: steps[i](), sets=BATCHES_IN_ROTATION, min_reps=50, max_reps=200),
               with_counts_ms=time_gpu_ms(lambda i: steps_with_counts[i](), sets=BATCHES_IN_ROTATION, min_reps=30,
                                          max_reps=100),
               host_us=host_us_per_call(steps[0]),
               wall_us=wall_us_per_call(lambda i: steps[i](), sets=BATCHES_IN_ROTATION))
    # one step at a time, ours and torch's interleaved (the same machine state for both): the wall-clock figure
    one_step = one_step_us_interleaved({"ours": lambda i: steps[i](),
                                        "torch": lambda i: state.index_add_(0, batches[i][1], batches[i][0])},
                                       sets=BATCHES_IN_ROTATION, steps=400)
    row.update(sync_us=one_step["ours"][1], torch_sync_us=one_step["torch"][1])
    row.update(graph_step_times(state, batches, workspace))
    del state, batches, workspace, counts
    torch.cuda.empty_cache()
    return row


def graph_step_times(state: Any, batches: list[Any], workspace: Any) -> dict[str, float]:
    """The same steps (counts skipped), each batch's step captured once into a CUDA graph on a side stream and
    replayed with cuGraphLaunch (plugin.cuda_graph): device, host and wall time per step, as step_times."""
    import torch

    from plugin.cuda_graph import CapturedGraph

    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # ours() launches on the current stream; the timing helpers use it too
        steps = [ours(state, src, index, None, workspace) for src, index in batches]
        for step in steps:  # first-run work outside the capture
            step()
        graphs = [CapturedGraph(side.cuda_stream, step) for step in steps]
        try:
            return dict(graph_step_ms=time_gpu_ms(lambda i: graphs[i].launch(), sets=BATCHES_IN_ROTATION, min_reps=50,
                                                  max_reps=200),
                        graph_host_us=host_us_per_call(graphs[0].launch),
                        graph_wall_us=wall_us_per_call(lambda i: graphs[i].launch(), sets=BATCHES_IN_ROTATION),
                        graph_sync_us=sync_step_us(lambda i: graphs[i].launch(), sets=BATCHES_IN_ROTATION))
        finally:
            for graph in graphs:
                graph.close()


def main() -> int:
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="folder for the table (.md)")
    parser.add_argument("--batches", type=positive_int, nargs="+", default=[10**4, 10**6])
    args = parser.parse_args()
    require_torch_gpu("bench_state_update.py")
    rows = []
    for dtype_name in ("float32", "float16"):
        for batch in args.batches:
            for num_nodes in NODES:
                row = step_times(num_nodes, batch, dtype_name)
                rows.append(row)
                print(f"{dtype_name} B={batch} N={num_nodes}: {row['step_ms'] * 1e3:.1f} us per step on the device "
                      f"({row['with_counts_ms'] * 1e3:.1f} with counts), host {row['host_us']:.1f} us, wall "
                      f"{row['wall_us']:.1f} us, one at a time {row['sync_us']:.1f} us (torch {row['torch_sync_us']:.1f}); "
                      f"CUDA graph replay: device {row['graph_step_ms'] * 1e3:.1f}, host {row['graph_host_us']:.1f}, "
                      f"wall {row['graph_wall_us']:.1f}, one at a time {row['graph_sync_us']:.1f} us [{row['plan']}]",
                      flush=True)
    lines = [f"{device_name()}: per-step device time (us, median), F = 1, counts skipped; fixed batch B"]
    for key, us_per_unit, title in (
            ("step_ms", 1e3, None),
            ("host_us", 1, "Host time per step (us, median): issuing one step from Python, counts skipped"),
            ("wall_us", 1, "Wall time per step (us): 400 steps back to back, counts skipped"),
            ("sync_us", 1, "One step at a time (us, median): the step issued, then the device synchronised before the "
             "next (host launch included), counts skipped"),
            ("torch_sync_us", 1, "torch index_add_ one step at a time (us, median), the same tensors, the same way"),
            ("graph_step_ms", 1e3, "CUDA graph replay (each batch's step captured once, then one cuGraphLaunch per "
             "step), counts skipped: device time per step (us, median)"),
            ("graph_host_us", 1, "CUDA graph replay: host time per step (us, median)"),
            ("graph_wall_us", 1, "CUDA graph replay: wall time per step (us), 400 steps back to back"),
            ("graph_sync_us", 1, "CUDA graph replay, one step at a time (us, median): cuGraphLaunch, then the device "
             "synchronised")):
        lines += (["", title] if title else []) + [
            "", "| dtype | B | N = 1e3 | 1e4 | 1e5 | 1e6 | 1e7 | 1e8 | max / min |", "|" + " --- |" * 9]
        for dtype_name in ("float32", "float16"):
            for batch in args.batches:
                times = [r[key] * us_per_unit for r in rows if r["dtype"] == dtype_name and r["B"] == batch]
                lines.append(f"| {dtype_name} | {batch:.0e} | " + " | ".join(f"{t:.1f}" for t in times)
                             + f" | {max(times) / min(times):.2f} |")
    lines += ["", "With counts requested (their O(N) zeroing included), device us:", "",
              "| dtype | B | N = 1e3 | 1e4 | 1e5 | 1e6 | 1e7 | 1e8 |", "|" + " --- |" * 8]
    for dtype_name in ("float32", "float16"):
        for batch in args.batches:
            sel = [r for r in rows if r["dtype"] == dtype_name and r["B"] == batch]
            lines.append(f"| {dtype_name} | {batch:.0e} | " + " | ".join(f"{r['with_counts_ms'] * 1e3:.1f}" for r in sel) + " |")
    lines += ["", "Plans: " + "; ".join(f"{r['dtype']} B={r['B']:.0e} N={r['N']:.0e}: {r['plan']}" for r in rows)]
    print_and_save("\n".join(lines), args.out, "bench_state_update.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
