"""The launches without counts (plan.py UNCOUNTED_ALGORITHMS) on a GPU against float64 (skipped
without a GPU): what a small in-place update of a large state runs.

Fresh random inputs every run; launched on a state between guard zones, with skipped, counts and the
workspace poisoned (tests/kernels/test_kernels_gpu.py launch_with_guards). Error bounds as there: float32 any order of
float32 additions, float16 each touched node's sum formed in float32 and rounded to half once. Besides random
graphs: hubs (all edges into one node, values of one sign, where half additions would stall), out-of-range
targets, E = 1, and owned tables forced far too small, so that blocks run many passes over sub-ranges of their
nodes (each node must still be added exactly once and rounded once).
"""


import numpy as np
import pytest

from plugin.kernels import launch, plan
from plugin.kernels.plan import OwnedTable, SlotTable
from tests.kernels.test_kernels_gpu import RNG, assert_within_bound, launch_with_guards, random_inputs

pytestmark = pytest.mark.gpu

BAD_IDS = np.array([-1, -2, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63)], dtype=np.int64)


def with_bad_ids(index, num_nodes, count):
    bad = RNG.choice(len(index), count, replace=False)
    index[bad] = RNG.choice(np.append(BAD_IDS, [num_nodes, num_nodes + 1]), count)
    return count


def skip_unless_available(algorithm):
    """Skips a path these kernels cannot run: grid_table needs cooperative groups."""
    if algorithm == "grid_table" and not launch.prepare_kernels(np.float16).cooperative:
        pytest.skip("the grid_table path needs kernels compiled with cooperative groups (no CCCL headers here)")


def run(state, src, index, algorithm):
    skip_unless_available(algorithm)
    out, _, skipped, guards_intact, untouched, launched = launch_with_guards(
        state, src, index, with_counts=False, algorithm=algorithm)
    assert guards_intact, "bytes around the state changed"
    assert untouched, "the counts buffer was written without counts"
    return out, skipped, launched


def plans_made_anew():
    """A fixture's body around a patched plan.py: the launcher's cached plans and prepared launches are dropped
    before (so the patch takes effect) and after (so no later test gets them)."""
    launch.backend.forget()
    yield
    launch.backend.forget()


@pytest.fixture
def tiny_tables(monkeypatch):
    """Owned tables of 64 slots (48 nodes per pass): blocks overflow and retry on sub-ranges."""
    monkeypatch.setattr(plan, "owned_table", lambda entries, features, device: OwnedTable(64, 48))
    yield from plans_made_anew()


@pytest.mark.parametrize("nodes, edges, features", [
    (10**6, 10**4, 1),     # the per-step case: 40 blocks
    (10**7, 10**4, 1),     # a 40 MB state, 1e4 edges
    (10**4, 10**6, 1),     # 100 edges per node: warps sum equal targets before their atomic
    (10**5, 300_000, 2),   # vec 2
    (10**5, 300_000, 64),  # vec 4, two edges per warp
    (1000, 30_000, 3),     # vec 1, three elements per edge
    (5, 1, 1),             # one edge
])
def test_direct_float32_matches_float64(nodes, edges, features):
    state, src, index = random_inputs(nodes, edges, features, np.float32)
    bad = with_bad_ids(index, nodes, min(100, edges // 10))
    out, skipped, launched = run(state, src, index, "direct")
    assert launched.algorithm == "direct" and skipped == bad
    assert_within_bound(out, state, src, index, np.float32)


def test_direct_float32_with_all_edges_into_one_node():
    nodes, edges = 1000, 10**6
    state, _, _ = random_inputs(nodes, 0, 1, np.float32)
    src = RNG.uniform(0, 1, (edges, 1)).astype(np.float32)
    index = np.full(edges, RNG.integers(0, nodes), np.int64)
    out, _, launched = run(state, src, index, "direct")
    assert launched.algorithm == "direct"
    assert_within_bound(out, state, src, index, np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("algorithm, nodes, edges, features", [
    ("owned", 10**6, 10**4, 1),         # the per-step case
    ("owned", 10**7, 10**4, 1),
    ("owned", 1000, 30_000, 1),         # 30 edges per node
    ("owned", 10**5, 20_000, 3),        # several features: each block loops over them
    ("owned", 7, 5000, 4),
    ("owned", 5, 1, 1),
])
def test_owned_path_matches_float64(algorithm, nodes, edges, features, dtype):
    state, src, index = random_inputs(nodes, edges, features, dtype)
    bad = with_bad_ids(index, nodes, min(1000, edges // 10))
    out, skipped, launched = run(state, src, index, algorithm)
    assert launched.algorithm == algorithm and skipped == bad
    assert_within_bound(out, state, src, index, dtype)


@pytest.mark.parametrize("algorithm, nodes, edges", [
    ("grid_table", 10**6, 10**4),      # the per-step case: hashed slots
    ("grid_table", 10**8, 2**15),      # the most edges "auto" gives it
    ("grid_table", 1000, 30_000),      # 30 edges per node: one slot per node
    ("grid_table", 10**4, 10**4),
    ("grid_table", 7, 5000),
    ("grid_table", 5, 1),
    ("split_table", 10**6, 10**4),     # what "auto" gives it where grid_table cannot run (no cooperative groups)
    ("split_table", 10**7, 10**6),     # the large-batch case: 2^21 slots
    ("split_table", 10**8, 2**15 + 1),  # just beyond grid_table
    ("split_table", 10**6, 200_000),
    ("split_table", 1000, 30_000),     # forced where the table would have one slot per node: hashed anyway
    ("split_table", 7, 5000),
    ("split_table", 5, 1),
    ("block_table", 10**8, 1000),      # what "auto" gives a batch of up to 1024 edges: 4096 slots
    ("block_table", 10**6, 1024),      # the largest batch it takes
    ("block_table", 1000, 1000),       # one slot's node hit about once
    ("block_table", 7, 1000),          # ~140 edges per node
    ("block_table", 5, 1),
])
def test_slot_tables_match_float64(algorithm, nodes, edges):
    skip_unless_available(algorithm)
    state, src, index = random_inputs(nodes, edges, 1, np.float16)
    bad = with_bad_ids(index, nodes, min(1000, edges // 10))
    out, skipped, launched = run(state, src, index, algorithm)
    assert launched.algorithm == algorithm and skipped == bad
    assert_within_bound(out, state, src, index, np.float16)


# algorithm: (plan.py's slots per edge, E, what the plan's table must be with one slot per edge)
FULL_TABLES = {
    "block_table": ("BLOCK_TABLE_SLOTS_PER_EDGE", 1024, lambda planned: planned.block_log2 == 10),
    "split_table": ("SPLIT_TABLE_SLOTS_PER_EDGE", 4096,
                    lambda planned: planned.slots is not None and planned.slots.capacity == 4096),
    "grid_table": ("GRID_TABLE_SLOTS_PER_EDGE", 4096, lambda planned: planned.slots == SlotTable(4096, True)),
}


@pytest.fixture(params=list(FULL_TABLES))
def full_table(request, monkeypatch):
    """A slot-table path with one (hashed) slot per edge (4, 4 and 16 otherwise): E distinct targets fill every
    slot, so probes run long and wrap past the table's last slot."""
    monkeypatch.setattr(plan, FULL_TABLES[request.param][0], 1)
    for _ in plans_made_anew():
        yield request.param


def test_slot_tables_filled_to_their_last_slot_match_float64(full_table):
    skip_unless_available(full_table)
    _, edges, table_is_full = FULL_TABLES[full_table]
    nodes = 10**7
    state, src, _ = random_inputs(nodes, edges, 1, np.float16)
    index = RNG.choice(nodes, edges, replace=False).astype(np.int64)  # distinct: E nodes in E slots
    out, skipped, launched = run(state, src, index, full_table)
    assert table_is_full(launched) and skipped == 0
    assert_within_bound(out, state, src, index, np.float16)


@pytest.mark.parametrize("algorithm", ["block_table", "grid_table", "split_table"])
def test_slot_tables_leave_a_node_whose_sum_is_plus_zero_bit_for_bit(algorithm):
    # -0.0 + (+0.0) would be +0.0: a node whose edges sum to +0.0 in float32 must keep its -0.0
    skip_unless_available(algorithm)
    nodes = 1000
    state, _, _ = random_inputs(nodes, 1, 1, np.float16)
    state[:10] = np.float16(-0.0)
    values = RNG.standard_normal(10).astype(np.float16)
    rest = RNG.integers(10, nodes, 1000, dtype=np.int64)  # 1020 edges: within block_table's 1024
    index = np.concatenate([np.arange(10), np.arange(10), rest]).astype(np.int64)
    src = np.concatenate([values, -values, RNG.standard_normal(1000).astype(np.float16)]).reshape(-1, 1)
    order = RNG.permutation(len(index))
    index, src = index[order], src[order]
    out, _, launched = run(state, src, index, algorithm)
    assert launched.algorithm == algorithm
    assert np.array_equal(out[:10].view(np.uint16), state[:10].view(np.uint16))  # still -0.0, bit for bit
    assert_within_bound(out, state, src, index, np.float16)


@pytest.mark.parametrize("algorithm, edges", [("block_table", 1024), ("owned", 30_000), ("grid_table", 30_000),
                                              ("split_table", 10**6)])
def test_float16_with_all_edges_into_one_node_is_summed_in_float32(algorithm, edges):
    # values in [0, 1): a half accumulator would stop growing at 2048-4096; a hub among random edges too
    nodes = 10**6
    hub = int(RNG.integers(0, nodes))
    state = RNG.uniform(0, 1, (nodes, 1)).astype(np.float16)
    src = (RNG.uniform(0, 1, (edges, 1)) / 8).astype(np.float16)
    index = np.full(edges, hub, np.int64)
    out, _, _ = run(state, src, index, algorithm)
    assert_within_bound(out, state, src, index, np.float16)
    index = np.concatenate([np.full(edges // 2, hub), RNG.integers(0, nodes, edges - edges // 2)]).astype(np.int64)
    RNG.shuffle(index)
    out, _, _ = run(state, src, index, algorithm)
    assert_within_bound(out, state, src, index, np.float16)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("algorithm, nodes, edges, features", [
    ("owned", 10**6, 10**4, 1),       # ~250 nodes per block over 48-node passes
    ("owned", 10**6, 5000, 3),
])
def test_tables_that_overflow_retry_on_sub_ranges_and_add_each_node_once(tiny_tables, algorithm, nodes, edges,
                                                                          features, dtype):
    state, src, index = random_inputs(nodes, edges, features, dtype)
    bad = with_bad_ids(index, nodes, 50)
    out, skipped, launched = run(state, src, index, algorithm)
    assert launched.owned == OwnedTable(64, 48) and skipped == bad
    assert_within_bound(out, state, src, index, dtype)


@pytest.mark.parametrize("dtype, nodes, edges, expected", [
    (np.float32, 10**6, 10**4, "direct"),
    (np.float32, 10**7, 10**6, "direct"),
    (np.float32, 1000, 10**6, "shared"),
    (np.float16, 10**6, 10**4, "grid_table"),  # split_table without cooperative groups
    (np.float16, 10**4, 10**4, "grid_table"),  # the one-slot table path without them
    (np.float16, 10**7, 10**6, "split_table"),
    (np.float16, 10**8, 10**5, "split_table"),
    (np.float16, 10**8, 1000, "block_table"),  # few edges: one block, no workspace
    (np.float16, 1000, 1000, "block_table"),
    (np.float16, 10**8, 1025, "grid_table"),   # split_table without cooperative groups
])
def test_auto_without_counts_takes_these_paths_and_matches_float64(dtype, nodes, edges, expected):
    if expected == "grid_table" and not launch.prepare_kernels(dtype).cooperative:
        expected = "split_table" if nodes > 2 * edges else "global"
    state, src, index = random_inputs(nodes, edges, 1, dtype)
    out, skipped, launched = run(state, src, index, "auto")
    assert launched.algorithm == expected and skipped == 0
    assert_within_bound(out, state, src, index, dtype)
