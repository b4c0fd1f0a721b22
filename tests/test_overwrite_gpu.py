"""The overwrite kernels on a GPU, bit for bit against the sequential loop (reference.gnn.scatter_overwrite_numpy:
the last edge wins), both ways they run: "python" as the Python plugin's enqueue runs them (PreparedOverwrite on
overwrite.cu's CUBIN: the driver calls, then their captured graph, then its replay, each from the original
state) and "aot" as TensorRT runs the two AOT plugins (overwrite.cu's PTX loaded with cuModuleLoadData, each
kernel on aot_launch_params' grid with TensorRT's argument order, the table filled with -1 as the network's
ConstantOfShape makes it). Fresh random inputs each run, repeated indices, a hot node, out-of-range indices
(negative, N, beyond int32), E = 0, F = 1 and 64, float32 and float16, N up to 1e8; guard rows around the state
must stay untouched. Tables too small or holding made-up values must end and stay in bounds. The last test runs
this file again under compute-sanitizer memcheck (skipped where it is not found)."""

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
from reference.gnn import scatter_overwrite_numpy

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent
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


def run(path, state, src, index, functions=None, capacity=None, table=None, misaligned=False):
    """The state after the overwrite on the GPU (`path` "python" or "aot"), with GUARD_ROWS poisoned rows on
    either side that must come back untouched. `capacity` (aot) gives a table of that many slots, `table`
    (aot) its made-up contents [2 capacity] int64 instead of the -1 fill (then the fill is skipped);
    `misaligned` puts the keys 8 bytes off a 32-byte boundary (the kernels then probe slot by slot)."""
    from cuda.bindings import driver

    from plugin.cuda_check import check

    num_nodes, num_features = state.shape
    poison = np.full((GUARD_ROWS, num_features), 0x5A5A, np.uint16 if state.dtype == np.float16 else np.uint32)
    guarded = np.concatenate([poison.view(state.dtype), state, poison.view(state.dtype)])
    sizes = overwrite_sizes(num_nodes, len(index), num_features, state.dtype, capacity)
    slots = sizes["capacity"]
    buffers = [DeviceArray.from_array(guarded), DeviceArray.from_array(src),
               DeviceArray.from_array(np.ascontiguousarray(index, np.int64)),
               DeviceArray.from_array(np.full(2 * slots + 2 * GUARD_ROWS + 1, 0x5A5A5A5A, np.int64))]
    state_d, src_d, index_d, table_d = buffers
    base = state_d.ptr + GUARD_ROWS * num_features * state.dtype.itemsize
    keys = table_d.ptr + 8 * (GUARD_ROWS + misaligned)  # one word more than the table for the misaligned one
    assert (keys % 32 == 0) != misaligned
    stream = check(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING))
    try:
        if path == "aot":
            pointers = {"state": base, "src": src_d.ptr, "index": index_d.ptr, "keys": keys,
                        "winners": keys + 8 * slots}
            if table is not None:
                host = np.full(2 * slots + 2 * GUARD_ROWS + 1, 0x5A5A5A5A, np.int64)
                host[GUARD_ROWS:GUARD_ROWS + 2 * slots] = table
                table_d.upload(host)
                from plugin.kernels.aot import aot_arguments, aot_argument_types, aot_launch_params
                from plugin.kernels.overwrite import OVERWRITE_KERNELS, overwrite_steps

                for step in overwrite_steps(state.dtype, sizes):  # the kernels alone, on the made-up table
                    if step[0] == "kernel":
                        kernel = OVERWRITE_KERNELS[step[1]]
                        grid, block, shared = aot_launch_params(kernel, sizes)
                        check(driver.cuLaunchKernel(functions[kernel.name], grid, 1, 1, block, 1, 1, shared, stream,
                                                    (aot_arguments(kernel, pointers, sizes),
                                                     aot_argument_types(kernel)), 0))
            else:
                launch_overwrite(functions, state.dtype, pointers, sizes, int(stream))
            check(driver.cuStreamSynchronize(stream))
        else:
            launch = PreparedOverwrite(num_nodes=num_nodes, num_edges=len(index), num_features=num_features,
                                       dtype=state.dtype)
            try:
                results = []
                for _ in range(3):  # the driver calls, their capture, the graph's replay
                    state_d.upload(guarded)
                    launch(base, src_d.ptr, index_d.ptr, keys, int(stream))
                    check(driver.cuStreamSynchronize(stream))
                    results.append(state_d.download())
                assert all(np.array_equal(r.view(np.uint8), results[0].view(np.uint8)) for r in results)
            finally:
                launch.close()
        out = state_d.download()
        table_after = table_d.download()
    finally:
        check(driver.cuStreamDestroy(stream))
        for buffer in buffers:
            buffer.free()
    guards = np.concatenate([out[:GUARD_ROWS], out[-GUARD_ROWS:]])
    assert np.array_equal(guards.view(poison.dtype), np.concatenate([poison, poison])), "a guard row was written"
    table_guards = np.concatenate([table_after[:GUARD_ROWS], table_after[-GUARD_ROWS:]])
    assert (table_guards == 0x5A5A5A5A).all(), "written outside the table"
    return out[GUARD_ROWS:-GUARD_ROWS]


def assert_bits_equal(got, expected):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    same = got.view(np.uint8).reshape(len(got), -1) == expected.view(np.uint8).reshape(len(got), -1)
    bad = np.flatnonzero(~same.all(axis=1))
    assert bad.size == 0, f"{bad.size} rows differ, first {bad[:5]}: got {got[bad[:2]]}, expected {expected[bad[:2]]}"


def check_case(path, functions, num_nodes, num_edges, num_features, dtype, misaligned=False, **kwargs):
    if UNDER_MEMCHECK and num_edges * num_features > 2 * 10**6:
        pytest.skip("too large for memcheck's pace; run plainly")
    state = random_rows((num_nodes, num_features), dtype)
    src = random_rows((num_edges, num_features), dtype)
    index = random_indices(num_nodes, num_edges, **kwargs)
    assert_bits_equal(run(path, state, src, index, functions, misaligned=misaligned),
                      scatter_overwrite_numpy(state, src, index))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
@pytest.mark.parametrize("num_nodes,num_edges,num_features", SIZES)
@pytest.mark.parametrize("path", PATHS)
def test_overwrite_is_the_sequential_loop_bit_for_bit(path, aot_functions, num_nodes, num_edges, num_features, dtype):
    check_case(path, aot_functions, num_nodes, num_edges, num_features, dtype)


@pytest.mark.parametrize("num_nodes,num_edges,num_features", [(7, 1000, 1), (10**5, 3 * 10**4, 5), (1000, 10**4, 64)])
@pytest.mark.parametrize("path", PATHS)
def test_keys_off_a_32_byte_boundary_are_probed_slot_by_slot(path, aot_functions, num_nodes, num_edges,
                                                              num_features):
    check_case(path, aot_functions, num_nodes, num_edges, num_features, np.float16, misaligned=True)


@pytest.mark.skipif(UNDER_MEMCHECK, reason="too large for memcheck's pace; run plainly")
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
@pytest.mark.parametrize("num_nodes,num_edges,num_features", LARGE)
@pytest.mark.parametrize("path", PATHS)
def test_overwrite_into_a_large_state(path, aot_functions, num_nodes, num_edges, num_features, dtype):
    check_case(path, aot_functions, num_nodes, num_edges, num_features, dtype, hot=0.0, outside=0.001)


@pytest.mark.parametrize("path", PATHS)
def test_a_hot_node_keeps_the_last_of_a_million_edges(path, aot_functions):
    edges = 10**5 if UNDER_MEMCHECK else 10**6
    state = random_rows((100, 2), np.float32)
    src = np.arange(2 * edges, dtype=np.float32).reshape(edges, 2)
    index = np.full(edges, 42)
    out = run(path, state, src, index, aot_functions)
    assert out[42].tolist() == src[-1].tolist() and np.array_equal(np.delete(out, 42, 0), np.delete(state, 42, 0))


def test_fuzz_random_sizes_both_paths_agree_with_the_loop(aot_functions):
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


@pytest.mark.parametrize("capacity", [1, 2, 3, 4, 5])
def test_a_table_of_as_many_slots_as_distinct_nodes_serves_them(aot_functions, capacity):
    """T >= distinct nodes is enough, in whole buckets of 4 (T >= 4, aligned) or slot by slot (T < 4)."""
    state = random_rows((10, 4), np.float16)
    src = random_rows((50, 4), np.float16)
    distinct = capacity & ~3 if capacity >= 4 else capacity  # the slots of whole buckets
    index = RNG.permutation(10)[:distinct][RNG.integers(0, distinct, 50)]
    assert_bits_equal(run("aot", state, src, index, aot_functions, capacity=capacity),
                      scatter_overwrite_numpy(state, src, index))


def test_a_table_too_small_ends_and_writes_only_rows_of_claimed_nodes_with_their_last_edge(aot_functions):
    """T < distinct nodes: each node either got a slot (its row is the loop's) or none (its row is untouched);
    the kernels end and stay inside their buffers."""
    state = random_rows((1000, 3), np.float32)
    src = random_rows((500, 3), np.float32)
    index = RNG.integers(0, 1000, 500)
    out = run("aot", state, src, index, aot_functions, capacity=37)
    expected = scatter_overwrite_numpy(state, src, index)
    written = ~(out == state).all(axis=1)
    assert 0 < written.sum() <= 37
    assert np.array_equal(out[written], expected[written])


@pytest.mark.parametrize("fill", ["random", "all edges", "full of other nodes"])
def test_made_up_tables_end_and_stay_in_bounds(aot_functions, fill):
    """What TensorRT may time a plugin on: keys and winners hold anything (the guard checks in run)."""
    num_edges, capacity = 2000, 4001
    if fill == "random":
        table = RNG.integers(-(2**62), 2**62, 2 * capacity)
    elif fill == "all edges":
        table = np.concatenate([RNG.integers(0, 100, capacity), RNG.integers(0, num_edges, capacity)])
    else:
        table = np.concatenate([np.arange(10**6, 10**6 + capacity), np.full(capacity, 5)])
    state = random_rows((100, 8), np.float32)
    src = random_rows((num_edges, 8), np.float32)
    index = random_indices(100, num_edges, outside=0.2)
    out = run("aot", state, src, index, aot_functions, table=table)
    changed = ~(out == state).all(axis=1)
    src_rows = {row.tobytes() for row in src}
    assert all(row.tobytes() in src_rows for row in out[changed])  # a row is written whole, from some src row


@pytest.mark.trt_bindings
def test_the_plugins_enqueue_overwrites_in_place_and_inside_a_callers_graph(trt):
    """ScatterAddInPlace with overwrite = 1, called as an execution context calls it (on_shape_change, then
    enqueue with TensorRT's workspace of get_workspace_size's bytes), plainly and captured into the caller's
    CUDA graph (--cuda_graph, trtexec), against the loop."""
    from cuda.bindings import driver

    from plugin.cuda_check import check
    from plugin.cuda_graph import CapturedGraph
    from plugin.scatter_add_plugin import ScatterAddPlugin
    from tests.test_plugin_gpu import plugin_descs, workspace_for

    num_nodes, num_edges, num_features = 5000, 3000, 16
    for dtype in DTYPES:
        plugin = ScatterAddPlugin(compute_counts=False, overwrite=True).attach_to_context(None)
        inputs, outputs = plugin_descs(trt, np.dtype(dtype), num_nodes, num_edges, num_features, False)
        state = random_rows((num_nodes, num_features), dtype)
        src = random_rows((num_edges, num_features), dtype)
        index = random_indices(num_nodes, num_edges)
        buffers = [DeviceArray.from_array(a) for a in (state, src, index)]
        workspace = DeviceArray((workspace_for(trt, plugin, inputs, outputs),), np.uint8)
        stream = check(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING))
        try:
            plugin.on_shape_change(inputs, outputs)

            def enqueue():
                plugin.enqueue(inputs, outputs, [b.ptr for b in buffers], [buffers[0].ptr], workspace.ptr, int(stream))

            expected = scatter_overwrite_numpy(state, src, index)
            for _ in range(3):  # direct, captured by the launcher, replayed
                buffers[0].upload(state)
                enqueue()
                check(driver.cuStreamSynchronize(stream))
                assert_bits_equal(buffers[0].download(), expected)
            with CapturedGraph(int(stream), enqueue) as graph:
                for _ in range(2):
                    buffers[0].upload(state)
                    graph.launch()
                    check(driver.cuStreamSynchronize(stream))
                    assert_bits_equal(buffers[0].download(), expected)
        finally:
            check(driver.cuStreamDestroy(stream))
            plugin._launch.close()
            for buffer in buffers + [workspace]:
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
