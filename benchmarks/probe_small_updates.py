"""Probe: per-step device time of small in-place updates, every candidate plan beside torch, in one process.

    python3 benchmarks/probe_small_updates.py [--out DIR] [--nodes 1000 ... 1e8] [--batches 10000 1000000]
                                              [--features 1 ...]

F features per row (default 1), no counts, a new batch of B edges per step (8 rotating random batches) into one
state of N nodes; CUDA events after warm-up, median (benchmarks/gpu_timing.py). Rows: torch index_add_ and the
Python plugin's kernel ("auto", and each candidate plan forced, some with a plan.py constant changed).
bench_aot.py (with the AOT plugin) and bench_state_update.py time the shipped choices; this probe times the
alternatives behind them (plugin/kernels/NOTES.md, "Small updates without counts").
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.arguments import ArgumentParser, dtype_names, positive_int  # noqa: E402
from benchmarks.gpu_timing import device_name, ours, print_and_save, require_torch_gpu, time_gpu_ms  # noqa: E402

NODES = [10**3, 10**4, 10**5, 10**6, 10**7, 10**8]
ROTATION = 8
TIMING = dict(sets=ROTATION, min_reps=30, max_reps=80, budget_s=0.2)


def with_constants(constants: dict, make):
    """make() with plan.py constants changed (the plan and prepared-launch caches cleared before and after)."""
    from plugin.kernels import launch, plan

    forget = launch.backend.forget
    saved = {name: getattr(plan, name) for name in constants}
    for name, value in constants.items():
        setattr(plan, name, value)
    forget()
    try:
        return make()
    finally:
        for name, value in saved.items():
            setattr(plan, name, value)
        forget()


def variants(dtype_name: str, batch: int, num_nodes: int, features: int) -> list[tuple[str, str, dict]]:
    """(label, algorithm, plan constants) of the Python plugin's candidates for this row."""
    rows = [("auto", "auto", {})]
    if dtype_name == "float32":
        rows += [("global (windowed)", "global", {}), ("direct, 8 blocks/SM", "direct", {"DIRECT_BLOCKS_PER_SM": 8})]
        if num_nodes <= 10**4:
            rows.append(("shared", "shared", {}))
    else:
        rows.append(("table (global/hashed)", "global", {}))
        if batch <= 2**15:
            rows += [("owned, 64 edges/block", "owned", {"OWNED_EDGES_PER_BLOCK": 64}),
                     ("owned, 256 edges/block", "owned", {"OWNED_EDGES_PER_BLOCK": 256})]
        if num_nodes > 2 * batch and features == 1:
            rows.append(("split_table", "split_table", {}))
    return rows


def probe_row(dtype_name: str, batch: int, num_nodes: int, features: int) -> list[tuple[str, float, str]]:
    import torch

    from plugin.kernels import scatter_add_workspace_size
    from plugin.kernels.plan import describe

    dtype = getattr(torch, dtype_name)
    state = torch.randn(num_nodes, features, device="cuda", dtype=dtype)
    batches = [(torch.randn(batch, features, device="cuda", dtype=dtype),
                torch.randint(0, num_nodes, (batch,), device="cuda", dtype=torch.int64)) for _ in range(ROTATION)]
    results = [("torch index_add_", time_gpu_ms(lambda i: state.index_add_(0, batches[i][1], batches[i][0]),
                                                **TIMING), "")]
    for label, algorithm, constants in variants(dtype_name, batch, num_nodes, features):
        def measure():
            size = scatter_add_workspace_size(num_nodes, batch, features, dtype_name, with_counts=False,
                                              algorithm=algorithm)
            workspace = torch.empty(max(size, 1), device="cuda", dtype=torch.uint8)
            steps = [ours(state, src, index, None, workspace if size else None, algorithm=algorithm)
                     for src, index in batches]
            plan = describe(steps[0]())
            return time_gpu_ms(lambda i: steps[i](), **TIMING), plan
        try:
            ms, plan = with_constants(constants, measure)
        except Exception as error:  # a candidate that cannot run here is reported, not fatal
            ms, plan = float("nan"), f"failed: {type(error).__name__}: {error}"[:160]
        results.append((f"python: {label}", ms, plan))
    del state, batches
    torch.cuda.empty_cache()
    return results


def main() -> int:
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--nodes", type=positive_int, nargs="+", default=NODES)
    parser.add_argument("--batches", type=positive_int, nargs="+", default=[10**4, 10**6])
    parser.add_argument("--dtypes", type=dtype_names, default=["float32", "float16"])
    parser.add_argument("--features", type=positive_int, nargs="+", default=[1])
    args = parser.parse_args()
    require_torch_gpu("probe_small_updates.py")
    lines = [f"{device_name()}: per-step device time (us, median), no counts", "",
             "| dtype | F | B | N | method | us | plan |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for dtype_name in args.dtypes:
        for features in args.features:
            for batch in (int(b) for b in args.batches):
                for num_nodes in (int(n) for n in args.nodes):
                    for label, ms, plan in probe_row(dtype_name, batch, num_nodes, features):
                        line = (f"| {dtype_name} | {features} | {batch:.0e} | {num_nodes:.0e} | {label} "
                                f"| {ms * 1e3:.1f} | {plan} |")
                        lines.append(line)
                        print(line, flush=True)
    print_and_save("\n".join(lines), args.out, "probe_small_updates.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
