"""Graph replay, recorded through the launcher's seam (tests/support/kernel_fakes.py): a prepared launch's driver calls
captured once and replayed, never while the caller's stream is captured, and freed with it. No GPU."""

import numpy as np
import pytest

from tests.support.kernel_fakes import INDEX_PTR, SRC_PTR, STATE_PTR, argument_slots, recorded  # noqa: F401

def test_cuda_graph_capture_refuses_the_legacy_default_stream():
    """Capturing stream 0 is a CUDA error; CapturedGraph says why before any driver call."""
    from plugin.cuda_graph import CapturedGraph

    with pytest.raises(ValueError, match="default stream 0"):
        CapturedGraph(0, lambda: None)


# --- graph replay: a prepared launch's driver calls captured once and replayed (recorded driver, no GPU) ------
@pytest.fixture
def replaying(recorded, monkeypatch):
    monkeypatch.setattr(recorded[1].PreparedScatterAdd, "graph_replay", True)
    return recorded


def one_kernel_launch(launch):
    """A launch of one kernel and no memset: float32 without counts, the direct path."""
    return launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                     with_counts=False)


def test_the_second_launch_with_the_same_pointers_captures_a_graph_and_later_ones_replay_it(replaying):
    driver, launch = replaying
    prepared = one_kernel_launch(launch)
    pointers = (STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0, 5)
    prepared(*pointers)
    assert driver.names() == ["cuLaunchKernel"]  # first use: the driver call
    direct = driver.calls[0][1]
    del driver.calls[:]
    prepared(*pointers)
    assert driver.names() == ["cuStreamIsCapturing", "cuStreamCreate", "cuStreamBeginCapture",
                              "cuLaunchKernel", "cuStreamEndCapture", "cuGraphInstantiate",
                              "cuGraphDestroy", "cuStreamIsCapturing", "cuGraphLaunch"]
    captured, replayed = driver.calls[3][1], driver.calls[-1][1]
    capture_stream = int(driver.calls[2][1][0])  # cuStreamBeginCapture's
    assert int(captured[8]) == capture_stream != 5  # captured on the launcher's own stream, not the caller's
    assert captured[:8] == direct[:8] and captured[9:] == direct[9:]  # the same kernel, shape and arguments
    assert int(replayed[1]) == 5 and replayed[0] is prepared.graph  # replayed on the caller's stream
    del driver.calls[:]
    prepared(*pointers)
    assert driver.names() == ["cuStreamIsCapturing", "cuGraphLaunch"]
    del driver.calls[:]
    prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0, 7)  # another stream: first use of these pointers
    assert driver.names() == ["cuLaunchKernel"]


def test_a_launch_into_a_stream_being_captured_issues_the_driver_calls_into_that_capture(replaying):
    driver, launch = replaying
    prepared = one_kernel_launch(launch)
    pointers = (STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0, 5)
    driver.capturing.add(5)  # the caller captures from the start (e.g. the engine captured at its first run)
    prepared(*pointers)
    prepared(*pointers)
    assert driver.names() == ["cuLaunchKernel", "cuStreamIsCapturing", "cuLaunchKernel"]
    driver.capturing.clear()
    prepared(*pointers)  # now the graph is captured and replayed
    assert driver.names()[-1] == "cuGraphLaunch"
    driver.capturing.add(5)
    del driver.calls[:]
    prepared(*pointers)  # a graph launched into a capture is CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: never tried
    assert driver.names() == ["cuStreamIsCapturing", "cuLaunchKernel"]
    assert int(driver.calls[1][1][8]) == 5


def test_pointer_sets_in_rotation_each_replay_their_own_graph(replaying, monkeypatch):
    driver, launch = replaying
    prepared = one_kernel_launch(launch)
    batches = [(STATE_PTR, SRC_PTR + 4096 * k, INDEX_PTR + 8192 * k, 0, 0, 5) for k in range(3)]
    for _ in range(2):
        for pointers in batches:
            prepared(*pointers)
    del driver.calls[:]
    bound, bind = [], launch.bind_driver_calls
    monkeypatch.setattr(launch, "bind_driver_calls", lambda *arguments: bound.append(arguments) or bind(*arguments))
    for pointers in batches:
        prepared(*pointers)
    launches = [arguments for name, arguments in driver.calls if name == "cuGraphLaunch"]
    assert driver.names().count("cuLaunchKernel") == 0 and len(launches) == 3
    assert len({int(executable) for executable, _ in launches}) == 3
    assert bound == []  # switched by their graphs: no driver calls bound on the way
    driver.capturing.add(5)
    for k in (1, 0):  # the caller captures: the driver calls, bound now to the right pointers
        del driver.calls[:]
        prepared(*batches[k])
        assert driver.names() == ["cuStreamIsCapturing", "cuLaunchKernel"]
        assert argument_slots(driver.calls[1][1][9], 2) == [SRC_PTR + 4096 * k, INDEX_PTR + 8192 * k]


@pytest.mark.parametrize("failing, status, second_call_ends", [
    ("cuStreamEndCapture", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", ["cuStreamEndCapture", "cuLaunchKernel"]),
    ("cuGraphLaunch", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", ["cuGraphLaunch", "cuGraphExecDestroy",
                                                             "cuLaunchKernel"]),
], ids=["capture fails", "replay fails"])
def test_a_failed_capture_or_replay_leaves_the_launch_to_the_driver_calls(replaying, failing, status,
                                                                         second_call_ends):
    """A capture that fails is not tried again for those pointers; a replay that fails frees the graphs and
    turns replay off. Either way the launch still happens, by the driver calls."""
    driver, launch = replaying
    prepared = one_kernel_launch(launch)
    pointers = (STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0, 5)
    prepared(*pointers)
    driver.statuses[failing] = [getattr(driver.CUresult, status)]
    del driver.calls[:]
    prepared(*pointers)
    assert driver.names()[-len(second_call_ends):] == second_call_ends
    assert prepared.graph_replay is (failing != "cuGraphLaunch")
    del driver.calls[:]
    prepared(*pointers)
    assert driver.names() == ["cuLaunchKernel"]


def test_keyword_entry_replays_from_its_third_call_with_the_same_pointers(replaying):
    driver, launch = replaying
    keywords = dict(state=STATE_PTR, src=SRC_PTR, index=INDEX_PTR, counts=0, num_nodes=10**6, num_edges=10**4,
                    num_features=1, dtype="float32", stream=5)
    for _ in range(3):
        launch.scatter_add_launch(**keywords)
    assert [name for name in driver.names() if name != "cuCtxGetId"][-2:] == ["cuStreamIsCapturing", "cuGraphLaunch"]
    assert driver.names().count("cuLaunchKernel") == 2  # the first call's, and the one captured at the second


def test_a_prepared_launchs_graphs_are_freed_with_it_and_the_finalizer_never_raises(replaying, monkeypatch):
    import gc
    import sys

    driver, launch = replaying
    prepared = one_kernel_launch(launch)
    for _ in range(2):
        prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0, 5)
    del driver.calls[:]
    del prepared
    gc.collect()
    assert driver.names() == ["cuGraphExecDestroy"]
    prepared = one_kernel_launch(launch)
    for _ in range(2):
        prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0, 5)
    driver.statuses["cuGraphExecDestroy"] = [driver.CUresult.CUDA_ERROR_CONTEXT_IS_DESTROYED]
    del driver.calls[:]
    raised = []
    monkeypatch.setattr(sys, "unraisablehook", raised.append)  # where an exception in a finalizer would go
    del prepared
    gc.collect()
    assert driver.names() == ["cuGraphExecDestroy"] and raised == []


# --- float16 grid_table: one cooperative launch (plan.py, scatter_add.cu scatter_grid_table) ------------------

