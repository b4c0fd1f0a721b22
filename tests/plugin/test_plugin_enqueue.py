"""ScatterAddPlugin.enqueue as TensorRT calls it, with a recording launcher in place of the prepared kernel
launch and a recording driver copy: which pointer goes where (state, src, index, counts, workspace, stream),
and the copy into an output buffer of its own (destination first) when TensorRT does not alias. No GPU.

Runs on the `trt` fixture (TensorRT-RTX here) and in the real-bindings matrix (the plugin subclasses the
real IPluginV3 bases of each release)."""

import importlib

import pytest

pytestmark = [pytest.mark.trt_standin, pytest.mark.trt_bindings]

STATE, SRC, INDEX, COUNTS, OWN_OUTPUT, WORKSPACE, STREAM = 0x1000, 0x2000, 0x3000, 0x4000, 0x6000, 0x5000, 7
STATE_NBYTES = 10 * 3 * 4  # N = 10, F = 3, float32


@pytest.fixture
def sap(trt):
    return importlib.import_module("plugin.scatter_add_plugin")


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, *arguments):
        self.calls.append(arguments)


@pytest.fixture
def plugin_with_recorders(trt, sap, monkeypatch):
    """(make_plugin(compute_counts), launches, copies): plugins whose prepared launch (plugin.kernels'
    PreparedScatterAdd, which on_shape_change makes) and device copy record."""
    import plugin.kernels
    from tests.plugin.test_plugin import tensor_desc

    copies = Recorder()
    monkeypatch.setattr(sap, "copy_device_async", copies)
    launches = Recorder()
    monkeypatch.setattr(plugin.kernels, "PreparedScatterAdd", lambda **sizes: launches)
    inputs = [tensor_desc(trt, trt.float32, dims).desc for dims in ([10, 3], [6, 3], [6])]  # N = 10, F = 3

    def make(compute_counts):
        made = sap.ScatterAddPlugin(compute_counts=compute_counts)
        made.on_shape_change(inputs, inputs[:1])
        return made

    return make, launches, copies


def test_enqueue_adds_into_the_aliased_state_with_src_index_counts_workspace_and_stream_in_order(plugin_with_recorders):
    make, launches, copies = plugin_with_recorders
    make(True).enqueue([], [], [STATE, SRC, INDEX], [STATE, COUNTS], WORKSPACE, STREAM)
    make(False).enqueue([], [], [STATE, SRC, INDEX], [STATE], WORKSPACE, STREAM)
    assert launches.calls == [(STATE, SRC, INDEX, COUNTS, WORKSPACE, STREAM), (STATE, SRC, INDEX, 0, WORKSPACE, STREAM)]
    assert copies.calls == []  # aliased: outputs[0] is inputs[0], nothing to copy


def test_enqueue_into_an_output_buffer_of_its_own_copies_the_state_there_first(plugin_with_recorders):
    make, launches, copies = plugin_with_recorders
    make(True).enqueue([], [], [STATE, SRC, INDEX], [OWN_OUTPUT, COUNTS], WORKSPACE, STREAM)
    assert copies.calls == [(OWN_OUTPUT, STATE, STATE_NBYTES, STREAM)]  # (destination, source, bytes, stream)
    assert launches.calls == [(OWN_OUTPUT, SRC, INDEX, COUNTS, WORKSPACE, STREAM)]


def test_copy_device_async_passes_the_destination_first_to_the_driver(sap, monkeypatch):
    from cuda.bindings import driver

    calls = []

    def memcpy(dst, src, nbytes, stream):
        calls.append((int(dst), int(src), nbytes, int(stream)))
        return (driver.CUresult.CUDA_SUCCESS,)

    monkeypatch.setattr(driver, "cuMemcpyDtoDAsync", memcpy)
    sap.copy_device_async(OWN_OUTPUT, STATE, STATE_NBYTES, STREAM)
    sap.copy_device_async(OWN_OUTPUT, STATE, 0, STREAM)  # nothing to copy: no driver call
    assert calls == [(OWN_OUTPUT, STATE, STATE_NBYTES, STREAM)]
