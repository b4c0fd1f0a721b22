"""The plugin host on a GPU: the Python plugin's enqueue and the AOT plugins' kernels reached the way TensorRT
reaches them (tests/plugin_host), on real device buffers, checked against float64 (skipped without a GPU or
without the host's layout of TensorRT's bindings).

Python plugin: build phase, then createPlugin(kRUNTIME) from the fields read back, attachToContext,
onShapeChange and enqueue through the bindings' C++ trampoline with outputs[0] == inputs[0] on a CUDA stream,
also several enqueues in a row (the plugin replays a CUDA graph of its launch from the second one on).
AOT plugins: the PTX getKernel returned, loaded with cuModuleLoadData and launched by the host with the grid and
extra arguments getLaunchParams gave, evaluated for the sizes, in the order tensorrt.plugin documents (inputs,
extra arguments, outputs; an aliased output is its input's buffer); the network's fills are memsets here.
"""

import importlib

import numpy as np
import pytest

from tests.test_kernels_gpu import assert_within_bound, reference
from tests.test_plugin_gpu import expected_aggregation, random_graph, tolerance
from tests.test_plugin_host import aot_spec, churn, register_aot_plugins

pytestmark = [pytest.mark.gpu, pytest.mark.trt_bindings]

RNG = np.random.default_rng()
DTYPES = {"float32": np.float32, "float16": np.float16}


@pytest.fixture(scope="module")
def host(trt):
    from tests.plugin_host.host import PluginHost, host_library_path

    if host_library_path() is None:
        pytest.skip("this tensorrt is no plugin host layout (tests/plugin_host/build.py DIR)")
    return PluginHost(trt)


@pytest.fixture(scope="module")
def sap(host):
    module = importlib.import_module("plugin.scatter_add_plugin")
    module.register_scatter_add_creator()
    return module


@pytest.fixture(scope="module")
def stream(host):
    from cuda.bindings import runtime

    from plugin.cuda_check import check

    check(runtime.cudaFree(0))  # the primary context current on this thread, as TensorRT's runtime makes it
    handle = check(runtime.cudaStreamCreate())
    yield int(handle)
    check(runtime.cudaStreamDestroy(handle))


def synchronize(stream):
    from cuda.bindings import runtime

    from plugin.cuda_check import check

    check(runtime.cudaStreamSynchronize(stream))


def build_engine(host, trt, sap, dtype, compute_counts, num_nodes, num_edges, num_features):
    feature = getattr(trt, dtype)
    spec = host.spec([(feature, ["N", num_features]), (feature, ["E", num_features]), (trt.int64, ["E"])],
                     {"N": (1, num_nodes, num_nodes), "E": (1, num_edges, num_edges)},
                     {"compute_counts": [int(compute_counts)]})
    with host.hook(churn):
        engine, report = host.build(sap.PLUGIN_NAME, sap.PLUGIN_VERSION, sap.PLUGIN_NAMESPACE, spec)
    assert report.ok, report
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


# --- AOT plugins: the kernel launched from what the host got through tensorrt.plugin ---------------------------


@pytest.fixture(scope="module")
def aot(host, trt):
    return register_aot_plugins(host, trt)


def aot_engine(host, trt, aot, plugin, dtype_name, num_features):
    from plugin.kernels.aot import AOT_KERNELS

    kernel = AOT_KERNELS[aot.PLUGIN_KERNELS[f"{aot.NAMESPACE}::{plugin}"]]
    engine, report = host.aot_build(plugin, aot.NAMESPACE, aot_spec(host, trt, kernel, dtype_name, num_features))
    assert report.ok, report
    return kernel, engine


def launch(host, engine, kernel, pointers, sizes, stream):
    report = host.aot_launch(engine, sizes, [pointers[name] for name in kernel.inputs], [0] * len(kernel.outputs),
                             stream)
    assert report.ok, report
    return report


@pytest.mark.parametrize("num_nodes, num_edges, num_features", [(1, 0, 1), (7, 1000, 3), (1000, 10**4, 64),
                                                                (10**5, 10**6, 3)])
@pytest.mark.parametrize("with_counts", [False, True], ids=["no counts", "counts"])
@pytest.mark.parametrize("dtype_name", ["float32", "float16"])
def test_aot_kernel_launched_by_the_host_matches_float64(trt, host, aot, stream, dtype_name, with_counts, num_nodes,
                                                         num_edges, num_features):
    from cuda.bindings import driver

    from plugin.cuda_check import check
    from plugin.device_array import DeviceArray
    from plugin.kernels.aot import table_capacity

    dtype = DTYPES[dtype_name]
    state = RNG.standard_normal((num_nodes, num_features)).astype(dtype)
    src = RNG.standard_normal((num_edges, num_features)).astype(dtype)
    index = RNG.integers(0, num_nodes, num_edges, dtype=np.int64)
    capacity = table_capacity(num_edges)
    sizes = {"N": num_nodes, "E": num_edges, "C": capacity}
    buffers = {"state": DeviceArray.from_array(state), "src": DeviceArray.from_array(src),
               "index": DeviceArray.from_array(index)}
    engines = []
    try:
        if with_counts:
            buffers["counts"] = DeviceArray.from_array(np.full((num_nodes, 1), 77, np.int64))
            check(driver.cuMemsetD32Async(buffers["counts"].ptr, 0, 2 * num_nodes, driver.CUstream(stream)))  # a fill
        pointers = {name: buffer.ptr for name, buffer in buffers.items()}
        suffix = "_counts" if with_counts else ""
        if dtype_name == "float32":
            kernel, engine = aot_engine(host, trt, aot, "scatter_add" + suffix, dtype_name, num_features)
            engines.append(engine)
            launch(host, engine, kernel, pointers, sizes, stream)
        else:
            buffers["keys"] = DeviceArray((capacity,), np.int32)
            buffers["values"] = DeviceArray((capacity, num_features), np.float32)
            pointers.update(keys=buffers["keys"].ptr, values=buffers["values"].ptr)
            check(driver.cuMemsetD32Async(pointers["keys"], 0xFFFFFFFF, capacity, driver.CUstream(stream)))
            check(driver.cuMemsetD32Async(pointers["values"], 0, capacity * num_features, driver.CUstream(stream)))
            for plugin in ("scatter_table" + suffix, "apply_table"):
                kernel, engine = aot_engine(host, trt, aot, plugin, dtype_name, num_features)
                engines.append(engine)
                launch(host, engine, kernel, pointers, sizes, stream)
        synchronize(stream)
        out = buffers["state"].download()
        counts = buffers["counts"].download() if with_counts else None
    finally:
        for engine in engines:
            host.free(engine)
        for buffer in buffers.values():
            buffer.free()
    assert_within_bound(out, state, src, index, dtype)
    if with_counts:
        np.testing.assert_array_equal(counts[:, 0], reference(state, src, index)[1])
