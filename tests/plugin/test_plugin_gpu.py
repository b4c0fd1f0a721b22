"""The plugin's enqueue on a GPU: real TensorRT descriptors, cuda-python device buffers, a real CUDA stream.

Called the way an execution context calls it: on_shape_change (which loads the kernel), then enqueue with the
device addresses, TensorRT-style workspace and stream. Compared with a float64 reference on fresh random inputs.
On the GPU machine `tensorrt` is TensorRT-RTX (../shared/trt-rtx/prepare): its descriptor types and plugin
bases are real; its runtime cannot run engines there, so enqueue is called directly. No polygraphy, no torch.
"""

import importlib

import numpy as np
import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.trt_standin, pytest.mark.trt_bindings]

DTYPES = {"fp32": np.float32, "fp16": np.float16}


@pytest.fixture(scope="module")
def sap(trt):
    return importlib.import_module("plugin.scatter_add_plugin")


@pytest.fixture(scope="module")
def cuda_runtime():
    from cuda.bindings import runtime

    from common.cuda_check import check

    check(runtime.cudaFree(0))  # makes the device's primary context current, as TensorRT's runtime does
    return runtime


@pytest.fixture
def stream(cuda_runtime):
    from common.cuda_check import check

    handle = check(cuda_runtime.cudaStreamCreate())  # a blocking stream, like the one polygraphy gives TensorRT
    yield int(handle)
    check(cuda_runtime.cudaStreamDestroy(handle))


def random_graph(rng, num_nodes, num_edges, num_features):
    """Node features, a state and edges in which every node has at least one in-edge (when E >= N)."""
    features = rng.standard_normal((num_nodes, num_features))
    state = rng.standard_normal((num_nodes, num_features))
    targets = rng.integers(0, num_nodes, num_edges)
    targets[: min(num_nodes, num_edges)] = rng.permutation(num_nodes)[: min(num_nodes, num_edges)]
    edges = np.stack([rng.integers(0, num_nodes, num_edges), targets], axis=1).astype(np.int64)
    return features, state, edges


def expected_aggregation(features, edges, state):
    """(aggregated, counts) in float64 from reference.gnn_reference, or inline numpy until reference/ exists."""
    try:
        from reference import gnn_reference
    except ImportError:
        aggregated = state.copy()
        np.add.at(aggregated, edges[:, 1], features[edges[:, 0]])
        counts = np.bincount(edges[:, 1], minlength=len(state)).reshape(-1, 1)
        return aggregated, counts
    with np.errstate(invalid="ignore"):  # nodes without in-edges (E = 0) have no mean; only sums are used here
        result = gnn_reference(features, edges, np.ones((1, features.shape[1])), state=state)
    return result["aggregated"], result["counts"]


def plugin_descs(trt, dtype, num_nodes, num_edges, num_features, compute_counts=True):
    feature = trt.float16 if dtype == np.float16 else trt.float32

    def desc(data_type, dims):
        d = trt.PluginTensorDesc()
        d.type, d.format, d.dims = data_type, trt.TensorFormat.LINEAR, trt.Dims(dims)
        return d

    inputs = [desc(feature, [num_nodes, num_features]), desc(feature, [num_edges, num_features]), desc(trt.int64, [num_edges])]
    outputs = [desc(feature, [num_nodes, num_features]), desc(trt.int64, [num_nodes, 1])]
    return inputs, outputs if compute_counts else outputs[:1]


def workspace_for(trt, plugin, inputs, outputs):
    """What TensorRT would allocate: get_workspace_size with these shapes as the profile's maximum."""
    def dynamic(desc):
        d = trt.DynamicPluginTensorDesc()
        d.desc, d.min, d.opt, d.max = desc, desc.dims, desc.dims, desc.dims
        return d

    return plugin.get_workspace_size([dynamic(d) for d in inputs], [dynamic(d) for d in outputs])


def tolerance(precision, state, features, edges, counts):
    """Per-element bound: float32 1e-5 relative to the magnitudes summed; float16 one rounding of the magnitudes
    per addition into the element (each add may round to half precision) plus the final rounding."""
    magnitude = np.abs(state).copy()
    np.add.at(magnitude, edges[:, 1], np.abs(features[edges[:, 0]]))
    if precision == "fp32":
        return 1e-5 * magnitude + 1e-30
    return (counts + 1) * 2.0**-11 * magnitude


def run_enqueue(trt, sap, stream, precision, num_nodes, num_edges, num_features, *, aliased=True, repeats=1, seed=None,
                plugin=None, cuda_graph=False):
    """Runs `plugin` (default: the plugin with counts) the way an execution context does; with a plugin without
    counts the outputs are [aggregated] only, and the poisoned counts buffer is handed to nobody. cuda_graph:
    enqueue runs once, captured into a CUDA graph right after on_shape_change, and the graph is replayed
    `repeats` times (an engine captured with its plugin, as --cuda_graph and trtexec --useCudaGraph run it)."""
    from plugin.cuda_graph import CapturedGraph
    from plugin.device_array import DeviceArray

    from common.cuda_check import check

    runtime = importlib.import_module("cuda.bindings.runtime")
    dtype = np.dtype(DTYPES[precision])
    rng = np.random.default_rng(seed)
    features, state, edges = random_graph(rng, num_nodes, num_edges, num_features)
    features, state = features.astype(dtype).astype(np.float64), state.astype(dtype).astype(np.float64)
    plugin = (sap.ScatterAddPlugin() if plugin is None else plugin).attach_to_context(None)
    inputs, outputs = plugin_descs(trt, dtype, num_nodes, num_edges, num_features, plugin.compute_counts)
    buffers = {
        "state": DeviceArray.from_array(state.astype(dtype)),
        "src": DeviceArray.from_array(features[edges[:, 0]].astype(dtype)),
        "index": DeviceArray.from_array(edges[:, 1]),
        "counts": DeviceArray.from_array(np.full((num_nodes, 1), -7, np.int64)),  # poisoned
        "workspace": DeviceArray((max(workspace_for(trt, plugin, inputs, outputs), 1),), np.uint8),
    }
    if not aliased:
        buffers["output"] = DeviceArray.from_array(np.full((num_nodes, num_features), 99, dtype))  # poisoned
    try:
        plugin.on_shape_change(inputs, outputs)
        output = buffers["state" if aliased else "output"]
        output_pointers = [output.ptr, buffers["counts"].ptr] if plugin.compute_counts else [output.ptr]
        def enqueue():
            plugin.enqueue(inputs, outputs, [buffers["state"].ptr, buffers["src"].ptr, buffers["index"].ptr],
                           output_pointers, buffers["workspace"].ptr, stream)

        if cuda_graph:
            with CapturedGraph(stream, enqueue) as graph:
                for _ in range(repeats):
                    graph.launch()
        else:
            for _ in range(repeats):
                enqueue()
        check(runtime.cudaStreamSynchronize(stream))
        results = {name: buffer.download() for name, buffer in buffers.items() if name != "workspace"}
    finally:
        for buffer in buffers.values():
            buffer.free()
    return features, state, edges, results


# Few nodes, wide rows, many edges: "auto" sorts chunks of edges in shared memory (plan.py chunk_plan; float16
# through its table), as test_the_chunked_sizes_take_the_chunked_path checks on this device.
CHUNKED_SIZES = (1000, 2**22, 32)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
# fp16 at 20,000 x 200,000 x 64 takes the sorted path (plan.py sorting_pays) in get_workspace_size's workspace
@pytest.mark.parametrize("num_nodes, num_edges, num_features",
                         [(7, 40, 1), (1000, 50_000, 3), (20_000, 200_000, 64), CHUNKED_SIZES])
def test_enqueue_adds_into_the_aliased_state(trt, sap, stream, precision, num_nodes, num_edges, num_features):
    features, state, edges, results = run_enqueue(trt, sap, stream, precision, num_nodes, num_edges, num_features)
    aggregated, counts = expected_aggregation(features, edges, state)
    np.testing.assert_array_equal(results["counts"], counts)
    error = np.abs(results["state"].astype(np.float64) - aggregated)
    bound = tolerance(precision, state, features, edges, counts)
    assert np.all(error <= bound), f"largest error {error.max():.3g}, its bound {bound.flat[error.argmax()]:.3g}"


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_the_chunked_sizes_take_the_chunked_path(cuda_runtime, precision):
    """What the plugin's launch plans for CHUNKED_SIZES on this device (cuda_runtime: its context current), with
    counts and its workspace."""
    from plugin.kernels import prepare_kernels, scatter_add_workspace_size
    from plugin.kernels.plan import LaunchRequest, plan_launch

    dtype = np.dtype(DTYPES[precision])
    workspace = scatter_add_workspace_size(*CHUNKED_SIZES, dtype)
    plan = plan_launch(LaunchRequest(*CHUNKED_SIZES, dtype, 4, with_counts=True, workspace=workspace),
                       prepare_kernels(dtype).device)
    assert plan.algorithm == "chunked"


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_enqueue_twice_adds_twice_and_recounts(trt, sap, stream, precision):
    """In place means cumulative: a second enqueue on the same state adds the edges again; counts are re-zeroed."""
    features, state, edges, results = run_enqueue(trt, sap, stream, precision, 500, 5000, 2, repeats=2)
    once, counts = expected_aggregation(features, edges, state)
    twice = once + (once - state)
    np.testing.assert_array_equal(results["counts"], counts)
    bound = 2 * tolerance(precision, state, features, np.concatenate([edges, edges]), 2 * counts)
    assert np.all(np.abs(results["state"].astype(np.float64) - twice) <= bound)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_enqueue_without_aliasing_copies_the_state_first(trt, sap, stream, precision):
    """If TensorRT gave output 0 its own buffer, the result lands there and the input state is left as it was."""
    features, state, edges, results = run_enqueue(trt, sap, stream, precision, 300, 3000, 4, aliased=False)
    aggregated, counts = expected_aggregation(features, edges, state)
    np.testing.assert_array_equal(results["state"].astype(np.float64), state)
    np.testing.assert_array_equal(results["counts"], counts)
    bound = tolerance(precision, state, features, edges, counts)
    assert np.all(np.abs(results["output"].astype(np.float64) - aggregated) <= bound)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_enqueue_with_no_edges_leaves_the_state_and_zeroes_counts(trt, sap, stream, precision):
    _, state, _, results = run_enqueue(trt, sap, stream, precision, 5, 0, 3)
    np.testing.assert_array_equal(results["state"].astype(np.float64), state)
    np.testing.assert_array_equal(results["counts"], np.zeros((5, 1), np.int64))


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("compute_counts", [True, False], ids=["counts", "no counts"])
def test_enqueue_captured_in_a_cuda_graph_adds_at_every_replay(trt, sap, stream, precision, compute_counts):
    """enqueue captured right after on_shape_change (so nothing in it may need a first run), then three replays:
    each adds the batch again, in place, and recounts from zero (fp32 with counts: counts zeroed inside the
    cooperative kernel; fp16: the table's memsets and apply kernel)."""
    plugin = sap.ScatterAddPlugin(compute_counts=compute_counts)
    features, state, edges, results = run_enqueue(trt, sap, stream, precision, 2000, 20_000, 4, repeats=3,
                                                  plugin=plugin, cuda_graph=True)
    once, counts = expected_aggregation(features, edges, state)
    thrice = state + 3 * (once - state)
    np.testing.assert_array_equal(results["counts"], counts if compute_counts else np.full((2000, 1), -7, np.int64))
    bound = 3 * tolerance(precision, state, features, np.concatenate([edges] * 3), 3 * counts)
    assert np.all(np.abs(results["state"].astype(np.float64) - thrice) <= bound)


# --- compute_counts = 0: the state-update network's plugin (one output, no counts, nothing O(N) per execution) ---


def plugin_without_counts(trt, sap):
    """The one-output plugin as a deserialized engine recreates it: from its serialized fields, through the
    registered creator's C++ entry point."""
    fields = sap.ScatterAddPlugin(compute_counts=False).get_fields_to_serialize()
    creator = sap.register_scatter_add_creator()
    plugin = trt.IPluginCreatorV3One.create_plugin(creator, sap.PLUGIN_NAME, fields, trt.TensorRTPhase.RUNTIME)
    assert plugin is not None and plugin.compute_counts is False and plugin.num_outputs == 1
    return plugin


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("num_nodes, num_edges, num_features", [(7, 40, 1), (1000, 50_000, 3), (20_000, 200_000, 64)])
def test_enqueue_without_counts_adds_into_the_aliased_state(trt, sap, stream, precision, num_nodes, num_edges,
                                                            num_features, plugin_registry):
    """One output pointer only (an access to outputs[1] would raise); the poisoned counts buffer stays as it was.
    The plugin comes from the registered creator (plugin_registry: skips over stand-in libraries, which have
    no registry)."""
    features, state, edges, results = run_enqueue(trt, sap, stream, precision, num_nodes, num_edges, num_features,
                                                  plugin=plugin_without_counts(trt, sap))
    aggregated, counts = expected_aggregation(features, edges, state)
    np.testing.assert_array_equal(results["counts"], np.full((num_nodes, 1), -7, np.int64))
    error = np.abs(results["state"].astype(np.float64) - aggregated)
    bound = tolerance(precision, state, features, edges, counts)
    assert np.all(error <= bound), f"largest error {error.max():.3g}, its bound {bound.flat[error.argmax()]:.3g}"


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_enqueue_without_counts_is_cumulative_over_steps(trt, sap, stream, precision):
    """Three executions on one state, as --steps runs them: each adds the batch again."""
    plugin = sap.ScatterAddPlugin(compute_counts=False)
    features, state, edges, results = run_enqueue(trt, sap, stream, precision, 500, 5000, 2, repeats=3, plugin=plugin)
    once, counts = expected_aggregation(features, edges, state)
    thrice = state + 3 * (once - state)
    np.testing.assert_array_equal(results["counts"], np.full((500, 1), -7, np.int64))
    bound = 3 * tolerance(precision, state, features, np.concatenate([edges] * 3), 3 * counts)
    assert np.all(np.abs(results["state"].astype(np.float64) - thrice) <= bound)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_enqueue_without_counts_or_aliasing_copies_the_state_first(trt, sap, stream, precision):
    features, state, edges, results = run_enqueue(trt, sap, stream, precision, 300, 3000, 4, aliased=False,
                                                  plugin=sap.ScatterAddPlugin(compute_counts=False))
    aggregated, counts = expected_aggregation(features, edges, state)
    np.testing.assert_array_equal(results["state"].astype(np.float64), state)
    np.testing.assert_array_equal(results["counts"], np.full((300, 1), -7, np.int64))
    bound = tolerance(precision, state, features, edges, counts)
    assert np.all(np.abs(results["output"].astype(np.float64) - aggregated) <= bound)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_enqueue_without_counts_and_no_edges_leaves_the_state(trt, sap, stream, precision):
    _, state, _, results = run_enqueue(trt, sap, stream, precision, 5, 0, 3, plugin=sap.ScatterAddPlugin(compute_counts=False))
    np.testing.assert_array_equal(results["state"].astype(np.float64), state)
    np.testing.assert_array_equal(results["counts"], np.full((5, 1), -7, np.int64))
