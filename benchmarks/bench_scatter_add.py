"""Scatter-add (sums and counts) on the GPU: this repository's kernel against torch, PyG and a label-loop kernel.

    python3 benchmarks/bench_scatter_add.py [--out DIR] [--quick | --sizes N:E:F,...] [--dtypes D,...]
                                            [--without-counts] [--baseline DIR]

Needs torch (and optionally torch_geometric, triton, matplotlib) on a CUDA machine. Per row: the median of
CUDA-event timings after warm-up (benchmarks/gpu_timing.py), fresh random inputs (standard normal values,
uniform targets), and the floor = bytes that must move / device-to-device copy bandwidth measured in this run:
index (8 B) and src row read once per edge, state read and written once per node, counts written once per node.
Methods: ours = scatter_add_launch with counts (memsets included); torch = state.index_add_(0, index, src)
+ torch.bincount(index, minlength=N); PyG = torch_geometric.utils.scatter(src, index, 0, dim_size=N,
reduce="sum") + bincount (into a new tensor, not added to the state); label-loop = benchmarks/label_loop_triton.py
(F = 1, N <= 1e4, E * N <= 1e10 only). For wide rows (F >= 32) the one-atomic-per-row limit measured in the same
run: one float32 atomic per edge into N nodes with the same targets (the direct path, F = 1, no counts), and
what share of ours it is. Prints a markdown table; with --out writes it (.md, .csv) and a plot.
--sizes and --dtypes restrict the table to some rows (e.g. --sizes 1e6:1e7:1,1e4:1e6:1 --dtypes float32).
--without-counts times launches without counts (torch and PyG without bincount), as a step of a state update.
--baseline DIR imports `plugin` from DIR (e.g. an older version's files) and times only its "auto" plan at
BASELINE_SIZES, to compare versions in one run.
"""

import argparse
import csv
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.arguments import ArgumentParser, dtype_names  # noqa: E402
from benchmarks.gpu_timing import (  # noqa: E402
    copy_bandwidth_bytes_per_s,
    device_name,
    ours,
    print_and_save,
    require_torch_gpu,
    time_gpu_ms,
)

FULL_SIZES = sorted(
    [(n, e, f) for f in (1, 64) for n in (10**3, 10**6) for e in (10**5, 10**6, 10**7, 10**8)]
    + [(10**4, 10**6, 1), (10**4, 10**6, 64)],
    key=lambda size: (size[2], size[0], size[1]),
)
QUICK_SIZES = [(10**3, 10**6, 1), (10**4, 10**6, 1), (10**6, 10**7, 1), (10**4, 10**6, 64), (10**6, 10**7, 64)]
SMALL_BYTES = 512 << 20  # inputs below this are rotated over several sets, so L2 does not keep them


def floor_bytes(num_nodes: int, num_edges: int, num_features: int, itemsize: int, with_counts: bool = True) -> int:
    return num_edges * (8 + num_features * itemsize) + num_nodes * (2 * num_features * itemsize + 8 * with_counts)


def issue_target(num_nodes: int, num_edges: int, num_features: int, best_other_ms: float, floor_ms: float) -> tuple[float, str]:
    """The issue's target time for this row and how it is set (speed-up over torch/PyG, share of the floor)."""
    factor = 5 if num_nodes <= 10**4 else 2
    target, why = best_other_ms / factor, f"{factor}x best"
    if num_nodes == 10**6 and num_edges >= 10**7 and num_features in (1, 64):
        share = 0.3 if num_features == 1 else 0.5
        if floor_ms / share < target:
            target, why = floor_ms / share, f"{int(share * 100)}% floor"
    return target, why


def make_inputs(num_nodes, num_edges, num_features, dtype, sets):
    import torch

    state = torch.randn(num_nodes, num_features, device="cuda", dtype=dtype)
    inputs = [
        (torch.randn(num_edges, num_features, device="cuda", dtype=dtype),
         torch.randint(0, num_nodes, (num_edges,), device="cuda", dtype=torch.int64))
        for _ in range(sets)
    ]
    return state, inputs


def bench_row(num_nodes, num_edges, num_features, dtype, bandwidth, *, with_others=True, with_counts=True):
    import torch

    from plugin.kernels import scatter_add_workspace_size
    from plugin.kernels.plan import SORT_MIN_FEATURES, describe

    itemsize = torch.tensor([], dtype=dtype).element_size()
    sets = 4 if floor_bytes(num_nodes, num_edges, num_features, itemsize) < SMALL_BYTES else 1
    state, inputs = make_inputs(num_nodes, num_edges, num_features, dtype, sets)
    counts = torch.empty(num_nodes, 1, device="cuda", dtype=torch.int64) if with_counts else None
    dtype_name = "float32" if dtype == torch.float32 else "float16"
    # room for the sorted path too where rows are wide, so that it can be timed as another plan ("auto" decides
    # by the sizes, not by the workspace's size)
    wide = num_features >= SORT_MIN_FEATURES
    size = scatter_add_workspace_size(num_nodes, num_edges, num_features, dtype_name, with_counts=with_counts,
                                      algorithm="sorted" if wide and with_counts else "auto")
    workspace = torch.empty(size, device="cuda", dtype=torch.uint8) if size else None
    row = dict(dtype=dtype_name, N=num_nodes, E=num_edges, F=num_features, counts=with_counts)
    row["floor_ms"] = floor_bytes(num_nodes, num_edges, num_features, itemsize, with_counts) / bandwidth * 1e3

    row["plan"] = describe(ours(state, *inputs[0], counts, workspace)())  # also compiles and loads the kernels
    launches = [ours(state, src, index, counts, workspace) for src, index in inputs]
    row["ours_ms"] = time_gpu_ms(lambda i: launches[i](), sets=sets)
    # The plans "auto" did not pick, where it had a choice: unpaired value and count atomics instead of
    # pairs, one pass instead of node passes, global atomics (without counts: the direct kernel) instead of
    # shared memory and back.
    others = {}
    atomics = "direct" if not with_counts and dtype == torch.float32 else "global"
    if " pairs" in row["plan"]:
        others["unpaired"] = dict(paired=False)
    if " passes=" in row["plan"]:  # node passes (not the sorted path's place_passes=)
        others["1 pass"] = dict(node_passes=1)
    if row["plan"].startswith("chunked"):
        others["sorted"] = dict(algorithm="sorted")
    if row["plan"].startswith(("shared", "sorted", "chunked")):
        others[atomics] = dict(algorithm=atomics)
    elif wide and with_counts:  # "auto" chose atomics over sorting the edges
        others["sorted"] = dict(algorithm="sorted")
    elif not with_counts and row["plan"].startswith(atomics):
        others["shared"] = dict(algorithm="shared")  # skipped where it cannot run
    elif row["plan"].startswith("global") and num_nodes <= 10**4:  # "auto" chose global atomics over shared memory
        others["shared"] = dict(algorithm="shared")
    row["others"] = ""
    for name, kwargs in (others if with_others else {}).items():
        alternatives = [ours(state, src, index, counts, workspace, **kwargs) for src, index in inputs]
        try:
            row[f"other[{name}]_ms"] = time_gpu_ms(lambda i: alternatives[i](), sets=sets)
        except ValueError as error:  # a forced plan that cannot run at these sizes
            print(f"{name}: {error}", flush=True)
            continue
        row["others"] += f"{'; ' if row['others'] else ''}{fmt(row[f'other[{name}]_ms'])} {name}"
    if with_others:
        def torch_call(i):
            src, index = inputs[i]
            state.index_add_(0, index, src)
            if with_counts:
                torch.bincount(index, minlength=num_nodes)

        row["torch_ms"] = time_gpu_ms(torch_call, sets=sets)
        try:
            from torch_geometric.utils import scatter

            def pyg_call(i):
                src, index = inputs[i]
                scatter(src, index, 0, dim_size=num_nodes, reduce="sum")
                if with_counts:
                    torch.bincount(index, minlength=num_nodes)

            row["pyg_ms"] = time_gpu_ms(pyg_call, sets=sets)
        except ImportError:
            row["pyg_ms"] = float("nan")
        row["label_loop_ms"] = float("nan")
        if num_features == 1 and num_nodes <= 10**4 and num_edges * num_nodes <= 10**10:
            from benchmarks.label_loop_triton import label_loop_scatter_add

            out = torch.zeros(num_nodes, 1, device="cuda", dtype=torch.float32)
            label_counts = torch.zeros(num_nodes, 1, device="cuda", dtype=torch.int32)
            row["label_loop_ms"] = time_gpu_ms(
                lambda i: label_loop_scatter_add(out, inputs[i][0], inputs[i][1], label_counts), sets=sets,
                min_reps=3, max_reps=10)
        row["atomic_row_ms"] = one_atomic_per_row_ms(num_nodes, inputs, sets) if wide else float("nan")
        best = min(row["torch_ms"], row["pyg_ms"]) if row["pyg_ms"] == row["pyg_ms"] else row["torch_ms"]
        row["target_ms"], row["target"] = issue_target(num_nodes, num_edges, num_features, best, row["floor_ms"])
        row["speedup"] = best / row["ours_ms"]
    del state, inputs, counts, workspace
    torch.cuda.empty_cache()
    return row


def one_atomic_per_row_ms(num_nodes: int, inputs, sets: int) -> float:
    """The one-atomic-per-row limit of a wide row, measured: the device time of one float32 atomic per edge into
    N nodes with the same targets (this kernel's direct path, F = 1, no counts); NaN if it cannot run."""
    import torch

    try:
        state = torch.zeros(num_nodes, 1, device="cuda", dtype=torch.float32)
        ones = [(torch.randn(index.shape[0], 1, device="cuda", dtype=torch.float32), index) for _, index in inputs]
        steps = [ours(state, src, index, None, None, algorithm="direct") for src, index in ones]
        return time_gpu_ms(lambda i: steps[i](), sets=sets)
    except Exception as error:  # a reference column: the table goes on without it
        print(f"one-atomic-per-row reference failed: {type(error).__name__}: {error}", flush=True)
        return float("nan")


def fmt(value: float) -> str:
    if value != value:
        return "–"
    return f"{value:.4f}" if value < 0.1 else f"{value:.3f}" if value < 10 else f"{value:.1f}"


def exp10(n: int) -> str:
    return f"1e{len(str(n)) - 1}" if str(n).strip("0") == "1" else str(n)


def atomic_cell(row) -> str:
    limit = row.get("atomic_row_ms", float("nan"))
    return "–" if limit != limit else f"{fmt(limit)} ({100 * limit / row['ours_ms']:.0f}%)"


def markdown(rows) -> str:
    head = ("| dtype | N | E | F | floor ms | ours ms | % of floor | torch ms | PyG ms | label-loop ms | "
            "x best | target ms (rule) | met | ours, other plans ms | one atomic per row ms (its % of ours) |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in rows:
        met = "yes" if r["ours_ms"] <= r["target_ms"] else f"no ({r['ours_ms'] / r['target_ms']:.1f}x over)"
        lines.append(
            f"| {r['dtype']} | {exp10(r['N'])} | {exp10(r['E'])} | {r['F']} | {fmt(r['floor_ms'])} | {fmt(r['ours_ms'])} | "
            f"{100 * r['floor_ms'] / r['ours_ms']:.0f}% | {fmt(r['torch_ms'])} | {fmt(r['pyg_ms'])} | "
            f"{fmt(r['label_loop_ms'])} | {r['speedup']:.1f} | {fmt(r['target_ms'])} ({r['target']}) | {met} | "
            f"{r['others'] or '–'} | {atomic_cell(r)} |"
        )
    return "\n".join(lines)


def plot(rows, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(n, f) for f in (1, 64) for n in (10**3, 10**6)]
    figure, axes = plt.subplots(2, 2, figsize=(9, 6.5), sharex=True)
    for axis, (n, f) in zip(axes.flat, panels):
        for dtype, style in (("float32", "-"), ("float16", "--")):
            sel = sorted((r for r in rows if r["N"] == n and r["F"] == f and r["dtype"] == dtype), key=lambda r: r["E"])
            if not sel:
                continue
            e = [r["E"] for r in sel]
            for key, label, color in (("ours_ms", "ours", "C0"), ("torch_ms", "torch", "C1"), ("pyg_ms", "PyG", "C2"),
                                      ("floor_ms", "floor", "k")):
                axis.plot(e, [r[key] for r in sel], style, color=color, marker="o", ms=3,
                          label=f"{label} {dtype}" if (n, f) == panels[0] else None)
        axis.set(xscale="log", yscale="log", title=f"N = {exp10(n)}, F = {f}")
        axis.grid(True, which="major", alpha=0.3)
    for axis in axes[1]:
        axis.set_xlabel("edges E")
    for axis in axes[:, 0]:
        axis.set_ylabel("time (ms)")
    figure.legend(loc="lower center", ncol=4, fontsize=8)
    figure.suptitle(f"scatter-add with counts, {device_name()} (median of CUDA-event timings)")
    figure.tight_layout(rect=(0, 0.08, 1, 1))
    figure.savefig(path, dpi=72)


BASELINE_SIZES = [(10**3, 10**6, 64, "float32"), (10**3, 10**7, 64, "float32"), (10**4, 10**6, 64, "float32"),
                  (10**3, 10**6, 64, "float16")]  # (N, E, F, dtype) of --baseline


def parse_sizes(text: str) -> list[tuple[int, int, int]]:
    """'1e6:1e7:1,1e4:1e6:64' -> [(1000000, 10000000, 1), (10000, 1000000, 64)]."""
    sizes = []
    for item in text.split(","):
        parts = item.split(":")
        if len(parts) != 3:
            raise argparse.ArgumentTypeError(f"expected N:E:F, got {item!r}")
        try:
            values = [float(part) for part in parts]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected numbers in N:E:F, got {item!r}") from None
        if any(not 1 <= v < 2**63 or v != int(v) for v in values):  # inf and nan too
            raise argparse.ArgumentTypeError(f"N, E and F must be positive integers, got {item!r}")
        sizes.append((int(values[0]), int(values[1]), int(values[2])))
    return sizes


def main() -> int:
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="folder for the table (.md, .csv) and the plot (.png)")
    parser.add_argument("--quick", action="store_true", help="a few float32 sizes only")
    parser.add_argument("--sizes", type=parse_sizes, help="only these rows, N:E:F comma-separated (1e6 allowed)")
    parser.add_argument("--dtypes", type=dtype_names, default="float32,float16", help="comma-separated: float32, float16")
    parser.add_argument("--without-counts", action="store_true", help="launches without counts (torch and PyG "
                        "without bincount)")
    parser.add_argument("--baseline", type=Path, help="import plugin from this folder; time its auto plan at "
                        "BASELINE_SIZES only")
    args = parser.parse_args()
    require_torch_gpu("bench_scatter_add.py")
    import torch

    if args.baseline:
        sys.path.insert(0, str(args.baseline.resolve()))
    started = time.time()
    bandwidth = copy_bandwidth_bytes_per_s()
    print(f"{device_name()}: device-to-device copy {bandwidth / 1e12:.2f} TB/s (read + write)", flush=True)

    if args.baseline:
        import plugin.kernels

        print(f"plugin.kernels from {Path(plugin.kernels.__file__).parent}", flush=True)
        for n, e, f, dtype in BASELINE_SIZES:
            row = bench_row(n, e, f, getattr(torch, dtype), bandwidth, with_others=False)
            print(f"{dtype} N={exp10(n)} E={exp10(e)} F={f}: floor {fmt(row['floor_ms'])} auto={fmt(row['ours_ms'])} "
                  f"[{row['plan']}]", flush=True)
        print(f"baseline took {time.time() - started:.0f} s", flush=True)
        return 0

    sizes = args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES)
    dtypes = [torch.float32] if args.quick else [getattr(torch, name) for name in args.dtypes]
    rows = []
    for dtype in dtypes:
        for n, e, f in sizes:
            row = bench_row(n, e, f, dtype, bandwidth, with_counts=not args.without_counts)
            rows.append(row)
            print(f"{row['dtype']} N={exp10(n)} E={exp10(e)} F={f} [{row['plan']}]: ours {fmt(row['ours_ms'])} "
                  f"torch {fmt(row['torch_ms'])} PyG {fmt(row['pyg_ms'])} floor {fmt(row['floor_ms'])} "
                  f"others: {row['others'] or '-'}", flush=True)
    table = markdown(rows)
    header = (f"{device_name()}, copy bandwidth {bandwidth / 1e12:.2f} TB/s (read + write), torch {torch.__version__}"
              f"{', without counts' if args.without_counts else ''}; plans: "
              + "; ".join(f"{r['dtype']} {exp10(r['N'])}/{exp10(r['E'])}/{r['F']}: {r['plan']}" for r in rows))
    print_and_save(header + "\n\n" + table, args.out, "bench_scatter_add.md")
    if args.out:
        with open(args.out / "bench_scatter_add.csv", "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(key for row in rows for key in row)))
            writer.writeheader()
            writer.writerows(rows)
        try:
            plot(rows, args.out / "scatter_add.png")
        except ImportError as error:
            print(f"no plot: {error}")
    print(f"benchmark took {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
