"""plugin/overwrite_op.py's OVERWRITE_ROWS without a GPU: the description passes inplace.checks, its one launch
is the one the AOT plugin has launched with (a thread per element, at most 2^16 blocks, (N, E, F)), the Python
plugin reads its grid from it, its reference copies rows (the last edge of a repeated index winning, indices
outside [0, N) skipped), and the PTX an engine would hold takes TensorRT's AOT order (NVRTC through cuda-python;
skipped with the reason where it is missing)."""

import numpy as np
import pytest

from inplace.checks import check_op, op_id, plugin_id, step_kernels
from inplace.launch import evaluate_launch
from inplace.ptx import check_entry_parameters, entry_parameters
from plugin.kernels.overwrite import aot_overwrite_launch, overwrite_grid
from plugin.overwrite_op import OVERWRITE_ROWS, STEP, kernel

# (N, E, F): E = 0, one node, one feature, rows of 3 and 64, float16 rows of odd width, the grid's cap, int32's edge
SIZES = [(1, 0, 1), (10, 0, 64), (1, 1, 1), (1, 7, 3), (5, 7, 3), (1000, 255, 1), (1000, 257, 1), (7, 100, 5),
         (1000, 10**4, 64), (10**8, 10**6, 1), (10**6, 2**20, 64), (2**31 - 1, 2**30 - 1, 4), (3, 2**31 - 1, 2**31 - 1)]
DTYPES = ["float32", "float16"]


def test_the_description_passes_the_checks():
    check_op(OVERWRITE_ROWS)
    assert op_id(OVERWRITE_ROWS) == "aliased_io::overwrite_rows_"
    assert plugin_id(OVERWRITE_ROWS, STEP) == "aliased_io::overwrite_rows"  # the id the AOT plugin has had
    assert OVERWRITE_ROWS.output_names() == ("state",) and STEP.aliases() == {"state": "state"}
    chain = OVERWRITE_ROWS.chains[0]
    assert chain.steps == (STEP,) and chain.scratch == ()


def test_each_dtype_takes_its_kernel_and_src_of_another_dtype_is_refused():
    chain = OVERWRITE_ROWS.chains[0]
    found = {dtypes["state"]: found.name for dtypes, found in step_kernels(OVERWRITE_ROWS, chain, STEP)}
    assert found == {"float32": "overwrite_rows_f32", "float16": "overwrite_rows_f16"}
    assert all(dtypes["src"] == dtypes["state"] for dtypes, _ in step_kernels(OVERWRITE_ROWS, chain, STEP))
    with pytest.raises(ValueError, match="src is float16"):
        kernel({"state": "float32", "src": "float16", "index": "int64"})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_nodes,num_edges,num_features", SIZES)
def test_the_launch_is_the_aot_plugins(dtype, num_nodes, num_edges, num_features):
    """LAUNCH evaluated with ints is the grid, block, shared memory and (N, E, F) the AOT plugin has launched with:
    a thread per element of the E rows, at most 2^16 blocks, at least one; 256 threads; no shared memory."""
    sizes = {"num_nodes": num_nodes, "num_edges": num_edges, "num_features": num_features}
    grid, block, shared, extra = evaluate_launch(kernel({"state": dtype}), {"N": num_nodes, "E": num_edges,
                                                                            "F": num_features})
    expected = (max(min(-(-num_edges * num_features // 256), 1 << 16), 1), 256, 0)
    assert (grid[0], block[0], shared) == expected
    assert grid[1:] == (1, 1) and block[1:] == (1, 1)
    assert extra == (num_nodes, num_edges, num_features)
    assert aot_overwrite_launch(dtype, sizes) == expected


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_nodes,num_edges,num_features", SIZES)
def test_the_python_plugins_grid_is_read_from_the_launch(dtype, num_nodes, num_edges, num_features):
    """overwrite_grid: the launch's grid, narrowed to a thread per 16-byte word where a row has whole words."""
    sizes = {"num_nodes": num_nodes, "num_edges": num_edges, "num_features": num_features}
    grid, block, shared = overwrite_grid(dtype, sizes)
    launch_grid, launch_block, launch_shared = aot_overwrite_launch(dtype, sizes)
    row_bytes = num_features * np.dtype(dtype).itemsize
    words = row_bytes // 16 if row_bytes % 16 == 0 else num_features
    assert (block, shared) == (launch_block, launch_shared)
    assert grid == max(1, min(-(-num_edges * words // 256), launch_grid))


def looped(state, src, index):
    """`for e: state[index[e]] = src[e]` where index[e] is in range, one edge at a time."""
    out = state.copy()
    for edge, node in enumerate(index):
        if 0 <= node < len(out):
            out[node] = src[edge]
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("num_nodes,num_edges,num_features", [(1, 0, 1), (1, 5, 1), (6, 0, 3), (6, 20, 3),
                                                               (100, 30, 7), (4, 50, 2)])
def test_the_reference_copies_rows_the_last_edge_winning(dtype, num_nodes, num_edges, num_features):
    rng = np.random.default_rng(num_nodes * 1000 + num_edges)
    state = rng.standard_normal((num_nodes, num_features)).astype(dtype)
    src = rng.standard_normal((num_edges, num_features)).astype(dtype)
    index = rng.integers(-2, num_nodes + 2, num_edges).astype(np.int64)  # repeats and out of range
    if num_edges:
        index[-1] = 2**40
    (got,) = OVERWRITE_ROWS.reference(state, src, index)
    assert got.dtype == state.dtype and got.shape == state.shape
    assert np.array_equal(got.view(np.uint8), looped(state, src, index).view(np.uint8))  # bit for bit
    (again,) = OVERWRITE_ROWS.reference(state, src, index)
    assert np.array_equal(again, got)  # the input is not changed


def test_the_reference_keeps_the_last_of_repeated_edges_and_skips_out_of_range():
    state = np.zeros((3, 2), np.float16)
    src = np.arange(12, dtype=np.float16).reshape(6, 2)
    index = np.array([1, 1, -1, 3, 2, 1], np.int64)
    (got,) = OVERWRITE_ROWS.reference(state, src, index)
    assert got.tolist() == [[0, 0], [10, 11], [8, 9]]
    assert not state.any()


def need_nvrtc():
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError as error:
        pytest.skip(f"NVRTC through cuda-python is not installed ({error}): pip install -r requirements.txt")


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_ptx_takes_pointers_then_int32_then_pointers(dtype):
    """The PTX an engine would hold (OverwritePtx for this machine's target): the step's input pointers, the int32
    extra arguments, the output pointer, as TensorRT launches an AOT plugin's kernel."""
    need_nvrtc()
    chain = OVERWRITE_ROWS.chains[0]
    for dtypes, found in step_kernels(OVERWRITE_ROWS, chain, STEP):
        if dtypes["state"] != dtype:
            continue
        ptx = found.source.ptx(found.name, dtypes)
        assert [kind for kind, _ in entry_parameters(ptx, found.name)] == ["ptr"] * 3 + ["i32"] * 3 + ["ptr"]
        check_entry_parameters(ptx, found.name, len(STEP.inputs), len(found.launch.extra_args), len(STEP.outputs))


def test_the_ptx_is_for_the_builds_target():
    """compute_75 at PTX ISA 8.0 where no Hopper or newer GPU builds (these tests' machine without a GPU), else
    compute_90 at ISA 8.1, as the scatter-add's kernels."""
    need_nvrtc()
    from common.nvrtc import ptx_isa_version
    from plugin.kernels.aot import FAMILY_PTX_ISA, aot_target_arch

    arch = aot_target_arch()
    ptx = kernel({"state": "float32"}).source.ptx("overwrite_rows_f32", {"state": "float32"})
    assert f".target sm_{arch}".encode() in ptx and ptx_isa_version(ptx) == FAMILY_PTX_ISA[arch]
