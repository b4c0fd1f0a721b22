"""Host time per call of the plugin's enqueue and of the kernel launch, beside torch's index_add_, in one run.

    python3 benchmarks/bench_enqueue.py [--nodes 1000000] [--edges 10000] [--out DIR]

Every engine execution pays the plugin's enqueue on the host, so a small in-place update is host-bound when
enqueue costs more than the kernel. Rows (float32, F = 1, B edges into N nodes, on torch's current stream):
`ScatterAddPlugin.enqueue` called as an execution context calls it (after on_shape_change, with real TensorRT
PluginTensorDesc objects: PYTHONPATH must give the real `tensorrt` bindings), with and without counts;
`scatter_add_launch` (the keyword entry, a context check and a cache lookup included), with the pointers
read from torch once as the enqueue rows get them, and again with three `data_ptr()` calls in each call (how
BENCHMARKS.md's host table of the 2026-11-30 11:35 run timed it); the launch prepared once per shape
(`PreparedScatterAdd`, what enqueue calls; with counts also with the counts zeroed by a memset before the
kernel instead of inside it); for reference, the driver's own costs: one bare cuLaunchKernel of the same
kernel with the same prepared arguments, through cuda.bindings and through ctypes (Python ints converted by
argtypes, and prebuilt ctypes argument objects), one bare cuMemsetD32Async of the counts and one
cuCtxGetId(NULL) (the keyword entry's context check); torch `index_add_`, and `index_add_` + `bincount` (the
counts). Host time: benchmarks/gpu_timing.py host_us_per_call (100 calls queued back to back,
the stream drained between batches outside the timing; median of 40 batches).
"""

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.gpu_timing import host_us_per_call, print_and_save, require_torch_gpu  # noqa: E402


def plugin_rows(trt: Any, tensors: dict[str, Any], stream: int) -> dict[str, Callable[[], Any]]:
    """enqueue of the plugin with and without counts, set up as an execution context does."""
    from plugin.scatter_add_plugin import ScatterAddPlugin

    state, src, index, counts = tensors["state"], tensors["src"], tensors["index"], tensors["counts"]

    def desc(data_type: Any, shape: tuple[int, ...]) -> Any:
        result = trt.PluginTensorDesc()
        result.type, result.format, result.dims = data_type, trt.TensorFormat.LINEAR, trt.Dims(list(shape))
        return result

    calls = {}
    for compute_counts in (True, False):
        plugin = ScatterAddPlugin(compute_counts=compute_counts).attach_to_context(None)
        inputs = [desc(trt.float32, tuple(state.shape)), desc(trt.float32, tuple(src.shape)),
                  desc(trt.int64, tuple(index.shape))]
        outputs = [desc(trt.float32, tuple(state.shape)), desc(trt.int64, (state.shape[0], 1))][:plugin.num_outputs]
        plugin.on_shape_change(inputs, outputs)
        input_pointers = [state.data_ptr(), src.data_ptr(), index.data_ptr()]
        output_pointers = [state.data_ptr(), counts.data_ptr()][:plugin.num_outputs]

        def enqueue(plugin: Any = plugin, inputs: Any = inputs, outputs: Any = outputs,
                    input_pointers: Any = input_pointers, output_pointers: Any = output_pointers) -> None:
            plugin.enqueue(inputs, outputs, input_pointers, output_pointers, 0, stream)

        calls[f"ScatterAddPlugin.enqueue, {'with' if compute_counts else 'without'} counts"] = enqueue
    return calls


def prepared_plan_zeroes(launch: Any, pointers: tuple[int, ...]) -> bool:
    """Whether this prepared launch zeroes the counts in its scatter kernel (one call instead of two)."""
    plan = launch(*pointers)
    return plan is not None and plan.zeroing


def ctypes_launches(arguments: tuple[Any, ...]) -> dict[str, Callable[[], Any]]:
    """The same launch through libcuda's cuLaunchKernel called with ctypes (no cuda.bindings wrapper): Python
    ints converted by the argtypes in each call, and ctypes argument objects made once."""
    import ctypes

    libcuda = ctypes.CDLL("libcuda.so.1")
    launch = libcuda.cuLaunchKernel
    launch.restype = ctypes.c_int
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes, stream, address, _ = arguments
    as_ints = (int(function), grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes, int(stream), address,
               None)
    prebuilt = (ctypes.c_void_p(int(function)), *(ctypes.c_uint(value) for value in as_ints[1:8]),
                ctypes.c_void_p(int(stream)), ctypes.c_void_p(address), ctypes.c_void_p())

    def with_ints() -> None:
        if launch(*as_ints) != 0:
            raise RuntimeError("cuLaunchKernel failed")

    def with_prebuilt_objects() -> None:
        if launch(*prebuilt) != 0:
            raise RuntimeError("cuLaunchKernel failed")

    return {"bare cuLaunchKernel (libcuda through ctypes, same arguments as ints)": with_ints,
            "bare cuLaunchKernel (libcuda through ctypes, prebuilt ctypes arguments)": with_prebuilt_objects}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=10**6)
    parser.add_argument("--edges", type=int, default=10**4)
    parser.add_argument("--out", type=Path, help="folder for the table (bench_enqueue.md)")
    args = parser.parse_args()
    require_torch_gpu("bench_enqueue.py")
    import torch

    from plugin.kernels import PreparedScatterAdd, scatter_add_launch

    num_nodes, num_edges = args.nodes, args.edges
    tensors = {
        "state": torch.randn(num_nodes, 1, device="cuda"),
        "src": torch.randn(num_edges, 1, device="cuda"),
        "index": torch.randint(0, num_nodes, (num_edges,), device="cuda"),
        "counts": torch.empty(num_nodes, 1, device="cuda", dtype=torch.int64),
    }
    state, src, index, counts = tensors["state"], tensors["src"], tensors["index"], tensors["counts"]
    stream = torch.cuda.current_stream().cuda_stream
    calls: dict[str, Callable[[], Any]] = {}
    notes = []
    try:
        import tensorrt as trt

        calls.update(plugin_rows(trt, tensors, stream))
        notes.append(f"tensorrt {trt.__version__} from {Path(trt.__file__).parent}")
    except ImportError as error:
        notes.append(f"enqueue not timed: tensorrt could not be imported ({error})")
    prepared = {}
    for with_counts in (True, False):
        label = "with" if with_counts else "without"
        counts_ptr = counts.data_ptr() if with_counts else 0

        def keyword_launch(counts_ptr: int = counts_ptr, state_ptr: int = state.data_ptr(),
                           src_ptr: int = src.data_ptr(), index_ptr: int = index.data_ptr()) -> None:
            scatter_add_launch(state=state_ptr, src=src_ptr, index=index_ptr, counts=counts_ptr, num_nodes=num_nodes,
                               num_edges=num_edges, num_features=1, dtype="float32", stream=stream)

        def keyword_launch_reading_pointers(counts_ptr: int = counts_ptr) -> None:
            scatter_add_launch(state=state.data_ptr(), src=src.data_ptr(), index=index.data_ptr(), counts=counts_ptr,
                               num_nodes=num_nodes, num_edges=num_edges, num_features=1, dtype="float32",
                               stream=stream)

        launch = prepared[with_counts] = PreparedScatterAdd(num_nodes=num_nodes, num_edges=num_edges, num_features=1,
                                                            dtype="float32", with_counts=with_counts)
        pointers = (state.data_ptr(), src.data_ptr(), index.data_ptr(), counts_ptr, 0, stream)
        calls[f"scatter_add_launch, {label} counts"] = keyword_launch
        calls[f"scatter_add_launch, {label} counts, data_ptr() read in each call"] = keyword_launch_reading_pointers
        calls[f"PreparedScatterAdd call, {label} counts"] = lambda launch=launch, pointers=pointers: launch(*pointers)
        if with_counts and prepared_plan_zeroes(launch, pointers):
            memset_first = PreparedScatterAdd(num_nodes=num_nodes, num_edges=num_edges, num_features=1,
                                              dtype="float32", with_counts=True, zero_in_kernel=False)
            calls["PreparedScatterAdd call, with counts, memset + launch"] = (
                lambda launch=memset_first, pointers=pointers: launch(*pointers))
    plan = prepared[False](state.data_ptr(), src.data_ptr(), index.data_ptr(), 0, 0, stream)
    plan_with_counts = prepared[True](state.data_ptr(), src.data_ptr(), index.data_ptr(), counts.data_ptr(), 0, stream)
    from cuda.bindings import driver

    launch_kernel, arguments, _ = prepared[False]._calls[0]  # (driver.cuLaunchKernel, its arguments, what)
    calls["bare cuLaunchKernel (cuda.bindings, the prepared call's arguments)"] = lambda: launch_kernel(*arguments)
    calls.update(ctypes_launches(arguments))
    calls["bare cuCtxGetId(NULL) (cuda.bindings: scatter_add_launch's context check)"] = lambda: driver.cuCtxGetId(None)
    counts_words = 2 * num_nodes
    calls["bare cuMemsetD32Async of the counts (cuda.bindings)"] = lambda: driver.cuMemsetD32Async(
        counts.data_ptr(), 0, counts_words, stream)
    calls["torch index_add_"] = lambda: state.index_add_(0, index, src)
    calls["torch index_add_ + bincount"] = lambda: (state.index_add_(0, index, src),
                                                    torch.bincount(index, minlength=num_nodes))
    rows = []
    for name, call in calls.items():
        rows.append((name, host_us_per_call(call)))
        print(f"{name}: {rows[-1][1]:.2f} us per call", flush=True)
    from plugin.kernels.plan import describe

    lines = [f"{torch.cuda.get_device_name()}, Python {sys.version.split()[0]}, torch {torch.__version__}; "
             f"float32, F = 1, B = {num_edges} edges into N = {num_nodes} nodes; plans: without counts "
             f"{describe(plan) if plan else '-'}, with counts {describe(plan_with_counts) if plan_with_counts else '-'}; "
             + "; ".join(notes),
             "", "| call | host us per call (median) |", "| --- | --- |"]
    lines += [f"| {name} | {us:.2f} |" for name, us in rows]
    print_and_save("\n".join(lines), args.out, "bench_enqueue.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
