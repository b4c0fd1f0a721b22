"""The AOT plugins on the kernel family, cell by cell: the kernel table's sizes and the per-step table.

    python3 benchmarks/bench_aot_cells.py [--out DIR] [--quick | --sizes N:E:F,...] [--dtypes D,...]
                                          [--counts yes|no|both] [--tactics] [--no-steps] [--floor]

For each cell of bench_scatter_add.py's table (both dtypes, with and without counts): the AOT chain an engine
built for that cell would hold (plugin/scatter_add_op.py: `chain_for` with N and F constant and E the profile's
maximum), launched with inplace/launch.py exactly as TensorRT launches AOT plugins (the network's scratch fills
as memsets, then each step's aot_* kernel with its launch expressions evaluated), its memsets and kernels issued
one by one, at the tactic TensorRT's build would keep (where the scatter step offers tactics, each is timed at the
cell's sizes, as autotuning does, and the fastest is the cell's: built_cell); beside it the Python plugin's plan
(scatter_add_launch, its own memsets included; it replays a CUDA graph of its own launches when the same pointers
repeat), torch (state.index_add_(0, index, src), plus
torch.bincount(index, minlength=N) with counts) and TMA rows (benchmarks/tma_rows.py: each edge's row added into its
node by the bulk-copy unit; sm_90+, rows of a multiple of 16 bytes, else "-"; + bincount with counts). Then, like
for like with a captured engine (trtexec 11.x captures an engine's execution into a CUDA graph by default; any
captured deployment does the same): AOT captured, the same AOT chain (each input set's launches) captured once
into a CUDA graph and replayed with one cuGraphLaunch per call (plugin.cuda_graph.CapturedGraph), and torch
captured, torch's call captured with torch.cuda.CUDAGraph and replayed: index_add_, and with counts the counts
zeroed and each edge's 1 added with index_add_ (the same counts as torch.bincount, which reads the index's min
and max back to the host and so cannot be captured). Both captured on main()'s created stream, each after a first
run outside the capture (gpu_timing.captured). Then the per-step table of bench_aot.py's cells (F = 1, no counts,
a new batch of B edges per step into N nodes) for AOT, Python and torch, launched plainly. Device time: CUDA events
after warm-up, median of many runs (benchmarks/gpu_timing.py), fresh random inputs (standard normal values, uniform
targets) rotating over several sets where they would stay in L2. Each AOT and TMA rows cell is checked once against
float64 (torch) where E F <= 2^25, the AOT chain at every tactic (TMA rows within tma_rows.error_bound: it rounds
every edge in float16). Prints two markdown tables; with --out writes them (bench_aot_cells.md) and the cells' CSV
(aot_cells.csv: device, dtype, N, E, F, counts, aot_ms, python_ms, torch_ms, tma_ms, aot_graph_ms, torch_graph_ms;
tma_ms blank where TMA rows does not apply; aot_graph_ms and torch_graph_ms the captured columns). --tactics also
prints each tactic's time, launched plainly (tactic 0 is the rule's choice), after the cells (in
bench_aot_cells.md). --floor also times the launch floor (empty_launches_ms: k empty launches back to back, plain
and captured) and prints it after the cells.
"""

import csv
import sys
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.arguments import ArgumentParser, dtype_names  # noqa: E402
from benchmarks.bench_scatter_add import FULL_SIZES, QUICK_SIZES, SMALL_BYTES, floor_bytes, parse_sizes  # noqa: E402
from benchmarks.gpu_timing import (  # noqa: E402
    captured,
    device_name,
    ours,
    print_and_save,
    require_torch_gpu,
    time_gpu_ms,
)

STEP_NODES = [10**3, 10**4, 10**5, 10**6, 10**7, 10**8]
STEP_BATCHES = [10**4, 10**6]
STEP_SETS = 8
CHECK_MAX_VALUES = 2**25
CSV_COLUMNS = ("device", "dtype", "N", "E", "F", "counts", "aot_ms", "python_ms", "torch_ms", "tma_ms",
               "aot_graph_ms", "torch_graph_ms")


def chain_name(chain: Any) -> str:
    """The chain's steps' kernels, e.g. 'scatter_table+apply_table'; the sorted chain as 'sorted, P place', the
    pair chunks as 'pair chunks, K'."""
    names = [step.kernel({}).name.removeprefix("aot_") for step in chain.steps]
    if names[0] == "sort_count":
        return f"sorted, {names.count('sort_place')} place" + (", wide" if "sort_reduce_wide" in names else "")
    if names[0] == "scatter_pair_chunk":
        return f"pair chunks, {names.count('scatter_pair_chunk')}"
    return "+".join(names)


MODES = {0: "", 1: " shared", 2: " chunked"}  # scatter_add.cu AOT_ATOMICS, AOT_SHARED, AOT_CHUNKED
MODE_KERNELS = ("aot_scatter_state", "aot_scatter_table", "aot_scatter_pairs")  # their last extra argument: the mode


def tactic_step(chain: Any) -> Any:
    """The chain's step that offers tactics (its scatter step), or None."""
    return next((step for step in chain.steps if step.tactics({})), None)


def cell_chain(state: Any, num_edges: int, with_counts: bool) -> Any:
    """The chain an engine built for this cell holds: N and F constant (the state's), E the profile's maximum."""
    import torch

    from inplace.spec import BuildFacts
    from plugin.scatter_add_op import scatter_add_for

    dtype = "float32" if state.dtype == torch.float32 else "float16"
    num_nodes, num_features = state.shape
    return scatter_add_for(with_counts).chain_for(BuildFacts({"state": dtype, "src": dtype},
                                                             {"N": num_nodes, "F": num_features}, {"E": num_edges}))


def tactics_of(chain: Any) -> range:
    """The tactics TensorRT may keep for a chain: 0, and those its scatter step offers (tactic_step)."""
    step = tactic_step(chain)
    return range(1 + (len(step.tactics({})) if step is not None else 0))


def built_cell(state: Any, inputs: list[tuple[Any, Any]], with_counts: bool, **timing: Any) -> tuple[Any, list[float]]:
    """The AotCell an engine built for these sizes runs: every tactic of its scatter step timed at them (plain
    launches, time_gpu_ms with `timing`), as TensorRT's autotuning does, and the fastest kept. Returns (that cell,
    the device ms of tactics 0, 1, ...)."""
    fastest, times = None, []
    for tactic in tactics_of(cell_chain(state, inputs[0][1].shape[0], with_counts)):
        cell = AotCell(state, inputs, with_counts, tactic)
        times.append(time_gpu_ms(cell, **timing))
        if fastest is None or times[-1] < min(times[:-1]):
            fastest = cell
    return fastest, times


class AotCell:
    """The AOT chain for one cell's profile, prepared per input set as TensorRT prepares its plugins' launches."""

    def __init__(self, state: Any, inputs: list[tuple[Any, Any]], with_counts: bool, tactic: int = 0) -> None:
        import torch

        from inplace.launch import PreparedChain, scratch_bytes
        from plugin.scatter_add_op import scatter_add_for

        num_nodes, num_features = state.shape
        num_edges = inputs[0][1].shape[0]
        dtype = "float32" if state.dtype == torch.float32 else "float16"
        self.op = scatter_add_for(with_counts)
        self.chain = cell_chain(state, num_edges, with_counts)
        self.sizes = {"N": num_nodes, "E": num_edges, "F": num_features}
        self.scratch = {name: torch.empty(max(nbytes, 1), dtype=torch.uint8, device="cuda")
                        for name, nbytes in scratch_bytes(self.chain, self.sizes).items()}
        stream = torch.cuda.current_stream().cuda_stream
        step = tactic_step(self.chain)
        tactics = {step.plugin: tactic} if step is not None and tactic else None
        self.launches = []
        for src, index in inputs:
            pointers = {"state": state.data_ptr(), "src": src.data_ptr(), "index": index.data_ptr(),
                        **{name: tensor.data_ptr() for name, tensor in self.scratch.items()}}
            self.launches.append(PreparedChain(self.op, self.chain, {"state": dtype, "src": dtype}, pointers,
                                               self.sizes, stream, tactics))
        self.mode = max((kernel.launch.extra_args[-1].evaluate(self.sizes) for kernel in self.launches[0].kernels
                         if kernel.name.startswith(MODE_KERNELS)), default=0)
        self.tactic = tactic

    def __call__(self, i: int) -> None:
        self.launches[i]()

    def describe(self) -> str:
        return chain_name(self.chain) + MODES[self.mode] + (f", tactic {self.tactic}" if self.tactic else "")

    def counts(self) -> Any:
        import torch

        return self.scratch["counts"].view(torch.int64)[: self.sizes["N"]]


def check_cell(state: Any, src: Any, index: Any, with_counts: bool) -> str:
    """Runs the AOT chain once per tactic TensorRT may keep (tactics_of), each on a copy of the state, and returns
    the largest relative error against float64 (raising where one is over the bound or the counts are not exact)."""
    import torch

    expected = state.double().index_add_(0, index, src.double())
    bound = 1e-5 if state.dtype == torch.float32 else 2e-3
    worst = 0.0
    for tactic in tactics_of(cell_chain(state, len(index), with_counts)):
        copy = state.clone()
        cell = AotCell(copy, [(src, index)], with_counts, tactic)
        cell(0)
        torch.cuda.synchronize()
        error = ((copy.double() - expected).norm() / expected.norm().clamp_min(1e-30)).item()
        where = f"at N={state.shape[0]}, E={len(index)}, tactic {tactic}"
        if with_counts and not torch.equal(cell.counts().view(-1), torch.bincount(index, minlength=state.shape[0])):
            raise AssertionError(f"AOT counts differ from torch.bincount {where}")
        if not error <= bound:
            raise AssertionError(f"AOT relative error {error:.3g} > {bound} {where}")
        worst = max(worst, error)
    return f"{worst:.1e}"


def cell_row(num_nodes: int, num_edges: int, num_features: int, dtype_name: str, with_counts: bool) -> dict:
    import torch

    from benchmarks.bench_scatter_add import make_inputs
    from plugin.kernels import scatter_add_workspace_size
    from plugin.kernels.plan import describe

    dtype = getattr(torch, dtype_name)
    itemsize = torch.tensor([], dtype=dtype).element_size()
    sets = 4 if floor_bytes(num_nodes, num_edges, num_features, itemsize) < SMALL_BYTES else 1
    state, inputs = make_inputs(num_nodes, num_edges, num_features, dtype, sets)
    row: dict[str, Any] = dict(dtype=dtype_name, N=num_nodes, E=num_edges, F=num_features, counts=with_counts)
    row["check"] = (check_cell(state, *inputs[0], with_counts) if num_edges * num_features <= CHECK_MAX_VALUES
                    else "")
    aot, row["tactic_ms"] = built_cell(state, inputs, with_counts, sets=sets)
    row["tactic"] = aot.tactic
    row["aot_plan"] = aot.describe()
    row["aot_ms"] = min(row["tactic_ms"])
    with captured(aot.launches) as replay:  # each input set's chain: one graph launch per call
        row["aot_graph_ms"] = time_gpu_ms(replay, sets=sets)
    del aot
    counts = torch.empty(num_nodes, 1, device="cuda", dtype=torch.int64) if with_counts else None
    size = scatter_add_workspace_size(num_nodes, num_edges, num_features, dtype_name, with_counts=with_counts)
    workspace = torch.empty(size, device="cuda", dtype=torch.uint8) if size else None
    row["python_plan"] = describe(ours(state, *inputs[0], counts, workspace)())
    launches = [ours(state, src, index, counts, workspace) for src, index in inputs]
    row["python_ms"] = time_gpu_ms(lambda i: launches[i](), sets=sets)
    del launches, workspace

    def torch_call(i: int) -> None:
        src, index = inputs[i]
        state.index_add_(0, index, src)
        if with_counts:
            torch.bincount(index, minlength=num_nodes)

    row["torch_ms"] = time_gpu_ms(torch_call, sets=sets)
    # torch.bincount reads the index's min and max back to the host (a synchronisation, not capturable): captured,
    # the counts are zeroed and each edge's 1 added with index_add_, the same counts without a host read
    ones = torch.ones(num_edges, device="cuda", dtype=torch.int64) if with_counts else None
    torch_counts = torch.empty(num_nodes, device="cuda", dtype=torch.int64) if with_counts else None
    calls = [partial(torch_capturable, state, src, index, torch_counts, ones) for src, index in inputs]
    with captured(calls, torch_ops=True) as replay:
        row["torch_graph_ms"] = time_gpu_ms(replay, sets=sets)
    del calls, ones, torch_counts
    row["tma_ms"], row["tma_check"] = tma_cell(state, inputs, with_counts, sets)
    del state, inputs, counts
    torch.cuda.empty_cache()
    return row


def torch_capturable(state: Any, src: Any, index: Any, counts: Any, ones: Any) -> None:
    """torch's scatter-add as it can be captured: index_add_, and with counts (counts not None) the counts zeroed
    and each edge's 1 (ones, int64 [E]) added with index_add_: torch.bincount's counts without its host reads."""
    state.index_add_(0, index, src)
    if counts is not None:
        counts.zero_()
        counts.index_add_(0, index, ones)


def tma_cell(state: Any, inputs: list[tuple[Any, Any]], with_counts: bool, sets: int) -> tuple[float | None, str]:
    """(ms, check) of the TMA rows baseline (benchmarks/tma_rows.py) on this cell, + torch.bincount with counts,
    as the torch column; (None, "") where it does not apply: a row not a multiple of 16 bytes, or below sm_90."""
    import torch

    from benchmarks import tma_rows

    num_nodes, num_features = state.shape
    dtype_name = "float32" if state.dtype == torch.float32 else "float16"
    pointers = (state.data_ptr(), *(src.data_ptr() for src, _ in inputs))
    if not tma_rows.applies(num_features, dtype_name, *pointers) or not tma_rows.supported():
        return None, ""
    src, index = inputs[0]
    check = (tma_rows.check_tma_rows(state, src, index) if index.shape[0] * num_features <= CHECK_MAX_VALUES
             else "")
    kernel = tma_rows.TmaRows(state, inputs)

    def call(i: int) -> None:
        kernel(i)
        if with_counts:
            torch.bincount(inputs[i][1], minlength=num_nodes)

    return time_gpu_ms(call, sets=sets), check


def step_row(num_nodes: int, batch: int, dtype_name: str) -> dict:
    """One step of B edges into N nodes (F = 1, no counts), as bench_aot.py's cells."""
    import torch

    from plugin.kernels import scatter_add_workspace_size

    dtype = getattr(torch, dtype_name)
    state = torch.randn(num_nodes, 1, device="cuda", dtype=dtype)
    batches = [(torch.randn(batch, 1, device="cuda", dtype=dtype),
                torch.randint(0, num_nodes, (batch,), device="cuda", dtype=torch.int64)) for _ in range(STEP_SETS)]
    timing = dict(sets=STEP_SETS, min_reps=50, max_reps=200)
    aot, tactic_ms = built_cell(state, batches, False, **timing)
    size = scatter_add_workspace_size(num_nodes, batch, 1, dtype_name, with_counts=False)
    workspace = torch.empty(size, device="cuda", dtype=torch.uint8) if size else None
    python = [ours(state, src, index, None, workspace) for src, index in batches]
    row = dict(dtype=dtype_name, N=num_nodes, B=batch, aot_plan=aot.describe())
    row["aot_ms"] = min(tactic_ms)
    row["python_ms"] = time_gpu_ms(lambda i: python[i](), **timing)
    row["torch_ms"] = time_gpu_ms(lambda i: state.index_add_(0, batches[i][1], batches[i][0]), **timing)
    del state, batches, aot, python, workspace
    torch.cuda.empty_cache()
    return row


def exp10(n: int) -> str:
    return f"{n:.0e}".replace("e+0", "e")


def cells_table(rows: list[dict], device: str) -> list[str]:
    lines = [f"{device}: the kernel table's cells, device ms (median); AOT = the family's AOT chain via "
             "inplace/launch.py, its launches issued one by one, Python = scatter_add_launch's plan (which replays a "
             "CUDA graph of its own launches), torch = index_add_ (+ bincount with counts), "
             "TMA rows = benchmarks/tma_rows.py, each edge's row added by cp.reduce.async.bulk (sm_90; rounds every "
             "edge in float16: an anchor for speed; + bincount with counts; - where F * itemsize % 16 != 0 or below "
             "sm_90); captured = each input set's call captured once into a CUDA graph and replayed with one launch, "
             "as trtexec 11.x (by default) and a captured deployment run an engine: AOT captured = the same AOT chain, "
             "torch captured = index_add_ (+ with counts: the counts zeroed and index_add_ of ones, as torch.bincount "
             "reads the index back to the host and cannot be captured)", "",
             "| dtype | N | E | F | counts | AOT chain | AOT | Python plan | Python | torch | TMA rows | AOT captured | "
             "torch captured | AOT / Python | AOT / torch | AOT captured / Python | AOT captured / torch captured | "
             "AOT check | TMA check |", "|" + " --- |" * 19]
    for r in rows:
        tma = r.get("tma_ms")
        lines.append(f"| {r['dtype']} | {exp10(r['N'])} | {exp10(r['E'])} | {r['F']} | {'yes' if r['counts'] else 'no'} "
                     f"| {r['aot_plan']} | {r['aot_ms']:.4f} | {r['python_plan']} | {r['python_ms']:.4f} | "
                     f"{r['torch_ms']:.4f} | {'-' if tma is None else f'{tma:.4f}'} | {r['aot_graph_ms']:.4f} | "
                     f"{r['torch_graph_ms']:.4f} | {r['aot_ms'] / r['python_ms']:.2f} | "
                     f"{r['aot_ms'] / r['torch_ms']:.2f} | {r['aot_graph_ms'] / r['python_ms']:.2f} | "
                     f"{r['aot_graph_ms'] / r['torch_graph_ms']:.2f} | {r['check']} | {r.get('tma_check') or '-'} |")
    within = sum(r["aot_ms"] <= 1.25 * r["python_ms"] for r in rows)
    below = sum(r["aot_ms"] <= r["torch_ms"] for r in rows)
    captured_within = sum(r["aot_graph_ms"] <= 1.25 * r["python_ms"] for r in rows)
    captured_below = sum(r["aot_graph_ms"] <= r["torch_graph_ms"] for r in rows)
    lines += ["", f"AOT within 1.25x of the Python plugin's plan: {within} of {len(rows)}; at or below torch: "
              f"{below} of {len(rows)}; captured: within 1.25x of the Python plugin's plan: {captured_within} of "
              f"{len(rows)}; at or below captured torch: {captured_below} of {len(rows)}"]
    return lines


def csv_row(r: dict, device: str) -> list[Any]:
    """One cell's row of aot_cells.csv, in CSV_COLUMNS' order (tma_ms blank where TMA rows does not apply)."""
    return [device, r["dtype"], r["N"], r["E"], r["F"], int(r["counts"]), f"{r['aot_ms']:.5f}",
            f"{r['python_ms']:.5f}", f"{r['torch_ms']:.5f}", "" if r.get("tma_ms") is None else f"{r['tma_ms']:.5f}",
            f"{r['aot_graph_ms']:.5f}", f"{r['torch_graph_ms']:.5f}"]


def write_csv(path: Path, rows: list[dict], device: str) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        writer.writerows(csv_row(r, device) for r in rows)


def tactics_table(rows: list[dict], device: str) -> list[str]:
    """The cells whose chain has a step with tactics: its time under each (plugin/scatter_add_op.py
    SCATTER_TACTICS), the rule's choice first."""
    from plugin.scatter_add_op import SCATTER_TACTICS

    lines = [f"{device}: the AOT chain with its scatter step's tactics forced, device ms (median)", "",
             "| dtype | N | E | F | counts | AOT chain | 0: rule | " + " | ".join(
                 f"{k}: {name}" for k, name in enumerate(SCATTER_TACTICS, 1)) + " | best |",
             "|" + " --- |" * (8 + len(SCATTER_TACTICS))]
    for r in rows:
        if len(r["tactic_ms"]) > 1:
            lines.append(f"| {r['dtype']} | {exp10(r['N'])} | {exp10(r['E'])} | {r['F']} | "
                         f"{'yes' if r['counts'] else 'no'} | {r['aot_plan']} | "
                         + " | ".join(f"{t:.4f}" for t in r["tactic_ms"]) + f" | {r['tactic']} |")
    return lines


def steps_table(rows: list[dict], device: str) -> list[str]:
    nodes = sorted({r["N"] for r in rows})
    lines = [f"{device}: per step, device us (median), F = 1, no counts, a new batch of B edges per step", "",
             "| dtype | B | method | " + " | ".join(f"N = {exp10(n)}" for n in nodes) + " |",
             "|" + " --- |" * (3 + len(nodes))]
    for dtype in ("float32", "float16"):
        for batch in sorted({r["B"] for r in rows}):
            selected = [r for r in rows if r["dtype"] == dtype and r["B"] == batch]
            if not selected:
                continue
            for key, label in (("aot", "AOT chain"), ("python", "Python plugin's plan"), ("torch", "torch index_add_")):
                cells = " | ".join(f"{r[key + '_ms'] * 1e3:.1f}" for r in selected)
                lines.append(f"| {dtype} | {exp10(batch)} | {label} | {cells} |")
            lines.append(f"| {dtype} | {exp10(batch)} | AOT chain taken | "
                         + " | ".join(r["aot_plan"] for r in selected) + " |")
    return lines


FLOOR_LAUNCHES = (1, 2, 3, 4)
EMPTY_KERNEL = 'extern "C" __global__ void empty_kernel() {}\n'


def empty_launches_ms(counts: tuple[int, ...] = FLOOR_LAUNCHES) -> list[dict]:
    """The launch floor: for each k of `counts`, the device ms of k launches of an empty kernel (one warp) back to
    back on the current stream, as plain launches and captured into one CUDA graph: what any chain of k operations
    (fills and kernels) costs doing nothing. One rounding per node in float16 needs at least three (zeroed memory,
    and a kernel that sums before the one that rounds: an AOT plugin gets no grid barrier)."""
    import tempfile

    import torch

    from common.nvrtc import compile_engine_ptx
    from inplace.launch import PreparedKernel, load_function

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "empty_kernel.cu"
        path.write_text(EMPTY_KERNEL)
        function = load_function(compile_engine_ptx(path), "empty_kernel")
    stream = torch.cuda.current_stream().cuda_stream
    rows = []
    for count in counts:
        launches = [PreparedKernel(function, (1, 1, 1), (32, 1, 1), 0, (), (), stream, "empty_kernel")
                    for _ in range(count)]

        def run_all(launches: list[Any] = launches) -> None:
            for launch in launches:
                launch()

        row = {"launches": count, "plain_ms": time_gpu_ms(lambda i: run_all(), min_reps=50, max_reps=200)}
        with captured([run_all]) as replay:
            row["graph_ms"] = time_gpu_ms(replay, min_reps=50, max_reps=200)
        rows.append(row)
    return rows


def floor_table(rows: list[dict], device: str) -> list[str]:
    lines = [f"{device}: the launch floor, device us (median): k empty launches back to back (empty_launches_ms)", "",
             "| launches | plain | captured |", "| --- | --- | --- |"]
    lines += [f"| {r['launches']} | {r['plain_ms'] * 1e3:.2f} | {r['graph_ms'] * 1e3:.2f} |" for r in rows]
    return lines


def main() -> int:
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="folder for bench_aot_cells.md and aot_cells.csv")
    parser.add_argument("--quick", action="store_true", help="bench_scatter_add.py's quick sizes, B = 1e4 steps")
    parser.add_argument("--sizes", type=parse_sizes, help="N:E:F,... instead of the kernel table's sizes")
    parser.add_argument("--dtypes", type=dtype_names, default=["float32", "float16"])
    parser.add_argument("--counts", choices=("yes", "no", "both"), default="both", help="cells with counts, "
                        "without, or both")
    parser.add_argument("--tactics", action="store_true", help="also print each tactic's time of the scatter steps")
    parser.add_argument("--no-steps", action="store_true", help="leave out the per-step table")
    parser.add_argument("--floor", action="store_true", help="also time the launch floor (empty_launches_ms)")
    args = parser.parse_args()
    require_torch_gpu("bench_aot_cells.py")
    import torch

    torch.zeros(1, device="cuda")  # the primary context, shared with the driver API
    device = device_name()
    sizes = args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES)
    rows = []
    with torch.cuda.stream(torch.cuda.Stream()):
        for dtype in args.dtypes:
            for with_counts in {"no": (False,), "yes": (True,), "both": (False, True)}[args.counts]:
                for num_nodes, num_edges, num_features in sizes:
                    row = cell_row(num_nodes, num_edges, num_features, dtype, with_counts)
                    rows.append(row)
                    print(f"{dtype} {num_nodes}/{num_edges}/{num_features} counts={with_counts}: AOT "
                          f"{row['aot_ms']:.4f} ({row['aot_plan']}), Python {row['python_ms']:.4f} "
                          f"({row['python_plan']}), torch {row['torch_ms']:.4f}"
                          + ("" if row["tma_ms"] is None else f", TMA rows {row['tma_ms']:.4f}")
                          + "".join(f", tactic {k} {t:.4f}" for k, t in enumerate(row["tactic_ms"]) if k)
                          + f"; captured: AOT {row['aot_graph_ms']:.4f}, torch {row['torch_graph_ms']:.4f}",
                          file=sys.stderr, flush=True)
        steps = []
        if not args.no_steps:
            for dtype in args.dtypes:
                for batch in ([10**4] if args.quick else STEP_BATCHES):
                    for num_nodes in STEP_NODES:
                        steps.append(step_row(num_nodes, batch, dtype))
        floor = empty_launches_ms() if args.floor else []
    text = cells_table(rows, device)
    if floor:
        text += [""] + floor_table(floor, device)
    if args.tactics:
        text += [""] + tactics_table(rows, device)
    if steps:
        text += [""] + steps_table(steps, device)
    print_and_save("\n".join(text), args.out, "bench_aot_cells.md")
    if args.out:
        write_csv(args.out / "aot_cells.csv", rows, device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
