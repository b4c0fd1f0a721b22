"""The overwrite mode of the Python plugin (field `overwrite`) and plugin/kernels/overwrite.py's plain functions,
without a GPU: the field's rules, serialization through the creator's C++ entry point, the creator's advertised
fields, the workspace (none), and the launcher's grid and size checks. The kernels' numerics: test_overwrite_gpu.py."""

import importlib

import numpy as np
import pytest

from plugin import rules
from plugin.overwrite_op import MAX_BLOCKS
from plugin.kernels.overwrite import MAX_SIZE, OVERWRITE_KERNELS, overwrite_grid, overwrite_kernel, overwrite_sizes
from reference.gnn import scatter_overwrite_numpy
from tests.plugin.test_plugin import int32_field, profile_inputs, tensor_desc


# --- rules (plain functions) -----------------------------------------------------------------------------
def test_overwrite_defaults_to_adding_and_takes_only_zero_or_one():
    assert rules.DEFAULT_OVERWRITE is False and rules.OVERWRITE_FIELD in rules.FIELD_NAMES
    assert rules.overwrite_from_fields({}) is False
    assert rules.overwrite_from_fields({"overwrite": np.array([1], np.int32)}) is True
    assert rules.as_overwrite(np.int64(0)) is False and rules.as_overwrite(True) is True
    for value in (2, -1, 0.5, "1"):
        with pytest.raises(ValueError, match="overwrite must be 0 or 1"):
            rules.as_overwrite(value)
    with pytest.raises(ValueError, match="overwrite must be one int32 value"):
        rules.overwrite_from_fields({"overwrite": np.array([1, 1], np.int32)})


def test_overwrite_needs_compute_counts_zero_in_one_line():
    rules.check_overwrite(overwrite=True, compute_counts=False)
    rules.check_overwrite(overwrite=False, compute_counts=True)
    with pytest.raises(ValueError, match=r"^overwrite=1 .* needs compute_counts=0, got compute_counts=1$"):
        rules.check_overwrite(overwrite=True, compute_counts=True)


@pytest.mark.parametrize("overwrite", [False, True])
def test_overwrite_fields_round_trip(overwrite):
    fields = rules.fields_to_serialize(compute_counts=False, overwrite=overwrite)
    # an adding plugin serializes compute_counts alone
    assert list(fields) == ["compute_counts"] + (["overwrite"] if overwrite else [])
    assert rules.overwrite_from_fields(fields) is overwrite
    assert rules.compute_counts_from_fields(fields) is False


# --- plugin/kernels/overwrite.py plain functions -------------------------------------------------------------
def test_one_kernel_per_dtype_and_a_grid_of_one_thread_per_word_of_a_row():
    assert sorted(OVERWRITE_KERNELS) == ["overwrite_rows_f16", "overwrite_rows_f32"]
    assert overwrite_kernel(np.float16).name == "overwrite_rows_f16" and overwrite_kernel("float32").name == "overwrite_rows_f32"
    assert overwrite_sizes(100, 7, 3, np.float16) == {"num_nodes": 100, "num_edges": 7, "num_features": 3}
    cases = [  # (E, F, dtype) -> blocks: 16-byte words where a row has whole ones, else one thread per feature
        ((10**6, 64, np.float32), 10**6 * 16 // 256), ((10**6, 8, np.float16), 10**6 // 256 + 1),
        ((1000, 3, np.float32), -(-3000 // 256)), ((0, 5, np.float32), 1), ((10**8, 64, np.float32), MAX_BLOCKS)]
    for (edges, features, dtype), blocks in cases:
        assert overwrite_grid(dtype, overwrite_sizes(10, edges, features, dtype)) == (blocks, 256, 0)


@pytest.mark.parametrize("kwargs, message", [
    ({"num_nodes": -1}, "num_nodes must be an integer from 0 to"),
    ({"num_edges": MAX_SIZE + 1}, "num_edges must be an integer from 0 to"),
    ({"num_features": 0}, "num_features must be from 1 to"),
    ({"num_features": 2**30}, "num_features must be from 1 to"),  # 4 GiB rows: the kernel's int32 row bytes
    ({"dtype": np.float64}, "float32 or float16 state, got float64"),
])
def test_overwrite_sizes_refuse_what_the_kernels_cannot_take(kwargs, message):
    arguments = {"num_nodes": 10, "num_edges": 4, "num_features": 2, "dtype": np.float32} | kwargs
    with pytest.raises(ValueError, match=message):
        overwrite_sizes(**arguments)


def test_the_numpy_reference_is_a_sequential_loop_with_the_last_edge_winning():
    rng = np.random.default_rng(3)
    for _ in range(100):
        nodes, edges, features = (int(n) for n in rng.integers(1, 12, 3))
        state = rng.standard_normal((nodes, features)).astype(np.float16)
        src = rng.standard_normal((edges, features)).astype(np.float16)
        index = rng.integers(-2, nodes + 2, edges)
        expected = state.copy()
        for edge in range(edges):
            if 0 <= index[edge] < nodes:
                expected[index[edge]] = src[edge]
        got = scatter_overwrite_numpy(state, src, index)
        assert got.dtype == state.dtype and np.array_equal(got.view(np.uint16), expected.view(np.uint16))
    assert np.array_equal(scatter_overwrite_numpy(np.zeros((3, 1)), np.array([[1.0], [2.0]]), [1, 1]),
                          [[0.0], [2.0], [0.0]])


# --- the plugin and its creator, on TensorRT's descriptor types --------------------------------------------


@pytest.fixture(scope="module")
def sap(trt):
    return importlib.import_module("plugin.scatter_add_plugin")


@pytest.mark.trt_standin
@pytest.mark.trt_bindings
def test_an_overwriting_plugin_has_one_aliased_output(trt, sap):
    plugin = sap.ScatterAddPlugin(compute_counts=False, overwrite=True)
    assert plugin.num_outputs == 1 and plugin.get_aliased_input(0) == 0
    assert plugin.get_output_data_types([trt.float16, trt.float16, trt.int64]) == [trt.float16]
    clone = plugin.clone()
    assert clone.overwrite is True and clone.compute_counts is False
    with pytest.raises(ValueError, match="needs compute_counts=0"):
        sap.ScatterAddPlugin(overwrite=True)  # compute_counts defaults to 1


@pytest.mark.trt_standin
@pytest.mark.trt_bindings
@pytest.mark.parametrize("dtype_name", ["float32", "float16"])
def test_an_overwriting_plugin_asks_for_no_workspace(trt, sap, dtype_name):
    plugin = sap.ScatterAddPlugin(compute_counts=False, overwrite=True)
    inputs = profile_inputs(trt, getattr(trt, dtype_name))  # E up to 256
    plugin.configure_plugin(inputs, [])
    assert plugin.get_workspace_size(inputs, []) == 0


@pytest.mark.trt_standin
@pytest.mark.trt_bindings
def test_overwrite_fields_round_trip_through_the_creator(trt, sap):
    creator = sap.ScatterAddPluginCreator()
    fields = sap.ScatterAddPlugin(compute_counts=False, overwrite=True).get_fields_to_serialize()
    assert [(f.name, f.type, f.data.tolist()) for f in fields] == [
        ("compute_counts", trt.PluginFieldType.INT32, [0]), ("overwrite", trt.PluginFieldType.INT32, [1])]
    for phase in (trt.TensorRTPhase.BUILD, trt.TensorRTPhase.RUNTIME):
        rebuilt = trt.IPluginCreatorV3One.create_plugin(creator, sap.PLUGIN_NAME, fields, phase)  # via C++
        assert isinstance(rebuilt, sap.ScatterAddPlugin)
        assert (rebuilt.overwrite, rebuilt.compute_counts, rebuilt.num_outputs) == (True, False, 1)
    adding = sap.ScatterAddPlugin(compute_counts=False).get_fields_to_serialize()
    assert [f.name for f in adding] == ["compute_counts"]
    rebuilt = trt.IPluginCreatorV3One.create_plugin(creator, sap.PLUGIN_NAME, adding, trt.TensorRTPhase.RUNTIME)
    assert rebuilt.overwrite is False


@pytest.mark.trt_standin
@pytest.mark.trt_bindings
def test_the_creator_takes_an_onnx_nodes_overwrite_attribute_and_refuses_it_with_counts(trt, sap):
    """TensorRT's ONNX parser passes the node attributes the creator advertises (compute_counts, overwrite)."""
    creator = sap.ScatterAddPluginCreator()
    assert [f.name for f in creator.field_names] == ["compute_counts", "overwrite"]
    zero, one = np.array([0], np.int32), np.array([1], np.int32)
    node = trt.PluginFieldCollection([int32_field(trt, "overwrite", one), int32_field(trt, "compute_counts", zero)])
    plugin = creator.create_plugin(sap.PLUGIN_NAME, node, trt.TensorRTPhase.BUILD)
    assert plugin.overwrite is True and plugin.num_outputs == 1
    with pytest.raises(ValueError, match=r"^ScatterAddInPlace: overwrite=1 .* needs compute_counts=0"):
        creator.create_plugin(sap.PLUGIN_NAME, trt.PluginFieldCollection([int32_field(trt, "overwrite", one)]),
                              trt.TensorRTPhase.BUILD)
    with pytest.raises(ValueError, match="overwrite must be 0 or 1, got 2"):
        creator.create_plugin(sap.PLUGIN_NAME, trt.PluginFieldCollection(
            [int32_field(trt, "overwrite", np.array([2], np.int32)), int32_field(trt, "compute_counts", zero)]),
            trt.TensorRTPhase.BUILD)


@pytest.mark.trt_standin
@pytest.mark.trt_bindings
def test_an_overwriting_plugin_enqueues_its_own_launch(trt, sap, monkeypatch):
    """on_shape_change prepares PreparedOverwrite for the shapes and enqueue hands it (state, src, index,
    stream): no workspace and no counts pointer."""
    from plugin.kernels import overwrite

    calls = []

    class Recorded:
        def __init__(self, **sizes):
            calls.append(("prepare", sizes))

        def __call__(self, *pointers):
            calls.append(("launch", pointers))

    monkeypatch.setattr(overwrite, "PreparedOverwrite", Recorded)
    plugin = sap.ScatterAddPlugin(compute_counts=False, overwrite=True).attach_to_context(None)
    descs = [tensor_desc(trt, trt.float16, [100, 8]).desc, tensor_desc(trt, trt.float16, [5, 8]).desc,
             tensor_desc(trt, trt.int64, [5]).desc]
    plugin.on_shape_change(descs, descs[:1])
    plugin.enqueue(descs, descs[:1], [0x1000, 0x2000, 0x3000], [0x1000], 0x4000, 7)
    assert calls == [("prepare", {"num_nodes": 100, "num_edges": 5, "num_features": 8, "dtype": np.dtype(np.float16)}),
                     ("launch", (0x1000, 0x2000, 0x3000, 7))]
