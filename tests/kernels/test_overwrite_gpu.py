"""The overwrite kernel on a GPU, both ways it runs: "python" as the Python plugin's enqueue runs it
(PreparedOverwrite on overwrite.cu's CUBIN, called twice with the same pointers) and "aot" as TensorRT runs the
AOT plugin (overwrite.cu's PTX loaded with cuModuleLoadData, on its step's launch grid with TensorRT's argument
order). Against the rule (assert_overwritten): rows no edge writes keep their bits, a row one edge writes is
that edge's row bit for bit, and each element of a row written at a repeated index is that element of one of
its edges' rows. Fresh random inputs each run, repeated indices, a hot node, out-of-range indices (negative, N,
beyond int32), E = 0, F = 1 and 64, float32 and float16, rows of 2- to 16-byte words and buffers off alignment,
N up to 1e8; guard rows around the state must stay untouched. The last test runs this file again under
compute-sanitizer memcheck (skipped where it is not found)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from plugin.device_array import DeviceArray
from plugin.kernels.overwrite import (
    PreparedOverwrite,
    compile_overwrite_ptx,
    launch_overwrite,
    load_overwrite_functions,
    overwrite_sizes,
)

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng()
GUARD_ROWS = 16
UNDER_MEMCHECK = os.environ.get("OVERWRITE_UNDER_MEMCHECK") == "1"
PATHS = ("python", "aot")
DTYPES = (np.float32, np.float16)
SIZES = [  # (N, E, F)
    (1, 0, 1),
    (1000, 0, 64),
    (1, 1000, 3),        # every edge into one node
    (7, 1000, 1),        # each node repeated ~140 times
    (1000, 10**4, 64),
    (10**4, 10**4, 1),
    (10**6, 10**5, 5),   # rows of 20 / 10 bytes: 4- and 2-byte words
    (10**5, 10**6, 64),
]
LARGE = [(10**8, 10**6, 1)]


@pytest.fixture(scope="module")
def aot_functions():
    from cuda.bindings import driver

    module, functions = load_overwrite_functions(compile_overwrite_ptx())
    yield functions
    driver.cuModuleUnload(module)


def random_indices(num_nodes, num_edges, hot=0.1, outside=0.01):
    """Uniform targets (so repeats where E is near N or above), `hot` of the edges into node 0, `outside` of
    them out of range: negative, N and up, and beyond int32 (must not wrap into a node)."""
    index = RNG.integers(0, max(num_nodes, 1), num_edges, dtype=np.int64)
    index[RNG.random(num_edges) < hot] = 0
    bad = RNG.random(num_edges) < outside
    index[bad] = RNG.choice(np.array([-1, -(2**40), num_nodes, num_nodes + 5, 2**32, 2**32 + 3], np.int64),
                            int(bad.sum()))
    return index


def random_rows(shape, dtype):
    """Fresh random rows, never zero; float16 also holds -0.0, infinities and NaN payloads (copied as bits)."""
    rows = (RNG.standard_normal(shape, dtype=np.float32) + 3.0).astype(dtype)
    if dtype == np.float16 and rows.size:
        bits = rows.reshape(-1).view(np.uint16)
        picks = RNG.random(bits.size) < 0.01
        bits[picks] = RNG.choice(np.array([0x8000, 0x7C00, 0xFC00, 0x7E01, 0xFD55], np.uint16), int(picks.sum()))
    return rows


def run(path, state, src, index, functions=None, misaligned=False, grid=None):
    """The state after the overwrite on the GPU (`path` "python" or "aot"), with GUARD_ROWS poisoned rows on
    either side that must come back untouched. `misaligned` puts src one element off its allocation's alignment
    (the kernel then copies 2- or 4-byte words); `grid` (aot) launches that many blocks instead."""
    from cuda.bindings import driver

    from common.cuda_check import check

    num_nodes, num_features = state.shape
    poison = np.full((GUARD_ROWS, num_features), 0x5A5A, np.uint16 if state.dtype == np.float16 else np.uint32)
    guarded = np.concatenate([poison.view(state.dtype), state, poison.view(state.dtype)])
    sizes = overwrite_sizes(num_nodes, len(index), num_features, state.dtype)
    shifted = np.concatenate([np.zeros(1, src.dtype), src.reshape(-1)]) if misaligned else src  # src at element 1
    buffers = [DeviceArray.from_array(guarded), DeviceArray.from_array(np.ascontiguousarray(shifted)),
               DeviceArray.from_array(np.ascontiguousarray(index, np.int64))]
    state_d, src_d, index_d = buffers
    base = state_d.ptr + GUARD_ROWS * num_features * state.dtype.itemsize
    src_ptr = src_d.ptr + (state.dtype.itemsize if misaligned else 0)
    stream = check(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING))
    results = []
    try:
        for _ in range(2):  # twice: the python path's arguments bound, then reused
            state_d.upload(guarded)
            if path == "aot":
                launch_overwrite(functions, state.dtype, {"state": base, "src": src_ptr, "index": index_d.ptr},
                                 sizes, int(stream), grid)
            else:
                if not results:
                    launch = PreparedOverwrite(num_nodes=num_nodes, num_edges=len(index), num_features=num_features,
                                               dtype=state.dtype)
                launch(base, src_ptr, index_d.ptr, int(stream))
            check(driver.cuStreamSynchronize(stream))
            results.append(state_d.download())
    finally:
        check(driver.cuStreamDestroy(stream))
        for buffer in buffers:
            buffer.free()
    for out in results:
        guards = np.concatenate([out[:GUARD_ROWS], out[-GUARD_ROWS:]])
        assert np.array_equal(guards.view(poison.dtype), np.concatenate([poison, poison])), "a guard row was written"
    return [out[GUARD_ROWS:-GUARD_ROWS] for out in results]


def _bits(rows):
    return rows.view(np.uint16 if rows.dtype == np.float16 else np.uint32).reshape(len(rows), *rows.shape[1:])


def assert_overwritten(got, state, src, index):
    """The overwrite's rule, bit for bit (no arithmetic: NaN payloads and -0.0 arrive as they were)."""
    assert got.dtype == state.dtype and got.shape == state.shape
    got_bits, state_bits, src_bits = _bits(got), _bits(state), _bits(src)
    index = np.asarray(index, np.int64)
    edges = np.flatnonzero((index >= 0) & (index < len(state)))  # the others are skipped
    rows = index[edges]
    written = np.zeros(len(state), bool)
    written[rows] = True
    kept = ~written
    assert np.array_equal(got_bits[kept], state_bits[kept]), "a row no edge writes changed"
    _, inverse, counts = np.unique(rows, return_inverse=True, return_counts=True)
    once = counts[inverse.reshape(-1)] == 1
    bad = np.flatnonzero(~(got_bits[rows[once]] == src_bits[edges[once]]).all(axis=1))
    assert bad.size == 0, f"{bad.size} rows written once differ, first {rows[once][bad[:5]]}"
    matched = np.zeros(got_bits.shape, bool)  # [row, element]: one of the row's edges has this element
    np.logical_or.at(matched, rows[~once], got_bits[rows[~once]] == src_bits[edges[~once]])
    repeated = np.unique(rows[~once])
    bad = repeated[~matched[repeated].all(axis=1)]
    assert bad.size == 0, f"{bad.size} rows of a repeated index hold an element none of their edges wrote: {bad[:5]}"


def check_case(path, functions, num_nodes, num_edges, num_features, dtype, misaligned=False, grid=None, **kwargs):
    if UNDER_MEMCHECK and num_edges * num_features > 2 * 10**6:
        pytest.skip("too large for memcheck's pace; run plainly")
    state = random_rows((num_nodes, num_features), dtype)
    src = random_rows((num_edges, num_features), dtype)
    index = random_indices(num_nodes, num_edges, **kwargs)
    for out in run(path, state, src, index, functions, misaligned=misaligned, grid=grid):
        assert_overwritten(out, state, src, index)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
@pytest.mark.parametrize("num_nodes,num_edges,num_features", SIZES)
@pytest.mark.parametrize("path", PATHS)
def test_overwrite_follows_the_rule_bit_for_bit(path, aot_functions, num_nodes, num_edges, num_features, dtype):
    check_case(path, aot_functions, num_nodes, num_edges, num_features, dtype)


@pytest.mark.parametrize("num_nodes,num_edges,num_features", [(7, 1000, 1), (10**5, 3 * 10**4, 8), (1000, 10**4, 64)])
@pytest.mark.parametrize("path", PATHS)
def test_src_off_its_alignment_is_copied_in_narrower_words(path, aot_functions, num_nodes, num_edges, num_features):
    check_case(path, aot_functions, num_nodes, num_edges, num_features, np.float16, misaligned=True)


@pytest.mark.parametrize("grid", [1, 3, 1000])
def test_any_grid_covers_every_edge(aot_functions, grid):
    check_case("aot", aot_functions, 5000, 20000, 7, np.float32, grid=grid)


@pytest.mark.skipif(UNDER_MEMCHECK, reason="too large for memcheck's pace; run plainly")
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
@pytest.mark.parametrize("num_nodes,num_edges,num_features", LARGE)
@pytest.mark.parametrize("path", PATHS)
def test_overwrite_into_a_large_state(path, aot_functions, num_nodes, num_edges, num_features, dtype):
    check_case(path, aot_functions, num_nodes, num_edges, num_features, dtype, hot=0.0, outside=0.001)


@pytest.mark.parametrize("path", PATHS)
def test_a_hot_node_takes_its_elements_from_its_million_edges(path, aot_functions):
    edges = 10**5 if UNDER_MEMCHECK else 10**6
    state = random_rows((100, 2), np.float32)
    src = np.arange(2 * edges, dtype=np.float32).reshape(edges, 2)  # every element distinct
    index = np.full(edges, 42)
    for out in run(path, state, src, index, aot_functions):
        assert_overwritten(out, state, src, index)
        assert out[42, 0] % 2 == 0 and out[42, 1] % 2 == 1  # column by column: no element of another column


def test_the_rule_check_fails_a_wrong_overwrite():
    """assert_overwritten is not vacuous: an untouched row changed, a row written once from another edge, and an
    element of a repeated row from an edge of another row each fail it."""
    state = random_rows((6, 3), np.float32)
    src = random_rows((5, 3), np.float32)
    index = np.array([0, 2, 2, 4, -1])
    good = state.copy()
    good[0], good[2], good[4] = src[0], src[2], src[3]
    assert_overwritten(good, state, src, index)
    for row, value in ((1, src[0]), (0, src[1]), (4, src[0])):
        bad = good.copy()
        bad[row] = value
        with pytest.raises(AssertionError):
            assert_overwritten(bad, state, src, index)
    mixed = good.copy()
    mixed[2, 1] = src[1, 1]  # elements from both edges of row 2: allowed
    assert_overwritten(mixed, state, src, index)
    mixed[2, 2] = src[0, 2]
    with pytest.raises(AssertionError):
        assert_overwritten(mixed, state, src, index)


def test_fuzz_random_sizes_both_paths_follow_the_rule(aot_functions):
    cases = 20 if UNDER_MEMCHECK else 200
    for _ in range(cases):
        num_nodes = int(RNG.integers(1, 3000))
        num_edges = int(RNG.integers(0, 3000))
        num_features = int(RNG.choice([1, 2, 3, 4, 7, 8, 16, 33, 64]))
        dtype = DTYPES[int(RNG.integers(0, 2))]
        for path in PATHS:
            check_case(path, aot_functions, num_nodes, num_edges, num_features, dtype,
                       misaligned=bool(RNG.random() < 0.25), hot=float(RNG.random() * 0.5),
                       outside=float(RNG.random() * 0.1))


@pytest.mark.trt_bindings
def test_the_plugins_enqueue_overwrites_in_place_and_inside_a_callers_graph(trt):
    """ScatterAddInPlace with overwrite = 1, called as an execution context calls it (on_shape_change, then
    enqueue with no workspace), plainly and captured into the caller's CUDA graph (--cuda_graph, trtexec),
    against the rule."""
    from cuda.bindings import driver

    from common.cuda_check import check
    from plugin.cuda_graph import CapturedGraph
    from plugin.scatter_add_plugin import ScatterAddPlugin
    from tests.plugin.test_plugin_gpu import plugin_descs, workspace_for

    num_nodes, num_edges, num_features = 5000, 3000, 16
    for dtype in DTYPES:
        plugin = ScatterAddPlugin(compute_counts=False, overwrite=True).attach_to_context(None)
        inputs, outputs = plugin_descs(trt, np.dtype(dtype), num_nodes, num_edges, num_features, False)
        state = random_rows((num_nodes, num_features), dtype)
        src = random_rows((num_edges, num_features), dtype)
        index = random_indices(num_nodes, num_edges)
        buffers = [DeviceArray.from_array(a) for a in (state, src, index)]
        assert workspace_for(trt, plugin, inputs, outputs) == 0
        stream = check(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING))
        try:
            plugin.on_shape_change(inputs, outputs)

            def enqueue():
                plugin.enqueue(inputs, outputs, [b.ptr for b in buffers], [buffers[0].ptr], 0, int(stream))

            for _ in range(2):  # the arguments bound, then reused
                buffers[0].upload(state)
                enqueue()
                check(driver.cuStreamSynchronize(stream))
                assert_overwritten(buffers[0].download(), state, src, index)
            with CapturedGraph(int(stream), enqueue) as graph:
                for _ in range(2):
                    buffers[0].upload(state)
                    graph.launch()
                    check(driver.cuStreamSynchronize(stream))
                    assert_overwritten(buffers[0].download(), state, src, index)
        finally:
            check(driver.cuStreamDestroy(stream))
            for buffer in buffers:
                buffer.free()


def sanitizer():
    import glob
    import shutil

    found = os.environ.get("FUZZ_SANITIZER") or shutil.which("compute-sanitizer")
    return found or next(iter(sorted(glob.glob("/usr/local/cuda*/bin/compute-sanitizer"), reverse=True)), None)


@pytest.mark.skipif(UNDER_MEMCHECK, reason="this is the memcheck run")
def test_every_case_above_under_compute_sanitizer_memcheck():
    tool = sanitizer()
    if tool is None or os.environ.get("FUZZ_SANITIZER") == "0":
        pytest.skip("compute-sanitizer not found (PATH, /usr/local/cuda*/bin, or FUZZ_SANITIZER=path)")
    env = dict(os.environ, OVERWRITE_UNDER_MEMCHECK="1")
    command = [tool, "--tool", "memcheck", "--error-exitcode", "1", "--report-api-errors", "no", sys.executable,
               "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu", str(Path(__file__)),
               "-k", "not under_compute_sanitizer"]
    timeout = float(os.environ.get("OVERWRITE_MEMCHECK_TIMEOUT_S", "540"))
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    tail = (result.stdout + result.stderr)[-4000:]
    print(tail[-1500:])  # with -s: the child's summary and memcheck's
    assert result.returncode == 0, tail
    assert "ERROR SUMMARY: 0 errors" in tail and " passed" in tail, tail
