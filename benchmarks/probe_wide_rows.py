"""Probe (issue 26 item 3): wide rows (F = 64, float32, with counts) into N = 1e6 nodes with Hopper's bulk reduce.

    python3 benchmarks/probe_wide_rows.py [--out DIR] [--edges 1e6 1e7]

Device time (CUDA events after warm-up, median, inputs rotating over 2 sets) of torch index_add_ + bincount,
PyG's scatter + bincount (where torch_geometric is installed), the shipped plan (scatter_add_launch, auto: the
sorted path), the global-atomics plan, and bulk_reduce_rows (benchmarks/probe_wide_rows.cu: a memset of the
counts, then one cp.reduce.async.bulk per row) with 1 and 4 rows per warp round; beside the bandwidth floor of
bench_scatter_add.py. Each candidate is first checked against float64 (counts exact). sm_90+ only.
"""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.arguments import ArgumentParser  # noqa: E402
from benchmarks.gpu_timing import device_name, ours, print_and_save, require_torch_gpu, time_gpu_ms  # noqa: E402

SOURCE = Path(__file__).resolve().parent / "probe_wide_rows.cu"
TIMING = dict(sets=2, min_reps=10, max_reps=40, budget_s=0.3)


def load(unroll: int):
    from cuda.bindings import driver

    from plugin.cuda_check import check
    from plugin.kernels.compile import nvrtc_compile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "probe_wide_rows.cu"
        path.write_text(SOURCE.read_text())
        cubin, _ = nvrtc_compile(path, [b"--gpu-architecture=sm_90", b"--std=c++17", f"-DUNROLL={unroll}".encode()])
    module = check(driver.cuModuleLoadData(cubin))
    return module, check(driver.cuModuleGetFunction(module, b"bulk_reduce_rows"))


def rows(num_nodes: int, num_edges: int, bandwidth: float) -> list[str]:
    import ctypes

    import torch
    from cuda.bindings import driver

    from plugin.cuda_check import check
    from plugin.kernels import scatter_add_workspace_size

    features = 64
    state = torch.randn(num_nodes, features, device="cuda")
    sets = [(torch.randn(num_edges, features, device="cuda"),
             torch.randint(0, num_nodes, (num_edges,), device="cuda", dtype=torch.int64)) for _ in range(2)]
    counts = torch.zeros(num_nodes, device="cuda", dtype=torch.int64)
    floor_ms = (num_edges * (8 + features * 4) + num_nodes * (2 * features * 4 + 8)) / bandwidth * 1e3

    def check_once(step) -> str:
        before = state.clone()
        counts.fill_(-1)
        step(0)
        torch.cuda.synchronize()
        src, index = sets[0]
        want = before.double().index_add(0, index, src.double())
        scale = (before.double().abs() + torch.zeros_like(want).index_add(0, index, src.double().abs())).max()
        error = float((state.double() - want).abs().max() / scale)
        exact = bool(torch.equal(counts, torch.bincount(index, minlength=num_nodes)))
        return f"max error {error:.1e} of the largest |sum|, counts {'exact' if exact else 'WRONG'}"

    lines = []

    def row(label: str, step, verdict: str = "") -> None:
        ms = time_gpu_ms(step, **TIMING)
        line = (f"| {num_nodes:.0e} | {num_edges:.0e} | {label} | {ms:.4f} | {100 * floor_ms / ms:.0f}% | {verdict} |")
        print(line, flush=True)
        lines.append(line)

    row("torch index_add_ + bincount", lambda i: (state.index_add_(0, sets[i][1], sets[i][0]),
                                                  torch.bincount(sets[i][1], minlength=num_nodes)))
    try:
        from torch_geometric.utils import scatter

        row("PyG scatter + bincount", lambda i: (scatter(sets[i][0], sets[i][1], 0, dim_size=num_nodes, reduce="sum"),
                                                 torch.bincount(sets[i][1], minlength=num_nodes)))
    except ImportError:
        pass
    size = scatter_add_workspace_size(num_nodes, num_edges, features, "float32", with_counts=True)
    workspace = torch.empty(max(size, 1), device="cuda", dtype=torch.uint8)
    for algorithm in ("auto", "global"):
        steps = [ours(state, s, i, counts, workspace, algorithm=algorithm) for s, i in sets]
        plan = steps[0]()
        row(f"ours {algorithm} ({plan.algorithm})", lambda i: steps[i](), check_once(lambda i: steps[i]()))
    stream = driver.CUstream(torch.cuda.current_stream().cuda_stream)
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    for unroll in (1, 4):
        _, function = load(unroll)
        blocks = min(sm * 8, -(-num_edges // (8 * unroll)))
        args = [((s.data_ptr(), i.data_ptr(), num_edges, num_nodes, state.data_ptr(), counts.data_ptr()),
                 (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p))
                for s, i in sets]

        def step(i: int, function=function, blocks=blocks) -> None:
            check(driver.cuMemsetD32Async(driver.CUdeviceptr(counts.data_ptr()), 0, 2 * num_nodes, stream))
            check(driver.cuLaunchKernel(function, blocks, 1, 1, 256, 1, 1, 0, stream, args[i], 0))

        row(f"bulk reduce, {unroll} row(s) per warp round, {blocks} blocks", step, check_once(step))
    return lines


def main() -> int:
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--edges", type=float, nargs="+", default=[1e6, 1e7])
    args = parser.parse_args()
    require_torch_gpu("probe_wide_rows.py")
    import torch

    from benchmarks.gpu_timing import copy_bandwidth_bytes_per_s
    from plugin.kernels.launch import current_context

    torch.zeros(1, device="cuda")
    current_context()
    bandwidth = copy_bandwidth_bytes_per_s()
    lines = [f"{device_name()}, {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, copy bandwidth "
             f"{bandwidth / 1e12:.2f} TB/s", "", "| N | E | method | ms | % of floor | check |",
             "| --- | --- | --- | --- | --- | --- |"]
    for edges in args.edges:
        lines += rows(10**6, int(edges), bandwidth)
    print_and_save("\n".join(lines), args.out, "probe_wide_rows.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
