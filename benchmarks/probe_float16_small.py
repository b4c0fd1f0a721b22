"""Probe (issue 26): float16 small updates' candidate kernels, and what one synchronised step costs, in one process.

    python3 benchmarks/probe_float16_small.py [--out DIR] [--kernels [--shipped-only] [--large-batch]]
        [--grid-table] [--grid-table-shapes] [--split-table] [--floors] [--latency] [--nodes ...] [--batches ...]

--kernels: per-step device time (CUDA events after warm-up, median, 8 rotating random batches) of torch
index_add_, the shipped plans (auto, the table path "global", owned; --shipped-only: auto, owned, grid_table) and
kernels launched directly with cuLaunchKernel: owned on one block per SM and scatter_cluster_table (one cluster
holding the sums in distributed shared memory;
benchmarks/probe_float16_kernels.cu, which load_variant appends to scatter_add.cu, patched per variant), F = 1,
each first checked against float64 (one rounding per node: docs/kernel.md's bound). --large-batch adds B = 1e6
(auto, the table path). --grid-table: the floors (an empty
kernel, one load and atomic per thread, a grid barrier alone, a cluster barrier alone), the cluster inbox and
the global-table kernels behind grid barriers (cleared or kept, cooperative groups' barrier or one of their
own) at B = 1e4 and 1e6. --grid-table-shapes: the shipped scatter_grid_table on tables of other sizes.
--split-table: the shipped split_table kernels on tables of 2, 4 and 8 slots per edge beside torch and "auto"
(--batches and --nodes). --floors: the floors alone beside torch (B = 1e4, N = 1e6), with memsets
and empty kernels in the sequences the float16 paths issue.
--latency: one step at a time, the rows interleaved (gpu_timing.one_step_us_interleaved; CUDA events recorded
after a synchronisation, and the wall clock around call + synchronisation): torch, scatter_add_launch with
data_ptr() and torch.cuda.current_stream() read in each call, with only data_ptr() per call, with both read
once, PreparedScatterAdd with and without graph replay, and the AOT kernels launched by run_aot_scatter_add and
by PreparedAotLaunch. Measurements: plugin/kernels/NOTES.md "Issue 26" and "Issue 26, second session".
"""

import ctypes
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
PROBE_KERNELS = Path(__file__).resolve().parent / "probe_float16_kernels.cu"  # designs measured, not shipped


def load_variant(patches: list[tuple[str, str]], dtype: str) -> dict:
    """{name: CUfunction} of scatter_add.cu with textual patches, compiled for this device and loaded."""
    from cuda.bindings import driver

    from plugin.cuda_check import check
    from plugin.kernels.compile import SOURCE_PATH, compile_options, nvrtc_compile, nvrtc_supported_archs, pick_arch
    from plugin.kernels.launch import read_device_info

    text = SOURCE_PATH.read_text() + "\n" + PROBE_KERNELS.read_text()
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
    attribute = driver.CUfunction_attribute
    for name in ("scatter_owned", "scatter_cluster_table", "scatter_grid_table_clear",
                 "scatter_grid_table_kept", "scatter_grid_table_kept_own", "scatter_cluster_inbox", "scatter_split_table",
                 "apply_split_table", "scatter_split_table_preload", "apply_split_table_preload"):
        function = check(driver.cuModuleGetFunction(module, name.encode()))
        static = check(driver.cuFuncGetAttribute(attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function))
        check(driver.cuFuncSetAttribute(function, attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        device.max_shared_per_block - static))
        if name != "scatter_owned":  # 16-block clusters are beyond the portable 8
            check(driver.cuFuncSetAttribute(function, attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1))
        functions[name] = function
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


def table_cluster_launcher(function, blocks: int, threads: int, state, src, index, num_nodes: int, capacity: int):
    """scatter_cluster_table on one cluster of `blocks` blocks, each with a part of `capacity` slots."""
    from cuda.bindings import driver

    from plugin.cuda_check import check

    import torch

    stream = driver.CUstream(torch.cuda.current_stream().cuda_stream)
    args = ((src.data_ptr(), index.data_ptr(), index.shape[0], num_nodes, capacity, state.data_ptr(), 0),
            (VOID, VOID, I64, I64, I32, VOID, VOID))

    def launch() -> None:
        check(driver.cuLaunchKernel(function, blocks, 1, 1, threads, 1, 1, 8 * capacity, stream, args, 0))

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


def kernel_rows(batch: int, num_nodes: int, variants: dict, shipped=("auto", "global", "owned")) -> list[tuple[str, float, str]]:
    import torch

    from plugin.kernels import scatter_add_workspace_size
    from benchmarks.gpu_timing import ours
    from plugin.kernels.launch import read_device_info
    from plugin.kernels.plan import owned_table

    torch.manual_seed(batch + num_nodes)
    state = torch.randn(num_nodes, 1, device="cuda", dtype=torch.float16)
    batches = [(torch.randn(batch, 1, device="cuda", dtype=torch.float16),
                torch.randint(0, num_nodes, (batch,), device="cuda", dtype=torch.int64)) for _ in range(ROTATION)]
    rows = [("torch index_add_", time_gpu_ms(lambda i: state.index_add_(0, batches[i][1], batches[i][0]), **TIMING), "")]
    for algorithm in shipped:  # global: the table path of before (memsets, windowed kernel)
        size = scatter_add_workspace_size(num_nodes, batch, 1, "float16", with_counts=False, algorithm=algorithm)
        workspace = torch.empty(max(size, 1), device="cuda", dtype=torch.uint8)
        steps = [ours(state, s, i, None, workspace, algorithm=algorithm) for s, i in batches]
        before = state.clone()
        plan = steps[0]()
        torch.cuda.synchronize()
        check = one_rounding_ok(before, state, *batches[0])
        rows.append((f"shipped {algorithm} ({plan.algorithm})", time_gpu_ms(lambda i: steps[i](), **TIMING), check))
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    for label, (functions, name, blocks, threads) in variants.items():
        blocks = sm if blocks == "sm" else blocks
        device = read_device_info()
        if name == "scatter_cluster_table":
            capacity = batch if threads == "E" else threads  # (blocks, capacity) for this kernel
            threads = blocks[1]
            blocks = blocks[0]
            make = table_cluster_launcher
        else:
            capacity = owned_table(-(-batch // blocks), 1, device).capacity
            make = owned_launcher
        launches = [make(functions[name], blocks, threads, state, s, i, num_nodes, capacity) for s, i in batches]
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


def grid_table_rows(batch: int, num_nodes: int, variants: dict) -> list[tuple[str, float, str]]:
    """torch, the shipped plan, and scatter_grid_table_* (cooperative launches) on the same tensors."""
    import torch
    from cuda.bindings import driver

    from benchmarks.gpu_timing import ours
    from plugin.cuda_check import check
    from plugin.kernels import scatter_add_workspace_size
    from plugin.kernels.plan import next_power_of_two

    torch.manual_seed(batch + num_nodes)
    state = torch.randn(num_nodes, 1, device="cuda", dtype=torch.float16)
    batches = [(torch.randn(batch, 1, device="cuda", dtype=torch.float16),
                torch.randint(0, num_nodes, (batch,), device="cuda", dtype=torch.int64)) for _ in range(ROTATION)]
    rows = [("torch index_add_", time_gpu_ms(lambda i: state.index_add_(0, batches[i][1], batches[i][0]), **TIMING), "")]
    size = scatter_add_workspace_size(num_nodes, batch, 1, "float16", with_counts=False)
    workspace = torch.empty(max(size, 1), device="cuda", dtype=torch.uint8)
    steps = [ours(state, s, i, None, workspace) for s, i in batches]
    rows.append(("shipped auto", time_gpu_ms(lambda i: steps[i](), **TIMING), ""))
    stream = driver.CUstream(torch.cuda.current_stream().cuda_stream)
    capacity = next_power_of_two(2 * batch)
    for label, (functions, name, threads, loads, edges) in variants.items():
        slots = torch.full((capacity,), 0xFFFFFFFF, device="cuda", dtype=torch.int64)
        words = torch.zeros(2, device="cuda", dtype=torch.int32)
        blocks = max(1, -(-batch // (threads * loads)))
        launches = []
        if name == "scatter_cluster_inbox":  # (blocks = the cluster, threads, loads)
            blocks = edges
            per_sender = -(-batch // blocks)
            inbox_capacity = next_power_of_two(batch + 1)
            shared = 8 * blocks * per_sender + 8 * inbox_capacity
            for s, i in batches:
                args = ((s.data_ptr(), i.data_ptr(), batch, num_nodes, per_sender, inbox_capacity, state.data_ptr(), 0),
                        (VOID, VOID, I64, I64, I32, I32, VOID, VOID))
                launches.append(lambda args=args: check(driver.cuLaunchKernel(
                    functions[name], blocks, 1, 1, threads, 1, 1, shared, stream, args, 0)))
            edges = None
        for s, i in ([] if launches else batches):
            args = ((s.data_ptr(), i.data_ptr(), batch if edges is None else edges, num_nodes, slots.data_ptr(),
                     capacity, state.data_ptr(), 0, words.data_ptr()), (VOID, VOID, I64, I64, VOID, I32, VOID, VOID, VOID))
            launches.append(lambda args=args: check(driver.cuLaunchCooperativeKernel(
                functions[name], blocks, 1, 1, threads, 1, 1, 0, stream, args)))
        try:
            before = state.clone()
            launches[0]()
            torch.cuda.synchronize()
            verdict = one_rounding_ok(before, state, *batches[0]) if edges is None else "(no edges)"
            ms = time_gpu_ms(lambda i: launches[i](), **TIMING)
        except Exception as error:
            ms, verdict = float("nan"), f"failed: {type(error).__name__}: {error}"[:160]
        rows.append((f"{label} ({blocks} blocks)", ms, verdict))
    del state, batches, workspace
    torch.cuda.empty_cache()
    return rows


FLOOR_SOURCE = r"""
#include <cooperative_groups.h>
extern "C" __global__ void empty_kernel() {}
extern "C" __global__ void grid_barrier_kernel() { cooperative_groups::this_grid().sync(); }
#define CLUSTER_BARRIER asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory")
extern "C" __global__ void __cluster_dims__(8, 1, 1) cluster8_barrier_kernel() { CLUSTER_BARRIER; }
extern "C" __global__ void __cluster_dims__(16, 1, 1) cluster16_barrier_kernel() { CLUSTER_BARRIER; }
extern "C" __global__ void one_load_kernel(const long long* index, float* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 10000) atomicAdd(out + (index[i] & 1023), 1.0f);
}
"""


def floor_rows() -> list[str]:
    """Device time of kernels that do nothing but launch, meet at a grid or cluster barrier, or load one index
    and add one atomic per thread (1e4 threads), and of memsets followed by empty kernels: what synchronisation
    and a path's operations alone cost beside torch."""
    import torch
    from cuda.bindings import driver

    from plugin.cuda_check import check
    from plugin.kernels.compile import compile_options, nvrtc_compile, nvrtc_supported_archs, pick_arch
    from plugin.kernels.launch import read_device_info

    device = read_device_info()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "floor.cu"
        path.write_text(FLOOR_SOURCE)
        cubin, _ = nvrtc_compile(path, compile_options(pick_arch(device.arch, nvrtc_supported_archs()), "float16"))
    module = check(driver.cuModuleLoadData(cubin))
    stream = driver.CUstream(torch.cuda.current_stream().cuda_stream)
    index = torch.randint(0, 1 << 20, (10**4,), device="cuda", dtype=torch.int64)
    out = torch.zeros(1024, device="cuda")
    attribute = driver.CUfunction_attribute
    lines = []
    for name, blocks, threads, cooperative in (("empty_kernel", 40, 256, False), ("empty_kernel", 8, 1024, False),
                                               ("one_load_kernel", 40, 256, False),
                                               ("grid_barrier_kernel", 40, 256, True),
                                               ("grid_barrier_kernel", 79, 128, True),
                                               ("grid_barrier_kernel", 132, 1024, True),
                                               ("cluster8_barrier_kernel", 8, 1024, False),
                                               ("cluster8_barrier_kernel", 40, 256, False),
                                               ("cluster16_barrier_kernel", 16, 1024, False),
                                               ("cluster16_barrier_kernel", 16, 128, False)):
        function = check(driver.cuModuleGetFunction(module, name.encode()))
        if name.startswith("cluster16"):
            check(driver.cuFuncSetAttribute(function, attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1))
        args = ((index.data_ptr(), out.data_ptr()), (VOID, VOID)) if name == "one_load_kernel" else 0
        launch = driver.cuLaunchCooperativeKernel if cooperative else None

        def call(i, function=function, args=args, launch=launch, blocks=blocks, threads=threads):
            if launch is not None:
                check(launch(function, blocks, 1, 1, threads, 1, 1, 0, stream, args))
            else:
                check(driver.cuLaunchKernel(function, blocks, 1, 1, threads, 1, 1, 0, stream, args, 0))
        try:
            ms = time_gpu_ms(call, **TIMING)
        except Exception as error:
            ms = float("nan")
            name += f" failed: {error}"[:100]
        line = f"| floor | - | {name}, {blocks} x {threads}{', cooperative' if cooperative else ''} | {ms * 1e3:.2f} | |"
        print(line, flush=True)
        lines.append(line)
    # what a path of several operations pays before any work: the float16 AOT plugin is two fills (memsets
    # where it is timed outside TensorRT) and two kernels, split_table one memset and two kernels
    empty = check(driver.cuModuleGetFunction(module, b"empty_kernel"))
    table = torch.empty(2**16, device="cuda", dtype=torch.int64)
    for memsets, kernels in ((0, 2), (1, 2), (2, 2)):
        def sequence(i, memsets=memsets, kernels=kernels):
            for _ in range(memsets):
                check(driver.cuMemsetD32Async(table.data_ptr(), 0xFFFFFFFF, 2 * 2**16, stream))
            for _ in range(kernels):
                check(driver.cuLaunchKernel(empty, 40, 1, 1, 256, 1, 1, 0, stream, 0, 0))
        ms = time_gpu_ms(sequence, **TIMING)
        line = f"| floor | - | {memsets} memsets of 512 KiB, then {kernels} empty kernels of 40 x 256 | {ms * 1e3:.2f} | |"
        print(line, flush=True)
        lines.append(line)
    return lines


def floors() -> list[str]:
    """floor_rows beside torch's index_add_ of 1e4 float16 rows into 1e6 nodes."""
    import torch

    from plugin.kernels.launch import current_context

    torch.zeros(1, device="cuda")
    current_context()
    state = torch.randn(10**6, 1, device="cuda", dtype=torch.float16)
    batches = [(torch.randn(10**4, 1, device="cuda", dtype=torch.float16),
                torch.randint(0, 10**6, (10**4,), device="cuda", dtype=torch.int64)) for _ in range(ROTATION)]
    ms = time_gpu_ms(lambda i: state.index_add_(0, batches[i][1], batches[i][0]), **TIMING)
    line = f"| 1e+04 | 1e+06 | torch index_add_ | {ms * 1e3:.2f} | |"
    print(line, flush=True)
    return HEADER + [line] + floor_rows()


def grid_table_shapes() -> list[str]:
    """The shipped scatter_grid_table launched with tables of other sizes and slot rules than the plan's, B = 1e4:
    what makes the hashed table (N >= 1e5) slower than one slot per node (N <= 1e4)."""
    import torch
    from cuda.bindings import driver

    from plugin.cuda_check import check
    from plugin.kernels.launch import current_context, prepare_kernels

    torch.zeros(1, device="cuda")
    current_context()
    function = prepare_kernels("float16").functions["scatter_grid_table"]
    stream = driver.CUstream(torch.cuda.current_stream().cuda_stream)
    lines = []
    shapes = [(10**4, 10**4, 10**4, 0), (10**4, 10**5, 10**5, 0), (10**4, 10**5, 2**17, 1), (10**4, 10**6, 10**6, 0),
              (10**4, 2**21, 2**21, 0), (10**4, 10**7, 10**7, 0)]
    shapes += [(10**4, n, c, 1) for n in (10**6, 10**8) for c in (2**15, 2**17, 2**18, 2**19, 2**20)]
    shapes += [(2**15, 10**5, 10**5, 0), (2**15, 10**6, 10**6, 0)]
    shapes += [(2**15, n, c, 1) for n in (10**6, 10**8) for c in (2**16, 2**18, 2**19, 2**20, 2**21)]
    for batch, num_nodes, capacity, hashed in shapes:
        torch.manual_seed(num_nodes)
        state = torch.randn(num_nodes, 1, device="cuda", dtype=torch.float16)
        batches = [(torch.randn(batch, 1, device="cuda", dtype=torch.float16),
                    torch.randint(0, num_nodes, (batch,), device="cuda", dtype=torch.int64)) for _ in range(ROTATION)]
        slots = torch.empty(capacity, device="cuda", dtype=torch.int64)
        launches = []
        for s, i in batches:
            args = ((s.data_ptr(), i.data_ptr(), batch, num_nodes, slots.data_ptr(), capacity, hashed, state.data_ptr(), 0),
                    (VOID, VOID, I64, I64, VOID, I32, I32, VOID, VOID))
            launches.append(lambda args=args: check(driver.cuLaunchCooperativeKernel(
                function, -(-batch // 128), 1, 1, 128, 1, 1, 0, stream, args)))
        before = state.clone()
        launches[0]()
        torch.cuda.synchronize()
        verdict = one_rounding_ok(before, state, *batches[0])
        ms = time_gpu_ms(lambda i: launches[i](), **TIMING)
        line = f"| {batch:.0e} | {num_nodes:.0e} | scatter_grid_table, {capacity} slots, {'hashed' if hashed else 'slot = node'} | {ms * 1e3:.1f} | {verdict} |"
        print(line, flush=True)
        lines.append(line)
    return lines


HEADER = ["| B | N | method | us | check |", "| --- | --- | --- | --- | --- |"]


def table_lines(shapes, rows) -> list[str]:
    """One printed table line per row of rows(batch, num_nodes) -> [(label, ms, check)] for each (batch, N)."""
    lines = []
    for batch, num_nodes in shapes:
        for label, ms, check in rows(batch, num_nodes):
            line = f"| {batch:.0e} | {num_nodes:.0e} | {label} | {ms * 1e3:.1f} | {check} |"
            lines.append(line)
            print(line, flush=True)
    return lines


def grid_tables(args) -> list[str]:
    import torch

    from plugin.kernels.launch import current_context

    torch.zeros(1, device="cuda")
    current_context()
    one = load_variant([("#define GRID_TABLE_LOADS 8", "#define GRID_TABLE_LOADS 1")], "float16")
    two = load_variant([("#define GRID_TABLE_LOADS 8", "#define GRID_TABLE_LOADS 2")], "float16")
    eight = load_variant([], "float16")
    cas = load_variant([("#define GRID_TABLE_LOADS 8", "#define GRID_TABLE_LOADS 1"),
                        ("#define GRID_TABLE_PRELOAD 1", "#define GRID_TABLE_PRELOAD 0")], "float16")
    cas_prefetch = load_variant([("#define GRID_TABLE_LOADS 8", "#define GRID_TABLE_LOADS 1"),
                                 ("#define GRID_TABLE_PRELOAD 1", "#define GRID_TABLE_PRELOAD 0"),
                                 ("#define GRID_TABLE_PREFETCH 0", "#define GRID_TABLE_PREFETCH 1")], "float16")
    inbox8 = load_variant([("#define INBOX_BLOCKS 16", "#define INBOX_BLOCKS 8"),
                           ("#define INBOX_LOADS 1", "#define INBOX_LOADS 2")], "float16")
    inbox16x2 = load_variant([("#define INBOX_LOADS 1", "#define INBOX_LOADS 2")], "float16")
    small = {
        "cluster inbox 16 x 1024 x 1": (one, "scatter_cluster_inbox", 1024, 1, 16),
        "cluster inbox 16 x 640 x 1": (one, "scatter_cluster_inbox", 640, 1, 16),
        "cluster inbox 16 x 512 x 2": (inbox16x2, "scatter_cluster_inbox", 512, 2, 16),
        "cluster inbox 8 x 1024 x 2": (inbox8, "scatter_cluster_inbox", 1024, 2, 8),
        "clear, cg, 128 x 1, CAS first": (cas, "scatter_grid_table_clear", 128, 1, None),
        "clear, cg, 128 x 1, CAS first, prefetch": (cas_prefetch, "scatter_grid_table_clear", 128, 1, None),
        "kept, cg, 128 x 1, CAS first, prefetch": (cas_prefetch, "scatter_grid_table_kept", 128, 1, None),
        "clear, cg, 64 x 1, CAS first, prefetch": (cas_prefetch, "scatter_grid_table_clear", 64, 1, None),
        "clear, cg, 256 x 1, CAS first, prefetch": (cas_prefetch, "scatter_grid_table_clear", 256, 1, None),
        "barrier only, E = 0 (kept, cg)": (one, "scatter_grid_table_kept", 256, 1, 0),
        "barrier only, E = 0, 79 blocks (kept, cg)": (one, "scatter_grid_table_kept", 128, 1, 0),
        "barrier only, E = 0 (kept, own barrier)": (one, "scatter_grid_table_kept_own", 256, 1, 0),
        "barriers only, E = 0 (clear, cg)": (one, "scatter_grid_table_clear", 256, 1, 0),
        "clear, cg, 256 x 1": (one, "scatter_grid_table_clear", 256, 1, None),
        "kept, cg, 256 x 1": (one, "scatter_grid_table_kept", 256, 1, None),
        "kept, own barrier, 256 x 1": (one, "scatter_grid_table_kept_own", 256, 1, None),
        "kept, own barrier, 128 x 1": (one, "scatter_grid_table_kept_own", 128, 1, None),
        "kept, own barrier, 512 x 1": (one, "scatter_grid_table_kept_own", 512, 1, None),
        "kept, own barrier, 256 x 2": (two, "scatter_grid_table_kept_own", 256, 2, None),
        "clear, cg, 128 x 1": (one, "scatter_grid_table_clear", 128, 1, None),
    }
    large = {
        "clear, cg, 512 x 8": (eight, "scatter_grid_table_clear", 512, 8, None),
        "kept, cg, 512 x 8": (eight, "scatter_grid_table_kept", 512, 8, None),
        "kept, own barrier, 512 x 8": (eight, "scatter_grid_table_kept_own", 512, 8, None),
        "kept, own barrier, 1024 x 8": (eight, "scatter_grid_table_kept_own", 1024, 8, None),
        "kept, own barrier, 256 x 8": (eight, "scatter_grid_table_kept_own", 256, 8, None),
    }
    lines = HEADER + floor_rows()
    for batch, variants in ((10**4, small), (10**6, large)):
        lines += table_lines([(batch, n) for n in args.nodes],
                             lambda b, n, variants=variants: grid_table_rows(b, n, variants))
    return lines


def kernels(args) -> list[str]:
    import torch

    from plugin.kernels.launch import current_context

    torch.zeros(1, device="cuda")  # torch's primary context, current for the driver API too
    current_context()
    base = load_variant([], "float16")
    def table(blocks: int, threads: int, loads: int) -> dict:
        return load_variant([("#define TABLE_CLUSTER_BLOCKS 8 ", f"#define TABLE_CLUSTER_BLOCKS {blocks} "),
                             ("#define TABLE_CLUSTER_THREADS 1024", f"#define TABLE_CLUSTER_THREADS {threads}"),
                             ("#define TABLE_CLUSTER_LOADS 2 ", f"#define TABLE_CLUSTER_LOADS {loads} ")], "float16")

    t16 = table(16, 1024, 1)
    t8x512 = table(8, 512, 4)
    t16x512 = table(16, 512, 2)
    variants = {
        "owned, 132 blocks": (base, "scatter_owned", "sm", 1024),
        "cluster_table 8 x 1024 x 2, part E": (base, "scatter_cluster_table", (8, 1024), "E"),
        "cluster_table 8 x 1024 x 2, part 4096": (base, "scatter_cluster_table", (8, 1024), 4096),
        "cluster_table 16 x 1024 x 1, part E": (t16, "scatter_cluster_table", (16, 1024), "E"),
        "cluster_table 16 x 1024 x 1, part 2048": (t16, "scatter_cluster_table", (16, 1024), 2048),
        "cluster_table 8 x 512 x 4, part E": (t8x512, "scatter_cluster_table", (8, 512), "E"),
        "cluster_table 16 x 512 x 2, part E": (t16x512, "scatter_cluster_table", (16, 512), "E"),
        "cluster_table 16 x 512 x 2, part 2048": (t16x512, "scatter_cluster_table", (16, 512), 2048),
    }
    if args.shipped_only:
        variants = {}
    lines = list(HEADER)
    if args.large_batch:
        lines += table_lines([(10**6, n) for n in (10**5, 10**6, 10**7, 10**8)], large_batch_rows)
    shipped = ("auto", "owned", "grid_table") if args.shipped_only else ("auto", "global", "owned")
    return lines + table_lines([(b, n) for b in args.batches for n in args.nodes],
                               lambda b, n: kernel_rows(b, n, variants, shipped))


def large_batch_rows(batch: int, num_nodes: int, algorithms=("auto", "global")) -> list[tuple[str, float, str]]:
    """B = 1e6: torch, the shipped plan and the table path of before ("global")."""
    import torch

    from benchmarks.gpu_timing import ours
    from plugin.kernels import scatter_add_workspace_size

    state = torch.randn(num_nodes, 1, device="cuda", dtype=torch.float16)
    batches = [(torch.randn(batch, 1, device="cuda", dtype=torch.float16),
                torch.randint(0, num_nodes, (batch,), device="cuda", dtype=torch.int64)) for _ in range(ROTATION)]
    rows = [("torch index_add_", time_gpu_ms(lambda i: state.index_add_(0, batches[i][1], batches[i][0]), **TIMING), "")]
    for algorithm in algorithms:
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


def split_table_rows(batch: int, num_nodes: int, functions: dict) -> list[tuple[str, float, str]]:
    """torch, the shipped plans ("auto", owned up to 2^15 edges) and the shipped split_table kernels on
    tables of 2, 4 and 8 slots per edge (a memset, scatter_split_table, apply_split_table)."""
    import torch
    from cuda.bindings import driver

    from plugin.cuda_check import check
    from plugin.kernels.plan import THREADS_PER_BLOCK, next_power_of_two, split_table_capacity

    rows = large_batch_rows(batch, num_nodes, ("auto", "owned") if batch <= 2**15 else ("auto",))
    torch.manual_seed(batch + num_nodes)
    state = torch.randn(num_nodes, 1, device="cuda", dtype=torch.float16)
    batches = [(torch.randn(batch, 1, device="cuda", dtype=torch.float16),
                torch.randint(0, num_nodes, (batch,), device="cuda", dtype=torch.int64)) for _ in range(ROTATION)]
    stream = driver.CUstream(torch.cuda.current_stream().cuda_stream)
    blocks = -(-batch // THREADS_PER_BLOCK)
    for per_edge in (2, 4, 8):
        capacity = next_power_of_two(per_edge * batch)
        slots = torch.empty(capacity, device="cuda", dtype=torch.int64)

        def launch(i: int, capacity=capacity, slots=slots, steps=3, apply_blocks=4096) -> None:
            s, idx = batches[i]
            check(driver.cuMemsetD32Async(slots.data_ptr(), 0xFFFFFFFF, 2 * capacity, stream))
            if steps > 1:
                check(driver.cuLaunchKernel(functions["scatter_split_table"], blocks, 1, 1, THREADS_PER_BLOCK, 1, 1,
                                            0, stream, ((s.data_ptr(), idx.data_ptr(), batch, num_nodes,
                                                         slots.data_ptr(), capacity, 0),
                                                        (VOID, VOID, I64, I64, VOID, I32, VOID)), 0))
            if steps > 2:
                check(driver.cuLaunchKernel(functions["apply_split_table"],
                                            min(-(-capacity // THREADS_PER_BLOCK), apply_blocks), 1, 1, THREADS_PER_BLOCK, 1,
                                            1, 0, stream, ((slots.data_ptr(), capacity, num_nodes, state.data_ptr()),
                                                           (VOID, I32, I64, VOID)), 0))

        before = state.clone()
        launch(0)
        torch.cuda.synchronize()
        verdict = one_rounding_ok(before, state, *batches[0])
        rows.append((f"split_table, {per_edge} E -> {capacity} slots", time_gpu_ms(launch, **TIMING), verdict))
        if capacity == split_table_capacity(batch):  # the plan's table: what each of its three steps adds
            for steps, what in ((1, "the memset alone"), (2, "the memset and scatter_split_table")):
                ms = time_gpu_ms(lambda i, steps=steps, launch=launch: launch(i, steps=steps), **TIMING)
                rows.append((f"split_table, {per_edge} E: {what}", ms, ""))
            copies = torch.empty(capacity, device="cuda", dtype=torch.float16)

            def preload(i: int, capacity=capacity, slots=slots, copies=copies) -> None:
                s, idx = batches[i]
                check(driver.cuMemsetD32Async(slots.data_ptr(), 0xFFFFFFFF, 2 * capacity, stream))
                check(driver.cuLaunchKernel(functions["scatter_split_table_preload"], blocks, 1, 1, THREADS_PER_BLOCK,
                                            1, 1, 0, stream, ((s.data_ptr(), idx.data_ptr(), batch, num_nodes,
                                                               slots.data_ptr(), capacity, state.data_ptr(),
                                                               copies.data_ptr()),
                                                              (VOID, VOID, I64, I64, VOID, I32, VOID, VOID)), 0))
                check(driver.cuLaunchKernel(functions["apply_split_table_preload"],
                                            min(-(-capacity // THREADS_PER_BLOCK), 4096), 1, 1, THREADS_PER_BLOCK, 1,
                                            1, 0, stream, ((slots.data_ptr(), copies.data_ptr(), capacity, num_nodes,
                                                            state.data_ptr()), (VOID, VOID, I32, I64, VOID)), 0))

            before = state.clone()
            preload(0)
            torch.cuda.synchronize()
            verdict = one_rounding_ok(before, state, *batches[0])
            rows.append((f"split_table, {per_edge} E, the state read by the claimer (probe kernels)",
                         time_gpu_ms(preload, **TIMING), verdict))
            for blocks_cap in (1056, 2**31 - 1):  # the scan with 8 blocks per SM, and with a thread per slot
                ms = time_gpu_ms(lambda i, cap=blocks_cap, launch=launch: launch(i, apply_blocks=cap), **TIMING)
                rows.append((f"split_table, {per_edge} E, scan on {min(-(-capacity // THREADS_PER_BLOCK), blocks_cap)}"
                             " blocks", ms, ""))
        del slots
    del state, batches
    torch.cuda.empty_cache()
    return rows


def split_tables(args) -> list[str]:
    import torch

    from plugin.kernels.launch import current_context

    torch.zeros(1, device="cuda")
    current_context()
    functions = load_variant([], "float16")
    return HEADER + table_lines([(b, n) for b in args.batches for n in args.nodes],
                                lambda b, n: split_table_rows(b, n, functions))


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
    parser.add_argument("--grid-table", action="store_true", help="the global-table kernels behind a grid barrier")
    parser.add_argument("--grid-table-shapes", action="store_true", help="the shipped grid_table on other tables")
    parser.add_argument("--shipped-only", action="store_true", help="with --kernels: torch and the shipped plans only (auto, owned, grid_table)")
    parser.add_argument("--large-batch", action="store_true", help="with --kernels: B = 1e6 beside the table path")
    parser.add_argument("--floors", action="store_true", help="the floors alone (no work) beside torch")
    parser.add_argument("--split-table", action="store_true", help="split_table on tables of 2, 4, 8 slots per edge")
    parser.add_argument("--nodes", type=positive_int, nargs="+", default=[10**3, 10**4, 10**5, 10**6, 10**8])
    parser.add_argument("--batches", type=positive_int, nargs="+", default=[10**4, 2**15])
    args = parser.parse_args()
    require_torch_gpu("probe_float16_small.py")
    lines = [f"{device_name()}, {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}", ""]
    if args.latency:
        lines += latency(args) + [""]
    if args.kernels:
        lines += kernels(args)
    if args.grid_table:
        lines += grid_tables(args)
    if args.grid_table_shapes:
        lines += grid_table_shapes()
    if args.floors:
        lines += floors()
    if args.split_table:
        lines += split_tables(args)
    print_and_save("\n".join(lines), args.out, "probe_float16_small.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
