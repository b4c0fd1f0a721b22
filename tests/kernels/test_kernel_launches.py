"""The driver calls a prepared launch issues, recorded through the launcher's seam (tests/support/kernel_fakes.py): which
memsets and kernels, their grids and arguments, the fallbacks, and the keyword entry's caches. No GPU."""

import numpy as np
import pytest

from common.cuda_check import CudaError
from plugin.kernels import scatter_add_launch, scatter_add_workspace_size
from plugin.kernels.plan import (
    PAIRED_MAX_EDGES,
    OWNED_EDGES_PER_BLOCK,
    OWNED_THREADS,
    THREADS_PER_BLOCK,
    chunk_shared_bytes,
    sort_layout,
    split_table_capacity,
    table_layout,
)
from tests.support.kernel_fakes import (  # noqa: F401
    COUNTS_PTR,
    H200_LIKE,
    INDEX_PTR,
    SRC_PTR,
    STATE_PTR,
    WORKSPACE_PTR,
    argument_slots,
    recorded,
)


def uncounted_float16(launch, nodes, edges, **options):
    """A prepared float16 launch without counts, F = 1, its workspace sized by scatter_add_workspace_size."""
    size = scatter_add_workspace_size(nodes, edges, 1, np.float16, with_counts=False,
                                      algorithm=options.get("algorithm", "auto"))
    return launch.PreparedScatterAdd(num_nodes=nodes, num_edges=edges, num_features=1, dtype=np.float16,
                                     with_counts=False, workspace_size=size, **options)


def test_prepared_launch_with_counts_is_a_memset_and_a_launch_bound_once_per_pointers_and_stream(recorded,
                                                                                               monkeypatch):
    driver, launch = recorded
    bound, bind = [], launch.bind_driver_calls
    monkeypatch.setattr(launch, "bind_driver_calls", lambda *arguments: bound.append(arguments) or bind(*arguments))
    prepared = launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                         with_counts=True)
    plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)
    assert plan.algorithm == "global" and driver.names() == ["cuMemsetD32Async", "cuLaunchKernel"]
    function, *launch_shape, stream, parameters, extra = driver.calls[1][1]
    assert function is launch.prepare_kernels(np.float32).functions["scatter_global_v1"] and extra == 0
    assert launch_shape == [-(-10**4 // (8 * 32)), 1, 1, THREADS_PER_BLOCK, 1, 1, 0]  # windows of 32 edges
    assert isinstance(stream, driver.CUstream) and int(stream) == 5
    slots = argument_slots(parameters, 14)
    assert slots[:3] == [SRC_PTR, INDEX_PTR, 10**4] and slots[6:8] == [1, STATE_PTR] and slots[10] == COUNTS_PTR
    assert len(bound) == 1
    prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)
    assert len(bound) == 1 and driver.calls[2:] == driver.calls[:2]  # same pointers: nothing rebound
    prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 7)  # another stream
    assert int(driver.calls[5][1][8]) == 7
    prepared(STATE_PTR + 256, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 7)  # another state buffer
    assert argument_slots(parameters, 8)[7] == STATE_PTR + 256


def test_prepared_launch_with_a_memset_passes_the_counts_address_and_word_count(recorded):
    driver, launch = recorded
    prepared = launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                         with_counts=True)
    prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)
    assert driver.names() == ["cuMemsetD32Async", "cuLaunchKernel"]
    address, value, words, stream = driver.calls[0][1]
    assert (int(address), value, words, int(stream)) == (COUNTS_PTR, 0, 2 * 10**6, 5)
    assert driver.calls[1][1][-1] == 0  # cuLaunchKernel's extra




def test_prepared_sorted_launch_zeroes_the_counts_then_sorts_sums_and_fixes_up_in_the_workspace(recorded):
    driver, launch = recorded
    nodes, edges, features, workspace = 10**6, 10**6, 64, 0x7F4000000000
    size = scatter_add_workspace_size(nodes, edges, features, np.float32)
    layout = sort_layout(nodes, edges, features)
    prepared = launch.PreparedScatterAdd(num_nodes=nodes, num_edges=edges, num_features=features, dtype=np.float32,
                                         with_counts=True, workspace_size=size)
    plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, workspace, 5)
    assert plan.algorithm == "sorted"
    assert driver.names() == ["cuMemsetD32Async"] + ["cuLaunchKernel"] * 7
    functions = launch.prepare_kernels(np.float32).functions
    names = [next(n for n, f in functions.items() if f is call[1][0]) for call in driver.calls[1:]]
    assert names == ["sort_count", "sort_tile_sums", "sort_scan_tiles", "sort_cursors", "sort_place",
                     "sort_reduce_v2", "sort_fixup_v2"]

    parameters = [call[1][9] for call in driver.calls[1:]]
    assert argument_slots(parameters[0], 6) == [INDEX_PTR, edges, nodes, COUNTS_PTR, 0, 0]  # no skipped, no tallies
    assert argument_slots(parameters[5], 9) == [SRC_PTR, workspace + layout.sorted_offset, workspace, nodes,
                                                features, layout.span, STATE_PTR, workspace + layout.head_offset,
                                                workspace + layout.tail_offset]
    assert argument_slots(parameters[6], 6)[5] == layout.ranges
    with pytest.raises(ValueError, match="prepared with a workspace"):
        prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)

    del driver.calls[:]  # few nodes: one block scans them all (sort_cursors alone), tallies in shared memory
    few = launch.PreparedScatterAdd(num_nodes=1000, num_edges=edges, num_features=features, dtype=np.float32,
                                    with_counts=True, workspace_size=scatter_add_workspace_size(1000, edges, 64, "float32"))
    few(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, workspace, 5)
    names = [next(n for n, f in functions.items() if f is call[1][0]) for call in driver.calls[1:]]
    assert names == ["sort_count", "sort_cursors", "sort_place", "sort_reduce_v2", "sort_fixup_v2"]
    assert driver.calls[1][1][7] == 4 * 1000  # the tallies' shared memory


def test_prepared_sorted_launch_without_counts_zeroes_the_in_degrees_in_the_workspace(recorded):
    """float16 wide rows without counts sort where sorting pays: the in-degrees the sort needs live in the
    workspace (SortPlan.counts_offset), zeroed by a memset there before sort_count reads them."""
    driver, launch = recorded
    nodes, edges, features, workspace = 10**6, 10**6, 64, 0x7F4000000000
    size = scatter_add_workspace_size(nodes, edges, features, np.float16, with_counts=False)
    prepared = launch.PreparedScatterAdd(num_nodes=nodes, num_edges=edges, num_features=features, dtype=np.float16,
                                         with_counts=False, workspace_size=size)
    plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace, 5)
    assert plan.algorithm == "sorted" and plan.sort is not None and plan.sort.counts_offset is not None
    names = driver.names()
    assert names[0] == "cuMemsetD32Async" and names[1:] == ["cuLaunchKernel"] * (len(names) - 1)
    address, value, words, _ = driver.calls[0][1]
    assert (int(address), value, words) == (workspace + plan.sort.counts_offset, 0, 2 * nodes)
    assert argument_slots(driver.calls[1][1][9], 4)[3] == workspace + plan.sort.counts_offset  # sort_count's counts


def test_prepared_chunked_launch_is_one_kernel_after_the_memsets_and_before_float16s_apply(recorded):
    driver, launch = recorded
    functions = launch.prepare_kernels(np.float32).functions
    for dtype, names in ((np.float32, ["cuMemsetD32Async", "cuLaunchKernel"]),
                         (np.float16, ["cuMemsetD32Async", "cuMemsetD32Async", "cuLaunchKernel", "cuLaunchKernel"])):
        del driver.calls[:]
        size = scatter_add_workspace_size(1000, 10**7, 64, dtype)
        prepared = launch.PreparedScatterAdd(num_nodes=1000, num_edges=10**7, num_features=64, dtype=dtype,
                                             with_counts=True, workspace_size=size)
        plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0x7F4000000000 if size else 0, 5)
        assert plan.algorithm == "chunked" and driver.names() == names
        call = next(c for c in driver.calls if c[0] == "cuLaunchKernel")
        assert call[1][0] is functions["chunk_reduce_v2"] and call[1][7] == chunk_shared_bytes(1000)
        slots = argument_slots(call[1][9], 9)
        dest = STATE_PTR if dtype == np.float32 else 0x7F4000000000 + plan.table.values_offset
        assert slots == [SRC_PTR, INDEX_PTR, 10**7, 1000, 64, plan.chunk_edges, dest, COUNTS_PTR, 0]
        assert plan.chunk_edges == 25280



def test_prepared_launches_without_counts_are_one_or_two_kernels_with_their_blocks_and_workspace(recorded):
    driver, launch = recorded
    functions = launch.prepare_kernels(np.float16).functions
    workspace = 0x7F4000000000
    owned = launch.PreparedScatterAdd(num_nodes=10**8, num_edges=10**4, num_features=1, dtype=np.float16,
                                      with_counts=False, algorithm="owned", workspace_size=scatter_add_workspace_size(
                                          10**8, 10**4, 1, np.float16, with_counts=False))
    plan = owned(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace, 5)
    assert plan.algorithm == "owned" and driver.names() == ["cuLaunchKernel"]  # no memset, no apply
    function, grid_x, grid_y, grid_z, block_x, *_, shared, stream, parameters, extra = driver.calls[0][1]
    blocks = min(H200_LIKE.sm_count, -(-10**4 // OWNED_EDGES_PER_BLOCK))
    assert function is functions["scatter_owned"] and (grid_x, block_x) == (blocks, OWNED_THREADS)
    assert shared == plan.scatter.shared_bytes
    assert argument_slots(parameters, 9) == [SRC_PTR, INDEX_PTR, 10**4, 10**8, 1, plan.owned.capacity,
                                             plan.owned.probes, STATE_PTR, 0]

    del driver.calls[:]
    direct = launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                       with_counts=False, with_skipped=True)
    assert direct(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0, 5, skipped=COUNTS_PTR).algorithm == "direct"
    assert driver.names() == ["cuMemsetD32Async", "cuLaunchKernel"]  # skipped zeroed first
    call = driver.calls[1][1]
    assert call[0] is functions["scatter_direct_v1"] and call[4] == THREADS_PER_BLOCK
    assert argument_slots(call[9], 7) == [SRC_PTR, INDEX_PTR, 10**4, 10**6, 1, STATE_PTR, COUNTS_PTR]


def test_a_failed_driver_call_raises_cuda_error_naming_the_call_and_the_kernel(recorded):
    driver, launch = recorded
    driver.statuses["cuLaunchKernel"] = [driver.CUresult.CUDA_ERROR_INVALID_VALUE]
    prepared = launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                         with_counts=False)
    with pytest.raises(CudaError, match=r"CUDA_ERROR_INVALID_VALUE.*cuLaunchKernel of scatter_direct_v1") as error:
        prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0, 5)
    assert error.value.name == "CUDA_ERROR_INVALID_VALUE"
    driver.statuses["cuMemsetD32Async"] = [driver.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS]
    with_memset = launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                            with_counts=True)
    with pytest.raises(CudaError, match=r"CUDA_ERROR_ILLEGAL_ADDRESS.*cuMemsetD32Async of 2000000 words at the counts"):
        with_memset(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)


def test_keyword_entry_checks_the_context_with_one_call_and_prepares_again_in_another_context(recorded, monkeypatch):
    driver, launch = recorded
    prepared_in = []  # the current context at each PreparedScatterAdd made
    prepare = launch.PreparedScatterAdd.__init__

    def counting_prepare(self, **options):
        prepared_in.append(driver.context_id)
        prepare(self, **options)

    monkeypatch.setattr(launch.PreparedScatterAdd, "__init__", counting_prepare)

    def call(state=STATE_PTR, stream=5):
        return scatter_add_launch(state=state, src=SRC_PTR, index=INDEX_PTR, counts=0, num_nodes=10**6,
                                  num_edges=10**4, num_features=1, dtype="float32", stream=stream)

    call()
    del driver.calls[:]
    call()
    assert prepared_in == [1] and driver.names() == ["cuCtxGetId", "cuLaunchKernel"]
    assert driver.calls[0][1] == (None,)  # cuCtxGetId(NULL): the current context's id
    call(state=STATE_PTR + 512, stream=9)  # new pointers and stream: bound again, not prepared again
    parameters, stream = driver.calls[-1][1][9], driver.calls[-1][1][8]
    assert prepared_in == [1] and int(stream) == 9
    assert argument_slots(parameters, 7)[5] == STATE_PTR + 512  # scatter_direct_v1's dest
    driver.statuses["cuLaunchKernel"] = [driver.CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
                                         driver.CUresult.CUDA_SUCCESS]
    with pytest.raises(CudaError, match="CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES.*cuLaunchKernel of scatter_direct_v1"):
        call(state=STATE_PTR + 512, stream=9)
    driver.context_id = 2  # another context is current: its own module, functions and prepared launch
    call()
    assert prepared_in == [1, 2]
    driver.statuses["cuCtxGetId"] = [driver.CUresult.CUDA_ERROR_INVALID_CONTEXT]  # none current
    call()  # then current_context() decides (it makes device 0's primary context current)
    assert prepared_in == [1, 2]


def test_keyword_entry_alternating_between_two_launches_prepares_each_once_and_launches_the_right_one(recorded,
                                                                                                   monkeypatch):
    # The entry compares a call's key with the thread's last one before looking it up; alternating keys must
    # still find each prepared launch (and never launch the other one).
    driver, launch = recorded
    made = []
    prepare = launch.PreparedScatterAdd.__init__

    def counting_prepare(self, **options):
        made.append(options["with_counts"])
        prepare(self, **options)

    monkeypatch.setattr(launch.PreparedScatterAdd, "__init__", counting_prepare)

    def call(counts):
        scatter_add_launch(state=STATE_PTR, src=SRC_PTR, index=INDEX_PTR, counts=counts, num_nodes=10**6,
                           num_edges=10**4, num_features=1, dtype="float32", stream=5)

    for counts in (COUNTS_PTR, 0, COUNTS_PTR, 0, 0, COUNTS_PTR):
        call(counts)
    assert made == [True, False]
    launches = [name for name in driver.names() if name != "cuCtxGetId"]
    counted, uncounted = ["cuMemsetD32Async", "cuLaunchKernel"], ["cuLaunchKernel"]
    assert launches == (counted + uncounted) * 2 + uncounted + counted



def test_prepared_float16_grid_table_is_one_cooperative_launch_over_the_workspace(recorded):
    driver, launch = recorded
    functions = launch.prepare_kernels(np.float16).functions
    workspace = 0x7F4000000000
    for nodes in (10**3, 10**8):
        prepared = uncounted_float16(launch, nodes, 10**4, with_skipped=True)
        plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace, 5, skipped=COUNTS_PTR)
        assert plan.algorithm == "grid_table" and plan.slots is not None
        assert driver.names() == ["cuMemsetD32Async", "cuLaunchCooperativeKernel"]  # skipped zeroed, no table memset
        function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared, stream, parameters = driver.calls[1][1]
        assert function is functions["scatter_grid_table"]
        assert (grid_x, grid_y, grid_z, block_x, block_y, block_z, shared) == (79, 1, 1, 128, 1, 1, 0)
        assert argument_slots(parameters, 9) == [SRC_PTR, INDEX_PTR, 10**4, nodes, workspace, plan.slots.capacity,
                                                 int(plan.slots.hashed), STATE_PTR, COUNTS_PTR]
        del driver.calls[:]
    # a workspace that is not 8-byte aligned gets another plan (its own prepared driver calls), and so does
    # one too small for the grid table and the split table (the hash table: 1e4 edges exceed OWNED_MAX_EDGES)
    assert prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace + 4, 5, skipped=COUNTS_PTR).algorithm == "hashed"
    small = launch.PreparedScatterAdd(num_nodes=10**8, num_edges=10**4, num_features=1, dtype=np.float16,
                                      with_counts=False, workspace_size=8 * 2**15)
    assert small(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace, 5).algorithm == "hashed"
    assert "cuLaunchCooperativeKernel" not in driver.names()


def test_a_grid_table_launch_too_large_for_the_device_falls_back_to_another_float16_path(recorded):
    driver, launch = recorded
    driver.statuses["cuLaunchCooperativeKernel"] = [driver.CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE]
    prepared = uncounted_float16(launch, 10**8, 10**4)
    plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0x7F4000000000, 5)
    assert plan.algorithm == "split_table" and prepared.cooperative is False
    assert driver.names() == ["cuLaunchCooperativeKernel", "cuStreamIsCapturing", "cuMemsetD32Async", "cuLaunchKernel",
                              "cuLaunchKernel"]


def test_a_cooperative_launch_refused_during_a_capture_raises_and_later_launches_fall_back(recorded):
    # The refused launch has invalidated the caller's capture: nothing more is issued into it, the error says
    # why, and the launcher's fallback (no cooperative launch) holds for the launches after the capture.
    driver, launch = recorded
    driver.statuses["cuLaunchCooperativeKernel"] = [driver.CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE]
    prepared = uncounted_float16(launch, 10**8, 10**4)  # grid_table, then split_table
    pointers = (STATE_PTR, SRC_PTR, INDEX_PTR, 0, WORKSPACE_PTR, 5)
    driver.capturing.add(5)
    with pytest.raises(CudaError, match="refused .* while the stream was being captured") as error:
        prepared(*pointers)
    assert error.value.name == "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE" and "\n" not in str(error.value)
    assert driver.names() == ["cuLaunchCooperativeKernel", "cuStreamIsCapturing"]
    driver.capturing.clear()
    del driver.calls[:]
    plan = prepared(*pointers)
    assert not plan.cooperative and driver.names() == ["cuMemsetD32Async", "cuLaunchKernel", "cuLaunchKernel"]



def test_prepared_float16_block_table_is_one_launch_without_workspace(recorded):
    driver, launch = recorded
    functions = launch.prepare_kernels(np.float16).functions
    prepared = uncounted_float16(launch, 10**8, 1000, with_skipped=True)
    plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0x7F4000000000, 5, skipped=COUNTS_PTR)
    assert plan.algorithm == "block_table"
    # skipped zeroed, then the one block; the workspace (every float16 launch gets one) is not touched
    assert driver.names() == ["cuMemsetD32Async", "cuLaunchKernel"]
    scatter = driver.calls[1][1]
    assert scatter[0] is functions["scatter_block_table"]
    assert tuple(scatter[1:8]) == (1, 1, 1, 1024, 1, 1, 8 << 12)  # one block of 1024, 32 KiB of shared memory
    assert argument_slots(scatter[9], 7) == [SRC_PTR, INDEX_PTR, 1000, 10**8, 12, STATE_PTR, COUNTS_PTR]



def test_prepared_float16_split_table_is_a_memset_and_two_launches_over_the_workspace(recorded):
    driver, launch = recorded
    functions = launch.prepare_kernels(np.float16).functions
    workspace = 0x7F4000000000
    prepared = uncounted_float16(launch, 10**7, 10**6, with_skipped=True)
    plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace, 5, skipped=COUNTS_PTR)
    capacity = split_table_capacity(10**6)
    assert plan.algorithm == "split_table" and capacity == 2**21
    assert driver.names() == ["cuMemsetD32Async", "cuMemsetD32Async", "cuLaunchKernel", "cuLaunchKernel"]
    address, value, words = driver.calls[1][1][:3]
    assert (int(address), value, words) == (workspace, 0xFFFFFFFF, 2 * capacity)  # every slot: node -1
    scatter, apply = driver.calls[2][1], driver.calls[3][1]
    assert scatter[0] is functions["scatter_split_table"] and scatter[1] == -(-10**6 // THREADS_PER_BLOCK)
    assert argument_slots(scatter[9], 7) == [SRC_PTR, INDEX_PTR, 10**6, 10**7, workspace, capacity, COUNTS_PTR]
    assert apply[0] is functions["apply_split_table"] and apply[1] == plan.slots.apply.grid[0]
    assert argument_slots(apply[9], 4) == [workspace, capacity, 10**7, STATE_PTR]
    del driver.calls[:]
    # a workspace that is not 8-byte aligned gets another path: the hashed float16 table
    assert prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace + 4, 5, skipped=COUNTS_PTR).algorithm == "hashed"
    forced = uncounted_float16(launch, 0, 100, algorithm="split_table")  # no float16 table: nothing else checks
    with pytest.raises(ValueError, match="prepared with a workspace for its split_table path; got none"):
        forced(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0, 5)
    table = table_layout(10**8, 10**4, 1)  # 2^15 keys and sums: half the split table's 2^16 slots
    assert table is not None and table.nbytes < 8 * split_table_capacity(10**4)
    small = launch.PreparedScatterAdd(num_nodes=10**8, num_edges=10**4, num_features=1, dtype=np.float16,
                                      with_counts=False, workspace_size=table.nbytes)
    assert small(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace, 5).algorithm == "hashed"  # beyond OWNED_MAX_EDGES


def test_prepared_float16_pairs_without_counts_zero_sum_and_fold_in_the_workspace(recorded):
    # float16 of one feature without counts pairs as with counts; the (value, count) pairs live in the workspace,
    # which a memset zeroes first, and the fold reads them there; no counts pointer reaches either kernel.
    driver, launch = recorded
    functions = launch.prepare_kernels(np.float16).functions
    nodes, edges = 10**4, 10**6
    prepared = uncounted_float16(launch, nodes, edges)
    plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, WORKSPACE_PTR, 5)
    assert plan.paired and plan.algorithm == "global" and plan.table is None
    assert driver.names() == ["cuMemsetD32Async", "cuLaunchKernel", "cuLaunchKernel"]
    address, value, words = driver.calls[0][1][:3]
    assert (int(address), value, words) == (WORKSPACE_PTR, 0, 2 * nodes)
    scatter, fold = driver.calls[1][1], driver.calls[2][1]
    assert scatter[0] is functions["scatter_global_pairs"] and fold[0] is functions["fold_pairs"]
    slots = argument_slots(scatter[9], 14)
    assert slots[:4] == [SRC_PTR, INDEX_PTR, edges, nodes] and slots[7] == WORKSPACE_PTR and slots[10] == 0
    assert argument_slots(fold[9], 3) == [STATE_PTR, WORKSPACE_PTR, nodes]
    with pytest.raises(ValueError, match="needs a workspace of [0-9]+ bytes; got none"):
        uncounted_float16(launch, nodes, edges)(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0, 5)


# The chunked pairs path (F = 1 with counts, more than 2^24 edges): each chunk's scatter launch reads its own
# edges, at the chunk's offset into src and index, and a fold follows each chunk.
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_each_chunk_of_2_to_the_24_edges_launches_at_its_own_src_and_index_offsets(recorded, dtype):
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


def test_a_prepared_overwrite_rebinds_its_arguments_for_new_pointers_and_a_new_stream(recorded, monkeypatch):
    """PreparedOverwrite (the Python plugin's overwrite) packs its arguments once per pointer set and stream: the
    same call again launches the same arguments; a new state, src or index buffer or a new stream is launched
    with it, never with the previous call's (a stale pointer writes another buffer's rows)."""
    from plugin.kernels import overwrite

    driver, _ = recorded
    function = driver.CUfunction(0x2000)
    monkeypatch.setattr(overwrite, "prepare_overwrite_kernels", lambda: {"overwrite_rows_f32": function,
                                                                         "overwrite_rows_f16": function})
    prepared = overwrite.PreparedOverwrite(num_nodes=100, num_edges=10, num_features=4, dtype=np.float32)

    def launched(*pointers_and_stream):
        prepared(*pointers_and_stream)
        name, arguments = driver.calls[-1]
        assert name == "cuLaunchKernel" and arguments[0] is function
        return argument_slots(arguments[9], 3) + [int(arguments[8])]

    assert launched(STATE_PTR, SRC_PTR, INDEX_PTR, 5) == [STATE_PTR, SRC_PTR, INDEX_PTR, 5]
    assert launched(STATE_PTR, SRC_PTR, INDEX_PTR, 5) == [STATE_PTR, SRC_PTR, INDEX_PTR, 5]
    assert launched(STATE_PTR, SRC_PTR, INDEX_PTR, 7) == [STATE_PTR, SRC_PTR, INDEX_PTR, 7]
    assert launched(STATE_PTR + 256, SRC_PTR, INDEX_PTR, 7) == [STATE_PTR + 256, SRC_PTR, INDEX_PTR, 7]
    assert launched(STATE_PTR + 256, SRC_PTR + 512, INDEX_PTR + 64, 7) == [STATE_PTR + 256, SRC_PTR + 512,
                                                                           INDEX_PTR + 64, 7]
    assert driver.names() == ["cuLaunchKernel"] * 5
