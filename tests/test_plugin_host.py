"""The Python plugin driven through TensorRT's C++ plugin interface by the plugin host (tests/plugin_host).

The host is a stand-in libnvinfer under TensorRT's REAL Python bindings (10.4.0, 10.16.1.11 and 11.4.0.106 in
the real-bindings matrix of .ci/run): the plugin is registered in the host's registry through the bindings,
and the host makes TensorRT's calls in TensorRT's order, so every call crosses the bindings' C++ trampolines
(pyPlugin.cpp) that turn C++ calls into the plugin's Python methods and convert what they return. Each test
asserts on the host's report (what every call got); a failure prints it. What this cannot show, TensorRT's own
decisions (tactics, copies, fusion), is in docs/testing.md. On a CPU machine the runtime phase stops before
the kernel runs: the launch is recorded there (RecordedLaunch), and tests/test_plugin_host_gpu.py runs it.

Run by hand: dir=$(../shared/trt-bindings/setup 11.4.0.106 /tmp/hl | tail -1); python3 tests/plugin_host/build.py
$dir; PYTHONPATH=$dir python3 -m pytest tests/test_plugin_host.py. Without such a layout the tests here skip,
except test_the_host_tests_pass_on_real_bindings, which lays one out itself where it can.
"""

import gc
import importlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.plugin_host.host import PluginHost, host_library_path

pytestmark = pytest.mark.trt_bindings

ROOT = Path(__file__).resolve().parent.parent
PROFILE = {"N": (1, 4, 64), "E": (1, 6, 256)}
NUM_FEATURES = 3
BUILD_CALLS = [
    "IPluginRegistry::getCreator", "IPluginCreatorV3One::getFieldNames", "IPluginCreatorV3One::createPlugin(kBUILD)",
    "IPluginV3::getCapabilityInterface(kCORE)", "IPluginV3OneCore::getPluginName/Version/Namespace",
    "IPluginV3::getCapabilityInterface(kBUILD)", "getNbOutputs", "getOutputDataTypes", "getOutputShapes",
    "supportsFormatCombination", "configurePlugin", "getWorkspaceSize", "IPluginV3OneBuildV2::getAliasedInput",
    "getNbTactics + getValidTactics", "getTimingCacheID + getFormatCombinationLimit + getMetadataString",
    "IPluginV3::getCapabilityInterface(kRUNTIME)", "IPluginV3OneRuntime::getFieldsToSerialize", "IPluginV3::clone",
    "IPluginV3::getCapabilityInterface(kCORE of the clone)", "IPluginV3::getCapabilityInterface(kBUILD of the clone)",
    "the clone's getPluginName/Version/Namespace", "the clone's getNbOutputs", "delete the clone",
    "delete the build plugin",
]
RUNTIME_CALLS = [
    "IPluginRegistry::getCreator", "IPluginCreatorV3One::createPlugin(kRUNTIME, the serialized fields)",
    "IPluginV3::getCapabilityInterface(kRUNTIME)", "IPluginV3OneRuntime::attachToContext",
    "IPluginV3::getCapabilityInterface(kRUNTIME of the context's plugin)", "setTactic", "onShapeChange",
]
CLOSE_CALLS = ["delete the context's plugin", "delete the engine's plugin"]


@pytest.fixture(scope="module")
def host(trt):
    """The plugin host of this `tensorrt`'s layout, or a skip saying how to get one."""
    if host_library_path() is None:
        pytest.skip("the plugin host is not this tensorrt's libnvinfer: lay the bindings out and run "
                    "tests/plugin_host/build.py DIR (.ci/run does for 10.4.0, 10.16.1.11 and 11.4.0.106)")
    return PluginHost(trt)


@pytest.fixture(scope="module")
def sap(host):
    module = importlib.import_module("plugin.scatter_add_plugin")
    module.register_scatter_add_creator()  # through the bindings into the host's registry
    return module


def churn(point: str) -> None:
    """TensorRT's other work between a call and its use of the result, as far as Python memory goes: a
    collection and fresh int32 arrays that reuse freed ones (what a too-early free then shows)."""
    gc.collect()
    churn.kept = [np.full(1, 77, np.int32) for _ in range(2000)]  # type: ignore[attr-defined]


def network_spec(host, trt, dtype, compute_counts=True, fields=None):
    """state [N, 3], src [E, 3], index [E] int64 with PROFILE, and the network's compute_counts field."""
    feature = getattr(trt, dtype)
    inputs = [(feature, ["N", NUM_FEATURES]), (feature, ["E", NUM_FEATURES]), (trt.int64, ["E"])]
    return host.spec(inputs, PROFILE, {"compute_counts": [int(compute_counts)]} if fields is None else fields)


def build(host, trt, sap, dtype="float32", compute_counts=True, **kwargs):
    with host.hook(churn):
        return host.build(sap.PLUGIN_NAME, sap.PLUGIN_VERSION, sap.PLUGIN_NAMESPACE,
                          network_spec(host, trt, dtype, compute_counts), **kwargs)


class RecordedLaunch:
    """In place of plugin.kernels.PreparedScatterAdd on a CPU machine: records what on_shape_change prepares and
    what enqueue launches, and runs nothing."""

    made: list["RecordedLaunch"] = []

    def __init__(self, **sizes):
        self.sizes, self.calls = sizes, []
        RecordedLaunch.made.append(self)

    def __call__(self, *pointers):
        self.calls.append(pointers)


@pytest.fixture
def recorded_launch(monkeypatch):
    kernels = importlib.import_module("plugin.kernels")
    RecordedLaunch.made = []
    monkeypatch.setattr(kernels, "PreparedScatterAdd", RecordedLaunch)
    return RecordedLaunch


# --- the registry --------------------------------------------------------------------------------------------


def test_registry_registers_finds_lists_and_deregisters(trt, host, sap):
    class Probe(sap.ScatterAddPluginCreator):
        def __init__(self):
            super().__init__()
            self.name, self.plugin_version, self.plugin_namespace = "HostRegistryProbe", "7", "probe"

    registry, probe = trt.get_plugin_registry(), Probe()
    assert registry.register_creator(probe, "probe")
    assert not registry.register_creator(Probe(), "probe")  # the same (name, version, namespace) again
    assert registry.get_creator("HostRegistryProbe", "7", "probe") is probe
    assert any(creator is probe for creator in registry.all_creators)
    assert ["PLUGIN CREATOR_V3ONE", "HostRegistryProbe", "7", "probe"] in host.registry_list()
    assert registry.get_creator("HostRegistryProbe", "8", "probe") is None
    assert registry.deregister_creator(probe)
    assert registry.get_creator("HostRegistryProbe", "7", "probe") is None
    assert not registry.deregister_creator(probe)
    if hasattr(registry, "plugin_creator_list"):  # TensorRT 10's V1 creators: there are none
        assert list(registry.plugin_creator_list) == []


# --- the build phase -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("compute_counts", [True, False], ids=["counts", "no counts"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_build_phase_in_tensorrts_order(trt, host, sap, dtype, compute_counts):
    engine, report = build(host, trt, sap, dtype, compute_counts)
    try:
        assert report.ok, report
        assert report.calls == BUILD_CALLS, report
        feature, outputs = int(getattr(trt, dtype)), 2 if compute_counts else 1
        assert report.step("getNbOutputs")["value"] == outputs
        assert report.step("getOutputDataTypes")["types"] == [feature, int(trt.int64)][:outputs]
        shapes = report.step("getOutputShapes")["outputs"]  # symbolic N, evaluated for the profile afterwards
        assert shapes[0] == {"exprs": ["N", "3"], "min_opt_max": [[1, 3], [4, 3], [64, 3]]}
        if compute_counts:
            assert shapes[1] == {"exprs": ["N", "1"], "min_opt_max": [[1, 1], [4, 1], [64, 1]]}
        linear = int(trt.TensorFormat.LINEAR)
        accepted = [position["accepted"] for position in report.step("supportsFormatCombination")["positions"]]
        floats = [[int(trt.float32), linear], [int(trt.float16), linear]]
        expected = [floats, [[feature, linear]], [[int(trt.int64), linear]], [[feature, linear]],
                    [[int(trt.int64), linear]]]
        assert accepted == expected[:3 + outputs]  # only LINEAR, later entries undefined: same answers
        configured = report.step("configurePlugin")["in"]
        assert configured[0] == {"dims": [-1, 3], "min": [1, 3], "opt": [4, 3], "max": [64, 3]}
        assert configured[2] == {"dims": [-1], "min": [1], "opt": [6], "max": [256]}
        from plugin.kernels import scatter_add_workspace_size

        assert report.step("getWorkspaceSize")["bytes"] == scatter_add_workspace_size(
            64, 256, NUM_FEATURES, np.dtype(dtype), with_counts=compute_counts)
        assert report.step("IPluginV3OneBuildV2::getAliasedInput")["aliases"] == [0, -1][:outputs]
        assert report.step("getNbTactics")["tactics"] == []
        # read back from C++ after the call returned and Python memory was churned
        (field,) = report.step("IPluginV3OneRuntime::getFieldsToSerialize")["fields"]
        assert (field["name"], field["type"], field["values"]) == (
            "compute_counts", int(trt.PluginFieldType.INT32), [int(compute_counts)])
        assert report.step("IPluginV3::clone")["plugin"]["language"] == 1  # a Python plugin (APILanguage kPYTHON)
    finally:
        host.free(engine)


def test_a_call_from_ctypes_alone_cannot_convert_the_fields(trt, host, sap):
    """Why the host runs inside a bound call of the bindings: outside one, pybind11 cannot keep the temporary
    that turns the returned PluginFieldCollection into TensorRT's, and the trampoline returns a null collection.
    TensorRT calls get_fields_to_serialize inside build_serialized_network, a bound call."""
    engine, report = build(host, trt, sap, bound=False)
    host.free(engine)
    assert not report.ok and engine is None
    step = report.step("IPluginV3OneRuntime::getFieldsToSerialize")
    assert "could not be interpreted as nvinfer1::PluginFieldCollection" in step["stderr"], report


# --- the runtime phase ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("compute_counts", [True, False], ids=["counts", "no counts"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_runtime_phase_from_the_serialized_fields(trt, host, sap, recorded_launch, dtype, compute_counts):
    """createPlugin(kRUNTIME) from the fields the build read back, attachToContext, onShapeChange with concrete
    shapes, then enqueue with outputs[0] == inputs[0]: the launch is recorded (no GPU needed)."""
    engine, report = build(host, trt, sap, dtype, compute_counts)
    assert report.ok, report
    try:
        context, report = host.open(engine, {"N": 40, "E": 100})
        assert report.ok, report
        assert report.calls == RUNTIME_CALLS, report
        shapes = report.step("onShapeChange")
        assert [d["dims"] for d in shapes["in"]] == [[40, 3], [100, 3], [100]]
        assert [d["dims"] for d in shapes["out"]] == [[40, 3], [40, 1]][:2 if compute_counts else 1]
        (launch,) = recorded_launch.made  # prepared by the context's plugin only
        assert (launch.sizes["num_nodes"], launch.sizes["num_edges"], launch.sizes["num_features"]) == (40, 100, 3)
        assert launch.sizes["dtype"] == np.dtype(dtype) and launch.sizes["with_counts"] is compute_counts

        state, src, index, counts, workspace, stream = 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000
        report = host.enqueue(context, [state, src, index], [0, counts][:2 if compute_counts else 1], workspace,
                              stream, repeats=2)
        assert report.ok, report
        assert report.step("IPluginV3OneRuntime::enqueue")["outputs"][0] == state  # aliased: the input's buffer
        assert launch.calls == [(state, src, index, counts if compute_counts else 0, workspace, stream)] * 2
        report = host.close(context)
        assert report.ok and report.calls == CLOSE_CALLS, report
    finally:
        host.free(engine)


# --- a broken plugin must fail with the host's report ----------------------------------------------------------


def broken_plugin(sap, method, behaviour):
    """A ScatterAddPlugin subclass whose `method` is replaced by `behaviour`, and a creator that makes it."""
    base = sap.ScatterAddPlugin

    class Broken(base):
        def __init__(self, compute_counts=True):
            super().__init__(compute_counts=compute_counts)
            self.plugin_name = f"Broken_{method}"

        def clone(self):
            copy = Broken(compute_counts=self.compute_counts)
            return behaviour(self) if method == "clone" else copy

        def attach_to_context(self, resource_context):
            return behaviour(self) if method == "attach_to_context" else self.clone()

    if method not in ("clone", "attach_to_context"):
        setattr(Broken, method, lambda self, *args: behaviour(self, *args))

    class BrokenCreator(sap.ScatterAddPluginCreator):
        def __init__(self):
            super().__init__()
            self.name = f"Broken_{method}"

        def create_plugin(self, name, field_collection, phase):
            return Broken(compute_counts=super().create_plugin(name, field_collection, phase).compute_counts)

    return BrokenCreator()


def raises(self, *args):
    raise ValueError("deliberately broken")


def fresh_fields(self, *args):
    """A collection made in the call: its int32 array is freed when the call returns (a PluginField keeps its
    array alive, but the collection copies the fields and not their Python objects)."""
    import tensorrt as trt

    return trt.PluginFieldCollection([trt.PluginField("compute_counts", np.array([1], np.int32),
                                                      trt.PluginFieldType.INT32)])


BROKEN = [  # (method, behaviour, the call the host reports failed, what its report says)
    ("get_output_data_types", raises, "getOutputDataTypes", "deliberately broken"),
    ("get_output_data_types", lambda self, types: ["float32"], "getOutputDataTypes", "could not be interpreted"),
    ("get_output_shapes", lambda self, *a: [(1, 2)], "getOutputShapes", "could not be interpreted"),
    ("supports_format_combination", lambda self, pos, in_out, n: in_out[len(in_out) - 1].desc.format
     == type(in_out[0].desc.format).LINEAR, "supportsFormatCombination", "depends on inOut[pos + 1 ..]"),
    ("configure_plugin", raises, "configurePlugin", "deliberately broken"),
    ("get_workspace_size", raises, "getWorkspaceSize", "deliberately broken"),  # the bindings use 0 bytes
    ("get_aliased_input", lambda self, i: "0", "IPluginV3OneBuildV2::getAliasedInput", "could not be interpreted"),
    ("get_aliased_input", lambda self, i: 0, "IPluginV3OneBuildV2::getAliasedInput", "aliases"),  # input 0 twice
    ("get_fields_to_serialize", lambda self: None, "IPluginV3OneRuntime::getFieldsToSerialize", "null"),
    ("clone", lambda self: self, "IPluginV3::clone", "plugin"),
]


@pytest.mark.parametrize("method, behaviour, call, message", BROKEN,
                         ids=[f"{m}-{c}-{i}" for i, (m, _, c, _) in enumerate(BROKEN)])
def test_a_broken_build_method_fails_with_the_hosts_report(trt, host, sap, method, behaviour, call, message):
    creator = broken_plugin(sap, method, behaviour)
    assert trt.get_plugin_registry().register_creator(creator, "")
    try:
        with host.hook(churn):
            engine, report = host.build(creator.name, "1", "", network_spec(host, trt, "float32"))
        host.free(engine)
        assert not report.ok and engine is None, report
        failed = [step for step in report.steps if not step["ok"]]
        assert failed and failed[0]["call"].startswith(call), report
        assert message in str(failed[0]), report
    finally:
        trt.get_plugin_registry().deregister_creator(creator)


def test_fields_freed_too_early_reach_the_runtime_as_garbage(trt, host, sap):
    """get_fields_to_serialize returning a collection made in the call: the host reads it after TensorRT's other
    work, gets what reused the freed array, and the runtime phase's createPlugin refuses it."""
    creator = broken_plugin(sap, "get_fields_to_serialize", fresh_fields)
    assert trt.get_plugin_registry().register_creator(creator, "")
    try:
        with host.hook(churn):
            engine, report = host.build(creator.name, "1", "", network_spec(host, trt, "float32"))
        try:
            step = report.step("IPluginV3OneRuntime::getFieldsToSerialize")
            assert not step["ok"] or step["fields"][0]["values"] != [1], report
            if engine is not None:
                context, report = host.open(engine, {"N": 4, "E": 6})
                assert context is None and not report.ok, report
                assert "compute_counts must be 0 or 1" in report.error, report
        finally:
            host.free(engine)
    finally:
        trt.get_plugin_registry().deregister_creator(creator)


BROKEN_RUNTIME = [
    ("attach_to_context", lambda self: None, "IPluginV3OneRuntime::attachToContext", "plugin"),
    ("attach_to_context", lambda self: self, "IPluginV3OneRuntime::attachToContext", "plugin"),
    ("on_shape_change", raises, "onShapeChange", "deliberately broken"),
    ("set_tactic", raises, "setTactic", "deliberately broken"),
]


@pytest.mark.parametrize("method, behaviour, call, message", BROKEN_RUNTIME,
                         ids=[f"{m}-{i}" for i, (m, *_) in enumerate(BROKEN_RUNTIME)])
def test_a_broken_runtime_method_fails_with_the_hosts_report(trt, host, sap, recorded_launch, method, behaviour,
                                                             call, message):
    creator = broken_plugin(sap, method, behaviour)
    assert trt.get_plugin_registry().register_creator(creator, "")
    try:
        engine, report = host.build(creator.name, "1", "", network_spec(host, trt, "float32"))
        assert report.ok, report
        try:
            context, report = host.open(engine, {"N": 4, "E": 6})
            assert context is None and not report.ok, report
            failed = [step for step in report.steps if not step["ok"]]
            assert failed[0]["call"].startswith(call) and message in str(failed[0]), report
            assert all(step["ok"] for step in report.steps if step["call"].startswith("delete")), report
        finally:
            host.free(engine)
    finally:
        trt.get_plugin_registry().deregister_creator(creator)


def test_an_enqueue_that_raises_fails_with_the_hosts_report(trt, host, sap, recorded_launch):
    creator = broken_plugin(sap, "enqueue", raises)
    assert trt.get_plugin_registry().register_creator(creator, "")
    try:
        engine, report = host.build(creator.name, "1", "", network_spec(host, trt, "float32"))
        context, report = host.open(engine, {"N": 4, "E": 6})
        assert report.ok, report
        report = host.enqueue(context, [0x1000, 0x2000, 0x3000], [0, 0x4000], 0, 0x6000, repeats=3)
        assert not report.ok, report
        step = report.step("IPluginV3OneRuntime::enqueue")
        assert step["status"] != 0 and step["calls"] == 1 and "deliberately broken" in step["stderr"], report
        assert host.close(context).ok
        host.free(engine)
    finally:
        trt.get_plugin_registry().deregister_creator(creator)


# --- the README's test command: lay the bindings out and run the tests above on them ---------------------------


@pytest.mark.skipif(os.environ.get("PLUGIN_HOST_MATRIX") == "1",
                    reason=".ci/run runs the plugin host tests in its real-bindings matrix (10.4.0, 10.16.1.11, 11.4.0.106)")
def test_the_host_tests_pass_on_real_bindings(request):
    """Where `tensorrt` is not a host layout (e.g. `python3 -m pytest` with no PYTHONPATH): lays out TensorRT's
    real bindings of PLUGIN_HOST_RELEASES (default 11.4.0.106) with the host, in pytest's cache, and runs this
    file and the registry test of test_plugin.py there in a fresh process."""
    if host_library_path() is not None:
        pytest.skip("tensorrt here is a plugin host layout: the tests above ran on it")
    from tests.plugin_host.build import HostBuildError, lay_out

    releases = os.environ.get("PLUGIN_HOST_RELEASES", "11.4.0.106").split()
    cache = Path(request.config.cache.mkdir("plugin-host")) if request.config.cache else Path("/tmp/plugin-host")
    for release in releases:
        try:
            layout = lay_out(release, cache / release)
        except HostBuildError as error:
            pytest.skip(f"cannot lay out TensorRT {release}'s bindings with the plugin host here: {error}")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(layout), str(ROOT)]))
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_plugin_host.py",
             "tests/test_plugin.py::test_registration_is_idempotent"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"TensorRT {release}: {result.stdout[-4000:]}{result.stderr[-2000:]}"
        assert " passed" in result.stdout and "tensorrt: " + release in result.stdout, result.stdout[-2000:]
