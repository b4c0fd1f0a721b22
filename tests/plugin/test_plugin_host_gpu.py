"""The plugin host on a GPU: the Python plugin's enqueue and the AOT plugins' kernels reached the way TensorRT
reaches them (tests/plugin_host), on real device buffers, checked against float64 (skipped without a GPU or
without the host's layout of TensorRT's bindings).

Python plugin: build phase (with the builder's timing: onShapeChange at kOPT and enqueue on device buffers of
random bytes, waited for with a time limit), then createPlugin(kRUNTIME) from the fields read back,
attachToContext, onShapeChange and enqueue through the bindings' C++ trampoline with outputs[0] == inputs[0] on a
CUDA stream, also several enqueues in a row (the plugin replays a CUDA graph of its launch from the second one
on), new addresses between enqueues (onShapeChange again), two execution contexts enqueueing at once from two
threads, and enqueue inside the caller's CUDA graph capture.
AOT plugins: the builder's timing launch at kOPT on device buffers of random bytes (the kernel must end within the
time limit, without error), then the PTX getKernel returned, loaded with cuModuleLoadData and launched by the host
with the grid and extra arguments getLaunchParams gave, evaluated for the sizes, in the order tensorrt.plugin
documents (inputs, extra arguments, outputs; an aliased output is its input's buffer), step by step of the project
ops' chains (plugin/scatter_add_op.py); the network's fills are memsets here.
"""

import importlib

import numpy as np
import pytest

from tests.kernels.test_kernels_gpu import assert_within_bound, reference
from tests.plugin.test_plugin_gpu import expected_aggregation, random_graph, tolerance
from tests.plugin.test_plugin_host import aot_build, aot_sizes, block_variant, churn, register_aot_plugins

pytestmark = [pytest.mark.gpu, pytest.mark.trt_bindings]

RNG = np.random.default_rng()
DTYPES = {"float32": np.float32, "float16": np.float16}


@pytest.fixture(scope="module")
def host(trt):
    from tests.plugin_host.host import PluginHost, host_library_path

    if host_library_path() is None:
        pytest.skip("this tensorrt is no plugin host layout (tests/plugin_host/build.py DIR)")
    host = PluginHost(trt)
    host.timing_limit(20.0)  # the builds' timing kernels on made-up inputs: ms each; a kernel that never ends fails
    return host


@pytest.fixture(scope="module")
def sap(host):
    module = importlib.import_module("plugin.scatter_add_plugin")
    module.register_scatter_add_creator()
    return module


@pytest.fixture(scope="module")
def stream(host):
    from cuda.bindings import runtime

    from common.cuda_check import check

    check(runtime.cudaFree(0))  # the primary context current on this thread, as TensorRT's runtime makes it
    handle = check(runtime.cudaStreamCreate())
    yield int(handle)
    check(runtime.cudaStreamDestroy(handle))


def synchronize(stream):
    from cuda.bindings import runtime

    from common.cuda_check import check

    check(runtime.cudaStreamSynchronize(stream))


def build_engine(host, trt, sap, dtype, compute_counts, num_nodes, num_edges, num_features):
    feature = getattr(trt, dtype)
    spec = host.spec([(feature, ["N", num_features]), (feature, ["E", num_features]), (trt.int64, ["E"])],
                     {"N": (1, num_nodes, num_nodes), "E": (1, num_edges, num_edges)},
                     {"compute_counts": [int(compute_counts)]})
    with host.hook(churn):
        engine, report = host.build(sap.PLUGIN_NAME, sap.PLUGIN_VERSION, sap.PLUGIN_NAMESPACE, spec)
    assert report.ok, report
    timing = report.step("IPluginV3OneRuntime::enqueue (build")  # the builder's timing, on made-up device buffers
    assert timing["on_device"] and report.step("the timing enqueue's kernels")["ok"], report
    return engine, report.step("getWorkspaceSize")["bytes"]


def run_through_host(host, trt, sap, stream, dtype, compute_counts, num_nodes, num_edges, num_features, repeats):
    """The plugin's state update through the host: (features, state, edges, results) as test_plugin_gpu's."""
    from plugin.device_array import DeviceArray

    features, state, edges = random_graph(RNG, num_nodes, num_edges, num_features)
    np_dtype = np.dtype(DTYPES[dtype])
    features, state = features.astype(np_dtype).astype(np.float64), state.astype(np_dtype).astype(np.float64)
    engine, workspace_bytes = build_engine(host, trt, sap, dtype, compute_counts, num_nodes, num_edges, num_features)
    buffers = {
        "state": DeviceArray.from_array(state.astype(np_dtype)),
        "src": DeviceArray.from_array(features[edges[:, 0]].astype(np_dtype)),
        "index": DeviceArray.from_array(edges[:, 1]),
        "counts": DeviceArray.from_array(np.full((num_nodes, 1), -7, np.int64)),  # poisoned
        "workspace": DeviceArray((max(workspace_bytes, 1),), np.uint8),
    }
    context = None
    try:
        context, report = host.open(engine, {"N": num_nodes, "E": num_edges})
        assert report.ok, report
        outputs = [0, buffers["counts"].ptr][:2 if compute_counts else 1]  # output 0: the host passes the state's
        report = host.enqueue(context, [buffers["state"].ptr, buffers["src"].ptr, buffers["index"].ptr], outputs,
                              buffers["workspace"].ptr, stream, repeats)
        assert report.ok, report
        assert report.step("IPluginV3OneRuntime::enqueue")["outputs"][0] == buffers["state"].ptr
        synchronize(stream)
        results = {name: buffer.download() for name, buffer in buffers.items() if name != "workspace"}
    finally:
        if context is not None:
            assert host.close(context).ok
        host.free(engine)
        for buffer in buffers.values():
            buffer.free()
    return features, state, edges, results


@pytest.mark.parametrize("num_nodes, num_edges, num_features", [(7, 40, 1), (1000, 50_000, 3), (20_000, 200_000, 64)])
@pytest.mark.parametrize("compute_counts", [True, False], ids=["counts", "no counts"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_enqueue_through_the_host_adds_into_the_aliased_state(trt, host, sap, stream, dtype, compute_counts,
                                                              num_nodes, num_edges, num_features):
    features, state, edges, results = run_through_host(host, trt, sap, stream, dtype, compute_counts, num_nodes,
                                                       num_edges, num_features, repeats=1)
    aggregated, counts = expected_aggregation(features, edges, state)
    expected_counts = counts if compute_counts else np.full((num_nodes, 1), -7, np.int64)
    np.testing.assert_array_equal(results["counts"], expected_counts)
    error = np.abs(results["state"].astype(np.float64) - aggregated)
    bound = tolerance("fp32" if dtype == "float32" else "fp16", state, features, edges, counts)
    assert np.all(error <= bound), f"largest error {error.max():.3g}, its bound {bound.flat[error.argmax()]:.3g}"


@pytest.mark.parametrize("compute_counts", [True, False], ids=["counts", "no counts"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_repeated_enqueues_through_the_host_replay_and_add_each_time(trt, host, sap, stream, dtype, compute_counts):
    """Five enqueues in a row on the same buffers (the launch replays its CUDA graph from the second): five
    additions into the state, counts recounted from zero each time."""
    repeats = 5
    features, state, edges, results = run_through_host(host, trt, sap, stream, dtype, compute_counts, 2000, 20_000,
                                                       4, repeats=repeats)
    once, counts = expected_aggregation(features, edges, state)
    expected = state + repeats * (once - state)
    np.testing.assert_array_equal(results["counts"], counts if compute_counts else np.full((2000, 1), -7, np.int64))
    bound = repeats * tolerance("fp32" if dtype == "float32" else "fp16", state, features,
                                np.concatenate([edges] * repeats), repeats * counts)
    assert np.all(np.abs(results["state"].astype(np.float64) - expected) <= bound)


@pytest.mark.parametrize("compute_counts", [True, False], ids=["counts", "no counts"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_build_times_the_plugin_on_made_up_inputs(trt, host, sap, stream, dtype, compute_counts):
    """The builder's timing at kOPT of a profile much larger than kOPT: device buffers of random bytes (indices,
    values and the workspace the build promised), two enqueues, waited for at most 60 s: the kernels end and
    report no error."""
    feature = getattr(trt, dtype)
    spec = host.spec([(feature, ["N", 3]), (feature, ["E", 3]), (trt.int64, ["E"])],
                     {"N": (1, 5000, 10**6), "E": (1, 50_000, 10**7)}, {"compute_counts": [int(compute_counts)]})
    engine, report = host.build(sap.PLUGIN_NAME, sap.PLUGIN_VERSION, sap.PLUGIN_NAMESPACE, spec)
    host.free(engine)
    assert report.ok, report
    timing = report.step("IPluginV3OneRuntime::enqueue (build")
    assert timing["on_device"] and timing["calls"] == 2 and timing["outputs"][0] == timing["inputs"][0], report
    assert timing["workspace_bytes"] == report.step("getWorkspaceSize")["bytes"]
    assert [d["dims"] for d in report.step("onShapeChange (build: kOPT)")["in"]] == [[5000, 3], [50_000, 3], [50_000]]
    assert report.step("the timing enqueue's kernels on made-up inputs")["ok"], report


class Update:
    """One state update's device buffers and its float64 expectation after `times` executions."""

    def __init__(self, dtype, compute_counts, num_nodes, num_edges, num_features):
        from plugin.device_array import DeviceArray

        np_dtype = np.dtype(DTYPES[dtype])
        self.dtype, self.compute_counts = dtype, compute_counts
        self.features, self.state, self.edges = random_graph(RNG, num_nodes, num_edges, num_features)
        self.features = self.features.astype(np_dtype).astype(np.float64)
        self.state = self.state.astype(np_dtype).astype(np.float64)
        self.buffers = {
            "state": DeviceArray.from_array(self.state.astype(np_dtype)),
            "src": DeviceArray.from_array(self.features[self.edges[:, 0]].astype(np_dtype)),
            "index": DeviceArray.from_array(self.edges[:, 1]),
            "counts": DeviceArray.from_array(np.full((num_nodes, 1), -7, np.int64)),
        }

    def add_workspace(self, nbytes):
        from plugin.device_array import DeviceArray

        self.buffers["workspace"] = DeviceArray((max(nbytes, 1),), np.uint8)

    @property
    def inputs(self):
        return [self.buffers[name].ptr for name in ("state", "src", "index")]

    @property
    def outputs(self):
        return [0, self.buffers["counts"].ptr][:2 if self.compute_counts else 1]

    def check(self, times):
        """The state after `times` additions of the update, the counts of one (or untouched without counts)."""
        once, counts = expected_aggregation(self.features, self.edges, self.state)
        result = self.buffers["state"].download().astype(np.float64)
        expected_counts = counts if self.compute_counts else np.full_like(counts, -7)
        np.testing.assert_array_equal(self.buffers["counts"].download(), expected_counts)
        if times == 0:
            np.testing.assert_array_equal(result, self.state)
            return
        bound = times * tolerance("fp32" if self.dtype == "float32" else "fp16", self.state, self.features,
                                  np.concatenate([self.edges] * times), times * counts)
        error = np.abs(result - (self.state + times * (once - self.state)))
        assert np.all(error <= bound), f"largest error {error.max():.3g} after {times} additions"

    def free(self):
        for buffer in self.buffers.values():
            buffer.free()


def release(host, engine, contexts, updates):
    """Closes the contexts (None: never opened), frees the engine and the updates' buffers."""
    for context in contexts:
        if context is not None:
            assert host.close(context).ok
    host.free(engine)
    for update in updates:
        update.free()


def new_stream():
    from cuda.bindings import runtime

    from common.cuda_check import check

    return int(check(runtime.cudaStreamCreate()))


def destroy_stream(handle):
    from cuda.bindings import runtime

    from common.cuda_check import check

    check(runtime.cudaStreamDestroy(handle))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_new_addresses_between_enqueues(trt, host, sap, stream, dtype):
    """Two updates of the same shapes, enqueued A, B, A, A through one context: each address change calls
    onShapeChange again, and each update gets exactly its own additions."""
    num_nodes, num_edges, num_features = 3000, 30_000, 4
    engine, workspace = build_engine(host, trt, sap, dtype, True, num_nodes, num_edges, num_features)
    updates = [Update(dtype, True, num_nodes, num_edges, num_features) for _ in range(2)]
    context = None
    try:
        updates[0].add_workspace(workspace)
        context, report = host.open(engine, {"N": num_nodes, "E": num_edges})
        assert report.ok, report
        calls = []
        for which in (0, 1, 0, 0):
            update = updates[which]
            report = host.enqueue(context, update.inputs, update.outputs, updates[0].buffers["workspace"].ptr, stream)
            assert report.ok, report
            calls.append(report.calls[0])
        assert calls == ["onShapeChange (at enqueue: addresses changed)"] * 3 + ["IPluginV3OneRuntime::enqueue"]
        synchronize(stream)
        updates[0].check(3)
        updates[1].check(1)
    finally:
        release(host, engine, [context], updates)


@pytest.mark.parametrize("compute_counts", [True, False], ids=["counts", "no counts"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_two_contexts_enqueue_at_once(trt, host, sap, stream, dtype, compute_counts):
    """Two execution contexts of one engine, each with its own buffers, workspace and stream, enqueueing five
    times each at the same time from two threads: each state gets its own five additions."""
    num_nodes, num_edges, num_features, repeats = 2000, 20_000, 4, 5
    engine, workspace = build_engine(host, trt, sap, dtype, compute_counts, num_nodes, num_edges, num_features)
    updates = [Update(dtype, compute_counts, num_nodes, num_edges, num_features) for _ in range(2)]
    streams, contexts = [new_stream(), new_stream()], []
    try:
        for update in updates:
            update.add_workspace(workspace)
            context, report = host.open(engine, {"N": num_nodes, "E": num_edges})
            assert report.ok, report
            contexts.append(context)
        report = host.enqueue_together(contexts, [u.inputs for u in updates], [u.outputs for u in updates],
                                       [u.buffers["workspace"].ptr for u in updates], streams, repeats)
        assert report.ok, report
        for handle in streams:
            synchronize(handle)
        for update in updates:
            update.check(repeats)
    finally:
        release(host, engine, contexts, updates)
        for handle in streams:
            destroy_stream(handle)


@pytest.mark.parametrize("mode", ["global", "thread_local"])
@pytest.mark.parametrize("new_addresses", [False, True], ids=["same addresses", "new addresses"])
@pytest.mark.parametrize("compute_counts", [True, False], ids=["counts", "no counts"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_enqueue_inside_a_cuda_graph_capture(trt, host, sap, stream, dtype, compute_counts, new_addresses, mode):
    """One enqueue outside any capture, then one inside the caller's capture of a created stream (global mode, as
    torch.cuda.graph captures by default, and thread-local), the graph replayed four times: with the
    same addresses the state gets 1 + 4 additions; with new ones onShapeChange runs inside the capture and the
    other state gets the four."""
    num_nodes, num_edges, num_features, replays = 2000, 20_000, 4, 4
    handle = new_stream()
    engine, workspace = build_engine(host, trt, sap, dtype, compute_counts, num_nodes, num_edges, num_features)
    updates = [Update(dtype, compute_counts, num_nodes, num_edges, num_features) for _ in range(2)]
    context = None
    try:
        updates[0].add_workspace(workspace)
        space = updates[0].buffers["workspace"].ptr
        context, report = host.open(engine, {"N": num_nodes, "E": num_edges})
        assert report.ok, report
        assert host.enqueue(context, updates[0].inputs, updates[0].outputs, space, handle).ok
        captured = updates[1] if new_addresses else updates[0]
        report = host.enqueue_captured(context, captured.inputs, captured.outputs, space, handle, replays, mode)
        assert report.ok, report
        assert report.calls[0].startswith("onShapeChange") == new_addresses, report
        synchronize(handle)
        if new_addresses:
            updates[0].check(1)
            updates[1].check(replays)
        else:
            updates[0].check(1 + replays)
    finally:
        release(host, engine, [context], updates)
        destroy_stream(handle)


# --- AOT plugins: the kernel launched from what the host got through tensorrt.plugin ---------------------------


@pytest.fixture(scope="module")
def aot(host, trt):
    return register_aot_plugins(host, trt)


def aot_engine(host, trt, variant, num_features):
    """The step's plugin built by the host (its timing launch at kOPT on random bytes included): (kernel, engine)."""
    kernel, engine, report = aot_build(host, trt, variant, num_features)
    assert report.ok, report
    # the builder's timing: the kernel launched at kOPT on device buffers of random bytes, ended without error
    assert report.step("the timing launch's kernel on made-up inputs")["ok"], report
    return kernel, engine


def run_chain_by_the_host(host, trt, op, chain, dtypes, buffers, num_nodes, num_edges, num_features, stream):
    """The chain as an engine runs it: each scratch tensor allocated and filled (memsets where the network has
    fill layers), then each step's plugin built by the host and its kernel launched by it, in order."""
    from cuda.bindings import driver

    from common.cuda_check import check
    from inplace.launch import fill_words, scratch_bytes
    from plugin.device_array import DeviceArray

    sizes = {"N": num_nodes, "E": num_edges, "F": num_features}
    for scratch in chain.scratch:
        nbytes = scratch_bytes(chain, sizes)[scratch.name]
        buffers[scratch.name] = DeviceArray((max(nbytes, 1),), np.uint8)
        buffers[scratch.name].fill_bytes(0x5A)  # garbage the fill must replace (an unfilled one keeps it)
        if scratch.fill is None:
            continue
        pattern, per_element = fill_words(scratch.dtype, scratch.fill)
        words = nbytes // {"float32": 4, "int32": 4, "int64": 8}[scratch.dtype] * per_element
        if words:
            check(driver.cuMemsetD32Async(buffers[scratch.name].ptr, pattern, words, driver.CUstream(stream)))
    pointers = {name: buffer.ptr for name, buffer in buffers.items()}
    engines = []
    try:
        for step in chain.steps:
            kernel, engine = aot_engine(host, trt, (op, chain, step, dtypes), num_features)
            engines.append(engine)
            report = host.aot_launch(engine, aot_sizes(chain, num_nodes, num_edges, num_features),
                                     [pointers[name] for name in step.inputs], [0] * len(step.outputs), stream)
            assert report.ok, report
        synchronize(stream)
    finally:
        for engine in engines:
            host.free(engine)


@pytest.mark.parametrize("num_nodes, num_edges, num_features", [(1, 0, 1), (7, 1000, 3), (1000, 10**4, 64),
                                                                (10**5, 10**6, 3)])
@pytest.mark.parametrize("with_counts", [False, True], ids=["no counts", "counts"])
@pytest.mark.parametrize("dtype_name", ["float32", "float16"])
def test_aot_kernel_launched_by_the_host_matches_float64(trt, host, aot, stream, dtype_name, with_counts, num_nodes,
                                                         num_edges, num_features):
    """The float32 state chain or the float16 table chain (plugin/scatter_add_op.py), with or without counts."""
    from plugin.device_array import DeviceArray
    from plugin.scatter_add_op import SCATTER_ADD, SCATTER_ADD_COUNTS, state_chain, table_chain

    dtype = DTYPES[dtype_name]
    state = RNG.standard_normal((num_nodes, num_features)).astype(dtype)
    src = RNG.standard_normal((num_edges, num_features)).astype(dtype)
    index = RNG.integers(0, num_nodes, num_edges, dtype=np.int64)
    op = SCATTER_ADD_COUNTS if with_counts else SCATTER_ADD
    chain = state_chain(with_counts) if dtype_name == "float32" else table_chain(with_counts)
    dtypes = {"state": dtype_name, "src": dtype_name, "index": "int64",
              **{scratch.name: scratch.dtype for scratch in chain.scratch}}
    buffers = {"state": DeviceArray.from_array(state), "src": DeviceArray.from_array(src),
               "index": DeviceArray.from_array(index)}
    try:
        run_chain_by_the_host(host, trt, op, chain, dtypes, buffers, num_nodes, num_edges, num_features, stream)
        out = buffers["state"].download()
        counts = buffers["counts"].download().view(np.int64)[:num_nodes] if with_counts else None
    finally:
        for buffer in buffers.values():
            buffer.free()
    assert_within_bound(out, state, src, index, dtype)
    if with_counts:
        np.testing.assert_array_equal(counts, reference(state, src, index)[1])


@pytest.mark.parametrize("num_nodes, num_edges", [(1, 0), (1000, 1000), (10**6, 1024)])
def test_aot_one_block_launched_by_the_host_matches_float64(trt, host, aot, stream, num_nodes, num_edges):
    """add_block (the float16 chain of a profile of at most 1024 edges, F = 1), built through the host (its timing
    launch on random bytes at kOPT included) and launched by it: no table, one block."""
    from plugin.device_array import DeviceArray

    op, chain, _, dtypes = block_variant()
    state = RNG.standard_normal((num_nodes, 1)).astype(np.float16)
    src = RNG.standard_normal((num_edges, 1)).astype(np.float16)
    index = RNG.integers(0, num_nodes, num_edges, dtype=np.int64)
    buffers = {"state": DeviceArray.from_array(state), "src": DeviceArray.from_array(src),
               "index": DeviceArray.from_array(index)}
    try:
        run_chain_by_the_host(host, trt, op, chain, dtypes, buffers, num_nodes, num_edges, 1, stream)
        out = buffers["state"].download()
    finally:
        for buffer in buffers.values():
            buffer.free()
    assert_within_bound(out, state, src, index, np.float16)
