"""The chunked pairs path (F = 1 with counts, more than 2^24 edges): each chunk's scatter launch reads its own
edges, at the chunk's offset into src and index, and a fold follows each chunk. Recorded driver calls (the
`recorded` launcher of test_kernels.py), no GPU."""

import numpy as np
import pytest

from plugin.kernels import scatter_add_workspace_size
from plugin.kernels.plan import PAIRED_MAX_EDGES
from tests.test_kernels import COUNTS_PTR, INDEX_PTR, SRC_PTR, STATE_PTR, argument_slots, recorded  # noqa: F401

WORKSPACE_PTR = 0x7F4000000000


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_each_chunk_of_2_to_the_24_edges_launches_at_its_own_src_and_index_offsets(recorded, dtype):  # noqa: F811
    driver, launch = recorded
    nodes, edges = 10**6, 2 * PAIRED_MAX_EDGES + 12_345  # three chunks, the last one partial
    size = scatter_add_workspace_size(nodes, edges, 1, dtype)
    prepared = launch.PreparedScatterAdd(num_nodes=nodes, num_edges=edges, num_features=1, dtype=dtype,
                                         with_counts=True, workspace_size=size)
    plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, WORKSPACE_PTR, 5)
    assert plan.paired and plan.pair_chunks == 3

    functions = launch.prepare_kernels(dtype).functions
    kernels = [(next(name for name, f in functions.items() if f is call[1][0]), call[1][9])
               for call in driver.calls if call[0] == "cuLaunchKernel"]
    scatters = [parameters for name, parameters in kernels if name == plan.scatter.name]
    folds = [parameters for name, parameters in kernels if name == plan.fold.name]
    assert [name for name, _ in kernels] == [plan.scatter.name, plan.fold.name] * 3
    itemsize = np.dtype(dtype).itemsize
    for chunk, parameters in enumerate(scatters):
        first = chunk * PAIRED_MAX_EDGES
        assert argument_slots(parameters, 3) == [SRC_PTR + first * itemsize, INDEX_PTR + first * 8,
                                                 min(PAIRED_MAX_EDGES, edges - first)], chunk
    assert [argument_slots(parameters, 5) for parameters in folds] == [
        [STATE_PTR, WORKSPACE_PTR, COUNTS_PTR, nodes, last] for last in (0, 0, 1)]
