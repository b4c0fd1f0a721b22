"""The plugin's build-time methods, clone, fields and creator, called with TensorRT's real descriptor objects.

Runs on the `trt` fixture: the full TensorRT where installed, else TensorRT-RTX, whose PluginTensorDesc,
DynamicPluginTensorDesc, DataType, TensorFormat, IPluginV3* bases and plugin registry are real. Methods are
called the way TensorRT calls them; where the binding offers a C++ entry point (get_capability_interface,
the creator's create_plugin) the test goes through it, so the C++ side's casts are exercised too.
"""

import importlib
import itertools

import pytest

pytestmark = pytest.mark.trt_standin


@pytest.fixture(scope="module")
def sap(trt):
    """plugin.scatter_add_plugin, imported after the fixture has made `tensorrt` importable."""
    return importlib.import_module("plugin.scatter_add_plugin")


def tensor_desc(trt, dtype, dims, fmt=None, low=None, high=None):
    desc = trt.PluginTensorDesc()
    desc.type = dtype
    desc.format = trt.TensorFormat.LINEAR if fmt is None else fmt
    desc.dims = trt.Dims(dims)
    dynamic = trt.DynamicPluginTensorDesc()
    dynamic.desc = desc
    dynamic.min = trt.Dims(low or dims)
    dynamic.opt = trt.Dims(dims)
    dynamic.max = trt.Dims(high or dims)
    return dynamic


def plugin_io(trt, feature, num_nodes=4, num_edges=6, num_features=3):
    """DynamicPluginTensorDescs of (state, src, index, aggregated, counts) for a consistent combination."""
    return [
        tensor_desc(trt, feature, [num_nodes, num_features]),
        tensor_desc(trt, feature, [num_edges, num_features]),
        tensor_desc(trt, trt.int64, [num_edges]),
        tensor_desc(trt, feature, [num_nodes, num_features]),
        tensor_desc(trt, trt.int64, [num_nodes, 1]),
    ]


def spec_allows(trt, pos, dtype, fmt, state_dtype):
    """Issue 3's table: state float32/float16, src and aggregated the state's dtype, index and counts int64; LINEAR."""
    if fmt != trt.TensorFormat.LINEAR:
        return False
    if pos == 0:
        return dtype in (trt.float32, trt.float16)
    if pos in (1, 3):
        return dtype == state_dtype
    return dtype == trt.int64


def test_plugin_identity(trt, sap):
    plugin = sap.ScatterAddPlugin()
    assert (plugin.plugin_name, plugin.plugin_version, plugin.plugin_namespace) == (
        sap.PLUGIN_NAME,
        sap.PLUGIN_VERSION,
        sap.PLUGIN_NAMESPACE,
    )
    assert plugin.num_outputs == 2


def test_capability_interfaces_pass_tensorrt_casts(trt, sap):
    """Through the C++ entry point: the returned object must cast to the V3One core, build and runtime types."""
    plugin = sap.ScatterAddPlugin()
    for capability in (trt.PluginCapabilityType.CORE, trt.PluginCapabilityType.BUILD, trt.PluginCapabilityType.RUNTIME):
        interface = trt.IPluginV3.get_capability_interface(plugin, capability)
        assert interface is plugin
    assert isinstance(plugin, trt.IPluginV3OneBuildV2)  # the build interface with get_aliased_input


def test_supports_format_combination_every_position_dtype_and_format(trt, sap):
    plugin = sap.ScatterAddPlugin()
    dtypes = [trt.float32, trt.float16, trt.bfloat16, trt.int8, trt.int32, trt.int64, trt.bool, trt.uint8]
    formats = [trt.TensorFormat.LINEAR, trt.TensorFormat.CHW32, trt.TensorFormat.HWC8]
    checked = 0
    for state_dtype, pos, dtype, fmt in itertools.product((trt.float32, trt.float16), range(5), dtypes, formats):
        in_out = plugin_io(trt, state_dtype)
        in_out[pos] = tensor_desc(trt, dtype, list(in_out[pos].desc.dims), fmt)
        for later in range(pos + 1, 5):  # not chosen yet by TensorRT: must not matter
            in_out[later] = tensor_desc(trt, trt.bool, [1], trt.TensorFormat.CHW32)
        expected = spec_allows(trt, pos, dtype, fmt, state_dtype)
        assert plugin.supports_format_combination(pos, in_out, 3) == expected, (state_dtype, pos, dtype, fmt)
        checked += 1
    assert checked == 2 * 5 * len(dtypes) * len(formats)


@pytest.mark.parametrize("feature", ["float32", "float16"])
def test_get_output_data_types(trt, sap, feature):
    plugin = sap.ScatterAddPlugin()
    dtype = getattr(trt, feature)
    assert plugin.get_output_data_types([dtype, dtype, trt.int64]) == [dtype, trt.int64]


def test_get_output_data_types_refuses_mixed_features(trt, sap):
    with pytest.raises(ValueError, match="src"):
        sap.ScatterAddPlugin().get_output_data_types([trt.float32, trt.float16, trt.int64])


def test_get_aliased_input(trt, sap):
    plugin = sap.ScatterAddPlugin()
    assert plugin.get_aliased_input(0) == 0
    assert plugin.get_aliased_input(1) == -1


def test_configure_plugin_checks_dynamic_shapes(trt, sap):
    plugin = sap.ScatterAddPlugin()
    io = [
        tensor_desc(trt, trt.float16, [-1, 3], low=[1, 3], high=[64, 3]),
        tensor_desc(trt, trt.float16, [-1, 3], low=[1, 3], high=[256, 3]),
        tensor_desc(trt, trt.int64, [-1], low=[1], high=[256]),
    ]
    plugin.configure_plugin(io, [])
    io[1] = tensor_desc(trt, trt.float16, [-1, 2])
    with pytest.raises(ValueError, match="features"):
        plugin.configure_plugin(io, [])


def test_get_workspace_size_uses_the_profile_maximum(trt, sap):
    import numpy as np

    kernels = pytest.importorskip("plugin.kernels", reason="plugin.kernels (issue 5) is not in this tree yet")
    if not hasattr(kernels, "scatter_add_workspace_size"):
        pytest.skip("plugin.kernels has no scatter_add_workspace_size yet (issue 5)")
    plugin = sap.ScatterAddPlugin()
    for feature, dtype in ((trt.float32, np.float32), (trt.float16, np.float16)):
        io = [
            tensor_desc(trt, feature, [-1, 3], low=[1, 3], high=[64, 3]),
            tensor_desc(trt, feature, [-1, 3], low=[1, 3], high=[256, 3]),
            tensor_desc(trt, trt.int64, [-1], low=[1], high=[256]),
        ]
        size = plugin.get_workspace_size(io, [])
        assert size == kernels.scatter_add_workspace_size(64, 256, 3, np.dtype(dtype))
        if feature == trt.float32:
            assert size == 0  # the float32 path uses no workspace (issue 5)


def test_clone_is_an_independent_equivalent_plugin(trt, sap):
    plugin = sap.ScatterAddPlugin()
    copy = plugin.clone()
    assert copy is not plugin and isinstance(copy, sap.ScatterAddPlugin)
    assert (copy.plugin_name, copy.plugin_version, copy.num_outputs) == (plugin.plugin_name, plugin.plugin_version, 2)
    assert copy.get_aliased_input(0) == 0
    attached = plugin.attach_to_context(None)
    assert attached is not plugin and isinstance(attached, sap.ScatterAddPlugin)


def test_fields_round_trip_through_the_creator(trt, sap):
    """The plugin serializes no fields; the creator rebuilds an equivalent plugin from them (what deserialization does)."""
    creator = sap.register_scatter_add_creator()
    fields = sap.ScatterAddPlugin().get_fields_to_serialize()
    assert isinstance(fields, trt.PluginFieldCollection) and len(fields) == 0
    for phase in (trt.TensorRTPhase.BUILD, trt.TensorRTPhase.RUNTIME):
        rebuilt = trt.IPluginCreatorV3One.create_plugin(creator, sap.PLUGIN_NAME, fields, phase)  # via C++
        assert isinstance(rebuilt, sap.ScatterAddPlugin)
        assert rebuilt.get_aliased_input(0) == 0 and rebuilt.num_outputs == 2


def test_creator_refuses_unknown_fields(trt, sap):
    import numpy as np

    creator = sap.ScatterAddPluginCreator()
    fields = trt.PluginFieldCollection([trt.PluginField("num_nodes", np.array([4], np.int32), trt.PluginFieldType.INT32)])
    with pytest.raises(ValueError, match="num_nodes"):
        creator.create_plugin(sap.PLUGIN_NAME, fields, trt.TensorRTPhase.RUNTIME)
    # Through TensorRT's C++ entry point the exception becomes a null plugin (TensorRT then reports the error).
    assert trt.IPluginCreatorV3One.create_plugin(creator, sap.PLUGIN_NAME, fields, trt.TensorRTPhase.RUNTIME) is None


def test_creator_describes_the_plugin(trt, sap):
    creator = sap.ScatterAddPluginCreator()
    assert (creator.name, creator.plugin_version, creator.plugin_namespace) == (
        sap.PLUGIN_NAME,
        sap.PLUGIN_VERSION,
        sap.PLUGIN_NAMESPACE,
    )
    assert len(creator.field_names) == 0


def test_registration_is_idempotent(trt, sap):
    registry = trt.get_plugin_registry()
    first = sap.register_scatter_add_creator()
    second = sap.register_scatter_add_creator()
    assert first is second
    assert registry.get_creator(sap.PLUGIN_NAME, sap.PLUGIN_VERSION, sap.PLUGIN_NAMESPACE) is first
    matching = [c for c in registry.all_creators if c.name == sap.PLUGIN_NAME and c.plugin_version == sap.PLUGIN_VERSION]
    assert len(matching) == 1
