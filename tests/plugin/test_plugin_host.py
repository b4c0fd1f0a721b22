"""The Python plugin driven through TensorRT's C++ plugin interface by the plugin host (tests/plugin_host).

The host is a stand-in libnvinfer under TensorRT's REAL Python bindings (10.4.0, 10.16.1.11 and 11.4.0.106 in
the real-bindings matrix of .ci/run): the plugin is registered in the host's registry through the bindings,
and the host makes TensorRT's calls in TensorRT's order, so every call crosses the bindings' C++ trampolines
(pyPlugin.cpp) that turn C++ calls into the plugin's Python methods and convert what they return. Each test
asserts on the host's report (what every call got); a failure prints it. What this cannot show, TensorRT's own
decisions (tactics, copies, fusion), is in docs/testing.md. On a CPU machine the runtime phase stops before
the kernel runs: the launch is recorded there (RecordedLaunch), and tests/plugin/test_plugin_host_gpu.py runs it.

Run by hand: dir=$(../shared/trt-bindings/setup 11.4.0.106 /tmp/hl | tail -1); python3 tests/plugin_host/build.py
$dir; PYTHONPATH=$dir python3 -m pytest tests/plugin/test_plugin_host.py. Without such a layout the tests here skip,
and tests/plugin/test_real_bindings.py lays one out itself where it can and runs them there.
"""

import gc
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.plugin_host.host import PluginHost, host_library_path
from tests.support.trt_plugin_internals import qdp_registry, register_creator  # noqa: E402

pytestmark = pytest.mark.trt_bindings

ROOT = Path(__file__).resolve().parents[2]
# Large enough that the plugin asks for a workspace where it ever does (float16: its table, 1 MB here; float32
# needs none for F = 3), so that a plugin whose runtime answer differs from the build's is seen (nothing is
# allocated on a CPU).
PROFILE = {"N": (1, 4000, 64000), "E": (1, 6000, 2**25)}
NUM_FEATURES = 3
CONFIGURE_ROUNDS = ["the profile: min, opt, max", "kMIN only", "kOPT only", "kMAX only", "the profile again"]
TIMING_CALLS = [
    "IPluginV3::clone (the builder's copy for timing)",
    "IPluginV3::getCapabilityInterface(kRUNTIME of the timing copy)", "setTactic", "onShapeChange (build: kOPT)",
    "IPluginV3OneRuntime::enqueue (build: timing on made-up inputs at kOPT)", "delete the timing copy",
]
BUILD_CALLS = [
    "IPluginRegistry::getCreator", "IPluginCreatorV3One::getFieldNames", "IPluginCreatorV3One::createPlugin(kBUILD)",
    "IPluginV3::clone (addPluginV3: the network's copy)", "delete the parser's plugin (right after addPluginV3)",
    "IPluginV3::getCapabilityInterface(kCORE)", "IPluginV3OneCore::getPluginName/Version/Namespace",
    "IPluginV3::getCapabilityInterface(kBUILD)", "getNbOutputs", "getOutputDataTypes", "getOutputShapes",
    "supportsFormatCombination",
    *[call for label in CONFIGURE_ROUNDS for call in (f"configurePlugin ({label})", f"getWorkspaceSize ({label})")],
    "IPluginV3OneBuildV2::getAliasedInput",
    "getNbTactics + getValidTactics", "getTimingCacheID + getFormatCombinationLimit + getMetadataString",
    *TIMING_CALLS,
    "IPluginV3::getCapabilityInterface(kRUNTIME)", "IPluginV3OneRuntime::getFieldsToSerialize", "IPluginV3::clone",
    "IPluginV3::getCapabilityInterface(kCORE of the clone)", "the clone's getPluginName/Version/Namespace",
    "IPluginV3::getCapabilityInterface(kBUILD of the clone)", "the clone's getNbOutputs", "delete the clone",
    "delete the build plugin",
]
DESERIALIZE_CALLS = [
    "IPluginRegistry::getCreator", "IPluginCreatorV3One::createPlugin(kRUNTIME, the serialized fields)",
    "IPluginV3::getCapabilityInterface(kRUNTIME)", "IPluginV3::getCapabilityInterface(kBUILD of the runtime plugin)",
    "getWorkspaceSize (the runtime plugin, never configured)",
]
CONTEXT_CALLS = [
    "IPluginV3OneRuntime::attachToContext", "IPluginV3::getCapabilityInterface(kRUNTIME of the context's plugin)",
    "setTactic", "onShapeChange",
]
RUNTIME_CALLS = DESERIALIZE_CALLS + CONTEXT_CALLS
CLOSE_CALLS = ["delete the context's plugin"]
FREE_CALLS = ["delete the engine's plugin"]


@pytest.fixture(scope="module")
def host(trt):
    """The plugin host of this `tensorrt`'s layout, or a skip saying how to get one.

    While a module uses it, what was alive before is frozen (gc.freeze): churn's collections then walk only the
    objects this module's tests make, the plugins and fields among them, and not the millions torch and onnxscript
    left from earlier tests of the session (0.27 s a collection there, 19 s of the 43 s trt_bindings run)."""
    if host_library_path() is None:
        pytest.skip("this tensorrt is no plugin host layout (tests/plugin_host/build.py DIR): "
                    "tests/plugin/test_real_bindings.py runs these on one, .ci/run's matrix on three releases")
    gc.collect()
    gc.freeze()
    try:
        yield PluginHost(trt)
    finally:
        gc.unfreeze()


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


@pytest.fixture(autouse=True)
def recorded_launch(monkeypatch):
    """Every test here records the plugin's launches: the host enqueues already while building (the builder's
    timing on made-up inputs), and a CPU has nothing to launch on (tests/plugin/test_plugin_host_gpu.py launches)."""
    kernels = importlib.import_module("plugin.kernels")
    RecordedLaunch.made = []
    monkeypatch.setattr(kernels, "PreparedScatterAdd", RecordedLaunch)
    return RecordedLaunch


def launch_sizes(launch):
    return launch.sizes["num_nodes"], launch.sizes["num_edges"], launch.sizes["num_features"]


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
def test_build_phase_in_tensorrts_order(trt, host, sap, recorded_launch, dtype, compute_counts):
    from plugin.kernels import scatter_add_workspace_size

    engine, report = build(host, trt, sap, dtype, compute_counts)
    try:
        assert report.ok, report
        assert report.calls == BUILD_CALLS, report
        (n_min, n_opt, n_max), (e_min, e_opt, e_max) = PROFILE["N"], PROFILE["E"]
        feature, outputs = int(getattr(trt, dtype)), 2 if compute_counts else 1
        assert report.step("getNbOutputs")["value"] == outputs
        assert report.step("getOutputDataTypes")["types"] == [feature, int(trt.int64)][:outputs]
        shapes = report.step("getOutputShapes")["outputs"]  # symbolic N, evaluated for the profile afterwards
        assert shapes[0] == {"exprs": ["N", "3"], "min_opt_max": [[n_min, 3], [n_opt, 3], [n_max, 3]]}
        if compute_counts:
            assert shapes[1] == {"exprs": ["N", "1"], "min_opt_max": [[n_min, 1], [n_opt, 1], [n_max, 1]]}
        linear = int(trt.TensorFormat.LINEAR)
        accepted = [position["accepted"] for position in report.step("supportsFormatCombination")["positions"]]
        floats = [[int(trt.float32), linear], [int(trt.float16), linear]]
        expected = [floats, [[feature, linear]], [[int(trt.int64), linear]], [[feature, linear]],
                    [[int(trt.int64), linear]]]
        assert accepted == expected[:3 + outputs]  # only LINEAR, later entries undefined: same answers
        configured = report.step("configurePlugin")["in"]
        assert configured[0] == {"dims": [-1, 3], "min": [n_min, 3], "opt": [n_opt, 3], "max": [n_max, 3]}
        assert configured[2] == {"dims": [-1], "min": [e_min], "opt": [e_opt], "max": [e_max]}
        # getWorkspaceSize after every configurePlugin, each for its own range's largest shapes
        maxima = {"kMIN only": (n_min, e_min), "kOPT only": (n_opt, e_opt), "kMAX only": (n_max, e_max)}
        for label in CONFIGURE_ROUNDS:
            nodes, edges = maxima.get(label, (n_max, e_max))
            assert report.step(f"getWorkspaceSize ({label})")["bytes"] == scatter_add_workspace_size(
                nodes, edges, NUM_FEATURES, np.dtype(dtype), with_counts=compute_counts), label
        if dtype == "float16":
            assert report.step("getWorkspaceSize")["bytes"] > 0  # the profile is large enough to need one
        assert report.step("IPluginV3OneBuildV2::getAliasedInput")["aliases"] == [0, -1][:outputs]
        assert report.step("getNbTactics")["tactics"] == []
        # read back from C++ after the call returned and Python memory was churned
        (field,) = report.step("IPluginV3OneRuntime::getFieldsToSerialize")["fields"]
        assert (field["name"], field["type"], field["values"]) == (
            "compute_counts", int(trt.PluginFieldType.INT32), [int(compute_counts)])
        assert report.step("IPluginV3::clone")["plugin"]["language"] == 1  # a Python plugin (APILanguage kPYTHON)
        # the builder's timing: onShapeChange at kOPT, then enqueue on made-up inputs (recorded on a CPU)
        shapes = report.step("onShapeChange (build: kOPT)")
        assert [d["dims"] for d in shapes["in"]] == [[n_opt, 3], [e_opt, 3], [e_opt]]
        timing = report.step("IPluginV3OneRuntime::enqueue (build")
        assert timing["calls"] == 2 and timing["outputs"][0] == timing["inputs"][0]  # on a CPU: made-up addresses
        assert timing["workspace_bytes"] == report.step("getWorkspaceSize")["bytes"]
        assert (timing["workspace"] != 0) == (timing["workspace_bytes"] > 0)  # no workspace: a null pointer
        (launch,) = recorded_launch.made
        assert launch_sizes(launch) == (n_opt, e_opt, NUM_FEATURES)
        counts = timing["outputs"][1] if compute_counts else 0
        assert launch.calls == [(*timing["inputs"], counts, timing["workspace"], timing["stream"])] * 2
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
    """createPlugin(kRUNTIME) from the fields the build read back, getWorkspaceSize of that never configured
    plugin (the build's answer), attachToContext, onShapeChange with concrete shapes, then enqueue with
    outputs[0] == inputs[0] (onShapeChange again first: the addresses are new): the launch is recorded."""
    engine, report = build(host, trt, sap, dtype, compute_counts)
    assert report.ok, report
    built_workspace = report.step("getWorkspaceSize")["bytes"]
    recorded_launch.made.clear()  # the build's timing launch
    try:
        context, report = host.open(engine, {"N": 40, "E": 100})
        assert report.ok, report
        assert report.calls == RUNTIME_CALLS, report
        assert report.step("getWorkspaceSize (the runtime plugin")["bytes"] == built_workspace
        pairs = compute_counts and PROFILE["E"][2] > 2**24  # float32: the paired path's 8 N beyond 2^24 edges
        assert (built_workspace > 0) == (dtype == "float16" or pairs)
        shapes = report.step("onShapeChange")
        assert [d["dims"] for d in shapes["in"]] == [[40, 3], [100, 3], [100]]
        assert [d["dims"] for d in shapes["out"]] == [[40, 3], [40, 1]][:2 if compute_counts else 1]
        (launch,) = recorded_launch.made  # prepared by the context's plugin only
        assert launch_sizes(launch) == (40, 100, 3)
        assert launch.sizes["dtype"] == np.dtype(dtype) and launch.sizes["with_counts"] is compute_counts
        # the engine's fields say how its workspace was sized: this release's, for these shapes
        from plugin.kernels import scatter_add_workspace_size

        assert launch.sizes["workspace_size"] == scatter_add_workspace_size(40, 100, 3, np.dtype(dtype),
                                                                            with_counts=compute_counts)

        state, src, index, counts, workspace, stream = 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000
        report = host.enqueue(context, [state, src, index], [0, counts][:2 if compute_counts else 1], workspace,
                              stream, repeats=2)
        assert report.ok, report
        assert report.calls == ["onShapeChange (at enqueue: addresses changed)", "IPluginV3OneRuntime::enqueue"]
        assert report.step("IPluginV3OneRuntime::enqueue")["outputs"][0] == state  # aliased: the input's buffer
        assert recorded_launch.made == [launch]  # the same shapes: the prepared launch is kept
        assert launch.calls == [(state, src, index, counts if compute_counts else 0, workspace, stream)] * 2
        report = host.close(context)
        assert report.ok and report.calls == CLOSE_CALLS, report
    finally:
        report = host.free(engine)
    assert report.ok and report.calls == FREE_CALLS, report


def test_onshapechange_again_when_addresses_or_shapes_change(trt, host, sap, recorded_launch):
    """TensorRT calls onShapeChange at the next enqueueV3 after new addresses or shapes: none for the same
    addresses; new addresses keep the launch prepared for the shapes; new shapes prepare one for them."""
    engine, report = build(host, trt, sap, "float32", False)
    assert report.ok, report
    recorded_launch.made.clear()
    try:
        context, report = host.open(engine, {"N": 40, "E": 100})
        assert report.ok, report
        first = [0x1000, 0x2000, 0x3000]
        assert host.enqueue(context, first, [0], 0x5000, 0x6000).calls[0].startswith("onShapeChange")
        report = host.enqueue(context, first, [0], 0x5000, 0x6000)
        assert report.ok and report.calls == ["IPluginV3OneRuntime::enqueue"], report
        moved = [0x11000, 0x12000, 0x13000]
        report = host.enqueue(context, moved, [0], 0x5000, 0x6000)
        assert report.calls == ["onShapeChange (at enqueue: addresses changed)", "IPluginV3OneRuntime::enqueue"]
        report = host.enqueue(context, moved, [0], 0x5000, 0x6000, sizes={"N": 50, "E": 7})
        assert report.ok and report.calls[0] == "onShapeChange (at enqueue: shapes changed)", report
        assert [d["dims"] for d in report.step("onShapeChange")["in"]] == [[50, 3], [7, 3], [7]]
        kept, resized = recorded_launch.made
        assert launch_sizes(kept) == (40, 100, 3) and launch_sizes(resized) == (50, 7, 3)
        assert kept.calls == [(*first, 0, 0x5000, 0x6000)] * 2 + [(*moved, 0, 0x5000, 0x6000)]
        assert resized.calls == [(*moved, 0, 0x5000, 0x6000)]
        assert host.close(context).ok
    finally:
        host.free(engine)


def test_two_execution_contexts_enqueue_at_once(trt, host, sap, recorded_launch):
    """Two contexts of one engine, each attached from the engine's one runtime plugin, enqueueing at the same
    time from two threads: each context's plugin launches with its own pointers, every call."""
    engine, report = build(host, trt, sap, "float32", True)
    assert report.ok, report
    recorded_launch.made.clear()
    contexts = []
    try:
        for _ in range(2):
            context, report = host.open(engine, {"N": 40, "E": 100})
            assert report.ok, report
            contexts.append(context)
        assert report.calls == CONTEXT_CALLS, report  # the second context: attached, not deserialized again
        inputs = [[0x1000, 0x2000, 0x3000], [0x21000, 0x22000, 0x23000]]
        outputs, workspaces, streams = [[0, 0x4000], [0, 0x24000]], [0x5000, 0x25000], [0x6000, 0x26000]
        report = host.enqueue_together(contexts, inputs, outputs, workspaces, streams, repeats=200)
        assert report.ok, report
        for i in range(2):
            assert report.step(f"context {i}: IPluginV3OneRuntime::enqueue")["calls"] == 200, report
        launches = {launch.calls[0]: launch for launch in recorded_launch.made}
        for i in range(2):
            expected = (*inputs[i], outputs[i][1], workspaces[i], streams[i])
            assert launches[expected].calls == [expected] * 200
    finally:
        for context in contexts:
            assert host.close(context).ok
        host.free(engine)


LOCALE_HELPER = r"""
#include <locale>
struct SpaceGroups : std::numpunct<char> {
    char do_thousands_sep() const override { return ' '; }
    std::string do_grouping() const override { return "\3"; }
};
extern "C" void set_space_grouping_locale() {
    std::locale::global(std::locale(std::locale::classic(), new SpaceGroups));
}
"""

LOCALE_SCRIPT = """
import ctypes, sys
try:
    import torch  # first, as bench_enqueue.py imports it (where torch is installed)
except ImportError:
    pass
import tensorrt as trt
ctypes.CDLL(sys.argv[1]).set_space_grouping_locale()
from tests.plugin_host.host import PluginHost
import plugin.kernels
import plugin.scatter_add_plugin as sap
from benchmarks.bench_enqueue import trampoline_context
launches = []
plugin.kernels.PreparedScatterAdd = lambda **sizes: (lambda *pointers: launches.append(pointers))  # recorded
host = PluginHost(trt)
sap.register_scatter_add_creator()
for compute_counts in (True, False):  # the trampoline rows' engine and context, bench_enqueue.py's default sizes
    engine, context, workspace = trampoline_context(trt, host, 10**6, 10**4, compute_counts)
    outputs = [0, 0x4000][:2 if compute_counts else 1]
    report = host.enqueue(context, [0x1000, 0x2000, 0x3000], outputs, 0x5000 if workspace else 0, 0x6000, 101)
    assert report.ok and report.step("IPluginV3OneRuntime::enqueue")["calls"] == 101, report
    assert host.close(context).ok and host.free(engine).ok
print(len(launches))
"""


def test_bench_enqueue_trampoline_context_whatever_global_cpp_locale_the_process_has(host, tmp_path):
    """bench_enqueue.py's trampoline rows, as far as a CPU goes (launches recorded): torch imported first, then a
    global C++ locale that groups digits by spaces (in which a stream reads "1 1000000" as one number), then the
    rows' engine and context for N = 1e6, E = 1e4 and 101 enqueues, in a fresh process. The host reads its spec
    without streams, so the locale changes nothing."""
    helper = tmp_path / "libsetlocale.so"
    (tmp_path / "setlocale.cpp").write_text(LOCALE_HELPER)
    build = subprocess.run([os.environ.get("CXX", "g++"), "-shared", "-fPIC", "-o", str(helper),
                            str(tmp_path / "setlocale.cpp")], capture_output=True, text=True)
    if build.returncode != 0:
        pytest.skip(f"cannot compile the locale helper: {build.stderr.strip()[-300:]}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", LOCALE_SCRIPT, str(helper)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == str(2 * (2 + 101)), result.stdout  # timing 2, enqueues 101


def test_the_bindings_keep_a_deleted_plugin_alive_in_python(trt, host, sap):
    """What the host found about TensorRT's bindings (10.4 to 11.4): each getCapabilityInterface call of
    TensorRT's releases a reference to the object the plugin returns (here the plugin itself), and the plugin's
    destructor gives one back, so after TensorRT deletes a plugin its Python object lives on (with what it holds:
    the prepared launch and its CUDA graphs) until the process ends. plugin_host.cpp keeps such plugins' memory.
    The plugin createPlugin made, deleted by the parser before any getCapabilityInterface call, is freed; the
    network's copy (the parser's clone) is not."""
    import weakref

    made, clones = [], []

    class Watched(sap.ScatterAddPlugin):
        def clone(self):
            copy = Watched(compute_counts=self.compute_counts)
            copy.plugin_name = self.plugin_name
            clones.append(weakref.ref(copy))
            return copy

    class WatchedCreator(sap.ScatterAddPluginCreator):
        def __init__(self):
            super().__init__()
            self.name = "WatchedScatterAdd"

        def create_plugin(self, name, field_collection, phase):
            plugin = Watched(compute_counts=super().create_plugin(name, field_collection, phase).compute_counts)
            plugin.plugin_name = self.name
            made.append(weakref.ref(plugin))
            return plugin

    creator = WatchedCreator()
    assert trt.get_plugin_registry().register_creator(creator, "")
    try:
        engine, report = host.build(creator.name, "1", "", network_spec(host, trt, "float32"))
        assert report.ok, report
        host.free(engine)
        gc.collect()
        (created,) = [ref() for ref in made]
        assert created is None  # deleted by the parser, freed: no getCapabilityInterface call had released a reference
        network_copy = clones[0]()  # the parser's clone, which every build call went to, deleted at the end
        assert network_copy is not None  # deleted by TensorRT (the host), alive in Python
        # clone's, kCORE's, kBUILD's and kRUNTIME's released references, one given back by the destructor
        assert sys.getrefcount(network_copy) - 2 == 3  # (minus `network_copy` and getrefcount's argument)
    finally:
        trt.get_plugin_registry().deregister_creator(creator)


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


def planted(sap, name, **methods):
    """A creator of a ScatterAddPlugin subclass named `name` with these methods replaced: a bug planted to show
    that the host finds it."""
    plugin_class = type(name, (sap.ScatterAddPlugin,), dict(methods))

    def clone(self):
        copy = plugin_class(compute_counts=self.compute_counts)
        copy.plugin_name = name
        return copy

    plugin_class.clone = clone
    plugin_class.attach_to_context = lambda self, resource_context: self.clone()

    class Creator(sap.ScatterAddPluginCreator):
        def __init__(self):
            super().__init__()
            self.name = name

        def create_plugin(self, plugin_name, field_collection, phase):
            made = super().create_plugin(plugin_name, field_collection, phase)
            return clone(made)

    return Creator()


def configure_once(self, inp, out):
    """configure_plugin that refuses a second call (TensorRT may call it several times)."""
    if getattr(self, "configured", False):
        raise RuntimeError("planted: configure_plugin refuses a second call")
    self.configured = True
    from plugin.scatter_add_plugin import ScatterAddPlugin

    return ScatterAddPlugin.configure_plugin(self, inp, out)


def configure_and_keep_workspace(self, inp, out):
    """configure_plugin that computes the workspace and keeps it for get_workspace_size."""
    from plugin.scatter_add_plugin import ScatterAddPlugin, profile_workspace_size

    ScatterAddPlugin.configure_plugin(self, inp, out)
    self.workspace = profile_workspace_size(inp, with_counts=self.compute_counts)


def test_planted_a_plugin_refusing_a_second_configure_fails_the_build(trt, host, sap):
    creator = planted(sap, "RefusesSecondConfigure", configure_plugin=configure_once)
    assert trt.get_plugin_registry().register_creator(creator, "")
    try:
        engine, report = host.build(creator.name, "1", "", network_spec(host, trt, "float32"))
        host.free(engine)
        assert not report.ok and engine is None, report
        failed = [step for step in report.steps if not step["ok"]]
        assert failed[0]["call"] == "configurePlugin (kMIN only)", report  # the first call passed, the second not
        assert "planted: configure_plugin refuses a second call" in failed[0]["stderr"], report
    finally:
        trt.get_plugin_registry().deregister_creator(creator)


PLANTED_WORKSPACE = [  # get_workspace_size answering what configure_plugin computed
    (lambda self, inp, out: self.workspace, "getWorkspaceSize (the runtime plugin, never configured)",
     "AttributeError"),  # the bindings print it and use 0 bytes
    (lambda self, inp, out: getattr(self, "workspace", 0), "the runtime plugin's workspace against the build's",
     "asks for 0 bytes where the build promised"),
]


@pytest.mark.parametrize("get_workspace_size, call, message", PLANTED_WORKSPACE, ids=["raises", "answers 0"])
def test_planted_a_workspace_only_configure_plugin_computed_fails_the_runtime(trt, host, sap, get_workspace_size,
                                                                              call, message):
    """The build configures the plugin first, so its answer is right; the runtime plugin (createPlugin kRUNTIME)
    was never configured, and TensorRT may ask it during execution: the host compares with the build's."""
    creator = planted(sap, "WorkspaceFromConfigure", configure_plugin=configure_and_keep_workspace,
                      get_workspace_size=get_workspace_size)
    assert trt.get_plugin_registry().register_creator(creator, "")
    try:
        engine, report = host.build(creator.name, "1", "", network_spec(host, trt, "float16"))  # a workspace
        assert report.ok and report.step("getWorkspaceSize")["bytes"] > 0, report
        try:
            context, report = host.open(engine, {"N": 4, "E": 6})
            assert context is None and not report.ok, report
            failed = [step for step in report.steps if not step["ok"]]
            assert failed[0]["call"] == call and message in str(failed[0]), report
        finally:
            host.free(engine)
    finally:
        trt.get_plugin_registry().deregister_creator(creator)


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
    # the builder's timing: the runtime methods run already while building
    ("set_tactic", raises, "setTactic", "deliberately broken"),
    ("on_shape_change", raises, "onShapeChange (build: kOPT)", "deliberately broken"),
    ("enqueue", raises, "IPluginV3OneRuntime::enqueue (build: timing", "deliberately broken"),
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


# --- quickly deployable AOT plugins (tensorrt.plugin, TensorRT 10.16 and 11.x) ------------------------------------

# The project's ops' steps (plugin/inplace_ops.py PROJECT_OPS, registered by inplace.aot.register_aot_op as
# --onnx --plugin aot registers them). N = 10^5 > 4 E at kOPT: the float16 table is hashed there (keys of its own).
AOT_PROFILE = {"N": (1, 10**5, 10**6), "E": (1, 10**4, 10**7)}
AOT_SIZES = [(1, 0, 1), (5, 7, 3), (1000, 10**4, 64), (10**6, 10**7, 1)]  # (N, E, F)
AOT_BUILD_CALLS = [
    "IPluginRegistry::getCreator", "IPluginCreatorV3Quick::createPlugin(kBUILD)",
    "IPluginV3::clone (addPluginV3: the network's copy)", "delete the parser's plugin (right after addPluginV3)",
    "IPluginV3::getCapabilityInterface(kCORE)",
    "IPluginV3QuickCore::getPluginName/Version/Namespace", "IPluginV3::getCapabilityInterface(kBUILD)", "getNbOutputs",
    "getOutputDataTypes (with input ranks)", "getOutputShapes",
    "getNbSupportedFormatCombinations + getSupportedFormatCombinations",
    *[f"configurePlugin ({label})" for label in CONFIGURE_ROUNDS], "getAliasedInput",
    "getNbTactics + getValidTactics", "setTactic", "IPluginV3QuickAOTBuild::getLaunchParams",
    "IPluginV3QuickAOTBuild::getKernel", "getTimingCacheID + getMetadataString",
    "the timing launch at kOPT (no CUDA context: evaluated, not launched)", "IPluginV3::clone",
    "IPluginV3::getCapabilityInterface(kCORE of the clone)", "the clone's getPluginName/Version/Namespace",
    "delete the clone", "delete the build plugin",
]


def aot_variants():
    """(op, chain, step, dtypes) of every step of the chains an engine takes for F > 1 (the float32 state chain
    and the float16 table, with and without counts; tests/plugin/test_aot_plugin.py variants) and their ids."""
    from plugin.scatter_add_op import block_chain
    from tests.plugin.test_aot_plugin import VARIANT_IDS, variants

    return [(variant, name) for variant, name in zip(variants(), VARIANT_IDS) if variant[1] is not block_chain()]


AOT_VARIANTS = [variant for variant, _ in aot_variants()]
AOT_VARIANT_IDS = [name for _, name in aot_variants()]


def block_variant():
    """(op, chain, step, dtypes) of the one-block chain (float16, F = 1, at most 1024 edges in the profile)."""
    from plugin.scatter_add_op import SCATTER_ADD, block_chain

    chain = block_chain()
    return SCATTER_ADD, chain, chain.steps[0], {"state": "float16", "src": "float16", "index": "int64"}


@pytest.fixture(scope="module")
def aot(host, trt):
    return register_aot_plugins(host, trt)


def register_aot_plugins(host, trt):
    """The project's ops' step plugins registered with tensorrt.plugin (inplace.registry.register_aot_plugins) and
    their creators in the host's registry (tensorrt.plugin registers a creator when a network first uses the
    plugin: lazy_register=True); their plugin ids, or a skip saying why not."""
    if not host.aot:
        pytest.skip(f"the plugin host of TensorRT {trt.__version__} has no quickly deployable plugins (10.16+)")
    try:
        importlib.import_module("tensorrt.plugin")
    except ImportError:
        pytest.skip(f"this tensorrt ({trt.__version__}) has no tensorrt.plugin")
    importlib.import_module("plugin.inplace_ops")  # registers PROJECT_OPS
    from inplace.registry import register_aot_plugins as register

    ids = register()
    for plugin_id in ids:
        namespace, name = plugin_id.split("::")
        register_creator(name, namespace)  # what trtp.op.<namespace>.<name>(...) does first
    return ids


def input_dims(chain, step, num_features):
    """{tensor: dims} of the step's inputs as the network gives them: state [N, F], src [E, F], index [E], each
    scratch tensor by its shape expression, a dimension that is a computed size named <tensor><axis> (its
    range in aot_profile, its value in aot_sizes)."""
    dims = {"state": ["N", num_features], "src": ["E", num_features], "index": ["E"]}
    for scratch in chain.scratch:
        dims[scratch.name] = [num_features if dim.op == "size" and dim.value == "F" else dim.value
                              if dim.op in ("size", "const") else f"{scratch.name}{axis}"
                              for axis, dim in enumerate(scratch.shape)]
    return {name: dims[name] for name in step.inputs}


def aot_sizes(chain, num_nodes, num_edges, num_features):
    """The host's dims for these sizes: N, E and each computed scratch dimension."""
    sizes = {"N": num_nodes, "E": num_edges, "F": num_features}
    dims = {"N": num_nodes, "E": num_edges}
    for scratch in chain.scratch:
        for axis, dim in enumerate(scratch.shape):
            if dim.op not in ("size", "const"):
                dims[f"{scratch.name}{axis}"] = dim.evaluate(sizes)
    return dims


def aot_profile(chain, num_features):
    """AOT_PROFILE and each computed scratch dimension's (least, kOPT's, largest) over the profile's corners."""
    corners = [aot_sizes(chain, n, e, num_features) for n in AOT_PROFILE["N"] for e in AOT_PROFILE["E"]]
    opt = aot_sizes(chain, AOT_PROFILE["N"][1], AOT_PROFILE["E"][1], num_features)
    return {**AOT_PROFILE, **{name: (min(c[name] for c in corners), opt[name], max(c[name] for c in corners))
                              for name in opt if name not in AOT_PROFILE}}


def aot_spec(host, trt, variant, num_features=NUM_FEATURES, dtypes=None):
    _, chain, step, variant_dtypes = variant
    types = dict(variant_dtypes, **(dtypes or {}))
    dims = input_dims(chain, step, num_features)
    return host.spec([(getattr(trt, types[name]), dims[name]) for name in step.inputs], aot_profile(chain, num_features))


def aot_build(host, trt, variant, num_features=NUM_FEATURES):
    """The step's plugin built by the host: (its kernel for the variant's dtypes, engine, report)."""
    from inplace.checks import plugin_name

    op, _, step, dtypes = variant
    with host.hook(churn):
        engine, report = host.aot_build(plugin_name(step), op.namespace, aot_spec(host, trt, variant, num_features))
    return step.kernel(dtypes), engine, report


def expected_launch(kernel, dtypes, num_nodes, num_edges, num_features):
    """The kernel's Launch evaluated on ints (inplace.launch.evaluate_launch), in the host's report's form."""
    from inplace.launch import evaluate_launch

    grid, block, shared, extra = evaluate_launch(kernel, {"N": num_nodes, "E": num_edges, "F": num_features}, dtypes)
    return {"grid": list(grid), "block": list(block), "shared_mem": shared, "extra_args": list(extra)}


@pytest.mark.parametrize("variant", range(len(AOT_VARIANTS)), ids=AOT_VARIANT_IDS)
def test_aot_build_phase_gives_the_kernel_and_its_launch(trt, host, aot, variant):
    """createPlugin(kSTRICT_AOT) through the quick creator, then TensorRT's AOT build calls: the kernel name and
    PTX getKernel returns (read after the call), the aliasing, and getLaunchParams' symbolic launch and extra
    arguments evaluated for concrete sizes against the step's Launch evaluated on ints."""
    _, chain, step, dtypes = AOT_VARIANTS[variant]
    kernel, engine, report = aot_build(host, trt, AOT_VARIANTS[variant])
    try:
        assert report.ok, report
        assert report.calls == AOT_BUILD_CALLS, report
        build_interface = report.step("IPluginV3::getCapabilityInterface(kBUILD)")["interface"]
        assert build_interface["kind"] == "PLUGIN_V3QUICKAOT_BUILD"
        assert report.step("getAliasedInput")["aliases"] == [
            step.inputs.index(name) if name in step.inputs else -1 for name in step.outputs]
        name, ptx = host.aot_kernel(engine)
        assert name == kernel.name and ptx.rstrip(b"\0") == kernel.source.ptx(kernel.name, dtypes)
        for num_nodes, num_edges, num_features in AOT_SIZES:
            if num_features != NUM_FEATURES:
                continue  # F is the network's constant; other F: test_aot_launch_for_every_feature_count
            assert_evaluated_launch(host, engine, chain, kernel, dtypes, num_nodes, num_edges, num_features)
    finally:
        host.free(engine)


def assert_evaluated_launch(host, engine, chain, kernel, dtypes, num_nodes, num_edges, num_features):
    """The engine's launch parameters and extra arguments, evaluated by the host for these sizes (N, E and the
    scratch dimensions as the profile's dimensions), equal the step's Launch evaluated on the same ints."""
    evaluated = host.aot_evaluate(engine, aot_sizes(chain, num_nodes, num_edges, num_features))
    assert evaluated.ok, evaluated
    assert evaluated.data["launch"] == expected_launch(kernel, dtypes, num_nodes, num_edges, num_features)


@pytest.mark.parametrize("num_nodes, num_edges, num_features", AOT_SIZES)
def test_aot_launch_for_every_feature_count(trt, host, aot, num_nodes, num_edges, num_features):
    for variant, variant_id in zip(AOT_VARIANTS, AOT_VARIANT_IDS):
        _, chain, _, dtypes = variant
        kernel, engine, report = aot_build(host, trt, variant, num_features)
        try:
            assert report.ok, report
            evaluated = host.aot_evaluate(engine, aot_sizes(chain, num_nodes, num_edges, num_features))
            expected = expected_launch(kernel, dtypes, num_nodes, num_edges, num_features)
            assert evaluated.data["launch"]["grid"] == expected["grid"], (variant_id, evaluated)
            assert evaluated.data["launch"]["extra_args"] == expected["extra_args"], (variant_id, evaluated)
        finally:
            host.free(engine)


def test_aot_register_refusing_a_dtype_fails_the_build(trt, host, aot):
    """add_rows takes a float32 or float16 state: given int32 inputs, getOutputDataTypes fails with the plugin's
    message."""
    from inplace.checks import plugin_name

    variant = AOT_VARIANTS[0]
    op, _, step, _ = variant
    spec = aot_spec(host, trt, variant, dtypes={"state": "int32", "src": "int32"})
    engine, report = host.aot_build(plugin_name(step), op.namespace, spec)
    host.free(engine)
    assert not report.ok and "state must be a 2-D float32 or float16" in report.error, report


def test_aot_scatter_add_block_builds_one_block_of_one_feature_rows(trt, host, aot):
    """add_block (the float16 chain of a profile of at most 1024 edges, F = 1): one block whatever the sizes,
    its Launch's threads, (N, E) as its extra arguments, state aliased."""
    variant = block_variant()
    _, chain, step, dtypes = variant
    kernel, engine, report = aot_build(host, trt, variant, 1)
    try:
        assert report.ok, report
        assert report.step("getAliasedInput")["aliases"] == [0]
        for num_nodes, num_edges in [(1, 0), (10**6, 1000), (2**31 - 1, 10**7)]:
            evaluated = host.aot_evaluate(engine, aot_sizes(chain, num_nodes, num_edges, 1))
            assert evaluated.ok, evaluated
            assert evaluated.data["launch"] == expected_launch(kernel, dtypes, num_nodes, num_edges, 1)
            assert evaluated.data["launch"]["grid"] == [1, 1, 1]
            assert evaluated.data["launch"]["extra_args"] == [num_nodes, num_edges]
    finally:
        host.free(engine)


TWO_ALIASES = "host_test::two_outputs_alias_one_input"


def register_two_aliases_plugin(aot):
    """A quickly deployable AOT plugin whose two outputs both alias input 0 (state, float32 [N, 3]; src alongside),
    registered once in tensorrt.plugin and in the host's registry. NvInferRuntime.h (getAliasedInput): "A given
    plugin input can only be aliased to a single plugin output."; its aot_impl is never reached."""
    import tensorrt.plugin as trtp

    namespace, name = TWO_ALIASES.split("::")
    if TWO_ALIASES not in qdp_registry():
        @trtp.register(TWO_ALIASES, lazy_register=True)
        def two_aliases_desc(state: trtp.TensorDesc, src: trtp.TensorDesc) -> tuple[trtp.TensorDesc, trtp.TensorDesc]:
            return state.aliased(), state.aliased()

        @trtp.aot_impl(TWO_ALIASES)
        def two_aliases_aot(state: trtp.TensorDesc, src: trtp.TensorDesc, outputs: tuple[trtp.TensorDesc],
                            tactic: int) -> tuple[str | bytes, str | bytes, trtp.KernelLaunchParams,
                                                  trtp.SymIntExprs]:
            raise AssertionError("not reached: the host refuses the aliasing before getLaunchParams")

    register_creator(name, namespace)
    return name, namespace


def test_aot_two_outputs_aliasing_one_input_fail_the_build(trt, host, aot):
    """getAliasedInput answering input 0 for both outputs: the build stops there, as for a V3One plugin (BROKEN's
    get_aliased_input "input 0 twice"), before getLaunchParams or getKernel."""
    name, namespace = register_two_aliases_plugin(aot)
    inputs = [(trt.float32, ["N", NUM_FEATURES]), (trt.float32, ["E", NUM_FEATURES])]
    engine, report = host.aot_build(name, namespace, host.spec(inputs, AOT_PROFILE))
    host.free(engine)
    assert not report.ok and engine is None, report
    failed = [step for step in report.steps if not step["ok"]]
    assert failed[0]["call"] == "getAliasedInput" and failed[0]["aliases"] == [0, 0], report
    assert "IPluginV3QuickAOTBuild::getLaunchParams" not in report.calls, report


FAKE_DRIVER = r"""
/* A recording stand-in for libcuda's launch entry points (soname libcuda.so.1): what the host passes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
static void say(const char* text) { FILE* f = fopen(getenv("FAKE_CUDA_LOG"), "a"); fputs(text, f); fclose(f); }
int cuModuleLoadData(void** module, const void* image) { *module = (void*)0x10; say("load\n"); return image ? 0 : 1; }
int cuModuleGetFunction(void** f, void* m, const char* name) {
    char line[256]; snprintf(line, sizeof line, "function %s\n", name); say(line); *f = (void*)0x20; return 0; }
int cuModuleUnload(void* m) { say("unload\n"); return 0; }
int cuGetErrorName(int r, const char** s) { *s = r ? "FAKE_ERROR" : "CUDA_SUCCESS"; return 0; }
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** params, void** extra) {
    char line[512]; const char* kinds = getenv("FAKE_CUDA_KINDS");
    snprintf(line, sizeof line, "launch %u %u %u %u %u %u %u %llu\n", gx, gy, gz, bx, by, bz, shared,
             (unsigned long long)(uintptr_t)stream); say(line);
    for (int i = 0; kinds[i]; ++i) {
        if (kinds[i] == 'p') snprintf(line, sizeof line, "p %llu\n", (unsigned long long)*(uint64_t*)params[i]);
        else snprintf(line, sizeof line, "i %d\n", *(int32_t*)params[i]);
        say(line);
    }
    return extra == 0 ? 0 : 1;
}
"""

LAUNCH_SCRIPT = """
import ctypes, json, sys
ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)  # the recording driver, found by the host's dlopen("libcuda.so.1")
import tensorrt as trt
from tests.plugin_host.host import PluginHost
from tests.plugin.test_plugin_host import AOT_VARIANTS, aot_build, register_aot_plugins
host = PluginHost(trt)
register_aot_plugins(host, trt)
kernel, engine, report = aot_build(host, trt, AOT_VARIANTS[int(sys.argv[2])])
assert report.ok, report
launched = host.aot_launch(engine, {"N": 1000, "E": 5000}, [11, 22, 33, 44], [0, 0], 99)
host.free(engine)
print(json.dumps(launched.data))
"""


def test_aot_launch_passes_inputs_extra_arguments_then_outputs(trt, host, aot, tmp_path):
    """The host's launch of an AOT kernel (add_rows_counts, float32), recorded by a stand-in libcuda in a fresh
    process (no GPU needed): the grid of getLaunchParams for N = 1000, E = 5000, F = 3, then the input pointers,
    the extra int32 arguments and the output pointers, each aliased output being its input's pointer
    (tests/plugin/test_plugin_host_gpu.py runs it)."""
    variant = AOT_VARIANT_IDS.index("scatter_add_counts_add_rows_counts-float32")
    _, _, step, dtypes = AOT_VARIANTS[variant]
    kernel = step.kernel(dtypes)
    launch = expected_launch(kernel, dtypes, 1000, 5000, 3)
    compiler = os.environ.get("CC", "gcc")
    library = tmp_path / "libcuda.so.1"
    source = tmp_path / "fake_cuda.c"
    source.write_text(FAKE_DRIVER)
    build = subprocess.run([compiler, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(library), str(source)],
                           capture_output=True, text=True)
    if build.returncode != 0:
        pytest.skip(f"cannot compile the recording driver with {compiler}: {build.stderr.strip()[-300:]}")
    log = tmp_path / "launch.log"
    kinds = "p" * len(step.inputs) + "i" * len(launch["extra_args"]) + "p" * len(step.outputs)
    env = dict(os.environ, FAKE_CUDA_LOG=str(log), FAKE_CUDA_KINDS=kinds,
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", LAUNCH_SCRIPT, str(library), str(variant)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    grid, block = " ".join(map(str, launch["grid"])), " ".join(map(str, launch["block"]))
    assert log.read_text().splitlines() == [
        "load", f"function {kernel.name}", f"launch {grid} {block} {launch['shared_mem']} 99",
        "p 11", "p 22", "p 33", "p 44",  # state, src, index, counts
        *(f"i {value}" for value in launch["extra_args"]),  # the kernel's extra arguments (N, E, F first)
        "p 11", "p 44",  # the outputs: state and counts, aliased to their inputs
        "unload",  # with the engine
    ], result.stdout[-2000:]
    assert step.inputs == ("state", "src", "index", "counts") and step.outputs == ("state", "counts")
    assert launch["extra_args"][:3] == [1000, 5000, 3]


def test_a_host_built_from_another_source_is_refused_where_it_cannot_be_rebuilt(host, tmp_path):
    """A layout carried to a machine without TensorRT's headers (the GPU machine) keeps the host it was built
    with: build.py took any host there for current, so a layout built at an older tree ran an old host without a
    word; it now checks a digest of the source alone and refuses one built from another plugin_host.cpp."""
    import shutil

    from tests.plugin_host.build import HostBuildError, build

    layout = Path(host_library_path()).parent.parent
    carried = tmp_path / "carried"
    shutil.copytree(layout / "tensorrt_libs", carried / "tensorrt_libs")
    (carried / "tensorrt_bindings").mkdir()
    shutil.copy(layout / "tensorrt_bindings" / "__init__.py", carried / "tensorrt_bindings")
    no_headers = tmp_path / "no-headers"
    assert build(carried, no_headers) == carried / "tensorrt_libs" / Path(host_library_path()).name
    (carried / "tensorrt_libs" / "plugin_host.source").write_text("the digest of an older plugin_host.cpp")
    with pytest.raises(HostBuildError, match="built from another plugin_host.cpp"):
        build(carried, no_headers)


def test_a_spec_line_the_host_cannot_read_is_reported_with_its_bytes(trt, host, sap):
    """The profile line with its numbers run together (as an H200 run reported it) or grouped by commas: the build
    stops before any plugin call, naming the line and its bytes."""
    for profile_line in ("profile N110000001000000", "profile N 1 1,000 5"):
        spec = network_spec(host, trt, "float32").replace(f"profile N {' '.join(map(str, PROFILE['N']))}",
                                                          profile_line)
        engine, report = host.build(sap.PLUGIN_NAME, sap.PLUGIN_VERSION, sap.PLUGIN_NAMESPACE, spec)
        assert engine is None and report.calls == ["host"], report
        assert f"cannot read the profile line: {profile_line} (bytes {profile_line.encode().hex()})" in report.error


def test_host_py_refuses_a_host_built_from_another_source(host):
    """tests/plugin_host/host.py compares the digest compiled into the host with this tree's plugin_host.cpp."""
    from tests.plugin_host.build import source_digest
    from tests.plugin_host.host import check_source

    def digest_of(value):
        function = lambda: value  # noqa: E731  (stands for the ctypes function, which takes restype/argtypes)
        return type("Library", (), {"host_source_digest": staticmethod(function)})()

    check_source(host.lib, "the built host")  # this tree's
    check_source(digest_of(source_digest().encode()), "same")
    with pytest.raises(RuntimeError, match="built from another plugin_host.cpp"):
        check_source(digest_of(b"0" * 64), "old")


TIMING_DRIVER = r"""
/* A stand-in libcuda (soname libcuda.so.1) for the build's timing enqueue on "device" buffers: host memory behind
   made-up device addresses, a current context (none with FAKE_CUDA_NO_CONTEXT), a stream whose work ends or
   (FAKE_CUDA_NEVER_ENDS) never does. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void say(const char* text) { FILE* f = fopen(getenv("FAKE_CUDA_LOG"), "a"); fputs(text, f); fclose(f); }
int cuCtxGetCurrent(void** ctx) { *ctx = getenv("FAKE_CUDA_NO_CONTEXT") ? 0 : (void*)0xC0; return 0; }
int cuCtxSetCurrent(void* ctx) { return ctx == (void*)0xC0 ? 0 : 201; }
int cuMemAlloc_v2(uint64_t* p, size_t n) {
    char line[64]; snprintf(line, sizeof line, "alloc %zu\n", n); say(line); *p = (uint64_t)(uintptr_t)malloc(n);
    return 0; }
int cuMemFree_v2(uint64_t p) { say("free\n"); free((void*)(uintptr_t)p); return 0; }
int cuMemcpyHtoD_v2(uint64_t dst, const void* src, size_t n) { memcpy((void*)(uintptr_t)dst, src, n); return 0; }
int cuStreamCreate(void** s, unsigned flags) { *s = (void*)0x5700; say("stream\n"); return 0; }
int cuStreamDestroy_v2(void* s) { say("stream destroyed\n"); return 0; }
int cuStreamQuery(void* s) { return getenv("FAKE_CUDA_NEVER_ENDS") ? 600 : 0; }
int cuStreamSynchronize(void* s) { return 0; }
int cuGetErrorName(int r, const char** s) { *s = r == 600 ? "CUDA_ERROR_NOT_READY" : "CUDA_ERROR"; return 0; }
int cuModuleLoadData(void** m, const void* image) { *m = (void*)0x10; say("load\n"); return 0; }
int cuModuleGetFunction(void** f, void* m, const char* name) { *f = (void*)0x20; return 0; }
int cuModuleUnload(void* m) { say("unload\n"); return 0; }
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** params, void** extra) {
    char line[128]; snprintf(line, sizeof line, "launch %u %u %u %llu\n", gx, bx, shared,
                             (unsigned long long)(uintptr_t)stream); say(line); return 0; }
"""

TIMING_SCRIPT = """
import ctypes, json, sys
ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)  # found by the host's dlopen("libcuda.so.1")
import tensorrt as trt
import plugin.kernels
import plugin.scatter_add_plugin as sap
launches = []
plugin.kernels.PreparedScatterAdd = lambda **sizes: (lambda *pointers: launches.append(pointers))  # recorded
from tests.plugin_host.host import PluginHost
from tests.plugin.test_plugin_host import network_spec
host = PluginHost(trt)
host.timing_limit(0.5)
if sys.argv[2] == "aot":
    from tests.plugin.test_plugin_host import AOT_VARIANTS, AOT_VARIANT_IDS, aot_build, register_aot_plugins
    register_aot_plugins(host, trt)
    variant = AOT_VARIANTS[AOT_VARIANT_IDS.index("scatter_add_add_into_table-float16")]
    kernel, engine, report = aot_build(host, trt, variant)
else:
    sap.register_scatter_add_creator()
    engine, report = host.build(sap.PLUGIN_NAME, "1", "", network_spec(host, trt, "float16"))
host.free(engine)
print(json.dumps({"report": report.data, "launches": launches}))
"""


def run_with_timing_driver(tmp_path, which, never_ends, no_context=False):
    """TIMING_SCRIPT for `which` ("python" or "aot") in a fresh process with the stand-in libcuda: (report data,
    recorded launches, the driver's log lines)."""
    library = tmp_path / "libcuda.so.1"
    source = tmp_path / "timing_cuda.c"
    source.write_text(TIMING_DRIVER)
    compiler = os.environ.get("CC", "gcc")
    build = subprocess.run([compiler, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(library),
                            str(source)], capture_output=True, text=True)
    if build.returncode != 0:
        pytest.skip(f"cannot compile the stand-in driver with {compiler}: {build.stderr.strip()[-300:]}")
    log = tmp_path / "driver.log"
    env = dict(os.environ, FAKE_CUDA_LOG=str(log), PYTHONPATH=os.pathsep.join([str(ROOT), os.environ["PYTHONPATH"]]))
    if never_ends:
        env["FAKE_CUDA_NEVER_ENDS"] = "1"
    if no_context:
        env["FAKE_CUDA_NO_CONTEXT"] = "1"
    result = subprocess.run([sys.executable, "-c", TIMING_SCRIPT, str(library), which], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(result.stdout.strip().splitlines()[-1])
    from tests.plugin_host.host import Report

    return Report(data["report"]), data["launches"], log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("never_ends", [False, True], ids=["ends", "never ends"])
def test_the_aot_builds_timing_launch_with_a_stand_in_driver(trt, host, aot, tmp_path, never_ends):
    """An AOT plugin's timing where a CUDA context is current (stand-in libcuda, fresh process): device buffers of
    the inputs at kOPT, the PTX loaded, the kernel launched with getLaunchParams at kOPT on the host's stream,
    waited for, the build's module unloaded; a kernel that never ends is reported and its buffers left alone."""
    from inplace.launch import ITEMSIZE

    report, _, log = run_with_timing_driver(tmp_path, "aot", never_ends)
    variant = AOT_VARIANTS[AOT_VARIANT_IDS.index("scatter_add_add_into_table-float16")]
    _, chain, step, dtypes = variant
    kernel = step.kernel(dtypes)
    n, e = AOT_PROFILE["N"][1], AOT_PROFILE["E"][1]
    launch = expected_launch(kernel, dtypes, n, e, NUM_FEATURES)
    opt = aot_sizes(chain, n, e, NUM_FEATURES)
    allocations = [f"alloc {ITEMSIZE[dtypes[name]] * np.prod([opt.get(d, d) for d in dims], dtype=np.int64)}"
                   for name, dims in input_dims(chain, step, NUM_FEATURES).items()]  # state, src, index, keys, values
    assert len(allocations) == 5 and "alloc 0" not in allocations  # a hashed table at kOPT: keys of their own
    assert log[:8] == [*allocations, "stream", "load",
                       f"launch {launch['grid'][0]} {launch['block'][0]} {launch['shared_mem']} {0x5700}"], log
    kernel_step = report.step("the timing launch's kernel on made-up inputs")
    if never_ends:
        assert not report.ok and "did not end within 0.5 s" in kernel_step["message"], report
        assert "free" not in log and "unload" not in log
    else:
        assert report.ok and kernel_step["ok"], report
        assert log[8:] == ["unload", "stream destroyed"] + ["free"] * 5  # the build's module, then its buffers


def test_the_builds_timing_without_a_current_cuda_context_is_one_reported_error(trt, host, tmp_path):
    """The CUDA driver is there but no context is current on the building thread (stand-in libcuda, fresh
    process): the build fails with one error naming the missing context, before the timing copy gets any address
    or stream. It once went on with a CPU run's made-up addresses and stream, which the plugin's launch handed to
    the real driver: on the H200 the process died (SIGSEGV) with no report."""
    report, launches, log = run_with_timing_driver(tmp_path, "python", never_ends=False, no_context=True)
    assert not report.ok and "needs a current CUDA context" in report.error, report
    assert [step["call"] for step in report.steps if not step["ok"]] == ["host"], report  # the one error
    assert not any(call.startswith("IPluginV3OneRuntime::") for call in report.calls), report
    assert launches == [] and log == [], (launches, log)  # no buffer, no stream, no launch


@pytest.mark.parametrize("never_ends", [False, True], ids=["ends", "never ends"])
def test_the_builds_timing_on_device_buffers_with_a_stand_in_driver(trt, host, tmp_path, never_ends):
    """The timing enqueue where a CUDA context is current, with a stand-in libcuda in a fresh process: device
    buffers of the kOPT shapes' bytes (and the promised workspace) are made, filled and handed to enqueue on a
    stream of the host's, then waited for; a stream whose work never ends is reported after the time limit and
    its buffers are left alone (tests/plugin/test_plugin_host_gpu.py does this on a GPU)."""
    report, launches, log = run_with_timing_driver(tmp_path, "python", never_ends)
    timing = report.step("IPluginV3OneRuntime::enqueue (build")
    assert timing["on_device"] and timing["stream"] == 0x5700, report
    (n_opt, e_opt) = PROFILE["N"][1], PROFILE["E"][1]
    state, src, index = 2 * 3 * n_opt, 2 * 3 * e_opt, 8 * e_opt  # float16 [N, 3], [E, 3]; int64 [E]
    counts, workspace = 8 * n_opt, timing["workspace_bytes"]
    assert workspace > 0 and log[:6] == [
        f"alloc {state}", f"alloc {src}", f"alloc {index}", f"alloc {counts}", f"alloc {workspace}", "stream"]
    assert [tuple(call) for call in launches] == [
        (*timing["inputs"], timing["outputs"][1], timing["workspace"], 0x5700)] * 2
    kernels = report.step("the timing enqueue's kernels on made-up inputs")
    if never_ends:
        assert not report.ok and not kernels["ok"] and "did not end within 0.5 s" in kernels["message"], report
        assert "free" not in log  # a kernel still running: its buffers are left alone
    else:
        assert report.ok and kernels["ok"], report
        assert log[6:] == ["stream destroyed"] + ["free"] * 5
