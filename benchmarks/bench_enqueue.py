"""Host time per call of the plugin's enqueue and of the kernel launch, beside torch's index_add_, in one run.

    python3 benchmarks/bench_enqueue.py [--nodes 1000000] [--edges 10000] [--out DIR]

Every engine execution pays the plugin's enqueue on the host, so a small in-place update is host-bound when
enqueue costs more than the kernel. Rows (float32, F = 1, B edges into N nodes, on torch's current stream):
`ScatterAddPlugin.enqueue` called as an execution context calls it (after on_shape_change, with real TensorRT
PluginTensorDesc objects: PYTHONPATH must give the real `tensorrt` bindings), with and without counts, as
shipped (its prepared launch replays a CUDA graph of its driver calls from the second call on) and with graph
replay off (the driver calls every time); `scatter_add_launch` (the keyword entry, a context check and a cache
lookup included), with the pointers read from torch once as the enqueue rows get them, and again with three
`data_ptr()` calls in each call; the launch prepared once per shape (`PreparedScatterAdd`, what enqueue
calls): replaying its graph, and with graph replay off, each row naming the driver calls it makes; for
reference, the driver's own costs: the same kernel with the same packed arguments launched bare through
cuda.bindings' cuLaunchKernel, cuLaunchKernelEx with a CUlaunchConfig made once and libcuda's cuLaunchKernel through ctypes
(Python ints converted by argtypes, and prebuilt ctypes argument objects), one bare cuMemsetD32Async of the
counts and one cuCtxGetId(NULL) (the keyword entry's context check); torch `index_add_`, and `index_add_` +
`bincount` (the counts); cuGraphLaunch of the launch and of each enqueue captured by the caller into a CUDA
graph on a side stream (plugin.cuda_graph: what an execution of a captured engine costs on the host, with no
Python per execution); and, where `tensorrt` is the plugin host's layout (tests/plugin_host), enqueue called as
TensorRT's runtime calls it, through the bindings' C++ trampoline, timed by the host in C++ (host_trampoline_rows,
its own batches after the interleaved rows). Host time: benchmarks/gpu_timing.py
host_us_per_call_interleaved (100 calls queued back to back, the stream drained between batches outside the
timing; the rows interleaved batch by batch, so that all see the same machine state; median of 40 batches).
"""

import functools
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.arguments import ArgumentParser, positive_int  # noqa: E402
from benchmarks.gpu_timing import (  # noqa: E402
    driver_calls,
    host_us_per_call_interleaved,
    print_and_save,
    require_torch_gpu,
)


def plugin_rows(trt: Any, tensors: dict[str, Any], stream: int, *, graph_replay: bool = True
                ) -> dict[str, Callable[[], Any]]:
    """enqueue of the plugin with and without counts, set up as an execution context does (graph_replay False:
    its prepared launch issues the driver calls every time instead of replaying its graph)."""
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
        plugin._launch.graph_replay = graph_replay
        input_pointers = [state.data_ptr(), src.data_ptr(), index.data_ptr()]
        output_pointers = [state.data_ptr(), counts.data_ptr()][:plugin.num_outputs]

        def enqueue(plugin: Any = plugin, inputs: Any = inputs, outputs: Any = outputs,
                    input_pointers: Any = input_pointers, output_pointers: Any = output_pointers) -> None:
            plugin.enqueue(inputs, outputs, input_pointers, output_pointers, 0, stream)

        how = "" if graph_replay else ", graph replay off (the driver calls every time)"
        calls[f"ScatterAddPlugin.enqueue, {'with' if compute_counts else 'without'} counts{how}"] = enqueue
    return calls


def trampoline_context(trt: Any, host: Any, num_nodes: int, num_edges: int, compute_counts: bool
                       ) -> tuple[int, int, int]:
    """The plugin host's engine and execution context for float32, F = 1, B edges into N nodes, as TensorRT's
    runtime makes them (build phase with its timing enqueue, createPlugin(kRUNTIME) from the serialized fields,
    attachToContext, onShapeChange): (engine, context, workspace bytes the build promised); RuntimeError with
    the host's report where a step failed (the engine freed)."""
    from plugin.scatter_add_plugin import PLUGIN_NAME, PLUGIN_NAMESPACE, PLUGIN_VERSION

    spec = host.spec([(trt.float32, ["N", 1]), (trt.float32, ["E", 1]), (trt.int64, ["E"])],
                     {"N": (1, num_nodes, num_nodes), "E": (1, num_edges, num_edges)},
                     {"compute_counts": [int(compute_counts)]})
    engine, report = host.build(PLUGIN_NAME, PLUGIN_VERSION, PLUGIN_NAMESPACE, spec)
    if engine is None:
        raise RuntimeError(f"plugin host, build: {report.error}")
    workspace_bytes = report.step("getWorkspaceSize")["bytes"]
    context, report = host.open(engine, {"N": num_nodes, "E": num_edges})
    if context is None:
        host.free(engine)
        raise RuntimeError(f"plugin host, runtime: {report.error}")
    return engine, context, workspace_bytes


def host_trampoline_rows(trt: Any, tensors: dict[str, Any], stream: int, *, batch: int = 100, batches: int = 40
                         ) -> dict[str, float]:
    """Host us per call of the plugin's enqueue as TensorRT's runtime calls it: through the bindings' C++ trampoline
    (pyPlugin.cpp: GIL taken, descriptors and pointers converted, the Python method called), from the plugin host
    (tests/plugin_host), which times each batch of `batch` enqueues in C++ around the calls only, with the GIL
    released as execute_async_v3 releases it. The engine and context are the host's (trampoline_context);
    outputs[0] is the state (aliased), the workspace the build promised. A sleep kernel before each batch keeps
    the GPU busy; median of `batches`. Empty where the `tensorrt` imported is not the host's layout
    (tests/plugin_host/build.py)."""
    import torch

    from benchmarks.gpu_timing import HOST_SLEEP_CYCLES

    try:
        from tests.plugin_host.host import PluginHost, host_library_path
    except ImportError:
        return {}
    if host_library_path() is None:
        print("no plugin host in this tensorrt's layout (tests/plugin_host/build.py DIR): trampoline rows skipped",
              flush=True)
        return {}
    from plugin.scatter_add_plugin import register_scatter_add_creator

    register_scatter_add_creator()
    try:
        host = PluginHost(trt)
    except RuntimeError as error:  # e.g. a host built from another plugin_host.cpp: the rows would time it
        print(f"trampoline rows skipped: {error}", flush=True)
        return {}
    state, src, index, counts = tensors["state"], tensors["src"], tensors["index"], tensors["counts"]
    rows = {}
    for compute_counts in (True, False):
        try:
            engine, context, workspace_bytes = trampoline_context(trt, host, state.shape[0], index.shape[0],
                                                                  compute_counts)
        except RuntimeError as error:
            print(error, flush=True)
            continue
        workspace = torch.empty(max(workspace_bytes, 1), dtype=torch.uint8, device="cuda")
        pointers = [state.data_ptr(), src.data_ptr(), index.data_ptr()]
        outputs = [0, counts.data_ptr()][:2 if compute_counts else 1]
        times = []
        for round_index in range(batches + 1):  # the first batch warms up (graph capture on the second call)
            torch.cuda._sleep(HOST_SLEEP_CYCLES)
            report = host.enqueue(context, pointers, outputs, workspace.data_ptr(), stream, repeats=batch + 1)
            if not report.ok:
                raise RuntimeError(f"enqueue through the plugin host failed: {report}")
            if round_index:
                times.append(host.enqueue_ns(context) / batch / 1e3)
            torch.cuda.synchronize()
        host.close(context)
        host.free(engine)
        rows[f"ScatterAddPlugin.enqueue through the bindings' C++ trampoline (plugin host, timed in C++ around "
             f"{batch} calls), {'with' if compute_counts else 'without'} counts"] = statistics.median(times)
    return rows


def launch_form_of(launch: Any, pointers: tuple[int, ...]) -> str:
    """The driver calls a prepared launch issues, e.g. "cuMemsetD32Async + cuLaunchKernel" (binds it to the pointers)."""
    return " + ".join(call.__name__ for call, _, _ in driver_calls(launch, *pointers))


def kernel_launch_shape(launch: Any, pointers: tuple[int, ...]) -> tuple[Any, ...]:
    """(function, grid x, grid y, block size, shared bytes, arguments) of the one kernel of a prepared launch
    bound to `pointers` (state, src, index, counts, workspace, stream)."""
    from plugin.kernels.launch import MEMSET

    (operation,) = [operation for operation in launch.bind(*pointers) if operation[0] != MEMSET]
    _, function, grid_x, grid_y, shared_bytes, arguments, _, block = operation  # PreparedScatterAdd.bind's kernel
    return function, grid_x, grid_y, block, shared_bytes, arguments


def bare_launches(driver: Any, launch: Any, pointers: tuple[int, ...]) -> dict[str, Callable[[], Any]]:
    """The kernel of a prepared launch (bound to `pointers`, its arguments packed) launched straight through
    cuda.bindings' cuLaunchKernel and cuLaunchKernelEx with a CUlaunchConfig made once, and through ctypes."""
    from common.cuda_check import check

    def row(function: Any, arguments: tuple[Any, ...], keep: Any) -> Callable[[], Any]:
        check(function(*arguments), call=f"{function.__name__} (bare launch row)")  # once: a failing form is no row
        return lambda: (function(*arguments), keep)  # keep: the packed arguments stay alive with the row

    stream = driver.CUstream(int(pointers[-1]))
    function, grid_x, grid_y, block, shared_bytes, packed = kernel_launch_shape(launch, pointers)
    shape = (function, grid_x, grid_y, 1, block, 1, 1, shared_bytes, stream)
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid_x, grid_y, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = block, 1, 1
    config.sharedMemBytes, config.hStream = shared_bytes, stream
    calls = {"bare cuLaunchKernel, kernelParams (cuda.bindings)": row(driver.cuLaunchKernel,
                                                                     (*shape, packed.address, 0), packed)}
    calls.update(ctypes_launches((*shape, packed.address, 0), packed))
    calls["bare cuLaunchKernelEx prebuilt CUlaunchConfig, kernelParams"] = row(
        driver.cuLaunchKernelEx, (config, function, packed.address, 0), packed)
    return calls


def ctypes_launches(arguments: tuple[Any, ...], keep: Any = None) -> dict[str, Callable[[], Any]]:
    """The same launch through libcuda's cuLaunchKernel called with ctypes (no cuda.bindings wrapper): Python
    ints converted by the argtypes in each call, and ctypes argument objects made once; `keep` is what the
    kernelParams address points into, kept alive by the rows."""
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

    def with_ints(keep: Any = keep) -> None:
        if launch(*as_ints) != 0:
            raise RuntimeError("cuLaunchKernel failed")

    def with_prebuilt_objects(keep: Any = keep) -> None:
        if launch(*prebuilt) != 0:
            raise RuntimeError("cuLaunchKernel failed")

    return {"bare cuLaunchKernel (libcuda through ctypes, same arguments as ints)": with_ints,
            "bare cuLaunchKernel (libcuda through ctypes, prebuilt ctypes arguments)": with_prebuilt_objects}


def captured_rows(trt: Any, tensors: dict[str, Any]) -> dict[str, Any]:
    """scatter_add_launch and (where `trt` is given) the plugin's enqueue, with and without counts, each run once
    and then captured into a CUDA graph on a side stream (plugin.cuda_graph): what an execution costs on the
    host when the engine is captured and replayed (--cuda_graph, trtexec --useCudaGraph)."""
    import torch

    from plugin.cuda_graph import CapturedGraph
    from plugin.kernels import scatter_add_launch

    state, src, index, counts = tensors["state"], tensors["src"], tensors["index"], tensors["counts"]
    side = torch.cuda.Stream().cuda_stream  # capture needs a created stream; torch's default one is stream 0
    to_capture: dict[str, Callable[[], Any]] = {}
    for with_counts in (True, False):
        counts_ptr = counts.data_ptr() if with_counts else 0
        to_capture[f"cuGraphLaunch: a replay of the captured scatter_add_launch, {'with' if with_counts else 'without'} "
                   "counts"] = functools.partial(
            scatter_add_launch, state=state.data_ptr(), src=src.data_ptr(), index=index.data_ptr(), counts=counts_ptr,
            num_nodes=state.shape[0], num_edges=index.shape[0], num_features=1, dtype="float32", stream=side)
    if trt is not None:
        for name, enqueue in plugin_rows(trt, tensors, side).items():
            to_capture[f"cuGraphLaunch: a replay of the captured {name}"] = enqueue
    graphs = {}
    for name, call in to_capture.items():
        call()  # first-run work outside the capture
        graphs[name] = CapturedGraph(side, call)
    return graphs


def main() -> int:
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=positive_int, default=10**6)
    parser.add_argument("--edges", type=positive_int, default=10**4)
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
    trt: Any = None
    try:
        import tensorrt as trt

        calls.update(plugin_rows(trt, tensors, stream))
        calls.update(plugin_rows(trt, tensors, stream, graph_replay=False))
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
        replaying = PreparedScatterAdd(num_nodes=num_nodes, num_edges=num_edges, num_features=1, dtype="float32",
                                       with_counts=with_counts)
        calls[f"PreparedScatterAdd call, {label} counts, graph replay (the default: cuStreamIsCapturing + "
              "cuGraphLaunch)"] = lambda launch=replaying, pointers=pointers: launch(*pointers)
        launch.graph_replay = False
        calls[f"PreparedScatterAdd call, {label} counts, graph replay off ({launch_form_of(launch, pointers)})"] = (
            lambda launch=launch, pointers=pointers: launch(*pointers))
    graphs = captured_rows(trt, tensors)
    calls.update({name: graph.launch for name, graph in graphs.items()})
    plan = prepared[False](state.data_ptr(), src.data_ptr(), index.data_ptr(), 0, 0, stream)
    plan_with_counts = prepared[True](state.data_ptr(), src.data_ptr(), index.data_ptr(), counts.data_ptr(), 0, stream)
    from cuda.bindings import driver

    calls.update(bare_launches(driver, prepared[False], (state.data_ptr(), src.data_ptr(), index.data_ptr(), 0, 0,
                                                          stream)))
    calls["bare cuCtxGetId(NULL) (cuda.bindings: scatter_add_launch's context check)"] = lambda: driver.cuCtxGetId(None)
    counts_words = 2 * num_nodes
    calls["bare cuMemsetD32Async of the counts (cuda.bindings)"] = lambda: driver.cuMemsetD32Async(
        counts.data_ptr(), 0, counts_words, stream)
    calls["torch index_add_"] = lambda: state.index_add_(0, index, src)
    calls["torch index_add_ + bincount"] = lambda: (state.index_add_(0, index, src),
                                                    torch.bincount(index, minlength=num_nodes))
    print(f"timing {len(calls)} rows, interleaved", flush=True)
    rows = list(host_us_per_call_interleaved(calls).items())
    if trt is not None:
        rows += list(host_trampoline_rows(trt, tensors, stream).items())
    for name, us in rows:
        print(f"{name}: {us:.2f} us per call", flush=True)
    from plugin.kernels.plan import describe

    lines = [f"{torch.cuda.get_device_name()}, Python {sys.version.split()[0]}, torch {torch.__version__}; "
             f"float32, F = 1, B = {num_edges} edges into N = {num_nodes} nodes; plans: without counts "
             f"{describe(plan) if plan else '-'}, with counts {describe(plan_with_counts) if plan_with_counts else '-'}; "
             + "; ".join(notes),
             "", "| call | host us per call (median) |", "| --- | --- |"]
    lines += [f"| {name} | {us:.2f} |" for name, us in rows]
    print_and_save("\n".join(lines), args.out, "bench_enqueue.md")
    for graph in graphs.values():
        graph.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
