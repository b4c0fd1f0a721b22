"""Which path and grid a launch gets (plan.py's table of paths), without a GPU: the parametrized tables of
(dtype, N, E, F) -> path are the specification; then each path's grids, tables and what forcing it needs."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plugin.kernels import scatter_add_workspace_size
from plugin.kernels.plan import (
    AUTO,
    BLOCK_TABLE_MAX_EDGES,
    CHUNK_EDGES,
    CHUNK_MAX_NODES,
    CHUNK_MIN_EDGES,
    CHUNK_WINDOWS,
    DIRECT_BLOCKS_PER_SM,
    GRID_TABLE_MAX_EDGES,
    GRID_TABLE_MAX_EDGES_PER_NODE,
    GRID_TABLE_THREADS,
    MAX_EDGES,
    OWNED_EDGES_PER_BLOCK,
    OWNED_MAX_EDGES,
    OWNED_MAX_VALUES,
    OWNED_MAX_PROBES,
    OWNED_THREADS,
    PAIRED_MAX_EDGES,
    QUEUE_BYTES_PER_BLOCK,
    RESIDENT_BLOCKS_PER_SM,
    SHARED_FEW_NODES,
    SHARED_MIN_EDGES_PER_NODE,
    SHARED_OVER_DIRECT_FEW_MIN_EDGES,
    SHARED_OVER_DIRECT_FEW_MIN_EDGES_PER_NODE,
    SHARED_OVER_DIRECT_FEW_NODES,
    SHARED_OVER_FLOAT32_PAIRS_MIN_EDGES_PER_NODE,
    SHARED_OVER_PAIRS_MIN_EDGES_PER_NODE,
    SHARED_UNCOUNTED_WINDOWS,
    SHARED_WIDE_MAX_VALUES,
    SHARED_WIDE_MIN_EDGES_PER_VALUE,
    SORT_FEW_NODES_MIN_VALUES,
    SORT_MAX_PLACE_PASSES,
    SORT_MID_FEATURES,
    SORT_MID_MAX_EDGES,
    SORT_MIN_EDGES,
    SORT_MIN_FEATURES,
    SORT_SPARSE_MAX_EDGES_PER_NODE,
    SORT_SPARSE_MIN_TABLE,
    SORT_SPARSE_MIN_VALUES,
    SORT_WIDE_FEATURES,
    SORT_PRIVATE_BLOCKS_PER_SM,
    SORT_PRIVATE_MAX_NODES,
    SORT_PRIVATE_MIN_EDGES_PER_NODE,
    THREADS_PER_BLOCK,
    WARPS_PER_BLOCK,
    WINDOW_LOADS,
    KernelLaunch,
    SlotTable,
    chunk_shared_bytes,
    describe,
    grid_table_layout,
    lanes_log2_for,
    owned_shared_bytes,
    sort_layout,
    split_table_capacity,
    vector_width,
)
from tests.support.kernel_fakes import ENOUGH, H200_LIKE, paired_plan, plan_for

DTYPES = [np.float32, np.float16]

# --- launch plans ------------------------------------------------------------------------------------------
def test_vector_width_follows_features_and_alignment():
    assert vector_width(64, 256, 4, 512) == 4
    assert vector_width(64, 256 + 8, 4, 512) == 2
    assert vector_width(6, 256, 4, 512) == 2
    assert vector_width(3, 256, 4, 512) == 1
    assert vector_width(64, 256 + 8, 2, 512) == 4  # float16 src: 4 halves = 8 bytes
    assert vector_width(64, 256, 4, 512 + 4) == 1


def test_lanes_per_row_cover_the_row_up_to_a_warp():
    assert [1 << lanes_log2_for(chunks) for chunks in (1, 2, 3, 16, 32, 33, 100)] == [1, 2, 4, 16, 32, 32, 32]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
def test_few_nodes_many_edges_use_shared_memory(dtype):
    plan = plan_for(1000, 10**6, 1, np.dtype(dtype), H200_LIKE, vec=1)
    assert plan.algorithm == "shared" and plan.scatter.name == "scatter_shared_v1"
    assert plan.scatter.shared_bytes == 4 * 1000 * 2 <= H200_LIKE.max_shared_per_block


def test_rows_too_wide_for_shared_memory_use_global_atomics_and_shared_memory_holds_whole_rows_only():
    assert plan_for(1000, 10**6, 64, np.dtype(np.float32), H200_LIKE, vec=4, with_counts=True).algorithm == "global"
    assert plan_for(1000, 10**5, 64, np.dtype(np.float32), H200_LIKE, vec=4).algorithm == "direct"  # no counts
    with pytest.raises(ValueError, match="cannot hold 1000 nodes of 64 features"):
        plan_for(1000, 10**6, 64, np.dtype(np.float32), H200_LIKE, vec=4, algorithm="shared")
    # the most nodes of 64 features whose rows and counts fit beside the row queues
    most = (H200_LIKE.max_shared_per_block - QUEUE_BYTES_PER_BLOCK) // (4 * 65)
    plan = plan_for(most, 10**6, 64, np.dtype(np.float32), H200_LIKE, vec=4, algorithm="shared")
    assert plan.scatter.grid[1] == 1 and plan.scatter.shared_bytes == 4 * most * 65
    assert plan.scatter.shared_bytes + QUEUE_BYTES_PER_BLOCK <= H200_LIKE.max_shared_per_block
    with pytest.raises(ValueError, match="cannot hold"):
        plan_for(most + 1, 10**6, 64, np.dtype(np.float32), H200_LIKE, vec=4, algorithm="shared")


def test_many_nodes_use_global_atomics_and_fewer_edges_than_nodes_never_use_shared():
    counts = dict(with_counts=True)
    assert plan_for(10**6, 10**7, 1, np.dtype(np.float32), H200_LIKE, vec=1, paired=False, **counts).algorithm == "global"
    edges = SHARED_MIN_EDGES_PER_NODE * 1000 - 1
    assert plan_for(1000, edges, 1, np.dtype(np.float32), H200_LIKE, vec=1, **counts).algorithm == "global"
    assert plan_for(1000, edges, 1, np.dtype(np.float32), H200_LIKE, vec=1).algorithm == "direct"  # no counts


def test_large_float16_state_with_a_small_batch_uses_the_hash_table():
    plan = plan_for(10**8, 10**4, 1, np.dtype(np.float16), H200_LIKE, vec=1, with_counts=True)
    assert plan.algorithm == "hashed" and plan.table is not None and plan.table.hashed
    assert plan.apply is not None and plan.apply.name == "apply_table_v1"


def test_node_passes_cover_all_nodes_once_and_only_for_large_states_with_reused_wide_rows():
    plan = plan_for(10**6, 10**7, 64, np.dtype(np.float32), H200_LIKE, vec=4)
    ranges = plan.node_ranges
    assert len(ranges) > 1 and ranges[0][0] == 0 and ranges[-1][1] == 10**6
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert len(plan_for(10**6, 10**7, 1, np.dtype(np.float32), H200_LIKE, vec=1).node_ranges) == 1
    assert len(plan_for(10**6, 10**6, 64, np.dtype(np.float32), H200_LIKE, vec=4).node_ranges) == 1
    assert len(plan_for(10**6, 10**7, 64, np.dtype(np.float32), H200_LIKE, vec=4, node_passes=1).node_ranges) == 1


def test_grids_stay_within_one_resident_wave():
    for nodes, edges, features in [(10**6, 10**8, 1), (10**6, 10**5, 64), (10, 10, 3)]:  # the direct kernel: below
        plan = plan_for(nodes, edges, features, np.dtype(np.float32), H200_LIKE, vec=1, algorithm="global")
        assert 1 <= plan.scatter.grid[0] * plan.scatter.grid[1] <= 8 * H200_LIKE.sm_count


@pytest.mark.parametrize("edges", [1, 1000, 10**5, 101376, 101377, 10**6, 10**8])
@pytest.mark.parametrize("features", [1, 128])
def test_global_windows_spread_few_edges_over_warps_and_many_over_every_warp_of_one_wave(edges, features):
    plan = plan_for(10**5, edges, features, np.dtype(np.float32), H200_LIKE, vec=4 if features > 1 else 1,
                    algorithm="global")
    most = RESIDENT_BLOCKS_PER_SM * H200_LIKE.sm_count
    warps, window = plan.scatter.grid[0] * WARPS_PER_BLOCK, 32 * plan.window_loads
    assert 1 <= plan.window_loads <= WINDOW_LOADS and plan.scatter.grid[0] <= most
    assert warps * window >= edges or plan.window_loads == WINDOW_LOADS  # a grid-stride loop beyond
    assert (warps - WARPS_PER_BLOCK) * window < edges  # no block without a window
    if edges <= 32 * most * WARPS_PER_BLOCK:  # no more edges than one wave has warps x 32: one load each
        assert plan.window_loads == 1


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
def test_one_feature_with_counts_pairs_value_and_count_in_one_atomic(dtype):
    plan = paired_plan(10**6, 10**7, dtype)
    assert plan.paired and plan.algorithm == "global" and plan.scatter.name == "scatter_global_pairs"
    assert plan.fold is not None and plan.fold.name == "fold_pairs" and len(plan.node_ranges) == 1
    assert plan.fold.grid[0] * THREADS_PER_BLOCK >= 10**6  # a thread per node
    assert plan.table is None and plan.apply is None  # float16 too: the pairs replace its table


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
def test_paired_global_atomics_replace_large_shared_arrays_below_their_edges_per_node(dtype):
    for big in (SHARED_FEW_NODES - 1, SHARED_FEW_NODES):  # float32 on few nodes: a lower bound
        few = dtype == np.float32 and big < SHARED_FEW_NODES
        most = SHARED_OVER_FLOAT32_PAIRS_MIN_EDGES_PER_NODE if few else SHARED_OVER_PAIRS_MIN_EDGES_PER_NODE
        below = paired_plan(big, most * big - 1, dtype)
        assert below.algorithm == "global" and below.paired
        above = paired_plan(big, most * big, dtype)
        assert above.algorithm == "shared" and not above.paired  # pairs do not pay in the shared kernel
    assert SHARED_OVER_FLOAT32_PAIRS_MIN_EDGES_PER_NODE < SHARED_OVER_PAIRS_MIN_EDGES_PER_NODE
    no_counts = paired_plan(big, SHARED_MIN_EDGES_PER_NODE * big, dtype, with_counts=False)
    # without counts float32 takes the direct kernel below SHARED_OVER_DIRECT_MIN_EDGES_PER_NODE; float16 pairs as
    # with counts, the pairs in the workspace, and adds into its one-slot table in shared memory without one
    assert no_counts.algorithm == ("direct" if dtype == np.float32 else "global")
    assert no_counts.paired == (dtype == np.float16)
    no_workspace = paired_plan(big, SHARED_MIN_EDGES_PER_NODE * big, dtype, with_counts=False, workspace=0)
    assert not no_workspace.paired
    assert no_workspace.algorithm == ("direct" if dtype == np.float32 else "shared")
    forced = paired_plan(1000, 10**6, dtype, algorithm="shared", paired=True)
    assert forced.algorithm == "shared" and forced.paired and forced.scatter.name == "scatter_shared_pairs"
    assert not paired_plan(1000, 10**6, dtype, algorithm="shared").paired


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
def test_pairs_only_where_they_fit_and_pay(dtype):
    # without counts only float16 pairs (one rounding per node needs a float32 sum per node anyway), in 8 N bytes
    # of an 8-byte aligned workspace, up to PAIRED_MAX_EDGES edges
    assert paired_plan(10**6, 10**7, dtype, with_counts=False).paired == (dtype == np.float16)
    assert not paired_plan(10**6, 10**7, dtype, with_counts=False, workspace=8 * 10**6 - 1).paired
    assert not paired_plan(10**6, 10**7, dtype, with_counts=False, workspace_aligned=False).paired
    assert not paired_plan(10**6, PAIRED_MAX_EDGES + 1, dtype, with_counts=False, workspace=ENOUGH).paired
    assert not paired_plan(10**6, 10**6 - 1, dtype, with_counts=False).paired
    assert not paired_plan(10**6, 10**7, dtype, counts_aligned=False).paired  # the pairs live in the counts
    assert not paired_plan(10**6, 10**7, dtype, device=dataclasses.replace(H200_LIKE, arch=80)).paired
    assert not paired_plan(10**6, 10**6 - 1, dtype).paired  # E < N: the O(N) fold would cost more than it saves
    assert paired_plan(10**6, 10**6, dtype).paired
    wide = plan_for(10**6, 10**7, 3, np.dtype(dtype), H200_LIKE, vec=1, with_counts=True)
    assert not wide.paired and wide.fold is None
    assert (wide.table is not None) == (dtype == np.float16)
    unpaired = paired_plan(10**6, 10**5, dtype)
    assert not unpaired.paired and unpaired.fold is None and (unpaired.apply is not None) == (dtype == np.float16)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
@pytest.mark.parametrize("nodes", [1, 10**5, 10**6])
def test_pairs_beyond_2_to_the_24_edges_live_in_the_workspace_folded_per_chunk(nodes, dtype):
    # A float32 count is exact up to 2^24: up to there the pairs live in the counts (one fold); beyond, in the
    # workspace (8 N bytes), with a fold after every chunk of 2^24 edges. Without that workspace: two atomics.
    at = paired_plan(nodes, PAIRED_MAX_EDGES, dtype, algorithm="global")
    assert at.paired and at.pair_chunks == 1 and at.fold is not None and at.fold.name == "fold_pairs"
    assert at.table is None
    over = paired_plan(nodes, PAIRED_MAX_EDGES + 1, dtype, algorithm="global")
    assert over.paired and over.pair_chunks == 2 and over.fold is not None and over.fold.name == "fold_pair_chunk"
    assert paired_plan(nodes, MAX_EDGES, dtype, algorithm="global").pair_chunks == 256
    alone = paired_plan(nodes, PAIRED_MAX_EDGES + 1, dtype, algorithm="global", workspace=8 * nodes - 1)
    assert not alone.paired and alone.fold is None and alone.scatter.name == "scatter_global_v1"
    assert (alone.table is not None and alone.apply is not None) == (dtype == np.float16)
    with pytest.raises(ValueError, match="a workspace for the pairs"):
        paired_plan(nodes, PAIRED_MAX_EDGES + 1, dtype, paired=True, workspace=0)


def test_chunked_pairs_only_where_each_chunk_has_at_least_one_edge_per_node():
    # Every fold is O(N): 10^8 edges in 6 chunks pay for N = 10^6 (6e6 <= 1e8), not for N = 2e7 (1.2e8 > 1e8).
    assert paired_plan(10**6, 10**8).pair_chunks == 6
    assert not paired_plan(2 * 10**7, 10**8).paired




def test_forcing_pairs_is_refused_where_they_cannot_be_used():
    assert paired_plan(10**6, 10**5, paired=True).paired
    assert paired_plan(10**6, 10**7, device=dataclasses.replace(H200_LIKE, arch=80), paired=True).paired
    assert not paired_plan(10**6, 10**7, paired=False).paired
    for refused in (dict(with_counts=False), dict(counts_aligned=False)):
        with pytest.raises(ValueError, match="paired path needs"):
            paired_plan(10**6, 10**7, paired=True, **refused)
    with pytest.raises(ValueError, match="paired path needs"):
        plan_for(10**6, 10**7, 2, np.dtype(np.float32), H200_LIKE, vec=2, with_counts=True, paired=True)


def sorted_plan(nodes, edges, features, vec=4, **overrides):
    options = dict(with_counts=True, workspace=ENOUGH) | overrides
    return plan_for(nodes, edges, features, np.dtype(np.float32), H200_LIKE, vec, **options)


@pytest.mark.parametrize("nodes, edges", [(1000, 10**6), (10**4, 10**6), (10**6, 10**6), (10**6, 10**8)])
def test_wide_rows_with_counts_and_many_edges_sort_the_edges(nodes, edges):
    plan = sorted_plan(nodes, edges, 64)
    assert plan.algorithm == "sorted" and plan.sort is not None and plan.table is None
    assert plan.vec == 2 and plan.sort.reduce.grid[1] == 1  # 32 lanes x 2 features: one warp per row
    private = nodes <= SORT_PRIVATE_MAX_NODES and edges >= SORT_PRIVATE_MIN_EDGES_PER_NODE * nodes
    assert plan.sort.private_nodes == (nodes if private else 0) and (nodes <= 10**4) == private
    assert plan.sort.count.shared_bytes == 4 * plan.sort.private_nodes
    if private:  # few blocks, so that each block's edges revisit its tallies
        assert plan.sort.count.grid == (SORT_PRIVATE_BLOCKS_PER_SM * H200_LIKE.sm_count, 1)
    warps = plan.sort.reduce.grid[0] * THREADS_PER_BLOCK // 32
    assert plan.sort.layout.ranges <= warps < plan.sort.layout.ranges + THREADS_PER_BLOCK // 32
    assert (plan.sort.fixup is None) == (plan.sort.layout.ranges == 1)
    assert "sorted vec=2" in describe(plan) and "span=" in describe(plan)


@pytest.mark.parametrize("nodes, edges, features, overrides", [
    (10**6, 10**6, 64, dict(with_counts=False, workspace=0)),  # nothing O(N) without counts
    (10**6, 10**6, 64, dict(workspace=sort_layout(10**6, 10**6, 64).nbytes - 1)),  # sized for smaller shapes
    (10**4, SORT_MIN_EDGES - 1, 64, {}),  # too few edges to pay for the sort's seven launches
    (1000, SORT_FEW_NODES_MIN_VALUES // 64 - 1, 64, {}),
    (1000, 10**6, SORT_MIN_FEATURES - 1, {}),  # narrow rows: few atomics per edge
])
def test_atomics_where_sorting_is_not_possible_or_does_not_pay(nodes, edges, features, overrides):
    assert sorted_plan(nodes, edges, features, vec=1, **overrides).algorithm != "sorted"


@pytest.mark.parametrize("dtype, nodes, edges, features, sorts", [
    # many nodes: wide rows from SORT_MIN_EDGES (below, global atomics cost less than the sort's launches)
    (np.float32, 10**6, SORT_MIN_EDGES, SORT_WIDE_FEATURES, True),
    (np.float32, 10**6, SORT_MIN_EDGES - 1, SORT_WIDE_FEATURES, False),
    (np.float32, 10**6, 10**8, SORT_WIDE_FEATURES, True),
    (np.float32, 10**4, SORT_MID_MAX_EDGES - 1, SORT_MID_FEATURES, True),
    (np.float32, 10**4, SORT_MID_MAX_EDGES, SORT_MID_FEATURES, False),  # the sort's atomics cost more there
    (np.float32, 10**4, SORT_MID_MAX_EDGES, SORT_WIDE_FEATURES, True),
    (np.float32, 10**6, 10**6, SORT_MIN_FEATURES, False),
    # float16 whose table of N F values is large, up to SORT_SPARSE_MAX_EDGES_PER_NODE edges per node
    (np.float16, SORT_SPARSE_MIN_TABLE // 32, SORT_SPARSE_MIN_VALUES // 32, SORT_MIN_FEATURES, True),
    (np.float16, SORT_SPARSE_MIN_TABLE // 32, SORT_SPARSE_MIN_VALUES // 32 - 1, SORT_MIN_FEATURES, False),
    (np.float16, SORT_SPARSE_MIN_TABLE // 32 - 1, SORT_SPARSE_MIN_VALUES // 32, SORT_MIN_FEATURES, False),
    (np.float16, 10**6, SORT_SPARSE_MAX_EDGES_PER_NODE * 10**6, SORT_MIN_FEATURES, True),
    (np.float16, 10**6, SORT_SPARSE_MAX_EDGES_PER_NODE * 10**6 + 1, SORT_MIN_FEATURES, False),
    (np.float32, SORT_SPARSE_MIN_TABLE // 32, SORT_SPARSE_MIN_VALUES // 32, SORT_MIN_FEATURES, False),  # no table
    # few nodes: contention on each node's rows
    (np.float32, CHUNK_MAX_NODES, SORT_FEW_NODES_MIN_VALUES // 32, SORT_MIN_FEATURES, True),
    (np.float32, CHUNK_MAX_NODES, SORT_FEW_NODES_MIN_VALUES // 32 - 1, SORT_MIN_FEATURES, False),
    (np.float32, CHUNK_MAX_NODES + 1, SORT_FEW_NODES_MIN_VALUES // 32, SORT_MIN_FEATURES, False),
    (np.float16, 1000, 1000, 128, False),
])
def test_auto_sorts_by_features_edges_and_nodes_as_the_kernel_grid_measured(dtype, nodes, edges, features, sorts):
    size = scatter_add_workspace_size(nodes, edges, features, dtype)
    plan = plan_for(nodes, edges, features, np.dtype(dtype), H200_LIKE, 1, with_counts=True, workspace=size)
    assert (plan.algorithm == "sorted") == sorts
    if sorts:  # a workspace sized for these sizes holds any smaller launch's sort
        assert scatter_add_workspace_size(nodes, 2 * edges, 2 * features, dtype) >= sort_layout(
            nodes, edges, features).nbytes


def test_wide_rows_take_the_shared_kernel_only_in_small_blocks_with_many_edges_per_value():
    def algorithm(nodes, edges, features, dtype=np.float32, **options):
        return plan_for(nodes, edges, features, np.dtype(dtype), H200_LIKE, 1, workspace=ENOUGH, **options).algorithm

    # (features, dtype, most values, least edges per value, the path below the bounds): with counts, then the
    # windows without counts (float32 takes the direct kernel below them, float16 the global one)
    cases = [(4, np.float32, SHARED_WIDE_MAX_VALUES, SHARED_WIDE_MIN_EDGES_PER_VALUE, "global", True)]
    for features, half_only, most, least in SHARED_UNCOUNTED_WINDOWS:
        dtype = np.float16 if half_only else np.float32
        cases.append((features or 4, dtype, most, least, "global" if half_only else "direct", False))
    for features, dtype, values, least, atomics, counts in cases:
        most = values // features
        assert algorithm(most, least * features * most, features, dtype, with_counts=counts) == "shared"
        assert algorithm(most, least * features * most - 1, features, dtype, with_counts=counts) == atomics
        assert algorithm(most + 1, least * features * (most + 1), features, dtype, with_counts=counts) == atomics
    for counts in (True, False):
        assert algorithm(1000, 10**7, 16, with_counts=counts) != "shared"  # 68 KB of sums: one block per SM
    assert algorithm(1000, 10**7, 4, with_counts=False) == "direct"  # float16's window only
    assert algorithm(1000, 10**7, 4, np.float16, with_counts=False) == "shared"


def test_placing_runs_once_per_node_range_that_fits_half_of_l2_except_with_tallies_in_shared_memory():
    assert [len(sorted_plan(n, e, 64, algorithm="sorted").sort.place_ranges) for n, e in
            ((10**6, 10**6), (10**6, 10**7), (10**6, 10**8), (1000, 10**8))] == [1, 4, SORT_MAX_PLACE_PASSES, 1]
    ranges = sorted_plan(10**6, 10**7, 64).sort.place_ranges
    assert ranges[0][0] == 0 and ranges[-1][1] == 10**6 and all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))


def test_sorted_vector_width_is_the_narrowest_that_covers_the_row_in_one_warp():
    assert [sorted_plan(1000, 10**6, f, vec=v, algorithm="sorted").vec for f, v in
            ((32, 4), (33, 1), (64, 4), (64, 1), (96, 2), (128, 4), (256, 4), (200, 4))] == [1, 1, 2, 1, 2, 4, 4, 4]
    assert sorted_plan(1000, 10**6, 256, algorithm="sorted").sort.reduce.grid[1] == 2  # two slices of 128
    assert sorted_plan(1000, 10**6, 33, vec=1, algorithm="sorted").sort.reduce.grid[1] == 2


def test_forcing_the_sorted_path_is_refused_without_counts_or_its_workspace():
    for refused in (dict(with_counts=False), dict(workspace=0)):
        with pytest.raises(ValueError, match="sorted path needs counts"):
            sorted_plan(1000, 10**6, 64, algorithm="sorted", **refused)
    assert sorted_plan(3, 1, 1, vec=1, algorithm="sorted").sort.fixup is None  # one range: no fixup


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("with_counts", [True, False])
def test_few_nodes_with_wide_rows_and_many_edges_sort_chunks_in_shared_memory(dtype, with_counts):
    plan = plan_for(1000, 10**7, 64, np.dtype(dtype), H200_LIKE, 4, with_counts=with_counts, workspace=ENOUGH)
    assert plan.algorithm == "chunked" and plan.vec == 2 and plan.sort is None
    assert plan.scatter.name == "chunk_reduce_v2" and plan.scatter.shared_bytes == chunk_shared_bytes(1000)
    # 3 resident blocks on each of 132 SMs: 1e7 edges in 396 chunks of 25280 (not 306 of 32768, a wave 77% full)
    assert H200_LIKE.shared_per_sm // (chunk_shared_bytes(1000) + 1024) == 3
    assert plan.scatter.grid == (396, 1) and plan.chunk_edges == 25280 and "chunk=25280" in describe(plan)
    assert (plan.table is not None and not plan.table.hashed and plan.apply is not None) == (dtype == np.float16)
    many = plan_for(1000, 10**8, 64, np.dtype(dtype), H200_LIKE, 4, with_counts=with_counts)
    assert many.scatter.grid == (396, 1) and many.chunk_edges == 31584  # 8 rounds of 396 chunks (the last 395)
    for nodes, edges, features in ((CHUNK_MAX_NODES + 1, 10**7, 64), (1000, CHUNK_MIN_EDGES - 1, 64),
                                   (1000, 10**7, SORT_MIN_FEATURES - 1)):
        assert plan_for(nodes, edges, features, np.dtype(dtype), H200_LIKE, 4, with_counts=True,
                           workspace=ENOUGH).algorithm != "chunked"


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("window", CHUNK_WINDOWS)
def test_fewer_edges_sort_chunks_in_shared_memory_inside_each_window_of_nodes_and_edges_per_node(dtype, window):
    counts, most, features, per_node = window

    def algorithm(nodes, edges, features=features):
        return plan_for(nodes, edges, features, np.dtype(dtype), H200_LIKE, 4, with_counts=counts,
                        workspace=ENOUGH).algorithm

    assert per_node * most < CHUNK_MIN_EDGES and algorithm(most, per_node * most) == "chunked"
    assert algorithm(most, per_node * most - 1) != "chunked"
    assert algorithm(most + 1, per_node * (most + 1)) != "chunked"
    assert algorithm(most, per_node * most, SORT_MIN_FEATURES - 1) != "chunked"
    assert algorithm(10, per_node * 10) == "chunked"  # and on as few nodes as any launch has


def test_forcing_the_chunked_path_is_refused_beyond_its_shared_memory():
    with pytest.raises(ValueError, match="at most 2048 nodes"):
        plan_for(CHUNK_MAX_NODES + 1, 10**6, 64, np.dtype(np.float32), H200_LIKE, 4, algorithm="chunked")
    with pytest.raises(ValueError, match="one table slot per node"):  # float16 with a hashed table
        plan_for(2000, 10, 64, np.dtype(np.float16), H200_LIKE, 4, algorithm="chunked")
    sliced = plan_for(7, 100, 200, np.dtype(np.float32), H200_LIKE, 4, algorithm="chunked")
    assert sliced.vec == 4 and sliced.scatter.grid == (4, 2) and sliced.chunk_edges == 32  # slices of 128 features


@settings(max_examples=300, deadline=None)
@given(
    nodes=st.integers(0, CHUNK_MAX_NODES),
    edges=st.integers(1, MAX_EDGES) | st.integers(CHUNK_MIN_EDGES, 10**9),
    features=st.sampled_from([32, 64, 128, 200]) | st.integers(1, 300),
    vec=st.sampled_from([1, 2, 4]),
    sm_count=st.sampled_from([132, 78, 16]),
)
def test_chunks_fill_whole_waves_of_resident_blocks(nodes, edges, features, vec, sm_count):
    device = dataclasses.replace(H200_LIKE, sm_count=sm_count)
    plan = plan_for(nodes, edges, features, np.dtype(np.float32), device, vec, algorithm="chunked")
    blocks, slices = plan.scatter.grid
    chunk = plan.chunk_edges
    assert 32 <= chunk <= CHUNK_EDGES and chunk % 32 == 0  # the shared memory holds CHUNK_EDGES offsets
    resident = device.shared_per_sm // (chunk_shared_bytes(nodes) + 1024)
    slots = resident * sm_count // slices
    assert blocks * slices <= resident * sm_count and blocks <= -(-edges // chunk)  # all resident, none idle
    rounds = -(-(-(-edges // chunk)) // blocks)  # chunks per block, at most (blocks take every blocks-th chunk)
    assert rounds == -(-edges // (slots * CHUNK_EDGES))  # no more rounds than chunks of CHUNK_EDGES would take
    # The busiest block sorts at most 32 edges per round more than an even share of the slots.
    assert rounds * chunk < edges / slots + 32 * rounds


def test_forcing_shared_memory_for_too_many_nodes_is_refused():
    with pytest.raises(ValueError, match="cannot hold"):
        plan_for(10**6, 10**7, 1, np.dtype(np.float32), H200_LIKE, vec=1, algorithm="shared")
    with pytest.raises(ValueError, match="unknown algorithm"):
        plan_for(10, 10, 1, np.dtype(np.float32), H200_LIKE, vec=1, algorithm="fast")


# --- argument checks before any CUDA call (no GPU here) -----------------------------------------------------

# --- launches without counts -----------------------------------------------------------------------------
FEW, FEW_LEAST = SHARED_OVER_DIRECT_FEW_NODES, SHARED_OVER_DIRECT_FEW_MIN_EDGES_PER_NODE


@pytest.mark.parametrize("dtype, nodes, edges, features, expected", [
    (np.float32, 10**6, 10**4, 1, "direct"),         # a small update of a large state
    (np.float32, 10**8, 10**6, 1, "direct"),
    (np.float32, 10**4, 10**6, 1, "direct"),         # 100 edges per node: below the shared kernel's threshold
    (np.float32, 1000, 10**6, 1, "shared"),          # 1000 edges per node: shared memory first
    (np.float32, FEW, FEW_LEAST * FEW, 1, "shared"),  # few nodes: from FEW_LEAST edges per node ...
    (np.float32, FEW, FEW_LEAST * FEW - 1, 1, "direct"),
    (np.float32, FEW + 1, FEW_LEAST * (FEW + 1), 1, "direct"),  # ... on at most FEW nodes
    (np.float32, 400, SHARED_OVER_DIRECT_FEW_MIN_EDGES, 1, "shared"),  # ... from 2^15 edges
    (np.float32, 400, SHARED_OVER_DIRECT_FEW_MIN_EDGES - 1, 1, "direct"),
    (np.float32, 1000, 10**5, 4, "direct"),          # ... of one feature
    (np.float32, 10**6, 10**7, 64, "global"),        # 256 MB of wide, reused rows: node passes
    (np.float16, 10**8, OWNED_MAX_EDGES, 1, "owned"),  # up to OWNED_MAX_EDGES: one launch, no workspace
    (np.float16, 10**6, OWNED_MAX_EDGES, 2, "owned"),
    (np.float16, 10**6, OWNED_MAX_EDGES + 1, 1, "hashed"),  # more edges: every owned block reads them all
    (np.float16, 10**6, OWNED_MAX_VALUES // 4, 4, "owned"),
    (np.float16, 10**6, OWNED_MAX_VALUES // 4 + 1, 4, "hashed"),  # more values than OWNED_MAX_VALUES
    (np.float16, 10**6, 2**10, 5, "hashed"),         # rows wider than OWNED_MAX_FEATURES: the table
    (np.float16, 10**4, 10**4, 1, "global"),         # the table with one slot per node is faster
    (np.float16, 16384, OWNED_MAX_EDGES, 1, "global"),  # still one slot per node (2^ceil(log2(2E)) = 16384)
    (np.float16, 16385, OWNED_MAX_EDGES, 1, "owned"),
    (np.float16, 10**7, 10**6, 1, "hashed"),         # (all without the slot tables' workspace: below)
    (np.float16, 10**6, 10**6, 1, "global"),         # one slot per node
    (np.float16, 1000, 10**6, 1, "shared"),
    (np.float16, 10**7, 10**6, 2, "hashed"),
])
def test_small_updates_without_counts_take_the_direct_or_owned_path(dtype, nodes, edges, features, expected):
    vec = 4 if features % 4 == 0 else 1
    plan = plan_for(nodes, edges, features, np.dtype(dtype), H200_LIKE, vec)
    assert plan.algorithm == expected and plan.path == plan.algorithm.replace("hashed", "global")
    assert plan_for(nodes, edges, features, np.dtype(dtype), dataclasses.replace(H200_LIKE, arch=80),
                    vec).algorithm == expected  # no path here needs sm_90
    counted = plan_for(nodes, edges, features, np.dtype(dtype), H200_LIKE, vec, with_counts=True)
    assert counted.algorithm not in ("direct", "owned")  # with counts: as before


def test_direct_grid_covers_the_elements_up_to_its_blocks_per_sm():
    small = plan_for(10**6, 10**4, 1, np.dtype(np.float32), H200_LIKE, 1)
    assert small.scatter == KernelLaunch("scatter_direct_v1", (-(-10**4 // THREADS_PER_BLOCK), 1))
    wide = plan_for(10**5, 10**4, 64, np.dtype(np.float32), H200_LIKE, 4, algorithm="direct")
    assert wide.scatter.name == "scatter_direct_v4" and wide.scatter.grid[0] * THREADS_PER_BLOCK >= 16 * 10**4
    large = plan_for(10**8, 10**8, 1, np.dtype(np.float32), H200_LIKE, 1)
    assert large.scatter.grid == (DIRECT_BLOCKS_PER_SM * H200_LIKE.sm_count, 1)  # a grid-stride loop beyond


@pytest.mark.parametrize("edges", [1, 255, 10**4, OWNED_MAX_EDGES, 10**6])
def test_owned_blocks_each_get_a_table_for_their_share_of_the_edges(edges):
    plan = plan_for(10**8, edges, 1, np.dtype(np.float16), H200_LIKE, 1, algorithm="owned")
    blocks = plan.scatter.grid[0]
    assert blocks == max(1, min(H200_LIKE.sm_count, -(-edges // OWNED_EDGES_PER_BLOCK)))
    assert plan.scatter.block == OWNED_THREADS and plan.owned is not None
    share = -(-edges // blocks)
    capacity = plan.owned.capacity
    assert plan.owned.probes == min(capacity, OWNED_MAX_PROBES) and capacity & (capacity - 1) == 0
    # filled at most 2/3 on average, or as large as one block's shared memory allows
    assert 3 * share <= 2 * capacity or 2 * capacity * 8 > H200_LIKE.max_shared_per_block
    assert plan.scatter.shared_bytes == owned_shared_bytes(capacity, 1) <= H200_LIKE.max_shared_per_block
    assert owned_shared_bytes(64, 1) == 64 * 4 * 2 and owned_shared_bytes(64, 3) == 64 * 4 * 4  # keys and sums



def test_paths_without_counts_refuse_counts_and_direct_refuses_float16():
    half, single = np.dtype(np.float16), np.dtype(np.float32)
    for algorithm in ("direct", "owned", "block_table", "grid_table", "split_table"):
        with pytest.raises(ValueError, match="without counts"):
            plan_for(1000, 1000, 1, half if "table" in algorithm else single, H200_LIKE, 1, algorithm=algorithm,
                     with_counts=True, workspace=ENOUGH)
    for nodes in (1000, 10**6):  # float16 adds into a float32 table: the table paths
        with pytest.raises(ValueError, match="direct path adds float32 rows"):
            plan_for(nodes, 1000, 1, half, H200_LIKE, 1, algorithm="direct")
    with pytest.raises(ValueError, match="too wide"):
        plan_for(1000, 1000, 10**5, half, H200_LIKE, 1, algorithm="owned")


def test_float16_auto_takes_the_grid_table_only_where_it_may_launch_cooperatively():
    half = np.dtype(np.float16)
    may = dict(cooperative=True, workspace=ENOUGH)  # cooperative launches; the workspace holds its table

    def algorithm(nodes, edges, features=1, dtype=half, device=H200_LIKE, **options):
        return plan_for(nodes, edges, features, dtype, device, 1, **{**may, **options}).algorithm

    for nodes, table in ((10**3, SlotTable(10**3, False)), (2**18, SlotTable(2**18, False)),
                         (2**18 + 1, SlotTable(2**18, True)), (10**8, SlotTable(2**18, True))):
        plan = plan_for(nodes, 10**4, 1, half, H200_LIKE, 1, **may)
        assert plan.algorithm == "grid_table" and plan.table is None and plan.apply is None and plan.cooperative
        assert plan.scatter == KernelLaunch("scatter_grid_table", (-(-10**4 // GRID_TABLE_THREADS), 1), 0,
                                            GRID_TABLE_THREADS)
        assert plan.slots == grid_table_layout(nodes, 10**4) == table  # 16 slots per edge, rounded up: 2^18
        assert "table=262144h" in describe(plan) or not table.hashed
    assert plan_for(10**8, 1, 1, half, H200_LIKE, 1, algorithm="grid_table", **may).slots == SlotTable(16, True)
    # up to BLOCK_TABLE_MAX_EDGES edges of one feature block_table first, whatever the table and the launches
    # allowed (measured faster); wider rows into a hashed table owned, which alone takes them
    for nodes in (1000, 10**8):
        for edges in (1, BLOCK_TABLE_MAX_EDGES):
            assert algorithm(nodes, edges) == "block_table"
            assert algorithm(nodes, edges, cooperative=False, workspace=0) == "block_table"
    for edges in (2, BLOCK_TABLE_MAX_EDGES, BLOCK_TABLE_MAX_EDGES + 1):
        assert algorithm(10**8, edges, 4) == "owned"
    assert algorithm(10**8, BLOCK_TABLE_MAX_EDGES + 1) == "grid_table"
    assert algorithm(1000, BLOCK_TABLE_MAX_EDGES + 1) == "grid_table"  # one slot per node: not hashed
    # from GRID_TABLE_MAX_EDGES_PER_NODE edges per node its slots contend: split_table (measured faster)
    assert algorithm(1000, GRID_TABLE_MAX_EDGES_PER_NODE * 1000 - 1) == "grid_table"
    assert algorithm(1000, GRID_TABLE_MAX_EDGES_PER_NODE * 1000) == "split_table"
    assert algorithm(10**8, GRID_TABLE_MAX_EDGES) == "grid_table"
    # not without cooperative launches, the workspace for its table or its alignment (then split_table, or
    # without that workspace either owned up to OWNED_MAX_EDGES, else the hash table), for wider rows, more
    # edges, float32, counts, or a grid that might not be resident (8 SMs hold 64 blocks of the plan's 79)
    assert algorithm(10**8, 10**4, cooperative=False) == "split_table"
    assert algorithm(10**8, 10**4, workspace_aligned=False) == "hashed"
    assert algorithm(10**8, OWNED_MAX_EDGES, workspace_aligned=False) == "owned"
    assert algorithm(10**8, 10**4, workspace=8 * 2**18 - 1) == "split_table"
    assert algorithm(10**8, 10**4, workspace=0) == "hashed"
    assert algorithm(10**8, OWNED_MAX_EDGES, workspace=0) == "owned"
    assert algorithm(10**8, 10**4, features=2) == "hashed"
    assert algorithm(10**8, GRID_TABLE_MAX_EDGES + 1) == "split_table"
    assert algorithm(10**8, 10**4, dtype=np.dtype(np.float32)) == "direct"
    assert algorithm(10**8, 10**4, with_counts=True) == "hashed"
    assert algorithm(10**8, 10**4, device=dataclasses.replace(H200_LIKE, sm_count=8)) == "split_table"


def test_the_grid_table_kernel_and_the_plan_agree_on_its_block_and_residency():
    import re

    from plugin.kernels import plan as plans
    from plugin.kernels.compile import SOURCE_PATH

    source = SOURCE_PATH.read_text()
    defined = {name: int(value) for name, value in re.findall(r"#define (GRID_TABLE_\w+) (\d+)\b", source)}
    assert defined == {"GRID_TABLE_THREADS": plans.GRID_TABLE_THREADS,
                       "GRID_TABLE_BLOCKS_PER_SM": plans.GRID_TABLE_RESIDENT_BLOCKS_PER_SM}
    assert "__launch_bounds__(GRID_TABLE_THREADS, GRID_TABLE_BLOCKS_PER_SM)" in source


# --- float16 split_table: a memset and two kernels over 64-bit slots (plan.py, scatter_add.cu) ---------------


def test_float16_auto_takes_the_split_table_where_the_table_is_hashed_or_grid_table_would_contend():
    half = np.dtype(np.float16)

    def algorithm(nodes, edges, features=1, **options):
        return plan_for(nodes, edges, features, half, H200_LIKE, 1, **{"workspace": ENOUGH, "cooperative": False,
                                                                       **options})

    for nodes, edges in ((10**8, 10**4), (10**7, 10**6), (10**8, 2**15 + 1), (10**8, 2**22 + 1)):
        plan = algorithm(nodes, edges)
        capacity = split_table_capacity(edges)
        assert plan.algorithm == "split_table" and plan.table is None and plan.apply is None
        assert plan.scatter == KernelLaunch("scatter_split_table", (-(-edges // THREADS_PER_BLOCK), 1))
        assert plan.slots is not None and plan.slots.capacity == capacity and plan.slots.hashed
        apply_blocks = min(-(-capacity // THREADS_PER_BLOCK), 32 * H200_LIKE.sm_count)
        assert plan.slots.apply == KernelLaunch("apply_split_table", (apply_blocks, 1))
        assert f"table={capacity}h" in describe(plan)
    # the grid_table first where it may run; the one-slot table, wider rows, counts, float32 and a missing
    # workspace as before
    assert algorithm(10**8, 10**4, cooperative=True).algorithm == "grid_table"
    # few nodes with many edges each, up to GRID_TABLE_MAX_EDGES: split_table, cooperative launches or not
    for cooperative in (False, True):
        assert algorithm(100, 10**4, cooperative=cooperative).algorithm == "split_table"
        assert algorithm(1000, GRID_TABLE_MAX_EDGES, cooperative=cooperative).algorithm == "split_table"
    # beyond: the pairs in the workspace (as with counts), at least one edge per node
    assert algorithm(1000, GRID_TABLE_MAX_EDGES + 1).paired and algorithm(10**6, 10**6).paired
    assert algorithm(1000, GRID_TABLE_MAX_EDGES + 1, workspace=0).algorithm == "shared"
    assert algorithm(10**7, 10**6, 2).algorithm == "hashed"
    assert algorithm(10**8, 4096, 2).algorithm == "owned"
    assert algorithm(10**7, 10**6, with_counts=True).algorithm == "hashed"
    assert plan_for(10**7, 10**6, 1, np.dtype(np.float32), H200_LIKE, 1, workspace=ENOUGH).algorithm == "direct"
    assert algorithm(10**7, 10**6, workspace=8 * split_table_capacity(10**6) - 1).algorithm == "hashed"
    assert algorithm(10**7, 10**6, workspace_aligned=False).algorithm == "hashed"


def test_float16_block_table_is_one_block_with_a_shared_table_of_four_slots_per_edge():
    from plugin.kernels.plan import BLOCK_TABLE_MAX_EDGES, BLOCK_TABLE_THREADS, KernelLaunch, block_table_log2

    half = np.dtype(np.float16)
    assert [block_table_log2(e) for e in (0, 1, 16, 17, 1000, 1024)] == [6, 6, 6, 7, 12, 12]
    for nodes, edges in ((10**8, 1), (1000, 1000), (10**6, BLOCK_TABLE_MAX_EDGES)):
        plan = plan_for(nodes, edges, 1, half, H200_LIKE, 1)
        log2 = block_table_log2(edges)
        assert plan.algorithm == "block_table" and plan.block_log2 == log2 and plan.table is None and plan.apply is None
        assert plan.scatter == KernelLaunch("scatter_block_table", (1, 1), 8 << log2, BLOCK_TABLE_THREADS)
        assert plan.scatter.shared_bytes <= 32 * 1024  # within the 48 KiB a launch gets without opting in
    # not for wider rows, float32, counts or more edges; forcing it names why
    assert plan_for(10**8, 1000, 2, half, H200_LIKE, 1).algorithm == "owned"
    assert plan_for(10**8, 1000, 1, np.dtype(np.float32), H200_LIKE, 1).algorithm == "direct"
    assert plan_for(10**8, 1000, 1, half, H200_LIKE, 1, with_counts=True).algorithm != "block_table"
    assert plan_for(10**8, BLOCK_TABLE_MAX_EDGES + 1, 1, half, H200_LIKE, 1).algorithm != "block_table"
    for features, dtype, edges, message in ((2, half, 10, "one feature, not 2 float16"),
                                            (1, np.dtype(np.float32), 10, "one feature, not 1 float32"),
                                            (1, half, 1025, "at most 1024 edges, not 1025")):
        with pytest.raises(ValueError, match=message):
            plan_for(10**8, edges, features, dtype, H200_LIKE, 1, algorithm="block_table")



@pytest.mark.parametrize("algorithm, workspace, nodes, edges, too_many", [
    ("grid_table", 2097152, 10**6, 2**15 + 1, "at most 32768 edges, not 32769"),  # its workspace holds no more
    ("split_table", 524288, 2**31 - 1, 2**29 + 1, "at most 536870912 edges, not 536870913"),  # 2^31 slots: no int
])
def test_forcing_a_slot_table_path_names_what_it_needs(algorithm, workspace, nodes, edges, too_many):
    half = np.dtype(np.float16)

    def forced(nodes=10**8, edges=10**4, features=1, dtype=half, **options):
        return plan_for(nodes, edges, features, dtype, H200_LIKE, 1, algorithm=algorithm, **options)

    with pytest.raises(ValueError, match=rf"8-byte aligned workspace of {workspace} bytes \(got 0\)"):
        forced()
    for refused, message in ((dict(workspace_aligned=False), "8-byte aligned workspace"),
                             (dict(features=2), "one feature, not 2 float16"),
                             (dict(dtype=np.dtype(np.float32)), "one feature, not 1 float32"),
                             (dict(with_counts=True), "runs without counts"),
                             (dict(nodes=nodes, edges=edges), too_many)):
        with pytest.raises(ValueError, match=message):
            forced(workspace=ENOUGH, **refused)
    if algorithm == "grid_table":
        with pytest.raises(ValueError, match="cooperative launches"):
            forced(workspace=ENOUGH, cooperative=False)
    else:
        assert forced(nodes=2**31 - 1, edges=2**29, workspace=ENOUGH).slots.capacity == 2**30
        assert forced(nodes=1000, edges=30_000, workspace=ENOUGH).slots.capacity == 2**17  # hashed even so
        assert scatter_add_workspace_size(1000, 30_000, 1, np.float16, with_counts=False,
                                          algorithm="split_table") == 8 * 2**17



def test_every_path_of_auto_is_chosen_somewhere_on_a_grid_of_sizes():
    """Each path in AUTO pays on some sizes (with the workspace workspace_size gives them): none is dead."""
    chosen = {}
    for dtype in DTYPES:
        for nodes in (10, 1000, 10**4, 10**6, 10**8):
            for edges in (100, 10**4, 10**5, 10**6, 10**7, 10**8):
                for features in (1, 4, 64):
                    for with_counts in (True, False):
                        size = scatter_add_workspace_size(nodes, edges, features, dtype, with_counts=with_counts)
                        path = plan_for(nodes, edges, features, dtype, H200_LIKE, 1 if features == 1 else 4,
                                        with_counts=with_counts, workspace=size).path
                        chosen.setdefault(path, (np.dtype(dtype).name, nodes, edges, features, with_counts))
    assert set(chosen) == set(AUTO), f"never chosen: {set(AUTO) - set(chosen)}"


# Cells of benchmarks/auto_cells_h200.csv where "auto" is knowingly more than 10% slower than the fastest path
# timed (`python3 benchmarks/auto_cells.py` lists them): (dtype, N, E, F, counts).
KNOWN_MISSES = {
    ("float16", 10**2, 10**5, 8, True), ("float16", 3 * 10**2, 3 * 10**4, 128, True),
    ("float16", 3 * 10**2, 10**5, 128, True), ("float16", 3 * 10**2, 3 * 10**5, 128, True),
    ("float16", 10**3, 10**5, 2, False), ("float16", 10**3, 10**5, 2, True), ("float16", 10**3, 10**5, 128, True),
    ("float16", 10**3, 10**6, 8, True), ("float16", 10**3, 2 * 10**6, 128, True),
    ("float16", 4 * 10**3, 10**6, 1, True), ("float16", 10**4, 2 * 10**5, 128, True),
    ("float16", 10**4, 10**7, 64, True), ("float16", 10**4, 10**7, 96, True), ("float16", 10**5, 10**7, 64, True),
    ("float16", 10**5, 10**7, 96, True), ("float16", 10**7, 3 * 10**3, 4, False),
    ("float32", 3 * 10**2, 3 * 10**5, 128, True), ("float32", 5 * 10**2, 150000, 128, True),
    ("float32", 10**3, 10**6, 8, True), ("float32", 3 * 10**3, 3 * 10**4, 1, True),
    ("float32", 4 * 10**3, 3 * 10**4, 1, True),
    # float16 of one feature without counts pairs where it pairs with counts; the record has no pairs without
    # counts (BENCHMARKS.md "The AOT chains on the kernel family" times them with and without counts)
    ("float16", 10**3, 10**5, 1, False), ("float16", 3 * 10**3, 10**5, 1, False), ("float16", 10**4, 10**5, 1, False),
}


def test_auto_is_within_10_percent_of_the_fastest_measured_path_on_the_recorded_h200_cells():
    from benchmarks.auto_cells import misses, read_cells

    cells = read_cells()
    assert len(cells) >= 600 and KNOWN_MISSES <= set(cells)
    assert set(misses(cells)) <= KNOWN_MISSES, "auto now takes a slower (or untimed) path on these cells"


def test_every_path_is_at_least_10_percent_ahead_of_every_other_timed_path_on_a_recorded_cell_where_auto_takes_it():
    """A path pays for itself in measurements, not prose: on some cell of benchmarks/auto_cells_h200.csv where
    "auto" takes it, every other path timed there took at least 10% longer."""
    from benchmarks.auto_cells import SLOWER, auto_path, read_cells

    cells = read_cells()
    justified = {}
    for cell, times in cells.items():
        path = auto_path(*cell)
        others = [ms for name, ms in times.items() if name != path]
        if path in times and others and min(others) >= SLOWER * times[path]:
            justified.setdefault(path, cell)
    assert set(AUTO) - set(justified) == set(), "no recorded cell where these paths are 10% ahead"


def test_docs_kernel_md_names_only_constants_plan_py_has():
    """docs/kernel.md names plan.py's bounds (`SORT_MIN_FEATURES`, `SORT_*`) instead of restating their values:
    each name it gives in backticks is one of plan.py's, or the prefix of some."""
    import re
    from pathlib import Path

    from plugin.kernels import plan

    text = (Path(__file__).resolve().parents[2] / "docs" / "kernel.md").read_text()
    named = set(re.findall(r"`([A-Z][A-Z0-9_]+\*?)`", text))
    unknown = {name for name in named if not (any(key.startswith(name[:-1]) for key in vars(plan))
                                              if name.endswith("*") else hasattr(plan, name))}
    assert len(named) >= 20 and unknown == set(), unknown


def test_float16_wide_rows_without_counts_sort_where_sorting_pays_instead_of_a_table_of_n_f_values():
    """Issue 48 item 3: the same plan with counts and without beyond CHUNK_MAX_NODES nodes, the in-degrees in the
    workspace (after the sort's own layout); at most CHUNK_MAX_NODES nodes and float32 keep their paths."""
    from plugin.kernels.plan import CHUNK_MAX_NODES, sort_layout

    def plan(nodes, edges, features, dtype=np.float16, counts=False):
        return plan_for(nodes, edges, features, np.dtype(dtype), H200_LIKE, 4, with_counts=counts, workspace=ENOUGH)

    for nodes, edges in ((10**6, 10**6), (10**6, 10**7), (2 * 10**5, 10**6), (10**4, 10**6)):
        without, with_counts = plan(nodes, edges, 64), plan(nodes, edges, 64, counts=True)
        assert without.algorithm == with_counts.algorithm == "sorted" and without.table is None
        layout = sort_layout(nodes, edges, 64)
        assert layout is not None and without.sort is not None and without.sort.counts_offset == layout.nbytes
        assert with_counts.sort is not None and with_counts.sort.counts_offset is None
        need = scatter_add_workspace_size(nodes, edges, 64, "float16", with_counts=False)
        assert need >= layout.nbytes + 8 * nodes
    assert plan(CHUNK_MAX_NODES, 10**7, 48).algorithm != "sorted"
    assert plan(10**6, 10**6, 64, np.float32).algorithm != "sorted"
