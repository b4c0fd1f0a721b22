"""The kernel family's AOT chains (plugin/scatter_add_op.py) on a GPU, launched as TensorRT launches AOT plugins
(inplace.launch.PreparedChain: the scratch fills as memsets, then each step's aot_* kernel with its grid, shared
memory and (input pointers, int32 extra arguments, output pointers)), against float64 (skipped without a GPU).

Fresh random inputs every run, a non-zero state, hot nodes and out-of-range indices (tests/plugin/
random_indices), scratch tensors holding garbage before their fills, guard rows around the
state and the counts; a second run of the same prepared chain starts from clean tables. Error bounds:
tests/kernels/test_kernels_gpu.py (float16: one rounding per node). Also each kernel's PTX parameters, as
NVRTC emits them for the engine, against its step's order.
"""

import re

import numpy as np
import pytest

from inplace.launch import PreparedChain, scratch_bytes
from plugin.device_array import DeviceArray
from plugin.scatter_add_op import (
    SCATTER_ADD,
    SCATTER_ADD_COUNTS,
    PAIR_MAX_CHUNKS,
    block_chain,
    pair_chunks_chain,
    pairs_chain,
    sorted_chain,
    split_chain,
    state_chain,
    table_chain,
)
from tests.kernels.test_kernels_gpu import assert_within_bound, reference

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng()


def random_indices(num_nodes, num_edges):
    """Uniform targets, 10% of edges into node 0 (a hot node), about 1% out of range (negative, N and up,
    and values beyond int32 that must not wrap into a node)."""
    index = RNG.integers(0, num_nodes, num_edges, dtype=np.int64)
    index[RNG.random(num_edges) < 0.1] = 0
    bad = RNG.random(num_edges) < 0.01
    choices = np.array([-1, -num_nodes, num_nodes, num_nodes + 5, 2**31 + 3, 2**32, -(2**40)], dtype=np.int64)
    index[bad] = RNG.choice(choices, int(bad.sum()))
    return index
GUARD_ROWS = 64
SIZES = [  # (N, E, F): shared memory, direct / global at widths 4, 2, 1, a hashed table, E = 0, hot rows,
    # chunk_reduce (100 / 1000 nodes, F = 64), and rows of 33 features (chunked falls back to global atomics)
    (1, 0, 1), (1000, 0, 3), (7, 1000, 3), (1000, 10**5, 1), (3000, 10**5, 1), (100, 10**5, 2),
    (1000, 10**4, 64), (10**5, 10**6, 3), (10**6, 2 * 10**5, 64), (10**6, 10**6, 1), (10**6, 10**4, 2),
    (100, 10**5, 64), (1000, 10**6, 64), (300, 3 * 10**5, 33),
]


def run_chain(chain, op, num_nodes, num_edges, num_features, dtype, *, index=None, runs=1, high=None, tactics=None):
    """Runs `chain` `runs` times on guarded buffers (scratch garbage before the first run), each run with the
    same src and index (state and src normal, or uniform in [0, high)); returns (state before the last run,
    out, counts or None, src, index)."""
    with_counts = "counts" in op.output_names()
    if high is None:
        state = RNG.standard_normal((num_nodes, num_features)).astype(dtype)
        src = RNG.standard_normal((num_edges, num_features)).astype(dtype)
    else:
        state = RNG.uniform(0, high, (num_nodes, num_features)).astype(dtype)
        src = RNG.uniform(0, high, (num_edges, num_features)).astype(dtype)
    index = random_indices(max(num_nodes, 1), num_edges) if index is None else index
    sentinel = np.full((GUARD_ROWS, num_features), 12.5, dtype)
    sizes = {"N": num_nodes, "E": num_edges, "F": num_features}
    buffers = {"state": DeviceArray.from_array(np.concatenate([sentinel, state, sentinel])),
               "src": DeviceArray.from_array(src), "index": DeviceArray.from_array(index)}
    try:
        pointers = {name: buffer.ptr for name, buffer in buffers.items()}
        pointers["state"] += GUARD_ROWS * num_features * state.itemsize
        for name, nbytes in scratch_bytes(chain, sizes).items():
            guard = GUARD_ROWS * 8 if name == "counts" else 0
            buffers[name] = DeviceArray((nbytes + 2 * guard,), np.uint8)
            buffers[name].fill_bytes(0x5A)  # garbage the fills must replace (and counts' guards)
            pointers[name] = buffers[name].ptr + guard
        prepared = PreparedChain(op, chain, {"state": np.dtype(dtype).name, "src": np.dtype(dtype).name}, pointers,
                                 sizes, 0, tactics)
        before = state
        for run in range(runs):
            if run:
                before = buffers["state"].download()[GUARD_ROWS:-GUARD_ROWS]
            prepared()
        out = buffers["state"].download()
        counts = buffers["counts"].download().view(np.int64) if with_counts else None
    finally:
        for buffer in buffers.values():
            buffer.free()
    assert np.array_equal(out[:GUARD_ROWS], sentinel) and np.array_equal(out[-GUARD_ROWS:], sentinel), "guard written"
    if counts is not None:
        guard = np.frombuffer(b"\x5a" * 8, np.int64)[0]
        assert np.all(counts[:GUARD_ROWS] == guard) and np.all(counts[-GUARD_ROWS:] == guard), "counts guard written"
        counts = counts[GUARD_ROWS:-GUARD_ROWS]
    return before, out[GUARD_ROWS:-GUARD_ROWS], counts, src, index


def check(before, out, counts, src, index, dtype):
    assert_within_bound(out, before, src, index, dtype)
    if len(index) == 0:
        assert np.array_equal(out.view(np.uint8), before.view(np.uint8))
    if counts is not None:
        assert np.array_equal(counts, reference(before, src, index)[1])


@pytest.mark.parametrize("with_counts", [False, True], ids=["no_counts", "counts"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("num_nodes,num_edges,num_features", SIZES)
def test_aot_chains_match_float64(num_nodes, num_edges, num_features, dtype, with_counts):
    chain = state_chain(with_counts) if dtype == np.float32 else table_chain(with_counts)
    op = SCATTER_ADD_COUNTS if with_counts else SCATTER_ADD
    _run_and_check(chain, op, num_nodes, num_edges, num_features, dtype)


def _run_and_check(chain, op, num_nodes, num_edges, num_features, dtype, **options):
    before, out, counts, src, index = run_chain(chain, op, num_nodes, num_edges, num_features, dtype, **options)
    check(before, out, counts, src, index, dtype)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("num_nodes,num_edges", [(1, 0), (7, 1000), (1000, 10**4), (1000, 10**6), (10**4, 10**6),
                                                 (10**6, 10**6)])
def test_aot_pairs_match_float64_with_exact_counts(num_nodes, num_edges, dtype):
    _run_and_check(pairs_chain(), SCATTER_ADD_COUNTS, num_nodes, num_edges, 1, dtype)


@pytest.mark.parametrize("num_nodes,num_edges", [(7, 1000), (1000, 10**5), (10**4, 10**6)])
def test_aot_float16_pairs_without_counts_match_float64(num_nodes, num_edges):
    """The op without counts on the pairs chain: its counts a scratch tensor of the chain alone."""
    _run_and_check(pairs_chain(), SCATTER_ADD, num_nodes, num_edges, 1, np.float16)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("num_nodes,num_edges,chunks", [(10**4, 2**24 + 5000, 2), (1000, 10**5, 3), (5, 0, 2),
                                                        (10**4, 2**20, PAIR_MAX_CHUNKS)])
def test_aot_pair_chunks_match_float64_with_exact_counts(num_nodes, num_edges, chunks, dtype):
    """Beyond 2^24 edges a fold after each chunk; a chunk beyond the run's edges does nothing."""
    _run_and_check(pair_chunks_chain(chunks), SCATTER_ADD_COUNTS, num_nodes, num_edges, 1, dtype)


TACTIC_SIZES = [(7, 1000, 3), (1000, 10**5, 1), (1000, 10**4, 64), (10**5, 10**6, 3), (100, 10**5, 64),
                (1000, 10**6, 64), (300, 3 * 10**5, 33), (3000, 10**5, 256), (1, 0, 1)]


@pytest.mark.parametrize("tactic", [1, 2], ids=["atomics", "chunked"])
@pytest.mark.parametrize("with_counts", [False, True], ids=["no_counts", "counts"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("num_nodes,num_edges,num_features", TACTIC_SIZES)
def test_every_scatter_tactic_matches_float64(num_nodes, num_edges, num_features, dtype, with_counts, tactic):
    """Each tactic TensorRT may pick at build runs correctly at any size (chunked falls back to global atomics
    where chunk_reduce cannot run: many nodes, a hashed table)."""
    chain = state_chain(with_counts) if dtype == np.float32 else table_chain(with_counts)
    op = SCATTER_ADD_COUNTS if with_counts else SCATTER_ADD
    _run_and_check(chain, op, num_nodes, num_edges, num_features, dtype, tactics={chain.steps[0].plugin: tactic})


@pytest.mark.parametrize("wide", [False, True], ids=["reduce", "reduce_wide"])
@pytest.mark.parametrize("with_counts", [False, True], ids=["no_counts", "counts"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("num_nodes,num_edges,num_features,passes", [
    (1000, 300_000, 64, 1),   # tallies in shared memory
    (10**5, 300_000, 64, 4),  # tallies in global memory, four placing passes
    (10**6, 10**6, 64, 1),    # 489 scan tiles
    (7, 100_000, 5, 1),       # few nodes, each straddling many warp ranges
    (1000, 50_000, 200, 2),   # two feature slices per row
    (3, 1, 33, 1),            # one edge, one warp range, no fixup
    (1, 0, 64, 1),
])
def test_aot_sorted_chain_matches_float64(num_nodes, num_edges, num_features, passes, dtype, with_counts, wide):
    """Either reduce kernel at any F (aot_sort_reduce at widths 1 and 2 only: more feature slices)."""
    _run_and_check(sorted_chain(with_counts, passes, wide), SCATTER_ADD_COUNTS if with_counts else SCATTER_ADD, num_nodes,
                   num_edges, num_features, dtype)


@pytest.mark.parametrize("num_nodes,num_edges", [(1, 0), (7, 1000), (1000, 10**4), (10**6, 10**4), (10**8, 32768)])
def test_aot_split_table_matches_float64(num_nodes, num_edges):
    _run_and_check(split_chain(), SCATTER_ADD, num_nodes, num_edges, 1, np.float16)


@pytest.mark.parametrize("num_nodes,num_edges", [(1, 0), (5, 1), (7, 1000), (1000, 1024), (10**8, 1024)])
def test_aot_block_table_matches_float64(num_nodes, num_edges):
    _run_and_check(block_chain(), SCATTER_ADD, num_nodes, num_edges, 1, np.float16)


@pytest.mark.parametrize("chain", ["state", "table", "split", "block", "pairs", "sorted"])
def test_a_second_run_starts_from_clean_scratch(chain):
    made = {"state": state_chain(False), "table": table_chain(True), "split": split_chain(),
            "block": block_chain(), "pairs": pairs_chain(), "sorted": sorted_chain(True, 2)}[chain]
    dtype = np.float32 if chain == "state" else np.float16
    op = SCATTER_ADD_COUNTS if chain in ("table", "pairs", "sorted") else SCATTER_ADD
    features = 40 if chain == "sorted" else 1
    before, out, counts, src, index = run_chain(made, op, 1000, 1000, features, dtype, runs=2)
    check(before, out, counts, src, index, dtype)


@pytest.mark.parametrize("chain", ["table", "split", "block"])
def test_float16_hot_node_sums_in_float32(chain):
    """Values of one sign into one node: half additions would stop growing at 2048-4096."""
    made = {"table": table_chain(False), "split": split_chain(), "block": block_chain()}[chain]
    edges = 1024 if chain == "block" else 2**15
    index = np.full(edges, RNG.integers(0, 1000), np.int64)
    _run_and_check(made, SCATTER_ADD, 1000, edges, 1, np.float16, index=index, high=0.125)


_ENTRY = re.compile(rb"\.entry (\w+)\(([^)]*)\)")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_every_kernels_ptx_parameters_are_pointers_then_int32_then_pointers(dtype):
    """The PTX an engine would hold (compile_family_ptx for this GPU's target): .u64 for each step input, .u32 for
    each extra argument, .u64 for each output, in that order."""
    from plugin.kernels.aot import aot_target_arch, compile_family_ptx

    chains = [state_chain(False), state_chain(True), pairs_chain(), pair_chunks_chain(2), sorted_chain(True, 2),
                                                                         sorted_chain(True, 1, wide=True)] if (
        dtype == "float32") else [table_chain(False), table_chain(True), split_chain(), block_chain(), pairs_chain(),
                                  pair_chunks_chain(2), sorted_chain(False, 1)]
    for chain in chains:
        for step in chain.steps:
            dtypes = {"state": dtype, "src": dtype}
            for kernel in (step.kernel(dtypes), *step.tactics(dtypes)):
                ptx = compile_family_ptx(kernel.name, dtype, aot_target_arch())
                entries = dict(_ENTRY.findall(ptx))
                assert list(entries) == [kernel.name.encode()]  # one plugin's PTX holds its kernel alone
                kinds = re.findall(rb"\.param \.(\w+)", entries[kernel.name.encode()])
                expected = ([b"u64"] * len(step.inputs) + [b"u32"] * len(kernel.launch.extra_args)
                            + [b"u64"] * len(step.outputs))
                assert kinds == expected, (kernel.name, kinds)
