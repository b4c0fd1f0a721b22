"""The plugin's build-time methods, clone, fields and creator, called with TensorRT's real descriptor objects.

Runs on the `trt` fixture: the full TensorRT where installed, else TensorRT-RTX, whose PluginTensorDesc,
DynamicPluginTensorDesc, DataType, TensorFormat, IPluginV3* bases and plugin registry are real; and in CI's
real-bindings matrix on TensorRT's own Python bindings of 10.4 ... 11.4 over stand-in libraries (no registry:
the test that registers the creator skips there). Methods are called the way TensorRT calls them; where the
binding offers a C++ entry point (get_capability_interface, the creator's create_plugin) the test goes
through it, so the C++ side's casts are exercised too.
"""

import gc
import importlib
import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.trt_standin, pytest.mark.trt_bindings]

ROOT = Path(__file__).resolve().parents[2]


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


def plugin_io(trt, feature, num_nodes=4, num_edges=6, num_features=3, compute_counts=True):
    """DynamicPluginTensorDescs of (state, src, index, aggregated[, counts]) for a consistent combination."""
    io = [
        tensor_desc(trt, feature, [num_nodes, num_features]),
        tensor_desc(trt, feature, [num_edges, num_features]),
        tensor_desc(trt, trt.int64, [num_edges]),
        tensor_desc(trt, feature, [num_nodes, num_features]),
        tensor_desc(trt, trt.int64, [num_nodes, 1]),
    ]
    return io if compute_counts else io[:4]


def profile_inputs(trt, feature):
    """DynamicPluginTensorDescs of (state, src, index) with dynamic N (1..64) and E (1..256), F = 3."""
    return [
        tensor_desc(trt, feature, [-1, 3], low=[1, 3], high=[64, 3]),
        tensor_desc(trt, feature, [-1, 3], low=[1, 3], high=[256, 3]),
        tensor_desc(trt, trt.int64, [-1], low=[1], high=[256]),
    ]


def plugin_key(sap):
    """(name, version, namespace) that the plugin and its creator must both report."""
    return (sap.PLUGIN_NAME, sap.PLUGIN_VERSION, sap.PLUGIN_NAMESPACE)


def int32_field(trt, name, values, field_type=None):
    """A PluginField as TensorRT's Python API takes it: a numpy array (kept alive by the caller) and its type."""
    return trt.PluginField(name, values, trt.PluginFieldType.INT32 if field_type is None else field_type)


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
    assert (plugin.plugin_name, plugin.plugin_version, plugin.plugin_namespace) == plugin_key(sap)
    assert plugin.num_outputs == 2 and plugin.compute_counts is True
    without_counts = sap.ScatterAddPlugin(compute_counts=False)
    assert without_counts.num_outputs == 1 and without_counts.compute_counts is False
    assert sap.ScatterAddPlugin(compute_counts=0).num_outputs == 1


@pytest.mark.parametrize("value", [2, -1, "0", None])
def test_plugin_refuses_a_compute_counts_other_than_0_or_1(trt, sap, value):
    with pytest.raises(ValueError, match="compute_counts must be 0 or 1"):
        sap.ScatterAddPlugin(compute_counts=value)


def test_capability_interfaces_pass_tensorrt_casts(trt, sap):
    """Through the C++ entry point: the returned object must cast to the V3One core, build and runtime types."""
    plugin = sap.ScatterAddPlugin()
    for capability in (trt.PluginCapabilityType.CORE, trt.PluginCapabilityType.BUILD, trt.PluginCapabilityType.RUNTIME):
        interface = trt.IPluginV3.get_capability_interface(plugin, capability)
        assert interface is plugin
    assert isinstance(plugin, trt.IPluginV3OneBuildV2)  # the build interface with get_aliased_input


@pytest.mark.parametrize("compute_counts", [True, False])
def test_supports_format_combination_every_position_dtype_and_format(trt, sap, compute_counts):
    """Positions 0-4 of the two-output plugin; positions 0-3 of the one-output plugin (it has no counts)."""
    plugin = sap.ScatterAddPlugin(compute_counts=compute_counts)
    positions = 5 if compute_counts else 4
    dtypes = [trt.float32, trt.float16, trt.bfloat16, trt.int8, trt.int32, trt.int64, trt.bool, trt.uint8]
    formats = [trt.TensorFormat.LINEAR, trt.TensorFormat.CHW32, trt.TensorFormat.HWC8]
    checked = 0
    for state_dtype, pos, dtype, fmt in itertools.product((trt.float32, trt.float16), range(positions), dtypes, formats):
        in_out = plugin_io(trt, state_dtype, compute_counts=compute_counts)
        in_out[pos] = tensor_desc(trt, dtype, list(in_out[pos].desc.dims), fmt)
        for later in range(pos + 1, positions):  # not chosen yet by TensorRT: must not matter
            in_out[later] = tensor_desc(trt, trt.bool, [1], trt.TensorFormat.CHW32)
        expected = spec_allows(trt, pos, dtype, fmt, state_dtype)
        assert plugin.supports_format_combination(pos, in_out, 3) == expected, (state_dtype, pos, dtype, fmt)
        checked += 1
    assert checked == 2 * positions * len(dtypes) * len(formats)


class ChosenUpTo:
    """TensorRT's in_out for a call at `pos`: real descriptors, where reading one past `pos` fails the test
    (TensorRT leaves them undefined). len() is allowed: it reads no descriptor."""

    def __init__(self, descriptors, pos):
        self.descriptors, self.pos, self.touched = list(descriptors), pos, []

    def __len__(self):
        return len(self.descriptors)

    def __getitem__(self, index):
        if not isinstance(index, int) or not 0 <= index <= self.pos:
            self.touched.append(index)
            raise AssertionError(f"supports_format_combination(pos={self.pos}) read in_out[{index}]")
        return self.descriptors[index]

    def __iter__(self):
        self.touched.append("iter")
        raise AssertionError(f"supports_format_combination(pos={self.pos}) iterated over every descriptor")


@pytest.mark.parametrize("compute_counts", [True, False])
def test_supports_format_combination_reads_nothing_past_pos(trt, sap, compute_counts):
    plugin = sap.ScatterAddPlugin(compute_counts=compute_counts)
    for state_dtype in (trt.float32, trt.float16):
        io = plugin_io(trt, state_dtype, compute_counts=compute_counts)
        for pos in range(len(io)):
            in_out = ChosenUpTo(io, pos)
            assert plugin.supports_format_combination(pos, in_out, 3) is True, (state_dtype, pos)
            assert in_out.touched == []


def test_supports_format_combination_refuses_the_other_variants_positions(trt, sap):
    plugin = sap.ScatterAddPlugin(compute_counts=False)
    # TensorRT never asks the one-output plugin about five positions, nor the two-output one about four
    assert not plugin.supports_format_combination(4, plugin_io(trt, trt.float32), 3)
    assert not sap.ScatterAddPlugin().supports_format_combination(0, plugin_io(trt, trt.float32, compute_counts=False), 3)


@pytest.mark.parametrize("feature", ["float32", "float16"])
def test_get_output_data_types(trt, sap, feature):
    plugin = sap.ScatterAddPlugin()
    dtype = getattr(trt, feature)
    assert plugin.get_output_data_types([dtype, dtype, trt.int64]) == [dtype, trt.int64]
    without_counts = sap.ScatterAddPlugin(compute_counts=False)
    assert without_counts.get_output_data_types([dtype, dtype, trt.int64]) == [dtype]


def test_get_output_data_types_refuses_mixed_features(trt, sap):
    with pytest.raises(ValueError, match="src"):
        sap.ScatterAddPlugin().get_output_data_types([trt.float32, trt.float16, trt.int64])


def test_get_aliased_input(trt, sap):
    plugin = sap.ScatterAddPlugin()
    assert plugin.get_aliased_input(0) == 0
    assert [plugin.get_aliased_input(i) for i in (1, 2, -1)] == [-1, -1, -1]  # only output 0 aliases an input
    assert sap.ScatterAddPlugin(compute_counts=False).get_aliased_input(0) == 0  # its only output


def test_configure_plugin_checks_dynamic_shapes(trt, sap):
    plugin = sap.ScatterAddPlugin()
    io = profile_inputs(trt, trt.float16)
    plugin.configure_plugin(io, [])
    io[1] = tensor_desc(trt, trt.float16, [-1, 2])
    with pytest.raises(ValueError, match="features"):
        plugin.configure_plugin(io, [])


def test_get_workspace_size_uses_the_profile_maximum(trt, sap):
    kernels = pytest.importorskip("plugin.kernels", reason="plugin.kernels (issue 5) is not in this tree yet")
    if not hasattr(kernels, "scatter_add_workspace_size"):
        pytest.skip("plugin.kernels has no scatter_add_workspace_size yet (issue 5)")
    plugin = sap.ScatterAddPlugin()
    for feature, dtype in ((trt.float32, np.float32), (trt.float16, np.float16)):
        size = plugin.get_workspace_size(profile_inputs(trt, feature), [])
        assert size == kernels.scatter_add_workspace_size(64, 256, 3, np.dtype(dtype))
        if feature == trt.float32:
            assert size == 0  # float32: no workspace at these sizes (3 features, 256 edges: no sorted path)


def test_configure_plugin_checks_what_get_workspace_size_needs(trt, sap):
    """TensorRT swallows an exception in get_workspace_size and uses 0 bytes, so configure_plugin (whose
    exceptions stop the build) refuses what would make it fail: a dynamic profile maximum, a state type
    other than float32/float16. Each refusal is one line naming the value."""
    plugin = sap.ScatterAddPlugin()
    dynamic_maximum = profile_inputs(trt, trt.float16)
    dynamic_maximum[0] = tensor_desc(trt, trt.float16, [-1, 3], low=[1, 3], high=[-1, 3])
    int32_state = profile_inputs(trt, trt.float32)
    int32_state[0] = tensor_desc(trt, trt.int32, [-1, 3], low=[1, 3], high=[64, 3])
    for inputs, message in ((dynamic_maximum, r"largest shapes must be concrete, got \[\(-1, 3\)"),
                            (int32_state, "the state .* must be float32 or float16, got None")):
        with pytest.raises(ValueError, match=message) as raised:
            plugin.configure_plugin(inputs, [])
        assert "\n" not in str(raised.value)


def test_get_workspace_size_cannot_raise_once_configure_plugin_accepted(trt, sap):
    """Over states, maxima and feature counts good and bad: configure_plugin either refuses the descriptors
    or get_workspace_size answers for them (an int >= 0), never an exception TensorRT would swallow."""
    plugin = sap.ScatterAddPlugin()
    accepted = refused = 0
    for state_type, src_type, max_nodes, max_edges, src_features in itertools.product(
            (trt.float32, trt.float16, trt.int32, trt.int8), (trt.float32, trt.float16),
            (64, -1, 0, 2**31 - 1), (256, -1, 0), (3, 2, -1)):
        inputs = [
            tensor_desc(trt, state_type, [-1, 3], low=[1, 3], high=[max_nodes, 3]),
            tensor_desc(trt, src_type, [-1, src_features], low=[1, 3], high=[max_edges, src_features]),
            tensor_desc(trt, trt.int64, [-1], low=[1], high=[max_edges]),
        ]
        try:
            plugin.configure_plugin(inputs, [])
        except ValueError:
            refused += 1
            continue
        size = plugin.get_workspace_size(inputs, [])
        assert isinstance(size, int) and size >= 0
        accepted += 1
    assert accepted > 0 and refused > 0


@pytest.mark.parametrize("compute_counts", [True, False])
def test_clone_is_an_independent_equivalent_plugin(trt, sap, compute_counts):
    plugin = sap.ScatterAddPlugin(compute_counts=compute_counts)
    outputs = 2 if compute_counts else 1
    for copy in (plugin.clone(), plugin.attach_to_context(None)):
        assert copy is not plugin and isinstance(copy, sap.ScatterAddPlugin)
        assert (copy.plugin_name, copy.plugin_version, copy.num_outputs) == (plugin.plugin_name, plugin.plugin_version, outputs)
        assert copy.compute_counts is compute_counts
        assert copy.get_aliased_input(0) == 0


@pytest.mark.parametrize("compute_counts", [True, False])
def test_fields_round_trip_through_the_creator(trt, sap, compute_counts):
    """get_fields_to_serialize -> the creator's create_plugin through TensorRT's C++ entry point (what engine
    deserialization does) gives a plugin with the same compute_counts, number of outputs and output types."""
    creator = sap.ScatterAddPluginCreator()
    fields = sap.ScatterAddPlugin(compute_counts=compute_counts).get_fields_to_serialize()
    assert isinstance(fields, trt.PluginFieldCollection) and len(fields) == 1
    (field,) = fields
    assert field.name == "compute_counts" and field.type == trt.PluginFieldType.INT32 and field.size == 1
    assert field.data.dtype == np.int32 and field.data.tolist() == [int(compute_counts)]
    for phase in (trt.TensorRTPhase.BUILD, trt.TensorRTPhase.RUNTIME):
        rebuilt = trt.IPluginCreatorV3One.create_plugin(creator, sap.PLUGIN_NAME, fields, phase)  # via C++
        assert isinstance(rebuilt, sap.ScatterAddPlugin)
        assert rebuilt.compute_counts is compute_counts
        assert rebuilt.num_outputs == (2 if compute_counts else 1)
        assert rebuilt.get_aliased_input(0) == 0
        expected_types = [trt.float16, trt.int64] if compute_counts else [trt.float16]
        assert rebuilt.get_output_data_types([trt.float16, trt.float16, trt.int64]) == expected_types


def test_serialized_fields_stay_valid_after_the_call(trt, sap):
    """TensorRT reads the returned collection after get_fields_to_serialize returns, and a PluginField only
    points at its array: the value must survive the plugin and fresh allocations that could reuse its memory."""
    fields = sap.ScatterAddPlugin(compute_counts=False).get_fields_to_serialize()  # the plugin is gone at once
    gc.collect()
    churn = [np.full(1, 77, np.int32) for _ in range(20_000)]
    assert fields[0].data.tolist() == [0]
    del churn


def test_no_fields_give_the_plugin_with_counts(trt, sap):
    """An engine serialized before compute_counts existed has no fields: the creator gives the two-output plugin."""
    creator = sap.ScatterAddPluginCreator()
    rebuilt = trt.IPluginCreatorV3One.create_plugin(creator, sap.PLUGIN_NAME, trt.PluginFieldCollection([]),
                                                     trt.TensorRTPhase.RUNTIME)
    assert rebuilt.compute_counts is True and rebuilt.num_outputs == 2


BAD_FIELDS = [
    ("num_nodes", np.array([4], np.int32), None, r"unknown plugin field\(s\) \['num_nodes'\]"),
    ("compute_counts", np.array([2], np.int32), None, "compute_counts must be 0 or 1, got 2$"),
    ("compute_counts", np.array([-1], np.int32), None, "compute_counts must be 0 or 1, got -1$"),
    ("compute_counts", np.array([1, 0], np.int32), None, "one int32 value .* got 2 value"),
    ("compute_counts", np.array([1.0], np.float32), "FLOAT32", "'compute_counts' must have type INT32, got FLOAT32"),
    ("compute_counts", np.array([1], np.int64), "INT64", "must have type INT32, got INT64"),
    ("compute_counts", np.array([1], np.float16), "FLOAT16", "must have type INT32, got FLOAT16"),
]


@pytest.mark.parametrize("name, values, field_type, message", BAD_FIELDS, ids=[m[:30] for *_, m in BAD_FIELDS])
def test_creator_refuses_bad_fields(trt, sap, name, values, field_type, message):
    creator = sap.ScatterAddPluginCreator()
    field = int32_field(trt, name, values, None if field_type is None else getattr(trt.PluginFieldType, field_type))
    fields = trt.PluginFieldCollection([field])
    with pytest.raises(ValueError, match=message) as raised:
        creator.create_plugin(sap.PLUGIN_NAME, fields, trt.TensorRTPhase.RUNTIME)
    assert str(raised.value).startswith(f"{sap.PLUGIN_NAME}: ") and "\n" not in str(raised.value)
    # Through TensorRT's C++ entry point the exception becomes a null plugin (TensorRT then reports the error).
    assert trt.IPluginCreatorV3One.create_plugin(creator, sap.PLUGIN_NAME, fields, trt.TensorRTPhase.RUNTIME) is None


def test_creator_refuses_a_repeated_field(trt, sap):
    zero, one = np.array([0], np.int32), np.array([1], np.int32)
    fields = trt.PluginFieldCollection([int32_field(trt, "compute_counts", zero), int32_field(trt, "compute_counts", one)])
    with pytest.raises(ValueError, match="given more than once"):
        sap.ScatterAddPluginCreator().create_plugin(sap.PLUGIN_NAME, fields, trt.TensorRTPhase.BUILD)


def test_plugin_field_collection_refuses_arrays_that_are_not_int32(trt, sap):
    """TensorRT would read an int64 [1] as the int32 pair (1, 0): the helper refuses it instead."""
    with pytest.raises(ValueError, match="int32 array, got int64"):
        sap.plugin_field_collection({"compute_counts": np.array([1], np.int64)})


def test_creator_describes_the_plugin(trt, sap):
    creator = sap.ScatterAddPluginCreator()
    assert (creator.name, creator.plugin_version, creator.plugin_namespace) == plugin_key(sap)
    # what a network or ONNX node may give create_plugin: name, type and the default value
    advertised, overwrite = creator.field_names
    assert advertised.name == "compute_counts" and advertised.type == trt.PluginFieldType.INT32
    assert advertised.size == 1 and advertised.data.tolist() == [1]
    assert overwrite.name == "overwrite" and overwrite.type == trt.PluginFieldType.INT32
    assert overwrite.size == 1 and overwrite.data.tolist() == [0]
    gc.collect()
    churn = [np.full(1, 77, np.int32) for _ in range(20_000)]
    assert creator.field_names[0].data.tolist() == [1]  # the creator keeps the array alive
    del churn


def test_registration_is_idempotent(trt, sap, plugin_registry):
    registry = plugin_registry
    first = sap.register_scatter_add_creator()
    second = sap.register_scatter_add_creator()
    assert first is second
    assert registry.get_creator(sap.PLUGIN_NAME, sap.PLUGIN_VERSION, sap.PLUGIN_NAMESPACE) is first
    matching = [c for c in registry.all_creators if c.name == sap.PLUGIN_NAME and c.plugin_version == sap.PLUGIN_VERSION]
    assert len(matching) == 1


FREE_PLUGINS = textwrap.dedent(
    """
    import gc
    import importlib
    import sys

    trt = sys.modules["tensorrt"] = importlib.import_module(sys.argv[1])  # tensorrt, or TensorRT-RTX standing in
    from plugin.scatter_add_plugin import PLUGIN_NAME, ScatterAddPlugin, ScatterAddPluginCreator

    plugin = ScatterAddPlugin()
    copy = plugin.clone()
    creator = ScatterAddPluginCreator()
    made = trt.IPluginCreatorV3One.create_plugin(creator, PLUGIN_NAME, plugin.get_fields_to_serialize(),
                                                 trt.TensorRTPhase.RUNTIME)
    assert isinstance(made, ScatterAddPlugin)
    del plugin, copy, made, creator
    gc.collect()
    print("freed plugins on tensorrt", trt.__version__, flush=True)
    """
)


def test_freeing_plugin_objects_does_not_crash_the_process(trt, sap):
    """The reason for the TensorRT >= 10.4 floor: 10.3's bindings crash the process (SIGSEGV, a use-after-free in
    ~PyIPluginV3Impl) once a Python IPluginV3 object is freed. Frees a plugin, its clone and one made through the
    creator's C++ entry point, then lets the interpreter exit, in a fresh process; its exit status must be 0."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-c", FREE_PLUGINS, trt.__name__], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, f"exit status {result.returncode} on tensorrt {trt.__version__}: {result.stderr[-2000:]}"
    assert f"freed plugins on tensorrt {trt.__version__}" in result.stdout
