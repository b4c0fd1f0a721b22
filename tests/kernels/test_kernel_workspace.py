"""The workspace a launch needs (plan.py workspace_size, every path's share): sizes and layouts, and that a
workspace sized for a profile's largest shapes serves every launch in it. No GPU."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plugin.kernels import scatter_add_workspace_size
from plugin.kernels.plan import (
    GRID_TABLE_MAX_EDGES,
    PAIRED_MAX_EDGES,
    SORT_MAX_TILES,
    SORT_SPARSE_MIN_VALUES,
    SORT_TARGET_RANGES,
    sort_layout,
    split_table_capacity,
    table_layout,
)

def test_float32_needs_no_workspace_without_counts_or_for_narrow_rows():
    # The paired path (F = 1 with counts, up to 2^24 edges) sums in the counts buffer: no workspace either.
    assert scatter_add_workspace_size(10**8, 10**8, 64, np.float32, with_counts=False) == 0
    assert scatter_add_workspace_size(10**6, 10**7, 3, np.float32) == 0
    assert scatter_add_workspace_size(10**6, 10**7, 1, np.float32) == 0
    assert scatter_add_workspace_size(10**6, 0, 1, np.float32) == 0
    assert scatter_add_workspace_size(10**6, SORT_SPARSE_MIN_VALUES // 64 - 1, 64, np.float32) == 0  # too few to sort


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_wide_rows_with_counts_and_many_edges_get_the_sorted_paths_workspace(dtype):
    layout = sort_layout(10**6, 10**7, 64)
    assert layout is not None
    assert scatter_add_workspace_size(10**6, 10**7, 64, dtype) >= layout.nbytes
    # forcing the sorted path sizes for it wherever it can run, here below "auto"'s edge threshold
    small = sort_layout(1000, 1000, 3)
    assert small is not None and scatter_add_workspace_size(1000, 1000, 3, dtype, algorithm="sorted") >= small.nbytes
    assert scatter_add_workspace_size(1000, 1000, 3, dtype, algorithm="sorted", with_counts=False) == (
        scatter_add_workspace_size(1000, 1000, 3, dtype, with_counts=False))


@pytest.mark.parametrize("nodes, edges, features", [(1, 1, 1), (1000, 10**6, 64), (10**6, 10**8, 64), (7, 33, 200),
                                                    (10**6, 2**31 - 1, 1)])
def test_sort_layout_sections_are_aligned_disjoint_and_large_enough(nodes, edges, features):
    layout = sort_layout(nodes, edges, features)
    assert layout is not None
    offsets = [0, layout.tile_sums_offset, layout.sorted_offset, layout.head_offset, layout.tail_offset, layout.nbytes]
    assert all(offset % 256 == 0 for offset in offsets)
    sizes = [4 * (nodes + 1), 4 * SORT_MAX_TILES, 8 * edges, 4 * layout.ranges * features, 4 * layout.ranges * features]
    assert all(end - start >= size for start, end, size in zip(offsets, offsets[1:], sizes))
    assert layout.span % 32 == 0 and layout.span * layout.ranges >= edges > layout.span * (layout.ranges - 1)
    assert layout.ranges <= SORT_TARGET_RANGES or layout.span == 32
    assert layout.tiles <= SORT_MAX_TILES and layout.tiles * layout.tile_nodes >= nodes
    assert sort_layout(0, 10, 1) is None and sort_layout(10, 0, 1) is None and sort_layout(10, 2**31, 1) is None


def test_float16_workspace_is_its_table_or_the_split_tables_for_any_width():
    for features in (1, 2, 64):  # without counts: with them, wide rows get the sorted path's workspace instead
        table = table_layout(1000, 10**6, features)
        assert table is not None
        assert table_layout(1000, 257, 1).hashed is False and table_layout(1000, 256, 1).hashed is True
        split = 8 * split_table_capacity(GRID_TABLE_MAX_EDGES)  # up to 2^15 edges into 1000 nodes may take it
        assert scatter_add_workspace_size(1000, 10**6, features, np.float16, with_counts=False) == max(table.nbytes,
                                                                                                       split)
    assert scatter_add_workspace_size(1000, 10**6, 1, np.float16) == table_layout(1000, 10**6, 1).nbytes  # counts


def test_float16_workspace_is_zero_without_edges_or_nodes():
    assert scatter_add_workspace_size(1000, 0, 4, np.float16) == 0
    assert scatter_add_workspace_size(0, 1000, 4, np.float16) == 0


def test_float16_table_is_direct_for_small_states_and_hashed_for_large_ones():
    direct = table_layout(1000, 10**6, 3)
    assert direct is not None and not direct.hashed and direct.capacity == 1000
    hashed = table_layout(10**8, 10**4, 3)
    assert hashed is not None and hashed.hashed and hashed.capacity == 2**15 and hashed.table_log2 == 15
    assert hashed.values_offset % 256 == 0 and hashed.nbytes == hashed.values_offset + 4 * 2**15 * 3


def test_float16_workspace_does_not_grow_with_the_state_for_a_fixed_batch():
    sizes = {scatter_add_workspace_size(nodes, 10**4, 8, np.float16) for nodes in (10**5, 10**6, 10**7, 10**8)}
    assert len(sizes) == 1


@settings(max_examples=300, deadline=None)
@given(
    nodes=st.integers(0, 10**7),
    edges=st.integers(0, 10**7),
    features=st.sampled_from([1, 1, 2, 3, 64]) | st.integers(1, 70),
    smaller_nodes=st.floats(0, 1),
    smaller_edges=st.floats(0, 1),
    smaller_features=st.floats(0, 1),
    dtype=st.sampled_from([np.float16, np.float32]),
    with_counts=st.booleans(),
)
def test_workspace_for_the_largest_shapes_serves_every_smaller_launch(nodes, edges, features, smaller_nodes, smaller_edges,
                                                                     smaller_features, dtype, with_counts):
    largest = scatter_add_workspace_size(nodes, edges, features, dtype, with_counts=with_counts)
    n, e = int(nodes * smaller_nodes), int(edges * smaller_edges)
    f = 1 + int((features - 1) * smaller_features)  # TensorRT sizes the workspace for a profile's largest F too
    assert scatter_add_workspace_size(n, e, f, dtype, with_counts=with_counts) <= largest
    layout = sort_layout(n, e, features)
    if layout is not None:  # the partial sums' room holds every range a smaller launch uses
        assert layout.span * layout.ranges >= e and 4 * layout.ranges * features <= layout.nbytes - layout.tail_offset
    table = table_layout(n, e, features)
    if table is not None and table.hashed:
        assert table.capacity >= 2 * min(n, e) and table.capacity & (table.capacity - 1) == 0
        assert table.capacity < n


@pytest.mark.parametrize("bad", [-1, 1.5, "7"])
def test_workspace_size_refuses_bad_sizes(bad):
    with pytest.raises(ValueError, match="non-negative integer"):
        scatter_add_workspace_size(bad, 10, 1, np.float16)



def test_workspace_holds_the_chunked_pairs_only_with_counts_and_more_than_2_to_the_24_edges():
    assert scatter_add_workspace_size(10**6, PAIRED_MAX_EDGES, 1, np.float32) == 0
    assert scatter_add_workspace_size(10**6, 10**8, 1, np.float32) == 8 * 10**6
    assert scatter_add_workspace_size(10**6, 10**8, 1, np.float32, with_counts=False) == 0
    # F = 2 pairs nothing, but a profile's largest F may be 2 while a launch in it has F = 1: the size must not
    # fall as F grows (it did: 0 at F = 2, 8 N at F = 1)
    assert scatter_add_workspace_size(10**6, 10**8, 2, np.float32) == 8 * 10**6
    table = table_layout(10**6, 10**8, 1)
    assert table is not None
    assert scatter_add_workspace_size(10**6, 10**8, 1, np.float16) == max(8 * 10**6, table.nbytes)
    split = 8 * split_table_capacity(2**18)  # the table is hashed for E <= 2^18 into 1e6 nodes
    assert scatter_add_workspace_size(10**6, 10**8, 1, np.float16, with_counts=False) == max(table.nbytes, split)



def test_the_workspace_holds_the_grid_table_where_it_may_run_and_never_shrinks_as_sizes_grow():
    def size(nodes, edges, features=1, dtype=np.float16, with_counts=False):
        return scatter_add_workspace_size(nodes, edges, features, dtype, with_counts=with_counts)

    assert size(10**8, 10**4) == 8 * 2**18  # 2^18 slots (the float16 table: 2^15 keys and sums)
    assert size(10**3, 10**4) >= 8 * 10**3  # one slot per node
    assert size(10**8, 10**4, 3) == 8 * 2**18  # whatever F
    assert size(10**8, 10**4, dtype=np.float32) == 0
    assert size(10**8, 10**4, with_counts=True) == table_layout(10**8, 10**4, 1).nbytes
    sizes = [size(10**8, edges) for edges in (1, 10**4, GRID_TABLE_MAX_EDGES, GRID_TABLE_MAX_EDGES + 1, 10**6)]
    assert sizes == sorted(sizes)


def test_the_workspace_formula_is_pinned():
    """scatter_add_workspace_size's answers on the paths that take a workspace: a change to them changes what
    TensorRT allocates for every engine built from now on."""
    f16, f32 = np.float16, np.float32
    pinned = {
        (10**8, 10**4, 1, f16, False): 2097152,     # grid_table: 2^18 slots
        (10**7, 10**6, 1, f16, False): 16777216,    # split_table 2^21 slots (= the hashed table)
        (10**7, 300_000, 1, f16, False): 16777216,  # split_table: 4 slots per edge
        (10**5, 10**4, 3, f16, True): 524288,       # the float16 table with counts
        (10**6, 10**8, 2, f32, True): 8000000,      # pairs beyond 2^24 edges, whatever F
        (10**6, 10**7, 64, f32, True): 86101504,    # the sorted path
        (10**6, 10**7, 1, f32, False): 0,
    }
    assert {key: scatter_add_workspace_size(*key[:4], with_counts=key[4]) for key in pinned} == pinned


def test_split_table_capacity_is_four_slots_per_edge_up_to_2_to_the_21_then_two_and_never_shrinks():
    from plugin.kernels.plan import SPLIT_TABLE_MAX_SPARSE_SLOTS

    assert [split_table_capacity(e) for e in (1, 3, 10**4, 2**15, 2**19)] == [4, 16, 2**16, 2**17, 2**21]
    assert SPLIT_TABLE_MAX_SPARSE_SLOTS == 2**21
    assert [split_table_capacity(e) for e in (2**19 + 1, 10**6, 2**20 + 1)] == [2**21, 2**21, 2**22]
    capacities = [split_table_capacity(e) for e in range(1, 2**21, 997)]
    assert capacities == sorted(capacities)
    assert all(c >= 2 * e for c, e in zip(capacities, range(1, 2**21, 997)))  # at most half full: probes end


@settings(max_examples=300, deadline=None)
@given(nodes=st.integers(0, 10**9), edges=st.integers(0, 10**8), smaller_nodes=st.floats(0, 1),
       smaller_edges=st.floats(0, 1), features=st.integers(1, 70))
def test_the_workspace_holds_the_split_table_of_every_smaller_launch_auto_may_give_it(nodes, edges, smaller_nodes,
                                                                                    smaller_edges, features):
    largest = scatter_add_workspace_size(nodes, edges, features, np.float16, with_counts=False)
    n, e = int(nodes * smaller_nodes), int(edges * smaller_edges)
    table = table_layout(n, e, 1)
    if table is not None and (table.hashed or e <= GRID_TABLE_MAX_EDGES):  # where "auto" may take split_table
        assert largest >= 8 * split_table_capacity(e)
