"""CUDA graphs on a GPU: the launcher's own graph replay (PreparedScatterAdd.graph_replay) and a caller's
capture of a launch (plugin.cuda_graph.CapturedGraph), on every launch path, with fresh random inputs uploaded
into the same buffers before each execution: every execution must add its edges into the state in place
(cumulative) and recount, as the direct driver calls do. Skipped without a GPU.
"""

import numpy as np
import pytest

from common.cuda_check import check
from plugin.cuda_graph import CapturedGraph
from plugin.device_array import DeviceArray
from plugin.kernels import scatter_add_launch, scatter_add_workspace_size
from tests.kernels.test_kernels_gpu import assert_within_bound, random_inputs
from tests.kernels.test_small_updates_gpu import skip_unless_available

pytestmark = pytest.mark.gpu

REPLAYS = 3


@pytest.fixture
def stream():
    from cuda.bindings import driver

    from plugin.kernels.launch import current_context

    current_context()
    handle = check(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING))
    yield int(handle)
    check(driver.cuStreamDestroy(handle))


def what_ran(plan):
    """The plan's kernel path."""
    if plan.sort is not None:
        return "sorted"
    if plan.paired:
        return "paired"
    if plan.algorithm == "grid_table":
        return "grid_table"
    if plan.table is not None:
        return "table"
    return plan.algorithm


# (dtype, N, E, F, counts, algorithm, what the first launch must plan): each launch path once; the sorted and
# chunked paths forced at sizes far below where "auto" takes them, to keep the float64 checks quick
CASES = [
    (np.float32, 10**6, 10**4, 1, True, "auto", "global"),  # a memset of the counts, then one launch
    (np.float32, 10**6, 10**4, 1, False, "auto", "direct"),  # one launch, nothing O(N)
    (np.float16, 10**6, 1000, 1, False, "auto", "block_table"),  # one block, a shared table, no workspace
    (np.float16, 10**6, 10**4, 1, False, "owned", "owned"),  # one launch of 1024-thread blocks, no workspace
    (np.float16, 10**6, 10**4, 1, False, "grid_table", "grid_table"),  # one cooperative launch, no memset
    (np.float16, 10**4, 10**4, 1, False, "global", "table"),  # memsets, scatter into the one-slot table, apply
    (np.float16, 10**7, 10**6, 1, False, "auto", "split_table"),  # a memset and two launches over the workspace
    (np.float32, 1000, 10**5, 1, True, "auto", "shared"),  # memset of the counts, then the shared-memory kernel
    (np.float32, 10**6, 10**6, 1, True, "auto", "paired"),  # (value, count) pairs in the counts, then a fold
    (np.float16, 10**5, 10**4, 3, True, "auto", "table"),  # memsets, scatter into the float32 table, apply
    (np.float32, 5000, 100_000, 64, True, "sorted", "sorted"),  # count, scan, place, reduce, fixup
    (np.float32, 1000, 300_000, 32, True, "chunked", "chunked"),  # chunks sorted in shared memory
]


@pytest.mark.parametrize("dtype, nodes, edges, features, with_counts, algorithm, path", CASES,
                         ids=[case[-1].split(",")[0] + ("" if case[4] else ", no counts") + f", {case[0].__name__}"
                              for case in CASES])
def test_every_launch_adds_its_new_batch_in_place_direct_replayed_or_captured(stream, dtype, nodes, edges, features,
                                                                              with_counts, algorithm, path):
    """The same buffers, a new batch uploaded before each execution: the first launch issues the driver calls,
    the second captures them into the launcher's own graph and replays it, the third replays it; then the
    caller captures a launch into a graph of its own (the launcher sees the capture and issues its driver
    calls into it) and replays that three times; then the launcher replays its graph again. Every execution
    must add its batch into the state in place and recount."""
    from cuda.bindings import driver

    from plugin.kernels import launch as launch_module

    skip_unless_available(algorithm)
    state, src, index = random_inputs(nodes, edges, features, dtype)
    size = scatter_add_workspace_size(nodes, edges, features, dtype, with_counts=with_counts, algorithm=algorithm)
    buffers = {
        "state": DeviceArray.from_array(state),
        "src": DeviceArray.from_array(src),
        "index": DeviceArray.from_array(index),
        "counts": DeviceArray((nodes, 1), np.int64),
        "workspace": DeviceArray((max(size, 1),), np.uint8),
    }

    def launch():
        return scatter_add_launch(
            state=buffers["state"].ptr, src=buffers["src"].ptr, index=buffers["index"].ptr,
            counts=buffers["counts"].ptr if with_counts else 0, num_nodes=nodes, num_edges=edges,
            num_features=features, dtype=dtype, stream=stream, workspace=buffers["workspace"].ptr,
            workspace_size=size, algorithm=algorithm, paired=False if path == "table" else None)

    def execute_and_check(execute):
        state = buffers["state"].download()
        _, src, index = random_inputs(nodes, edges, features, dtype)
        buffers["counts"].fill_bytes(0xA5)  # poisoned: each execution must zero and recount
        buffers["src"].upload(src)
        buffers["index"].upload(index)
        result = execute()
        check(driver.cuStreamSynchronize(stream))
        counts = assert_within_bound(buffers["state"].download(), state, src, index, dtype)
        if with_counts:
            np.testing.assert_array_equal(buffers["counts"].download()[:, 0], counts)
        return result

    try:
        assert what_ran(execute_and_check(launch)) == path
        prepared = launch_module.backend.threads.last[1]
        assert prepared.graph is None  # first use of these pointers: the driver calls
        for _ in range(2):
            execute_and_check(launch)
            assert prepared.graph is not None, "the launcher did not replay a graph of its own"
        before = buffers["state"].download()
        with CapturedGraph(stream, launch) as graph:
            np.testing.assert_array_equal(buffers["state"].download(), before)  # captured, not run
            for _ in range(REPLAYS):
                execute_and_check(graph.launch)
        execute_and_check(launch)
    finally:
        for buffer in buffers.values():
            buffer.free()
