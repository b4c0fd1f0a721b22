"""plugin/overwrite_op.py's OVERWRITE_ROWS on a GPU, launched as TensorRT launches its AOT plugin
(inplace.launch.PreparedChain: OverwritePtx's PTX for this GPU's target loaded with cuModuleLoadData, LAUNCH's
grid, (state, src, index, N, E, F, state) with the state's pointer for the aliased output), skipped without a GPU.

One chain prepared once per case and run several times on one state, each run with fresh src rows and indices
uploaded into the same buffers (as an engine's bindings stay put between executions); after each run the state
must be the previous one overwritten: where rows are unique, torch's index_copy_ of the in-range edges (CPU,
bit for bit); where an index repeats, the rule of tests/kernels/test_overwrite_gpu.py (each element from one of
its edges, rows no edge writes untouched). Out-of-range indices (negative, N, beyond int32) skipped; guard rows
around the state untouched; both dtypes, E = 0, N = 1, F = 1, rows of odd float16 width, N up to 1e7."""

import numpy as np
import pytest

from inplace.launch import PreparedChain, scratch_bytes
from plugin.device_array import DeviceArray
from plugin.overwrite_op import OVERWRITE_ROWS
from tests.kernels.test_overwrite_gpu import assert_overwritten, random_indices, random_rows

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng()
GUARD_ROWS = 16
RUNS = 3
DTYPES = (np.float32, np.float16)
SIZES = [  # (N, E, F)
    (1, 0, 1), (1000, 0, 64), (1, 1, 1), (1, 1000, 3), (7, 1000, 1), (1000, 10**4, 64), (10**4, 10**4, 1),
    (10**6, 10**5, 5), (10**5, 10**6, 64), (10**7, 10**5, 1),
]
UNIQUE_SIZES = [(1, 1, 1), (5, 3, 3), (1000, 1000, 64), (10**5, 10**4, 7), (10**6, 10**5, 1), (10**4, 10**4, 33)]


def unique_indices(num_nodes, num_edges):
    """Each in-range row at most once; about 1% of the edges out of range (negative, N and up, beyond int32)."""
    index = RNG.permutation(num_nodes)[:num_edges].astype(np.int64)
    bad = RNG.random(index.size) < 0.01
    index[bad] = RNG.choice(np.array([-1, -(2**40), num_nodes, num_nodes + 5, 2**32, 2**32 + 3], np.int64),
                            int(bad.sum()))
    return index


def index_copy(state, src, index):
    """torch's index_copy_ of the in-range edges into a copy of the state (CPU; rows unique), on the rows' bits as
    integers: the overwrite copies bits (random_rows' float16 holds NaN payloads, infinities and -0.0)."""
    torch = pytest.importorskip("torch")
    bits = np.int16 if state.dtype == np.float16 else np.int32
    keep = (index >= 0) & (index < len(state))
    out = torch.from_numpy(state.view(bits).copy())
    out.index_copy_(0, torch.from_numpy(index[keep]), torch.from_numpy(np.ascontiguousarray(src[keep]).view(bits)))
    return out.numpy().view(state.dtype)


def runs(num_nodes, num_edges, num_features, dtype, indices):
    """Yields (state before, src, index, state after) for RUNS runs of one PreparedChain on one state."""
    from cuda.bindings import driver

    from common.cuda_check import check

    chain = OVERWRITE_ROWS.chains[0]
    name = np.dtype(dtype).name
    sizes = {"N": num_nodes, "E": num_edges, "F": num_features}
    assert scratch_bytes(chain, sizes) == {}
    state = random_rows((num_nodes, num_features), dtype)
    poison = np.full((GUARD_ROWS, num_features), 0x5A5A, np.uint16 if dtype == np.float16 else np.uint32)
    guarded = np.concatenate([poison.view(dtype), state, poison.view(dtype)])
    buffers = {"state": DeviceArray.from_array(guarded), "src": DeviceArray((num_edges, num_features), dtype),
               "index": DeviceArray((num_edges,), np.int64)}  # E = 0: a byte each, so no null address
    stream = check(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING))
    try:
        pointers = {tensor: buffer.ptr for tensor, buffer in buffers.items()}
        pointers["state"] += GUARD_ROWS * num_features * np.dtype(dtype).itemsize
        prepared = PreparedChain(OVERWRITE_ROWS, chain, {"state": name, "src": name, "index": "int64"}, pointers,
                                 sizes, int(stream))
        for _ in range(RUNS):
            src = random_rows((num_edges, num_features), dtype)
            index = indices(num_nodes, num_edges)
            buffers["src"].upload(src)
            buffers["index"].upload(index)
            prepared()
            check(driver.cuStreamSynchronize(stream))
            out = buffers["state"].download()
            guards = np.concatenate([out[:GUARD_ROWS], out[-GUARD_ROWS:]]).view(poison.dtype)
            assert np.array_equal(guards, np.concatenate([poison, poison])), "a guard row was written"
            after = out[GUARD_ROWS:-GUARD_ROWS]
            yield state, src, index, after
            state = after
    finally:
        check(driver.cuStreamDestroy(stream))
        for buffer in buffers.values():
            buffer.free()


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
@pytest.mark.parametrize("num_nodes,num_edges,num_features", SIZES)
def test_repeated_indices_take_one_of_their_edges(num_nodes, num_edges, num_features, dtype):
    for before, src, index, after in runs(num_nodes, num_edges, num_features, dtype, random_indices):
        assert_overwritten(after, before, src, index)
        if num_edges == 0:
            assert np.array_equal(after.view(np.uint8), before.view(np.uint8))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
@pytest.mark.parametrize("num_nodes,num_edges,num_features", UNIQUE_SIZES)
def test_unique_rows_are_torch_index_copy_bit_for_bit(num_nodes, num_edges, num_features, dtype):
    for before, src, index, after in runs(num_nodes, num_edges, num_features, dtype, unique_indices):
        assert np.array_equal(after.view(np.uint8), index_copy(before, src, index).view(np.uint8))
        (expected,) = OVERWRITE_ROWS.reference(before, src, index)
        assert np.array_equal(after.view(np.uint8), expected.view(np.uint8))
