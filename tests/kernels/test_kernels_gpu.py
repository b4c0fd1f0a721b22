"""The scatter-add kernel on a GPU against a float64 numpy reference (skipped without a GPU).

Fresh random inputs every run (never zeros); counts, skipped and the workspace are poisoned before each launch,
so unwritten or uncleared memory shows. Error bounds (docs/kernel.md, "float16 accumulation"), for a node of degree d
with initial value s, edge values x_i, reference r = s + sum x_i:
    float32: |out - r| <= d * u32 * (|s| + sum |x_i|)                   (atomic float32 chain, any order)
    float16: |out - r| <= u16 * |r| + d * u32 * (|r| + sum |x_i|) + 2^-25  (float32 table, one half rounding)
with u32 = 2^-24, u16 = 2^-11. Norm-wise, float32 must also be within 1e-5 of float64.
"""

import numpy as np
import pytest

from plugin.kernels import scatter_add_launch, scatter_add_numpy, scatter_add_workspace_size
from plugin.device_array import DeviceArray
from plugin.kernels.plan import PAIRED_MAX_EDGES

pytestmark = pytest.mark.gpu

U32 = 2.0**-24
U16 = 2.0**-11
RNG = np.random.default_rng()  # fresh inputs every run; failures print the sizes and errors


def reference(state, src, index):
    """float64 (state + scatter-add of src by index, counts, degree, sum of |src| per node), skipping bad ids."""
    num_nodes = state.shape[0]
    state64 = state.astype(np.float64).reshape(num_nodes, -1)
    src64 = src.astype(np.float64).reshape(len(index), state64.shape[1])  # E = 0 too (-1 cannot be inferred)
    ok = (index >= 0) & (index < num_nodes)
    targets, rows = index[ok], src64[ok]
    out = state64.copy()
    abs_sum = np.zeros_like(state64)
    for f in range(state64.shape[1]):
        out[:, f] += np.bincount(targets, weights=rows[:, f], minlength=num_nodes)
        abs_sum[:, f] = np.bincount(targets, weights=np.abs(rows[:, f]), minlength=num_nodes)
    counts = np.bincount(targets, minlength=num_nodes).astype(np.int64)
    return out, counts, abs_sum, state64


def assert_within_bound(out, state, src, index, dtype):
    expected, counts, abs_sum, state64 = reference(state, src, index)
    got = out.astype(np.float64).reshape(expected.shape)
    assert np.all(np.isfinite(got)), "non-finite output"
    error = np.abs(got - expected)
    degree = counts[:, None].astype(np.float64)
    if dtype == np.float32:
        bound = degree * U32 * (np.abs(state64) + abs_sum)
    else:
        bound = U16 * np.abs(expected) + degree * U32 * (np.abs(expected) + abs_sum) + 2.0**-25
    worst = np.argmax(error - bound)
    assert np.all(error <= bound), (
        f"error {error.flat[worst]:.3g} > bound {bound.flat[worst]:.3g} at flat {worst} "
        f"(degree {degree.flat[worst // expected.shape[1]]:.0f})"
    )
    untouched = counts == 0
    assert np.array_equal(got[untouched], state64[untouched]), "a node without edges changed"
    if dtype == np.float32:  # typical, not worst case: roundings of random sign add up like a random walk
        typical = np.linalg.norm(np.sqrt(degree) * U32 * (np.abs(state64) + abs_sum))
        assert np.linalg.norm(error) <= typical, f"norm-wise error {np.linalg.norm(error):.3g} > {typical:.3g}"
    return counts


def random_inputs(num_nodes, num_edges, num_features, dtype, index=None):
    state = RNG.standard_normal((num_nodes, num_features)).astype(dtype)
    src = RNG.standard_normal((num_edges, num_features)).astype(dtype)
    if index is None:
        index = RNG.integers(0, num_nodes, num_edges, dtype=np.int64)
    return state, src, index


SIZES = [  # (N, E, F)
    (1000, 10**6, 1),
    (10**4, 10**6, 1),
    (10**6, 10**7, 1),
    (10**6, 10**6, 3),
    (1000, 10**5, 64),
    (10**4, 10**6, 64),
    (10**6, 10**6, 64),
    (10**5, 10**4, 3),
    (1, 1, 1),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("nodes, edges, features", SIZES)
def test_random_graphs_match_float64(nodes, edges, features, dtype):
    state, src, index = random_inputs(nodes, edges, features, dtype)
    out, counts = scatter_add_numpy(state, src, index)
    expected_counts = assert_within_bound(out, state, src, index, dtype)
    assert counts.shape == (nodes, 1) and counts.dtype == np.int64
    assert np.array_equal(counts[:, 0], expected_counts)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("algorithm, nodes, features", [("global", 1000, 1), ("global", 1000, 64), ("shared", 1000, 3),
                                                        ("shared", 500, 64), ("global", 7, 5)])
def test_each_kernel_variant_matches_float64(algorithm, nodes, features, dtype):
    state, src, index = random_inputs(nodes, 300_000, features, dtype)
    out, counts = scatter_add_numpy(state, src, index, algorithm=algorithm)
    assert np.array_equal(counts[:, 0], assert_within_bound(out, state, src, index, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("nodes", [1, 1000, 10**6])
def test_all_edges_into_one_node(nodes, dtype):
    edges = 10**6 if dtype == np.float32 else 10**4
    state, _, _ = random_inputs(nodes, 0, 2, dtype)
    src = RNG.uniform(0, 1, (edges, 2)).astype(dtype)  # one sign: naive half accumulation would stall at 2048-4096
    index = np.full(edges, RNG.integers(0, nodes), np.int64)
    out, counts = scatter_add_numpy(state, src, index)
    assert np.array_equal(counts[:, 0], assert_within_bound(out, state, src, index, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_paired_path_with_all_edges_into_one_node(dtype):
    # The (value, count) pair of one node takes every float2 atomic; float16 still sums in float32.
    nodes, edges = 1000, 10**6 if dtype == np.float32 else 10**4
    state, _, _ = random_inputs(nodes, 0, 1, dtype)
    src = RNG.uniform(0, 1, (edges, 1)).astype(dtype)
    index = np.full(edges, RNG.integers(0, nodes), np.int64)
    out, counts = scatter_add_numpy(state, src, index, algorithm="global", paired=True)
    assert np.array_equal(counts[:, 0], assert_within_bound(out, state, src, index, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_one_node_of_degree_ten_thousand_among_many_shuffled(dtype):
    nodes, hub = 10**5, int(RNG.integers(0, 10**5))
    index = np.concatenate([np.full(10**4, hub), RNG.integers(0, nodes, 2 * 10**5)]).astype(np.int64)
    RNG.shuffle(index)
    state = RNG.uniform(0, 1, (nodes, 3)).astype(dtype)
    src = RNG.uniform(0, 1, (len(index), 3)).astype(dtype)
    out, counts = scatter_add_numpy(state, src, index)
    assert counts[hub, 0] >= 10**4
    assert np.array_equal(counts[:, 0], assert_within_bound(out, state, src, index, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("nodes, features", [(1000, 1), (10**6, 3)])
def test_no_edges_leaves_the_state_and_zeroes_the_counts(nodes, features, dtype):
    state, src, index = random_inputs(nodes, 0, features, dtype)
    out, counts, skipped = scatter_add_numpy(state, src, index, return_skipped=True)
    assert np.array_equal(out, state) and not counts.any() and skipped == 0


def launch_with_guards(state, src, index, *, with_counts=True, poison=0x7F, node_passes=None, algorithm="auto",
                       paired=None, counts_offset=0):
    """Launches on buffers whose outputs and workspace are poisoned, with 4 KiB guard zones around the state
    and counts_offset bytes (0 or 4) before the counts; returns (new state, counts or None, skipped, whether
    the guards are intact, whether counts memory stayed untouched (without counts), the launch plan)."""
    from cuda.bindings import driver

    from common.cuda_check import check

    nodes, features = state.shape
    guard = 4096
    state_bytes = state.nbytes
    arena = DeviceArray((guard + state_bytes + guard,), np.uint8)
    arena.fill_bytes(0xA5)
    state_ptr = arena.ptr + guard
    check(driver.cuMemcpyHtoD(state_ptr, state.ctypes.data, state_bytes))
    src_d, index_d = DeviceArray.from_array(src), DeviceArray.from_array(index)
    counts_d = DeviceArray((8 * nodes + 8,), np.uint8)  # cuMemAlloc: 256-byte aligned, + counts_offset
    skipped_d = DeviceArray((1,), np.uint64)
    size = scatter_add_workspace_size(nodes, len(index), features, state.dtype, with_counts=with_counts,
                                      algorithm=algorithm)
    workspace_d = DeviceArray((max(size, 1),), np.uint8)
    for buffer in (counts_d, skipped_d, workspace_d):
        buffer.fill_bytes(poison)
    try:
        plan = scatter_add_launch(
            state=state_ptr, src=src_d.ptr, index=index_d.ptr, counts=counts_d.ptr + counts_offset if with_counts else 0,
            num_nodes=nodes, num_edges=len(index), num_features=features, dtype=state.dtype, stream=0,
            workspace=workspace_d.ptr if size else 0, workspace_size=size, skipped=skipped_d.ptr,
            node_passes=node_passes, algorithm=algorithm, paired=paired)
        check(driver.cuCtxSynchronize())
        whole = arena.download()
        out = whole[guard:guard + state_bytes].view(state.dtype).reshape(state.shape)
        counts_bytes = counts_d.download()
        guards_intact = bool(np.all(whole[:guard] == 0xA5) and np.all(whole[guard + state_bytes:] == 0xA5)
                             and np.all(counts_bytes[:counts_offset] == poison)
                             and np.all(counts_bytes[counts_offset + 8 * nodes:] == poison))
        counts = counts_bytes[counts_offset:counts_offset + 8 * nodes].view(np.int64).reshape(nodes, 1)
        untouched_counts = bool(np.all(counts_bytes == poison)) if not with_counts else None
        return out, counts if with_counts else None, int(skipped_d.download()[0]), guards_intact, untouched_counts, plan
    finally:
        for buffer in (arena, src_d, index_d, counts_d, skipped_d, workspace_d):
            buffer.free()


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("nodes, features, algorithm", [(1000, 4, "shared"), (1000, 4, "global"), (10**6, 1, "auto")])
def test_out_of_range_indices_are_skipped_counted_and_never_written(nodes, features, algorithm, dtype):
    edges = 200_000
    state, src, index = random_inputs(nodes, edges, features, dtype)
    bad = RNG.choice(edges, 5000, replace=False)
    index[bad] = RNG.choice(np.array([-1, -2, nodes, nodes + 1, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63)]), len(bad))
    out, counts, skipped, guards_intact, _, _ = launch_with_guards(state, src, index, algorithm=algorithm)
    assert guards_intact, "bytes around the state changed"
    assert skipped == len(bad)
    assert np.array_equal(counts[:, 0], assert_within_bound(out, state, src, index, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("nodes, edges, features", [
    (1000, 300_000, 64),   # tallies in shared memory, one warp slice (vec 2)
    (10**5, 300_000, 64),  # tallies in global memory
    (10**6, 10**6, 64),    # "auto" sorts here too
    (7, 100_000, 5),       # few nodes, each straddling many warp ranges; vec 1, lanes idle
    (1000, 50_000, 200),   # two warp slices per row (vec 4)
    (3, 1, 33),            # one edge, one warp range, no fixup
])
def test_sorted_path_matches_float64(nodes, edges, features, dtype):
    state, src, index = random_inputs(nodes, edges, features, dtype)
    out, counts, _, guards_intact, _, plan = launch_with_guards(state, src, index, algorithm="sorted")
    assert plan.sort is not None and guards_intact
    assert np.array_equal(counts[:, 0], assert_within_bound(out, state, src, index, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_sorted_path_with_a_hub_out_of_range_targets_and_all_edges_into_one_node(dtype):
    # A hub of degree 2e5 spans hundreds of warp ranges (head and tail sums, one fixup); bad ids are skipped.
    nodes, hub = 10**5, int(RNG.integers(0, 10**5))
    index = np.concatenate([np.full(2 * 10**5, hub), RNG.integers(0, nodes, 4 * 10**5)]).astype(np.int64)
    RNG.shuffle(index)
    bad = RNG.choice(len(index), 5000, replace=False)
    index[bad] = RNG.choice(np.array([-1, nodes, 2**31, -(2**63), 2**63 - 1]), len(bad))
    high = 1.0 if dtype == np.float32 else 0.1  # one sign, sums within float16's range (2e5 * 0.05 = 1e4)
    state = RNG.uniform(0, high, (nodes, 64)).astype(dtype)
    src = RNG.uniform(0, high, (len(index), 64)).astype(dtype)
    out, counts, skipped, guards_intact, _, plan = launch_with_guards(state, src, index, algorithm="sorted")
    assert plan.sort is not None and guards_intact and skipped == len(bad)
    assert np.array_equal(counts[:, 0], assert_within_bound(out, state, src, index, dtype))
    one = np.full(10**6 if dtype == np.float32 else 10**5, hub, np.int64)
    src = RNG.uniform(0, high, (len(one), 32)).astype(dtype)
    out, counts = scatter_add_numpy(state[:, :32].copy(), src, one, algorithm="sorted")
    assert np.array_equal(counts[:, 0], assert_within_bound(out, state[:, :32], src, one, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("nodes, edges, features, with_counts", [
    (1000, 300_000, 64, True),   # 391 chunks of 768 edges, a block each; vec 2
    (7, 100_000, 5, True),       # vec 1, lanes beyond the row idle
    (1000, 50_000, 200, False),  # two warp slices of 128 features, no counts
    (2048, 70_000, 33, True),    # the most nodes the chunk's shared memory takes; vec 1, two slices
])
def test_chunked_path_matches_float64(nodes, edges, features, with_counts, dtype):
    state, src, index = random_inputs(nodes, edges, features, dtype)
    bad = RNG.choice(edges, 1000, replace=False)
    index[bad] = RNG.choice(np.array([-1, nodes, 2**31, -(2**63), 2**63 - 1]), len(bad))
    out, counts, skipped, guards_intact, untouched, plan = launch_with_guards(
        state, src, index, algorithm="chunked", with_counts=with_counts)
    assert plan.algorithm == "chunked" and guards_intact and skipped == len(bad)
    expected_counts = assert_within_bound(out, state, src, index, dtype)
    if with_counts:
        assert np.array_equal(counts[:, 0], expected_counts)
    else:
        assert untouched


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_chunked_path_loops_over_more_chunks_than_blocks_and_takes_all_edges_into_one_node(dtype):
    # 13.5e6 edges: more than 32768 per resident block, so each block sorts two chunks; values small enough that
    # float16 holds the sums (13.5e6 * 5e-4 < 65504)
    high = 1.0 if dtype == np.float32 else 1e-3
    state = RNG.uniform(0, high, (10, 1)).astype(dtype)
    src = RNG.uniform(0, high, (13_500_000, 1)).astype(dtype)
    index = RNG.integers(0, 10, len(src), dtype=np.int64)
    out, counts = scatter_add_numpy(state, src, index, algorithm="chunked")
    assert np.array_equal(counts[:, 0], assert_within_bound(out, state, src, index, dtype))
    index[:] = 3
    out, counts = scatter_add_numpy(state, src[:10**6], index[:10**6], algorithm="chunked")
    assert np.array_equal(counts[:, 0], assert_within_bound(out, state, src[:10**6], index[:10**6], dtype))


@pytest.mark.parametrize("nodes, edges, features", [(10**6, 10**6, 64), (10**5, 300_000, 64), (3, 1, 33)])
def test_float16_sorted_without_counts_keeps_its_in_degrees_in_the_workspace(nodes, edges, features):
    """float16 wide rows without counts sort where sorting pays (plan.py Sorted): the in-degrees live in the
    workspace; the counts memory stays untouched; hot nodes and out-of-range ids as in the hub test."""
    state, src, index = random_inputs(nodes, edges, features, np.float16)
    index[RNG.random(edges) < 0.01] = -1
    forced = {} if nodes == 10**6 else {"algorithm": "sorted"}
    out, counts, skipped, guards_intact, counts_untouched, plan = launch_with_guards(
        state, src, index, with_counts=False, **forced)
    assert plan.sort is not None and plan.sort.counts_offset is not None and plan.table is None
    assert counts is None and counts_untouched and guards_intact and skipped == int((index < 0).sum())
    assert_within_bound(out, state, src, index, np.float16)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_without_counts_the_state_is_still_right_and_counts_memory_untouched(dtype):
    state, src, index = random_inputs(5000, 500_000, 2, dtype)
    out, counts, _, guards_intact, counts_untouched, plan = launch_with_guards(state, src, index, with_counts=False)
    assert counts is None and counts_untouched and guards_intact and not plan.paired
    assert_within_bound(out, state, src, index, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("passes", [2, 7])
def test_node_passes_give_the_same_result_and_count_skipped_rows_once(passes, dtype):
    nodes = 10**5
    state, src, index = random_inputs(nodes, 10**6, 8, dtype)
    index[RNG.choice(len(index), 777, replace=False)] = nodes + 5
    out, counts, skipped, guards_intact, _, _ = launch_with_guards(state, src, index, node_passes=passes)
    assert guards_intact and skipped == 777
    assert np.array_equal(counts[:, 0], assert_within_bound(out, state, src, index, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("nodes, algorithm", [(1000, "shared"), (10**5, "global")])
@pytest.mark.parametrize("paired", [True, False])
def test_paired_value_count_path_matches_float64(nodes, algorithm, paired, dtype):
    # F = 1 with counts: (value, count) pairs summed in the poisoned counts buffer itself (no workspace for
    # float32), then folded into int64 counts; values added into the state once (float16: one rounding).
    edges = 300_000
    state, src, index = random_inputs(nodes, edges, 1, dtype)
    bad = RNG.choice(edges, 3000, replace=False)
    index[bad] = RNG.choice(np.array([-1, nodes, 2**31, -(2**63), 2**63 - 1]), len(bad))
    out, counts, skipped, guards_intact, _, plan = launch_with_guards(state, src, index, algorithm=algorithm,
                                                                      paired=paired)
    assert plan.paired == paired and plan.algorithm == algorithm and (plan.fold is not None) == paired
    assert guards_intact and skipped == len(bad)
    assert np.array_equal(counts[:, 0], assert_within_bound(out, state, src, index, dtype))
    if dtype == np.float32:
        assert scatter_add_workspace_size(nodes, edges, 1, dtype) == 0


@pytest.mark.parametrize("nodes, edges, algorithm", [(1000, 300_000, "shared"), (10**4, 10**6, "global"),
                                                     (10**5, 300_000, "auto")])
def test_float16_without_counts_pairs_in_the_poisoned_workspace_and_leaves_the_counts(nodes, edges, algorithm):
    # float16 of one feature without counts: the (value, count) pairs in the workspace (poisoned here; the launch
    # zeroes them), each node rounded once; the counts buffer is never written.
    state, src, index = random_inputs(nodes, edges, 1, np.float16)
    bad = RNG.choice(edges, 1000, replace=False)
    index[bad] = RNG.choice(np.array([-1, nodes, 2**31, -(2**63), 2**63 - 1]), len(bad))
    out, _, skipped, guards_intact, untouched_counts, plan = launch_with_guards(
        state, src, index, with_counts=False, algorithm=algorithm, paired=True if algorithm != "auto" else None)
    assert plan.paired and plan.fold is not None and plan.table is None
    assert guards_intact and untouched_counts and skipped == len(bad)
    assert_within_bound(out, state, src, index, np.float16)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_counts_not_8_byte_aligned_take_the_two_atomic_path(dtype):
    # The pairs live in the counts: an int64 buffer 4 bytes off 8-byte alignment cannot hold float2 atomics.
    nodes, edges = 10**5, 10**6
    state, src, index = random_inputs(nodes, edges, 1, dtype)
    aligned = launch_with_guards(state, src, index)
    out, counts, skipped, guards_intact, _, plan = launch_with_guards(state, src, index, counts_offset=4)
    assert aligned[5].paired and not plan.paired and plan.fold is None
    assert guards_intact and skipped == 0
    assert np.array_equal(counts[:, 0], assert_within_bound(out, state, src, index, dtype))


@pytest.mark.parametrize("edges, algorithm, paired, chunks", [(PAIRED_MAX_EDGES, "auto", None, 1),
                                                              (PAIRED_MAX_EDGES + 1, "auto", None, 2),
                                                              (2 * PAIRED_MAX_EDGES + 4097, "global", None, 3),
                                                              (PAIRED_MAX_EDGES + 4097, "global", False, 1),
                                                              (PAIRED_MAX_EDGES + 4097, "shared", None, 1)])
def test_counts_stay_exact_at_and_beyond_2_to_the_24_edges_into_one_node(edges, algorithm, paired, chunks):
    # A float32 count stops at 2^24 (2^24 + 1 rounds back): pairs in the counts up to 2^24 edges, beyond that
    # pairs in the workspace folded into the int64 counts after every chunk of 2^24 edges, or two atomics
    # (integer counts). All edges go to one node of a small state; values are 0 or 1/8 (a quarter of them 1/8)
    # and the state whole numbers, so every partial sum (below 2^21 by far) is exact in float32 and the sum
    # must come out exact.
    nodes = 10**5 if algorithm != "shared" else 1000  # auto: paired global atomics
    hub = int(RNG.integers(0, nodes))
    state = np.round(100 * RNG.standard_normal((nodes, 1))).astype(np.float32)
    src = ((RNG.random((edges, 1)) < 0.25) / np.float32(8)).astype(np.float32)
    index = np.full(edges, hub, np.int64)
    out, counts, skipped, guards_intact, _, plan = launch_with_guards(state, src, index, algorithm=algorithm,
                                                                      paired=paired)
    assert plan.paired == (paired is None and algorithm != "shared") and plan.pair_chunks == chunks
    assert guards_intact and skipped == 0
    assert plan.algorithm == ("global" if algorithm == "auto" else algorithm)
    assert counts[hub, 0] == edges and np.count_nonzero(counts) == 1
    assert out[hub, 0] == state[hub, 0] + src[:, 0].astype(np.float64).sum()
    assert np.array_equal(np.delete(out, hub), np.delete(state, hub))


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_chunked_pairs_match_float64_with_out_of_range_targets(dtype):
    # 2^24 + 10^6 edges in 2 chunks into 10^5 nodes: values summed in float32 over both chunks, one rounding
    # into the state (float16 too), counts exact, out-of-range rows skipped and counted once each.
    nodes, edges = 10**5, PAIRED_MAX_EDGES + 10**6
    state, src, index = random_inputs(nodes, edges, 1, dtype)
    bad = RNG.choice(edges, 3000, replace=False)
    index[bad] = RNG.choice(np.array([-1, nodes, 2**63 - 1]), len(bad))
    out, counts, skipped, guards_intact, _, plan = launch_with_guards(state, src, index)
    assert plan.paired and plan.pair_chunks == 2 and guards_intact and skipped == len(bad)
    assert np.array_equal(counts[:, 0], assert_within_bound(out, state, src, index, dtype))


@pytest.mark.parametrize("nodes, edges, features, with_counts", [(10**6, 10**4, 1, True), (10**6, 10**4, 1, False),
                                                                 (5000, 10**6, 3, True), (100, 10**6, 64, True)])
def test_counts_and_skipped_zeroed_by_a_memset_before_the_kernel(nodes, edges, features, with_counts):
    # The poisoned counts and skipped word are zeroed before the kernel adds; guards intact; out-of-range rows
    # counted once.
    state, src, index = random_inputs(nodes, edges, features, np.float32)
    index[RNG.choice(edges, 999, replace=False)] = nodes + 3
    out, counts, skipped, guards_intact, untouched, plan = launch_with_guards(
        state, src, index, with_counts=with_counts, algorithm="global")
    assert not plan.paired and guards_intact and skipped == 999
    expected_counts = assert_within_bound(out, state, src, index, np.float32)
    if with_counts:
        assert np.array_equal(counts[:, 0], expected_counts)
    else:
        assert untouched


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("nodes, edges, features, algorithm, paired", [
    (10**6, 10**4, 1, "global", False), (1000, 10**5, 3, "shared", None), (10**5, 10**5, 1, "global", True)])
def test_prepared_launch_passes_kernel_params_to_each_kernel(dtype, nodes, edges, features, algorithm, paired):
    # Every launch passes kernelParams (8-byte slots) over the scatter kernels, the float16 table's apply and
    # the pairs' fold; results within the bound.
    from plugin.kernels import launch

    launch.backend.forget()  # prepared afresh
    state, src, index = random_inputs(nodes, edges, features, dtype)
    index[RNG.choice(edges, 99, replace=False)] = -1
    out, counts, skipped, guards_intact, _, plan = launch_with_guards(
        state, src, index, algorithm=algorithm, paired=paired)
    (prepared,) = launch.backend.threads.launches.values()
    kernels = [(call.__name__, arguments[-2] != 0 and arguments[-1] == 0) for call, arguments, _ in prepared._calls
               if call.__name__ != "cuMemsetD32Async"]
    assert kernels and all(name == "cuLaunchKernel" and kernel_params for name, kernel_params in kernels)
    assert guards_intact and skipped == 99 and plan.paired == bool(paired)
    assert np.array_equal(counts[:, 0], assert_within_bound(out, state, src, index, dtype))


def test_every_kernel_takes_as_many_parameters_as_its_launch_passes():
    # cuFuncGetParamInfo (driver >= 12.4) for every kernel: kernelParams must point at exactly as many arguments
    # as the kernel takes (each in an 8-byte slot: pointers and i64 fill it, an int reads its low half).
    from cuda.bindings import driver

    from plugin.kernels.launch import prepare_kernels

    if not hasattr(driver, "cuFuncGetParamInfo"):
        pytest.skip("these bindings have no cuFuncGetParamInfo")
    counts = {"scatter_global": 14, "scatter_hashed": 14, "scatter_shared": 9, "apply_table": 7, "fold_pairs": 3,
              "fold_pair_chunk": 5, "sort_count": 6, "sort_tile_sums": 4, "sort_scan_tiles": 4, "sort_cursors": 5,
              "sort_place": 8, "sort_reduce": 10, "sort_fixup": 9, "chunk_reduce": 9, "scatter_direct": 7,
              "scatter_owned": 9, "scatter_grid_table": 9, "scatter_split_table": 7, "apply_split_table": 4,
              "scatter_block_table": 7}
    for dtype in (np.float32, np.float16):
        for name, function in prepare_kernels(dtype).functions.items():
            count = next(n for prefix, n in counts.items() if name.startswith(prefix))
            sizes = []
            for index in range(count + 1):
                result = driver.cuFuncGetParamInfo(function, index)
                if result[0]:
                    break
                sizes.append(int(result[2]))
            assert len(sizes) == count and all(size in (4, 8) for size in sizes), (name, sizes)


def test_scatter_kernels_static_shared_memory_matches_the_plan():
    from cuda.bindings import driver

    from common.cuda_check import check
    from plugin.kernels.launch import prepare_kernels
    from plugin.kernels.plan import QUEUE_BYTES_PER_BLOCK

    for dtype in (np.float32, np.float16):
        for name, function in prepare_kernels(dtype).functions.items():
            if name.startswith(("scatter_global", "scatter_hashed", "scatter_shared")):  # the queued kernels
                static = check(driver.cuFuncGetAttribute(
                    driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function))
                assert static == QUEUE_BYTES_PER_BLOCK, name


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("nodes, edges, features", [(1000, 10**6, 3), (10**6, 10**6, 64)])
def test_same_inputs_twice_agree_within_rounding(nodes, edges, features, dtype):
    state, src, index = random_inputs(nodes, edges, features, dtype)
    first, _ = scatter_add_numpy(state, src, index)
    second, _ = scatter_add_numpy(state, src, index)
    expected, counts, abs_sum, _ = reference(state, src, index)
    degree = counts[:, None].astype(np.float64)
    ulp = U32 if dtype == np.float32 else U16
    allowed = 2 * (ulp * np.abs(expected) + degree * U32 * (np.abs(expected) + abs_sum)) + 2.0**-24
    assert np.all(np.abs(first.astype(np.float64) - second.astype(np.float64)) <= allowed)


def test_kernels_are_loaded_per_context():
    from cuda.bindings import driver

    from common.cuda_check import check
    from plugin.kernels.launch import current_context, prepare_kernels

    first = prepare_kernels(np.float32)
    device = check(driver.cuCtxGetDevice())
    context = check(driver.cuCtxCreate(None, 0, device))
    try:
        assert current_context() == int(check(driver.cuCtxGetId(context)))
        second = prepare_kernels(np.float32)
        assert second.module is not first.module
        state, src, index = random_inputs(100, 10_000, 2, np.float32)
        out, counts = scatter_add_numpy(state, src, index)
        assert np.array_equal(counts[:, 0], assert_within_bound(out, state, src, index, np.float32))
    finally:
        check(driver.cuCtxDestroy(context))
