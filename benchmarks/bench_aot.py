"""Per-step device time of the AOT scatter-add (--plugin aot) beside torch index_add_ and the Python plugin's kernel.

    python3 benchmarks/bench_aot.py [--out DIR] [--batches 10000 1000000] [--nodes 1000 ... 100000000]

What an AOT --steps engine runs per execution, on the GPU: the chain plugin/scatter_add_op.py's SCATTER_ADD
chooses for a profile whose most edges are the batch's (float32 one kernel, at the tactic TensorRT's build would
keep: each timed, the fastest; float16 the network's scratch fills and the table's kernels, or at most 1024 edges
one block), launched as TensorRT launches AOT plugins and
prepared once per batch's buffers as TensorRT prepares a plugin's launch (bench_aot_cells.AotCell over
inplace.launch.PreparedChain: each step is the driver calls alone). F = 1, no counts
(the --steps network), a fixed batch of B edges into a state of N nodes; each step takes a new batch (rotating
over 8 pre-generated ones: values standard normal, targets uniform) into the same state. Beside it, in the same
run and on the same tensors: torch state.index_add_(0, index, src) and the Python plugin's kernel
(scatter_add_launch, counts skipped, pointers and stream read once). Also each AOT step and each torch step
captured once into a CUDA graph and replayed with one launch, as a captured engine runs (--cuda_graph,
trtexec --useCudaGraph; torch.cuda.graph for torch): a graph's nodes start with less gap than separate
launches, so a chain of several operations costs less device time replayed. All methods run on one created
stream (a capture needs one). Device time from CUDA events after warm-up, median of many steps
(benchmarks/gpu_timing.py); then the methods one step at a time, interleaved step by step
(gpu_timing.one_step_us_interleaved), on the wall clock (call + synchronisation) and between CUDA events
recorded after a synchronisation (host launch latency + device time). Each table counts the cells at or below
torch's (a captured method's also against captured torch). The Python plugin's host time per execution is in
bench_enqueue.py; an AOT engine has none in Python.
"""

import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.arguments import ArgumentParser, positive_int  # noqa: E402
from benchmarks.gpu_timing import (  # noqa: E402
    captured,
    device_name,
    one_step_us_interleaved,
    ours,
    print_and_save,
    require_torch_gpu,
    time_gpu_ms,
)

NODES = [10**3, 10**4, 10**5, 10**6, 10**7, 10**8]
BATCHES_IN_ROTATION = 8


def step_times(num_nodes: int, batch: int, dtype_name: str) -> dict:
    import torch

    from benchmarks.bench_aot_cells import built_cell
    from plugin.kernels import scatter_add_workspace_size

    dtype = getattr(torch, dtype_name)
    state = torch.randn(num_nodes, 1, device="cuda", dtype=dtype)
    batches = [(torch.randn(batch, 1, device="cuda", dtype=dtype),
                torch.randint(0, num_nodes, (batch,), device="cuda", dtype=torch.int64))
               for _ in range(BATCHES_IN_ROTATION)]
    timing = dict(sets=BATCHES_IN_ROTATION, min_reps=50, max_reps=200)
    # prepared once per batch's buffers, as TensorRT prepares its launches, at the tactic its build would keep
    cell, _ = built_cell(state, batches, False, **timing)
    aot_launches = cell.launches

    def aot_step(i: int) -> None:
        aot_launches[i]()

    def torch_step(i: int) -> None:
        state.index_add_(0, batches[i][1], batches[i][0])

    row = dict(dtype=dtype_name, N=num_nodes, B=batch, aot_plan=cell.describe())
    # each captured on this (created) stream after a first run outside the capture (gpu_timing.captured)
    with (captured(aot_launches) as aot_graph,
          captured([partial(torch_step, i) for i in range(len(batches))], torch_ops=True) as torch_graph):
        size = scatter_add_workspace_size(num_nodes, batch, 1, dtype_name, with_counts=False)
        workspace = torch.empty(size, device="cuda", dtype=torch.uint8) if size else None
        python_plugin = [ours(state, src, index, None, workspace) for src, index in batches]
        steps = {"aot": aot_step, "aot_graph": aot_graph, "torch": torch_step, "torch_graph": torch_graph,
                 "python_plugin": lambda i: python_plugin[i]()}
        for name, step in steps.items():
            row[f"{name}_ms"] = time_gpu_ms(step, **timing)
        for name, (events, wall) in one_step_us_interleaved(steps, sets=BATCHES_IN_ROTATION).items():
            row[f"{name}_sync_us"], row[f"{name}_event_us"] = wall, events
    del state, batches, cell, workspace, python_plugin, steps, aot_launches, aot_graph, torch_graph
    torch.cuda.empty_cache()
    return row


METHODS = (("aot", "AOT plugin"), ("aot_graph", "AOT plugin, captured"), ("torch", "torch index_add_"),
           ("torch_graph", "torch index_add_, captured"), ("python_plugin", "Python plugin's kernel"))


def at_or_below(rows: list[dict], key: str, torch_key: str, suffix: str, scale: float) -> int:
    """Cells of `key` at or below `torch_key`'s, compared as printed (one decimal), as a reader compares them."""
    return sum(round(r[key + suffix] * scale, 1) <= round(r[torch_key + suffix] * scale, 1) for r in rows)


def table(rows: list[dict], batches: list[int], nodes: list[int], suffix: str, scale: float) -> list[str]:
    """One row per (dtype, B, method), one column per N, and the cells at or below torch's counted."""
    header = "| dtype | B | method | " + " | ".join(f"N = {n:.0e}" for n in nodes) + " | at or below torch |"
    lines = [header, "|" + " --- |" * (4 + len(nodes))]
    for dtype_name in ("float32", "float16"):
        for batch in batches:
            selected = [r for r in rows if r["dtype"] == dtype_name and r["B"] == batch]
            for key, label in METHODS:
                if not selected or any(key + suffix not in r for r in selected):
                    continue
                cells = " | ".join(f"{r[key + suffix] * scale:.1f}" for r in selected)
                if key.startswith("torch"):
                    count = "–"
                else:
                    count = f"{at_or_below(selected, key, 'torch', suffix, scale)} of {len(selected)}"
                    if key.endswith("_graph"):
                        count += f" (captured torch: {at_or_below(selected, key, 'torch_graph', suffix, scale)})"
                lines.append(f"| {dtype_name} | {batch:.0e} | {label} | {cells} | {count} |")
    return lines


def main() -> int:
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="folder for the table (bench_aot.md)")
    parser.add_argument("--batches", type=positive_int, nargs="+", default=[10**4, 10**6])
    parser.add_argument("--nodes", type=positive_int, nargs="+", default=NODES)
    args = parser.parse_args()
    require_torch_gpu("bench_aot.py")
    import torch

    torch.zeros(1, device="cuda")  # the primary context, shared with the driver API
    rows = []
    with torch.cuda.stream(torch.cuda.Stream()):  # every method on one created stream: captures need one
        for dtype_name in ("float32", "float16"):
            for batch in args.batches:
                for num_nodes in args.nodes:
                    row = step_times(num_nodes, batch, dtype_name)
                    rows.append(row)
                    print(f"{dtype_name} B={batch} N={num_nodes}: " + ", ".join(
                        f"{key} {row[key + '_ms'] * 1e3:.1f} us (one at a time {row[key + '_sync_us']:.1f})"
                        for key, _ in METHODS if key + "_ms" in row), file=sys.stderr, flush=True)
    lines = [f"{device_name()}: per-step device time (us, median), F = 1, no counts, a new batch of B edges per step",
             ""] + table(rows, args.batches, args.nodes, "_ms", 1e3) + [
             "", "One step at a time (us, median): the step issued, then the device synchronised before the next "
             "(host launch included; the AOT kernels' arguments packed once, launched from Python through "
             "cuda-python, or replayed from a graph; the methods interleaved)", ""] + table(
             rows, args.batches, args.nodes, "_sync_us", 1.0) + [
             "", "One step between CUDA events recorded after a synchronisation (us, median: host launch latency + "
             "device time)", ""] + table(rows, args.batches, args.nodes, "_event_us", 1.0)
    print_and_save("\n".join(lines), args.out, "bench_aot.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
