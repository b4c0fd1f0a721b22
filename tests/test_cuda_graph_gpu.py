"""A scatter-add launch captured into a CUDA graph (plugin.cuda_graph) replays correctly on a GPU.

Each plan's launch runs once (first-run work: compile, load, prepare), is captured, then replayed three times
with fresh random inputs uploaded into the same buffers between replays: every replay must add its edges
into the state in place (cumulative) and recount, as a direct launch does. Skipped without a GPU.
"""

import numpy as np
import pytest

from plugin.cuda_check import check
from plugin.cuda_graph import CapturedGraph
from plugin.device_array import DeviceArray
from plugin.kernels import scatter_add_launch, scatter_add_workspace_size
from tests.test_kernels_gpu import assert_within_bound, random_inputs

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
    """The plan's kernel path and, with counts, who zeroes them (the launch's first kernel or a memset)."""
    if plan.sort is not None:
        return "sorted"
    if plan.paired:
        return "paired"
    if plan.table is not None:
        return "table"
    return f"{plan.algorithm}, zeroing in the kernel" if plan.zeroing else plan.algorithm


# (dtype, N, E, F, counts, what the first launch must plan): each graph-captured path once
CASES = [
    (np.float32, 10**6, 10**4, 1, True, "global, zeroing in the kernel"),  # one cooperative launch
    (np.float32, 10**6, 10**4, 1, False, "global"),  # one launch, nothing O(N)
    (np.float32, 1000, 10**5, 1, True, "shared"),  # memset of the counts, then the shared-memory kernel
    (np.float32, 10**6, 10**6, 1, True, "paired"),  # (value, count) pairs in the counts, then a fold
    (np.float16, 10**5, 10**4, 3, True, "table"),  # memsets, scatter into the float32 table, apply
    (np.float32, 10**5, 10**6, 64, True, "sorted"),  # count, scan, place, reduce, fixup
    (np.float32, 1000, 2**22, 32, True, "chunked"),
]


@pytest.mark.parametrize("dtype, nodes, edges, features, with_counts, path", CASES,
                         ids=[case[-1].split(",")[0] + ("" if case[4] else ", no counts") + f", {case[0].__name__}"
                              for case in CASES])
def test_replays_add_each_new_batch_in_place(stream, dtype, nodes, edges, features, with_counts, path):
    from cuda.bindings import driver

    state, src, index = random_inputs(nodes, edges, features, dtype)
    size = scatter_add_workspace_size(nodes, edges, features, dtype, with_counts=with_counts)
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
            workspace_size=size)

    try:
        plan = launch()  # first-run work outside the capture, as TensorRT's warm-up execution does
        assert what_ran(plan) == path
        before = buffers["state"].download()
        with CapturedGraph(stream, launch) as graph:
            np.testing.assert_array_equal(buffers["state"].download(), before)  # captured, not run
            for _ in range(REPLAYS):
                state = buffers["state"].download()
                _, src, index = random_inputs(nodes, edges, features, dtype)
                buffers["counts"].fill_bytes(0xA5)  # poisoned: each replay must zero and recount
                buffers["src"].upload(src)
                buffers["index"].upload(index)
                graph.launch()
                check(driver.cuStreamSynchronize(stream))
                counts = assert_within_bound(buffers["state"].download(), state, src, index, dtype)
                if with_counts:
                    np.testing.assert_array_equal(buffers["counts"].download()[:, 0], counts)
    finally:
        for buffer in buffers.values():
            buffer.free()

