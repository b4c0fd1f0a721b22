"""The AOT kernels on a GPU, launched the way TensorRT launches an AOT plugin, against float64 (skipped without
a GPU).

The exact PTX the AOT plugins put into an engine (plugin.kernels.aot.compile_aot_ptx) is loaded with
cuModuleLoadData; each kernel is launched with TensorRT's argument order (input pointers, extra int32
arguments, output pointers; an aliased output gets its input's pointer) and with the grid and extra arguments
of aot_launch_params / aot_extra_args evaluated for the concrete N, E, F. The fills the network's layers make
(counts 0, keys -1, values 0) are memsets here. Fresh random inputs every run, a non-zero state, out-of-range
indices (negative, N, and beyond int32), E = 0, hot nodes; guard rows around the state and the counts must
stay untouched. Error bounds: tests/kernels/test_kernels_gpu.py.
"""

import numpy as np
import pytest

from plugin.device_array import DeviceArray
from plugin.kernels.aot import (
    AOT_KERNELS,
    BLOCK_MAX_EDGES,
    compile_aot_ptx,
    launch_aot_kernel,
    load_aot_functions,
    run_aot_scatter_add,
    table_capacity,
)
from tests.kernels.test_kernels_gpu import assert_within_bound, reference

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng()
GUARD_ROWS = 64
SIZES = [  # (N, E, F)
    (1, 0, 1),
    (1000, 0, 3),
    (7, 1000, 3),
    (1000, 10**4, 64),
    (10**5, 10**6, 3),
    (10**6, 2 * 10**5, 64),
    (10**6, 10**7, 1),
    (1000, 10**6, 1),   # float32 sums in shared memory first (privatised): N (F + 1) <= 10240, E >= 256 N
    (100, 10**5, 3),    # privatised, three features
    (10240, 3 * 10**6, 1),  # privatised without counts only (with counts N (F + 1) = 20480 words)
]



@pytest.fixture(scope="module")
def aot_functions():
    module, functions = load_aot_functions(compile_aot_ptx())
    yield functions
    from cuda.bindings import driver

    driver.cuModuleUnload(module)


def random_indices(num_nodes, num_edges):
    """Uniform targets, 10% of edges into node 0 (a hot node), about 1% out of range (negative, N and up,
    and values beyond int32 that must not wrap into a node)."""
    index = RNG.integers(0, num_nodes, num_edges, dtype=np.int64)
    index[RNG.random(num_edges) < 0.1] = 0
    bad = RNG.random(num_edges) < 0.01
    choices = np.array([-1, -num_nodes, num_nodes, num_nodes + 5, 2**31 + 3, 2**32, -(2**40)], dtype=np.int64)
    index[bad] = RNG.choice(choices, int(bad.sum()))
    return index


@pytest.mark.parametrize("with_counts", [False, True], ids=["no_counts", "counts"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("num_nodes,num_edges,num_features", SIZES)
def test_aot_kernels_match_float64(aot_functions, num_nodes, num_edges, num_features, dtype, with_counts):
    run_and_check(aot_functions, num_nodes, num_edges, num_features, dtype, with_counts)


def test_aot_float16_with_all_edges_into_one_node_sums_in_float32(aot_functions):
    # values of one sign: half additions would stop growing at 2048-4096
    index = np.full(2**15, RNG.integers(0, 1000), np.int64)
    run_and_check(aot_functions, 1000, len(index), 1, np.float16, False, index=index, high=0.125)


def test_aot_float32_privatised_with_all_edges_into_one_node(aot_functions):
    index = np.full(10**6, RNG.integers(0, 1000), np.int64)
    run_and_check(aot_functions, 1000, len(index), 1, np.float32, True, index=index, high=1.0)


@pytest.mark.parametrize("num_edges", [3, 4, 9, 5000])
def test_aot_float16_table_probed_slot_by_slot(aot_functions, num_edges):
    """Keys 4 bytes past a 32-byte boundary, and tables of fewer than 8 slots (E = 3), are probed one slot at a
    time instead of by buckets of 8; hot nodes and out-of-range ids as in every test."""
    run_and_check(aot_functions, 100, num_edges, 2, np.float16, False, keys_offset=4)
    run_and_check(aot_functions, 100, num_edges, 2, np.float16, True, keys_offset=4)


def test_aot_float16_table_of_one_bucket(aot_functions):
    """E = 4: a table of 9 slots holds one bucket of 8 for its at most 4 distinct keys."""
    index = np.array([3, 99, 3, 57], np.int64)
    run_and_check(aot_functions, 100, 4, 1, np.float16, True, index=index)


@pytest.mark.parametrize("num_nodes,num_edges", [(1, 0), (5, 1), (7, 1000), (1000, 1024), (10**6, 1000),
                                                 (10**8, 1024)])
def test_aot_float16_one_block_matches_float64(aot_functions, num_nodes, num_edges):
    """scatter_block_f16, what a network whose profile allows at most BLOCK_MAX_EDGES edges holds: no table, no
    fills; hot nodes and out-of-range ids as in every test."""
    run_and_check(aot_functions, num_nodes, num_edges, 1, np.float16, False, max_edges=BLOCK_MAX_EDGES)


def test_aot_float16_one_block_sums_a_hot_node_in_float32_and_keeps_minus_zero(aot_functions):
    # 1024 edges of one sign into one node (half additions would stall); a -0.0 node whose edges sum to +0.0
    index = np.full(BLOCK_MAX_EDGES, 3, np.int64)
    run_and_check(aot_functions, 10, len(index), 1, np.float16, False, index=index, high=4.0,
                  max_edges=BLOCK_MAX_EDGES)
    values = RNG.standard_normal(8).astype(np.float16)
    state = np.full((16, 1), np.float16(-0.0))
    out = run_and_check(aot_functions, 16, 16, 1, np.float16, False, index=np.repeat(np.arange(8), 2),
                        src=np.stack([values, -values], 1).reshape(16, 1), state=state, max_edges=BLOCK_MAX_EDGES)
    assert np.array_equal(out[:8].view(np.uint16), state[:8].view(np.uint16))  # -0.0 + (+0.0) would be +0.0


def test_aot_float16_one_block_beyond_its_slots_adds_every_edge(aot_functions):
    """More distinct nodes than its 4096 slots (a profile never allows it; the kernel is forced here): the nodes
    left over go straight into the state with a half atomic, one rounding each (one edge each here)."""
    index = RNG.choice(10**6, 6000, replace=False).astype(np.int64)
    run_and_check(aot_functions, 10**6, len(index), 1, np.float16, False, index=index, max_edges=len(index),
                  one_block=True)


def run_and_check(aot_functions, num_nodes, num_edges, num_features, dtype, with_counts, *, index=None, high=None,
                  keys_offset=0, max_edges=None, src=None, state=None, one_block=False):
    """Launches the AOT kernels on guarded buffers (garbage in the tables the fills must replace) and checks the
    state against float64, the guards, and the counts; returns the state. high: src and state uniform in
    [0, high) (else normal); src, state: given instead. keys_offset: bytes between the keys buffer's (aligned)
    start and the table. max_edges: the profile's bound on E (one block where it allows: no table); one_block:
    scatter_block_f16 whatever the bound."""
    if high is None:
        state = RNG.standard_normal((num_nodes, num_features)).astype(dtype) if state is None else state
        src = RNG.standard_normal((num_edges, num_features)).astype(dtype) if src is None else src
    else:
        state = RNG.uniform(0, high, (num_nodes, num_features)).astype(dtype)
        src = RNG.uniform(0, high, (num_edges, num_features)).astype(dtype)
    index = random_indices(num_nodes, num_edges) if index is None else index
    sentinel = np.full((GUARD_ROWS, num_features), 12.5, dtype)
    half = dtype == np.float16
    buffers = {}
    try:
        buffers["state"] = DeviceArray.from_array(np.concatenate([sentinel, state, sentinel]))
        buffers["src"] = DeviceArray.from_array(src)
        buffers["index"] = DeviceArray.from_array(index)
        pointers = {name: buffer.ptr for name, buffer in buffers.items()}
        pointers["state"] += GUARD_ROWS * num_features * state.itemsize
        if with_counts:
            buffers["counts"] = DeviceArray.from_array(np.full((num_nodes + 2 * GUARD_ROWS, 1), 77, np.int64))
            pointers["counts"] = buffers["counts"].ptr + GUARD_ROWS * 8
        if half:
            capacity = table_capacity(num_edges)
            buffers["keys"] = DeviceArray((capacity + keys_offset // 4,), np.int32)
            buffers["values"] = DeviceArray((capacity, num_features), np.float32)
            buffers["keys"].fill_bytes(0x5A)  # garbage the fills must replace
            buffers["values"].fill_bytes(0x5A)
            pointers.update(keys=buffers["keys"].ptr + keys_offset, values=buffers["values"].ptr)
        if one_block:
            launch_aot_kernel(aot_functions["scatter_block_f16"], AOT_KERNELS["scatter_block_f16"], pointers,
                              {"num_nodes": num_nodes, "num_edges": num_edges}, 0)
        else:
            run_aot_scatter_add(aot_functions, half=half, pointers=pointers, num_nodes=num_nodes,
                                num_edges=num_edges, num_features=num_features, stream=0, max_edges=max_edges)
        out = buffers["state"].download()
        counts = buffers["counts"].download() if with_counts else None
    finally:
        for buffer in buffers.values():
            buffer.free()

    assert np.array_equal(out[:GUARD_ROWS], sentinel) and np.array_equal(out[-GUARD_ROWS:], sentinel), "guard written"
    assert_within_bound(out[GUARD_ROWS:-GUARD_ROWS], state, src, index, dtype)  # E = 0 too (reference takes it)
    if num_edges == 0:  # nothing to add: the state bit for bit
        assert np.array_equal(out[GUARD_ROWS:-GUARD_ROWS].view(np.uint8), state.view(np.uint8))
    expected_counts = reference(state, src, index)[1]
    if with_counts:
        assert np.all(counts[:GUARD_ROWS] == 77) and np.all(counts[-GUARD_ROWS:] == 77), "counts guard written"
        assert np.array_equal(counts[GUARD_ROWS:-GUARD_ROWS, 0], expected_counts)
    return out[GUARD_ROWS:-GUARD_ROWS]
