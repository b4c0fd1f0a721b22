"""Per-step device time of the row overwrite in place (overwrite = 1) beside torch index_copy_ and a full-state copy.

    python3 benchmarks/bench_overwrite.py [--out DIR] [--batches 10000 1000000] [--nodes 1000 ... 100000000]
                                          [--features 1 64] [--dtypes float32,float16]

One step writes a new batch of B rows (values standard normal, targets uniform in [0, N): repeats where B is near
N or above) into a state of N rows of F features, rotating over 8 batches made beforehand. Methods, in the same
run on the same tensors and one created stream:
  python plugin     what ScatterAddInPlace's enqueue runs with overwrite = 1 (plugin.kernels.overwrite
                    PreparedOverwrite, overwrite.cu's CUBIN): one kernel launch
  aot plugin        what an engine of the AOT plugin runs, as TensorRT launches it: one launch of
                    overwrite_rows, the PTX the plugin embeds, its launch from plugin.overwrite_op
  torch index_copy_ state.index_copy_(0, index, src): in place, a repeated index's winner undefined
  copy + scatter    state.index_copy(0, index, src): a new state each step, what an out-of-place scatter layer
                    (TensorRT's ScatterND / scatter layer) must do
  floor             the bytes an in-place overwrite must move (index 8 B, src row read, state row written per
                    edge) at this GPU's device-to-device copy bandwidth; "copy floor" adds reading and writing
                    the whole state (N F elements twice)
Device time from CUDA events after warm-up, median of many steps (benchmarks/gpu_timing.py). Each table counts
the cells at or below torch index_copy_'s. Then host time per call (interleaved batches, gpu_timing
host_us_per_call_interleaved) at N = 1e6: the Python plugin's launch (and ScatterAddPlugin.enqueue where
tensorrt imports) beside torch's index_copy_.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.arguments import ArgumentParser, dtype_names, positive_int  # noqa: E402
from benchmarks.gpu_timing import (  # noqa: E402
    copy_bandwidth_bytes_per_s,
    device_name,
    host_us_per_call_interleaved,
    print_and_save,
    require_torch_gpu,
    time_gpu_ms,
)

NODES = [10**3, 10**4, 10**5, 10**6, 10**7, 10**8]
BATCHES_IN_ROTATION = 8
METHODS = (("python", "python plugin"), ("aot", "aot plugin"), ("torch", "torch index_copy_"),
           ("copy", "copy + scatter (index_copy)"))
FLOORS = (("floor", "floor (in place)"), ("copy_floor", "floor (full-state copy)"))


def make_case(num_nodes: int, batch: int, num_features: int, dtype_name: str) -> dict:
    import torch

    dtype = getattr(torch, dtype_name)
    state = torch.randn(num_nodes, num_features, device="cuda", dtype=dtype)
    batches = [(torch.randn(batch, num_features, device="cuda", dtype=dtype),
                torch.randint(0, num_nodes, (batch,), device="cuda", dtype=torch.int64))
               for _ in range(BATCHES_IN_ROTATION)]
    return {"state": state, "batches": batches}


def methods(case: dict, functions: dict, dtype_name: str) -> dict:
    """{name: step(i)} on the case's tensors."""
    import numpy as np
    import torch
    from cuda.bindings import driver

    from common.cuda_check import check
    from inplace.launch import pack_arguments
    from plugin.kernels.overwrite import (PreparedOverwrite, aot_overwrite_launch, overwrite_arguments, overwrite_kernel,
                                          overwrite_sizes)

    state, batches = case["state"], case["batches"]
    num_nodes, num_features = state.shape
    batch = batches[0][1].shape[0]
    stream = torch.cuda.current_stream().cuda_stream
    python = PreparedOverwrite(num_nodes=num_nodes, num_edges=batch, num_features=num_features,
                               dtype=np.dtype(dtype_name))
    sizes = overwrite_sizes(num_nodes, batch, num_features, dtype_name)
    kernel = overwrite_kernel(dtype_name)
    grid, block, shared = aot_overwrite_launch(dtype_name, sizes)
    on = driver.CUstream(int(stream))
    aot_calls = []  # per batch, prepared once, as TensorRT prepares an AOT launch
    for src, index in batches:
        pointers = {"state": state.data_ptr(), "src": src.data_ptr(), "index": index.data_ptr()}
        address, owner = pack_arguments(*overwrite_arguments(dtype_name, pointers, sizes))
        aot_calls.append(((functions[kernel.name], grid, 1, 1, block, 1, 1, shared, on, address, 0), owner))

    def aot(i: int) -> None:
        result = driver.cuLaunchKernel(*aot_calls[i][0])
        if result[0]:
            check(result)

    def ptrs(i: int) -> tuple[int, int, int, int]:
        src, index = batches[i]
        return state.data_ptr(), src.data_ptr(), index.data_ptr(), stream

    return {
        "python": lambda i: python(*ptrs(i)),
        "aot": aot,
        "torch": lambda i: state.index_copy_(0, batches[i][1], batches[i][0]),
        "copy": lambda i: state.index_copy(0, batches[i][1], batches[i][0]),
    }


def floors_us(num_nodes: int, batch: int, num_features: int, itemsize: int, bandwidth: float) -> dict:
    moved = batch * (8 + 2 * num_features * itemsize)
    return {"floor": moved / bandwidth * 1e6, "copy_floor": (moved + 2 * num_nodes * num_features * itemsize)
            / bandwidth * 1e6}


def device_row(functions: dict, num_nodes: int, batch: int, num_features: int, dtype_name: str,
               bandwidth: float) -> dict:
    import torch

    case = make_case(num_nodes, batch, num_features, dtype_name)
    steps = methods(case, functions, dtype_name)
    row = dict(dtype=dtype_name, N=num_nodes, B=batch, F=num_features)
    timing = dict(sets=BATCHES_IN_ROTATION, min_reps=20, max_reps=200, budget_s=0.3, warmup=BATCHES_IN_ROTATION * 2)
    for name, step in steps.items():
        row[name] = time_gpu_ms(step, **timing) * 1e3
    row.update(floors_us(num_nodes, batch, num_features, case["state"].element_size(), bandwidth))
    del case, steps
    torch.cuda.empty_cache()
    return row


def host_row(functions: dict, batch: int, num_features: int, dtype_name: str) -> dict:
    """Host us per call at N = 1e6 with one batch (fixed pointers, as an engine's bindings are)."""
    import torch

    case = make_case(10**6, batch, num_features, dtype_name)
    steps = methods(case, functions, dtype_name)
    calls = {name: (lambda step=step: step(0)) for name, step in steps.items() if name in ("python", "torch")}
    plugin = enqueue_call(case, dtype_name)
    if plugin is not None:
        calls["enqueue"] = plugin
    row = dict(dtype=dtype_name, B=batch, F=num_features)
    for name in calls:
        calls[name]()  # the launcher binds its arguments at the first call
    row.update(host_us_per_call_interleaved(calls, batch=100, batches=30))
    del case, steps, calls
    torch.cuda.empty_cache()
    return row


def enqueue_call(case: dict, dtype_name: str):
    """ScatterAddPlugin(overwrite=1).enqueue on the case's first batch, or None where tensorrt does not import."""
    try:
        from common.imports import import_tensorrt

        trt = import_tensorrt()
        from plugin.scatter_add_plugin import ScatterAddPlugin
    except Exception:
        return None
    import torch

    state, (src, index) = case["state"], case["batches"][0]
    feature = trt.float16 if dtype_name == "float16" else trt.float32

    def desc(data_type, dims):
        d = trt.PluginTensorDesc()
        d.type, d.format, d.dims = data_type, trt.TensorFormat.LINEAR, trt.Dims(dims)
        return d

    inputs = [desc(feature, list(state.shape)), desc(feature, list(src.shape)), desc(trt.int64, [index.shape[0]])]
    outputs = [desc(feature, list(state.shape))]
    plugin = ScatterAddPlugin(compute_counts=False, overwrite=True).attach_to_context(None)
    plugin.on_shape_change(inputs, outputs)
    pointers = [state.data_ptr(), src.data_ptr(), index.data_ptr()]
    out, stream = [state.data_ptr()], torch.cuda.current_stream().cuda_stream
    return lambda: plugin.enqueue(inputs, outputs, pointers, out, 0, stream)


def at_or_below(rows: list[dict], key: str) -> int:
    """Cells of `key` at or below torch index_copy_'s, compared as printed (one decimal)."""
    return sum(round(r[key], 1) <= round(r["torch"], 1) for r in rows)


def device_table(rows: list[dict], nodes: list[int]) -> list[str]:
    header = "| dtype | F | B | method | " + " | ".join(f"N = {n:.0e}" for n in nodes) + " | at or below torch |"
    lines = [header, "|" + " --- |" * (5 + len(nodes))]
    keys = sorted({(r["dtype"], r["F"], r["B"]) for r in rows}, key=lambda k: (k[0] != "float32", k[1], k[2]))
    for dtype_name, features, batch in keys:
        selected = {r["N"]: r for r in rows if (r["dtype"], r["F"], r["B"]) == (dtype_name, features, batch)}
        for key, label in METHODS + FLOORS:
            cells = " | ".join(f"{selected[n][key]:.1f}" if n in selected else "–" for n in nodes)
            uncounted = key == "torch" or key in dict(FLOORS)
            count = "–" if uncounted else f"{at_or_below(list(selected.values()), key)} of {len(selected)}"
            lines.append(f"| {dtype_name} | {features} | {batch:.0e} | {label} | {cells} | {count} |")
    return lines


def host_table(rows: list[dict]) -> list[str]:
    names = [("python", "python plugin's launch"), ("enqueue", "ScatterAddPlugin.enqueue"),
             ("torch", "torch index_copy_")]
    names = [(k, label) for k, label in names if any(k in r for r in rows)]
    lines = ["| dtype | F | B | " + " | ".join(label for _, label in names) + " |", "|" + " --- |" * (3 + len(names))]
    for r in rows:
        cells = " | ".join(f"{r[k]:.1f}" if k in r else "–" for k, _ in names)
        lines.append(f"| {r['dtype']} | {r['F']} | {r['B']:.0e} | {cells} |")
    return lines


def main() -> int:
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="folder for the table (bench_overwrite.md)")
    parser.add_argument("--batches", type=positive_int, nargs="+", default=[10**4, 10**6])
    parser.add_argument("--nodes", type=positive_int, nargs="+", default=NODES)
    parser.add_argument("--features", type=positive_int, nargs="+", default=[1, 64])
    parser.add_argument("--dtypes", type=dtype_names, default=["float32", "float16"])
    args = parser.parse_args()
    require_torch_gpu("bench_overwrite.py")
    import torch

    from plugin.kernels.overwrite import compile_overwrite_ptx, load_overwrite_functions

    torch.zeros(1, device="cuda")  # the primary context, shared with the driver API
    _, functions = load_overwrite_functions(compile_overwrite_ptx())
    bandwidth = copy_bandwidth_bytes_per_s()
    rows, hosts = [], []
    with torch.cuda.stream(torch.cuda.Stream()):  # every method on one created stream
        for dtype_name in args.dtypes:
            for features in args.features:
                for batch in args.batches:
                    for num_nodes in args.nodes:
                        row = device_row(functions, num_nodes, batch, features, dtype_name, bandwidth)
                        rows.append(row)
                        print(f"{dtype_name} F={features} B={batch} N={num_nodes}: " + ", ".join(
                            f"{key} {row[key]:.1f}" for key, _ in METHODS + FLOORS) + " us", file=sys.stderr,
                              flush=True)
                    hosts.append(host_row(functions, batch, features, dtype_name))
    lines = [f"{device_name()}: per-step device time (us, median of many steps after warm-up), a new batch of B "
             f"rows written into N rows of F features per step; copy bandwidth {bandwidth / 1e12:.2f} TB/s "
             "(read + write)", ""] + device_table(rows, args.nodes) + [
             "", "Host time per call (us, median of interleaved batches of 100 calls), N = 1e6, fixed pointers", ""
             ] + host_table(hosts)
    print_and_save("\n".join(lines), args.out, "bench_overwrite.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
