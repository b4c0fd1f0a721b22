"""Probe (issue 26): float16 small updates' candidate kernels, and what one synchronised step costs, in one process.

    python3 benchmarks/probe_float16_small.py [--out DIR] [--kernels] [--large-batch] [--latency] [--nodes ...]

--kernels: per-step device time (CUDA events after warm-up, median, 8 rotating random batches) of torch
index_add_, the shipped plans (auto, the table path "global", owned) and the one-launch kernels launched directly
with cuLaunchKernel (owned on one block per SM; clustered in clusters of 8 with 1024 or 512 threads, the latter
compiled from a patched copy of scatter_add.cu), F = 1, B = 1e4 and 2^15; each first checked against float64
(one rounding per node: docs/kernel.md's bound). --large-batch adds B = 1e6 (auto, the table path, partitioned).
--latency: one step at a time, the rows interleaved (gpu_timing.one_step_us_interleaved; CUDA events recorded
after a synchronisation, and the wall clock around call + synchronisation): torch, scatter_add_launch with
data_ptr() and torch.cuda.current_stream() read in each call, with only data_ptr() per call, with both read
once, PreparedScatterAdd with and without graph replay, and the AOT kernels launched by run_aot_scatter_add and
by PreparedAotLaunch. Measurements: plugin/kernels/NOTES.md "Issue 26".
"""

import ctypes
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.arguments import ArgumentParser, positive_int  # noqa: E402
from benchmarks.gpu_timing import (  # noqa: E402
    device_name, one_step_us_interleaved, print_and_save, require_torch_gpu, time_gpu_ms)

ROTATION = 8
TIMING = dict(sets=ROTATION, min_reps=30, max_reps=100, budget_s=0.15)
VOID, I64, I32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32


_CUBINS: dict = {}


def load_variant(patches: list[tuple[str, str]], dtype: str) -> dict:
    """{name: CUfunction} of scatter_add.cu with textual patches, compiled for this device and loaded."""
    from cuda.bindings import driver

    from plugin.cuda_check import check
    from plugin.kernels.compile import SOURCE_PATH, compile_options, nvrtc_compile, nvrtc_supported_archs, pick_arch
    from plugin.kernels.launch import read_device_info

    text = SOURCE_PATH.read_text()
    for old, new in patches:
        assert old in text, old
        text = text.replace(old, new)
    device = read_device_info()
    cubin = _CUBINS.get((text, dtype))
    if cubin is None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "scatter_add.cu"
            path.write_text(text)
            cubin, _ = nvrtc_compile(path, compile_options(pick_arch(device.arch, nvrtc_supported_archs()), dtype))
        _CUBINS[(text, dtype)] = cubin
    module = check(driver.cuModuleLoadData(cubin))
    functions = {}
    for name in ("scatter_owned", "scatter_clustered"):
        functions[name] = check(driver.cuModuleGetFunction(module, name.encode()))
    functions["_module"] = module
    return functions


def owned_launcher(function, blocks: int, threads: int, state, src, index, num_nodes: int, capacity: int):
    from cuda.bindings import driver

    from plugin.cuda_check import check
    from plugin.kernels.plan import OWNED_MAX_PROBES, owned_shared_bytes

    import torch

    stream = driver.CUstream(torch.cuda.current_stream().cuda_stream)
    args = ((src.data_ptr(), index.data_ptr(), index.shape[0], num_nodes, 1, capacity,
             min(capacity, OWNED_MAX_PROBES), state.data_ptr(), 0), (VOID, VOID, I64, I64, I32, I32, I32, VOID, VOID))
    shared = owned_shared_bytes(capacity, 1)

    def launch() -> None:
        check(driver.cuLaunchKernel(function, blocks, 1, 1, threads, 1, 1, shared, stream, args, 0))

    return launch


def one_rounding_ok(before, after, src, index) -> str:
    """'ok' or what failed: every node within 2^-11 |r| + d 2^-24 (|r| + sum |x|) + 2^-25 of the float64 sum."""
    import torch

    r = before.double().index_add(0, index, src.double())
    d = torch.bincount(index, minlength=before.shape[0]).double().unsqueeze(1)
    mag = torch.zeros_like(r).index_add(0, index, src.double().abs())
    bound = 2.0**-11 * r.abs() + d * 2.0**-24 * (r.abs() + mag) + 2.0**-25
    err = (after.double() - r).abs()
    bad = int((err > bound).sum())
    untouched = d == 0
    changed = int(((after != before) & untouched).sum())
    return "ok" if bad == 0 and changed == 0 else f"FAIL: {bad} nodes out of bound, {changed} untouched changed"


def kernel_rows(batch: int, num_nodes: int, variants: dict) -> list[tuple[str, float, str]]:
    import torch

    from plugin.kernels import scatter_add_workspace_size
    from benchmarks.gpu_timing import ours
    from plugin.kernels.launch import read_device_info
    from plugin.kernels.plan import CLUSTER_MAX_SHARED, owned_table

    torch.manual_seed(batch + num_nodes)
    state = torch.randn(num_nodes, 1, device="cuda", dtype=torch.float16)
    batches = [(torch.randn(batch, 1, device="cuda", dtype=torch.float16),
                torch.randint(0, num_nodes, (batch,), device="cuda", dtype=torch.int64)) for _ in range(ROTATION)]
    rows = [("torch index_add_", time_gpu_ms(lambda i: state.index_add_(0, batches[i][1], batches[i][0]), **TIMING), "")]
    for algorithm in ("auto", "global", "owned"):  # global: the table path of before (memsets, windowed kernel)
        size = scatter_add_workspace_size(num_nodes, batch, 1, "float16", with_counts=False, algorithm=algorithm)
        workspace = torch.empty(max(size, 1), device="cuda", dtype=torch.uint8)
        steps = [ours(state, s, i, None, workspace, algorithm=algorithm) for s, i in batches]
        before = state.clone()
        steps[0]()
        torch.cuda.synchronize()
        check = one_rounding_ok(before, state, *batches[0])
        rows.append((f"shipped {algorithm} (scatter_add_launch)", time_gpu_ms(lambda i: steps[i](), **TIMING), check))
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    for label, (functions, name, blocks, threads) in variants.items():
        blocks = sm if blocks == "sm" else blocks
        device = read_device_info()
        if name == "scatter_clustered":
            device = dataclasses.replace(device, max_shared_per_block=CLUSTER_MAX_SHARED)
        capacity = owned_table(-(-batch // blocks), 1, device).capacity
        launches = [owned_launcher(functions[name], blocks, threads, state, s, i, num_nodes, capacity)
                    for s, i in batches]
        try:
            before = state.clone()
            launches[0]()
            torch.cuda.synchronize()
            check = one_rounding_ok(before, state, *batches[0])
            ms = time_gpu_ms(lambda i: launches[i](), **TIMING)
        except Exception as error:  # a variant that cannot run here is reported
            ms, check = float("nan"), f"failed: {type(error).__name__}: {error}"[:160]
        rows.append((label, ms, check))
    del state, batches
    torch.cuda.empty_cache()
    return rows


def kernels(args) -> list[str]:
    import torch

    from plugin.kernels.launch import current_context

    torch.zeros(1, device="cuda")  # torch's primary context, current for the driver API too
    current_context()
    base = load_variant([], "float16")
    c512 = load_variant([("#define CLUSTER_THREADS 1024", "#define CLUSTER_THREADS 512"),
                         ("#define CLUSTER_LOADS 2 ", "#define CLUSTER_LOADS 4 ")], "float16")
    variants = {
        "owned, 132 blocks": (base, "scatter_owned", "sm", 1024),
        "clustered 1024 thr, 128 blocks": (base, "scatter_clustered", 128, 1024),
        "clustered 512 thr x 4 loads, 128 blocks": (c512, "scatter_clustered", 128, 512),
    }
    lines = ["| B | N | method | us | check |", "| --- | --- | --- | --- | --- |"]
    if args.large_batch:
        for num_nodes in (10**5, 10**6, 10**7):
            for label, ms, check in large_batch_rows(10**6, num_nodes):
                line = f"| 1e+06 | {num_nodes:.0e} | {label} | {ms * 1e3:.1f} | {check} |"
                lines.append(line)
                print(line, flush=True)
    for batch in args.batches:
        for num_nodes in args.nodes:
            for label, ms, check in kernel_rows(batch, num_nodes, variants):
                line = f"| {batch:.0e} | {num_nodes:.0e} | {label} | {ms * 1e3:.1f} | {check} |"
                lines.append(line)
                print(line, flush=True)
    return lines


def large_batch_rows(batch: int, num_nodes: int) -> list[tuple[str, float, str]]:
    """B = 1e6: torch, the shipped plan, the table path of before ("global") and the partitioned path."""
    import torch

    from benchmarks.gpu_timing import ours
    from plugin.kernels import scatter_add_workspace_size

    state = torch.randn(num_nodes, 1, device="cuda", dtype=torch.float16)
    batches = [(torch.randn(batch, 1, device="cuda", dtype=torch.float16),
                torch.randint(0, num_nodes, (batch,), device="cuda", dtype=torch.int64)) for _ in range(ROTATION)]
    rows = [("torch index_add_", time_gpu_ms(lambda i: state.index_add_(0, batches[i][1], batches[i][0]), **TIMING), "")]
    for algorithm in ("auto", "global", "partitioned"):
        size = scatter_add_workspace_size(num_nodes, batch, 1, "float16", with_counts=False, algorithm=algorithm)
        workspace = torch.empty(max(size, 1), device="cuda", dtype=torch.uint8)
        steps = [ours(state, s, i, None, workspace, algorithm=algorithm) for s, i in batches]
        before = state.clone()
        plan = steps[0]()
        torch.cuda.synchronize()
        check = one_rounding_ok(before, state, *batches[0])
        rows.append((f"shipped {algorithm} ({plan.algorithm})", time_gpu_ms(lambda i: steps[i](), **TIMING), check))
    del state, batches
    torch.cuda.empty_cache()
    return rows


def latency_rows(dtype_name: str, batch: int, num_nodes: int, aot_functions: dict) -> list[tuple[str, float, float]]:
    import torch

    from plugin.kernels import PreparedScatterAdd, scatter_add_launch, scatter_add_workspace_size
    from plugin.kernels.aot import PreparedAotLaunch, run_aot_scatter_add, table_capacity

    dtype = getattr(torch, dtype_name)
    half = dtype == torch.float16
    state = torch.randn(num_nodes, 1, device="cuda", dtype=dtype)
    batches = [(torch.randn(batch, 1, device="cuda", dtype=dtype),
                torch.randint(0, num_nodes, (batch,), device="cuda", dtype=torch.int64)) for _ in range(ROTATION)]
    size = scatter_add_workspace_size(num_nodes, batch, 1, dtype_name, with_counts=False)
    workspace = torch.empty(max(size, 1), device="cuda", dtype=torch.uint8)
    stream = torch.cuda.current_stream().cuda_stream

    def user(i: int) -> None:  # as a user calls it: pointers read in each call
        src, index = batches[i]
        scatter_add_launch(state=state.data_ptr(), src=src.data_ptr(), index=index.data_ptr(), counts=0,
                           num_nodes=num_nodes, num_edges=batch, num_features=1, dtype=dtype_name,
                           stream=torch.cuda.current_stream().cuda_stream, workspace=workspace.data_ptr(),
                           workspace_size=size)

    def prepared(replay: bool, algorithm: str = "auto"):
        launch = PreparedScatterAdd(num_nodes=num_nodes, num_edges=batch, num_features=1, dtype=dtype_name,
                                    with_counts=False, workspace_size=size, algorithm=algorithm)
        launch.graph_replay = replay
        ptrs = [(state.data_ptr(), s.data_ptr(), i.data_ptr(), 0, workspace.data_ptr(), stream) for s, i in batches]
        return lambda i: launch(*ptrs[i])

    def keyword(i: int, pointers=[(state.data_ptr(), s.data_ptr(), i.data_ptr()) for s, i in batches]) -> None:
        st, sr, ix = pointers[i]  # pointers and stream read once: the keyword entry's own cost
        scatter_add_launch(state=st, src=sr, index=ix, counts=0, num_nodes=num_nodes, num_edges=batch, num_features=1,
                           dtype=dtype_name, stream=stream, workspace=workspace.data_ptr(), workspace_size=size)

    def keyword_data_ptr(i: int) -> None:  # data_ptr() per call, the stream read once
        src, index = batches[i]
        scatter_add_launch(state=state.data_ptr(), src=src.data_ptr(), index=index.data_ptr(), counts=0,
                           num_nodes=num_nodes, num_edges=batch, num_features=1, dtype=dtype_name, stream=stream,
                           workspace=workspace.data_ptr(), workspace_size=size)

    rows = {"torch index_add_": lambda i: state.index_add_(0, batches[i][1], batches[i][0]),
            "scatter_add_launch (user: data_ptr() and current_stream() per call)": user,
            "scatter_add_launch, data_ptr() per call, stream read once": keyword_data_ptr,
            "scatter_add_launch, pointers and stream read once": keyword,
            "PreparedScatterAdd, graph replay": prepared(True),
            "PreparedScatterAdd, no graph replay": prepared(False)}
    capacity = table_capacity(batch)
    keys = torch.empty(capacity, device="cuda", dtype=torch.int32)
    values = torch.empty(capacity, 1, device="cuda", dtype=torch.float32)

    def aot(i: int) -> None:
        src, index = batches[i]
        pointers = {"state": state.data_ptr(), "src": src.data_ptr(), "index": index.data_ptr()}
        if half:
            pointers.update(keys=keys.data_ptr(), values=values.data_ptr())
        run_aot_scatter_add(aot_functions, half=half, pointers=pointers, num_nodes=num_nodes, num_edges=batch,
                            num_features=1, stream=stream)

    rows["AOT, run_aot_scatter_add"] = aot
    prepared_aot = []
    for src, index in batches:
        pointers = {"state": state.data_ptr(), "src": src.data_ptr(), "index": index.data_ptr()}
        if half:
            pointers.update(keys=keys.data_ptr(), values=values.data_ptr())
        prepared_aot.append(PreparedAotLaunch(aot_functions, half=half, pointers=pointers, num_nodes=num_nodes,
                                              num_edges=batch, num_features=1, stream=stream))
    rows["AOT, PreparedAotLaunch"] = lambda i: prepared_aot[i]()
    timed = one_step_us_interleaved(rows, sets=ROTATION, steps=300)
    out = [(label, *timed[label]) for label in rows]
    del state, batches, workspace, keys, values
    torch.cuda.empty_cache()
    return out


def latency(args) -> list[str]:
    import torch

    from plugin.kernels.aot import load_aot_functions

    torch.zeros(1, device="cuda")
    _, aot_functions = load_aot_functions()
    lines = ["One step at a time, the rows interleaved (gpu_timing.one_step_us_interleaved), median of 150 steps each:",
             "",
             "| dtype | B | N | call | events after a synchronise, us | wall, call + synchronise, us |",
             "| --- | --- | --- | --- | --- | --- |"]
    for dtype_name, batch, num_nodes in (("float32", 10**4, 10**6), ("float32", 10**6, 10**6),
                                         ("float16", 10**4, 10**6), ("float16", 10**6, 10**6)):
        for label, events, wall in latency_rows(dtype_name, batch, num_nodes, aot_functions):
            line = f"| {dtype_name} | {batch:.0e} | {num_nodes:.0e} | {label} | {events:.1f} | {wall:.1f} |"
            lines.append(line)
            print(line, flush=True)
    return lines


def main() -> int:
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--kernels", action="store_true")
    parser.add_argument("--latency", action="store_true")
    parser.add_argument("--large-batch", action="store_true", help="with --kernels: B = 1e6 beside the table path")
    parser.add_argument("--nodes", type=positive_int, nargs="+", default=[10**3, 10**4, 10**5, 10**6, 10**8])
    parser.add_argument("--batches", type=positive_int, nargs="+", default=[10**4, 2**15])
    args = parser.parse_args()
    require_torch_gpu("probe_float16_small.py")
    lines = [f"{device_name()}, {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}", ""]
    if args.latency:
        lines += latency(args) + [""]
    if args.kernels:
        lines += kernels(args)
    print_and_save("\n".join(lines), args.out, "probe_float16_small.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
