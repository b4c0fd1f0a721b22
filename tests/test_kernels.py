"""The scatter-add kernel without a GPU: NVRTC compilation for every architecture, workspace and launch plans,
argument checks, error wrapping. GPU behaviour is in test_kernels_gpu.py."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plugin.cuda_check import CudaError, NvrtcError, check
from plugin.kernels import compile_scatter_add, scatter_add_launch, scatter_add_workspace_size
from plugin.kernels.compile import (
    MIN_ARCH,
    compile_cubin,
    grid_sync_available,
    kernel_dtype,
    nvrtc_supported_archs,
    pick_arch,
)
from plugin.kernels.host import check_host_arrays
from plugin.kernels.launch import KERNEL_NAMES, ZEROING_KERNEL_NAMES
from plugin.kernels.plan import (
    MAX_EDGES,
    MAX_NODES,
    PAIRED_MAX_EDGES,
    PAIRS_OVER_SHARED_MIN_NODES,
    DIRECT_BLOCKS_PER_SM,
    OWNED_EDGES_PER_BLOCK,
    OWNED_MAX_EDGES,
    OWNED_MAX_PROBES,
    OWNED_THREADS,
    PARTITION_MAX_EDGES,
    QUEUE_BYTES_PER_BLOCK,
    RESIDENT_BLOCKS_PER_SM,
    SHARED_MIN_EDGES_PER_NODE,
    SHARED_OVER_PAIRS_MIN_EDGES_PER_NODE,
    THREADS_PER_BLOCK,
    CHUNK_EDGES,
    CHUNK_MAX_NODES,
    CHUNK_MIN_EDGES,
    SORT_MAX_PLACE_PASSES,
    SORT_MAX_TILES,
    SORT_MIN_EDGES,
    SORT_MIN_FEATURES,
    SORT_PRIVATE_BLOCKS_PER_SM,
    SORT_PRIVATE_MAX_NODES,
    SORT_PRIVATE_MIN_EDGES_PER_NODE,
    SORT_TARGET_RANGES,
    ZEROING_MAX_EDGES,
    DeviceInfo,
    KernelLaunch,
    chunk_shared_bytes,
    describe,
    lanes_log2_for,
    owned_shared_bytes,
    partition_layout,
    plan_launch,
    sort_layout,
    split_table_capacity,
    table_layout,
    vector_width,
)

# A device description shaped like an H200 (sm_90, 132 SMs, 227 KiB opt-in shared memory per block, 50 MiB L2).
H200_LIKE = DeviceInfo(arch=90, sm_count=132, max_shared_per_block=232448, shared_per_sm=233472, l2_bytes=50 * 2**20)
DTYPES = [np.float32, np.float16]


def archs_to_compile() -> list[int]:
    return [arch for arch in nvrtc_supported_archs() if arch >= MIN_ARCH]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
@pytest.mark.parametrize("arch", archs_to_compile())
def test_source_compiles_to_a_cubin_for_every_supported_arch(cubin_for, arch, dtype):
    cubin = cubin_for(arch, dtype)
    assert cubin[:4] == b"\x7fELF"
    for name in KERNEL_NAMES:
        assert name.encode() in cubin, f"entry point {name} missing from the sm_{arch} cubin"
    # The cooperative-groups variants exist exactly where CCCL's headers are found (nvidia-cuda-cccl, a test
    # requirement as it is a runtime one), so the grid-sync source is compiled here as on a user's machine.
    grid_sync = grid_sync_available()
    for name in ZEROING_KERNEL_NAMES:
        assert (name.encode() in cubin) == grid_sync, f"{name} in the sm_{arch} cubin: expected {grid_sync}"


def test_supported_archs_reach_from_sm75_to_beyond_hopper():
    archs = archs_to_compile()
    assert archs[0] == 75 and 90 in archs and max(archs) > 90


def test_compilation_is_cached_per_arch_and_dtype(monkeypatch):
    # compile_cubin recorded instead of run: the caching is under test here, NVRTC above (cubin_for)
    from plugin.kernels import compile as compile_module

    compiled = []
    monkeypatch.setattr(compile_module, "compile_cubin",
                        lambda arch, dtype: (compiled.append((arch, dtype)) or bytearray(b"sm_%d" % arch), ""))
    compile_module._compile_cached.cache_clear()
    try:
        assert compile_scatter_add(90, np.float32) is compile_scatter_add(90, "float32")
        assert compile_scatter_add(90, np.float16) is not compile_scatter_add(90, np.float32)
        assert compiled == [(90, np.float32), (90, np.float16)]
    finally:
        compile_module._compile_cached.cache_clear()  # nothing recorded is left for the kernel tests


def test_compile_error_carries_the_nvrtc_log():
    with pytest.raises(NvrtcError) as caught:
        compile_cubin(90, np.float32, ("-Du64=struct",))
    message = str(caught.value)
    assert "NVRTC_ERROR_COMPILATION" in message and "scatter_add.cu" in message and "error" in message.split("\n", 1)[1]
    assert isinstance(caught.value, CudaError) and caught.value.name == "NVRTC_ERROR_COMPILATION"


NVRTC_THEN_COMPILE = """
import sys
from pathlib import Path
from plugin.kernels.compile import nvrtc_compile
output, log = nvrtc_compile(Path(sys.argv[1]), [], ptx=True)
namespace = {"__name__": "compiled_after_nvrtc"}  # compiled now, as bench_enqueue.py imports the plugin host late
exec(compile("def spec(name, low, high):\\n    return f'profile {name} {low} {high}'\\n", "late.py", "exec"), namespace)
print(repr((log, " ".encode(), b"a b"[1:2], namespace["spec"]("N", 1, 1000000))))
"""


def test_nvrtc_compile_writes_only_into_buffers_of_its_own(tmp_path):
    """nvrtc_compile with an empty log (nvrtcGetProgramLogSize 1: the NUL alone), in a fresh process: the
    interpreter's shared one-byte b" " stays a space. The log buffer once was b" " * size, which for size 1 is
    that shared object; NVRTC wrote its NUL into it, every later b" " became b"\\0", and on Python 3.12 the
    f-strings of modules compiled afterwards lost their single-space parts (bench_enqueue.py's plugin host spec
    arrived as "profile N110000001000000" on the H200)."""
    import ast
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("cuda.bindings.nvrtc")
    root = Path(__file__).resolve().parent.parent
    source = tmp_path / "empty_log.cu"
    source.write_text('extern "C" __global__ void one(float* x) { x[0] = 1.0f; }\n')
    result = subprocess.run([sys.executable, "-c", NVRTC_THEN_COMPILE, str(source)], cwd=root, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    log, space, sliced, spec = ast.literal_eval(result.stdout.strip().splitlines()[-1])
    assert log == "", f"NVRTC wrote a log ({log!r}): this source no longer tests the one-byte buffer"
    assert (space, sliced, spec) == (b" ", b" ", "profile N 1 1000000")


def test_pick_arch_prefers_the_device_arch_then_an_older_minor_of_the_same_major():
    supported = (75, 80, 86, 89, 90, 100, 120)
    assert pick_arch(90, supported) == 90
    assert pick_arch(87, supported) == 86
    assert pick_arch(121, supported) == 120
    with pytest.raises(ValueError, match="sm_70"):
        pick_arch(70, supported)


@pytest.mark.parametrize("bad", [np.float64, np.int32, "bfloat16", None])
def test_unsupported_dtypes_are_refused(bad):
    with pytest.raises(ValueError, match="float32 or float16"):
        kernel_dtype(bad)


def test_check_unwraps_values_and_raises_with_name_description_and_call():
    from cuda.bindings import nvrtc, runtime

    assert check((nvrtc.nvrtcResult.NVRTC_SUCCESS,)) is None
    assert check((nvrtc.nvrtcResult.NVRTC_SUCCESS, 7)) == 7
    assert check((nvrtc.nvrtcResult.NVRTC_SUCCESS, 7, 8)) == (7, 8)
    with pytest.raises(CudaError) as caught:
        check((runtime.cudaError_t.cudaErrorMemoryAllocation, None))
    assert "cudaErrorMemoryAllocation" in str(caught.value) and "out of memory" in str(caught.value)
    assert "test_kernels.py" in str(caught.value)  # the failing call's source line
    with pytest.raises(CudaError, match=r"NVRTC_ERROR_INVALID_INPUT.*\(in nvrtcFoo\)"):
        check((nvrtc.nvrtcResult.NVRTC_ERROR_INVALID_INPUT,), "nvrtcFoo")


# --- workspace ---------------------------------------------------------------------------------------------
def test_float32_needs_no_workspace_without_counts_or_for_narrow_rows():
    # The paired path (F = 1 with counts, up to 2^24 edges) sums in the counts buffer: no workspace either.
    assert scatter_add_workspace_size(10**8, 10**8, 64, np.float32, with_counts=False) == 0
    assert scatter_add_workspace_size(10**6, 10**7, 3, np.float32) == 0
    assert scatter_add_workspace_size(10**6, 10**7, 1, np.float32) == 0
    assert scatter_add_workspace_size(10**6, 0, 1, np.float32) == 0
    assert scatter_add_workspace_size(10**6, SORT_MIN_EDGES - 1, 64, np.float32) == 0  # too few edges to sort


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
        split = 8 * split_table_capacity(256)  # 1024 slots: a launch of 256 edges into 1000 nodes may take it
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
    plan = plan_launch(1000, 10**6, 1, np.dtype(dtype), H200_LIKE, vec=1)
    assert plan.algorithm == "shared" and plan.scatter.name == "scatter_shared_v1"
    assert plan.scatter.shared_bytes == 4 * 1000 * 2 <= H200_LIKE.max_shared_per_block


def test_rows_too_wide_for_shared_memory_use_global_atomics_unless_sliced_on_request():
    assert plan_launch(1000, 10**6, 64, np.dtype(np.float32), H200_LIKE, vec=4, with_counts=True).algorithm == "global"
    assert plan_launch(1000, 10**6, 64, np.dtype(np.float32), H200_LIKE, vec=4).algorithm == "direct"  # no counts
    plan = plan_launch(1000, 10**6, 64, np.dtype(np.float32), H200_LIKE, vec=4, algorithm="shared")
    assert plan.algorithm == "shared" and plan.slice_width < 64 and plan.slice_width % 4 == 0
    assert plan.scatter.grid[1] == -(-64 // plan.slice_width)
    assert plan.slice_width * plan.scatter.grid[1] - 64 < 4 * plan.scatter.grid[1]  # slices of even width
    assert plan.scatter.shared_bytes + QUEUE_BYTES_PER_BLOCK <= H200_LIKE.max_shared_per_block


def test_many_nodes_use_global_atomics_and_fewer_edges_than_nodes_never_use_shared():
    counts = dict(with_counts=True)
    assert plan_launch(10**6, 10**7, 1, np.dtype(np.float32), H200_LIKE, vec=1, paired=False, **counts).algorithm == "global"
    edges = SHARED_MIN_EDGES_PER_NODE * 1000 - 1
    assert plan_launch(1000, edges, 1, np.dtype(np.float32), H200_LIKE, vec=1, **counts).algorithm == "global"
    assert plan_launch(1000, edges, 1, np.dtype(np.float32), H200_LIKE, vec=1).algorithm == "direct"  # no counts


def test_large_float16_state_with_a_small_batch_uses_the_hash_table():
    plan = plan_launch(10**8, 10**4, 1, np.dtype(np.float16), H200_LIKE, vec=1, with_counts=True)
    assert plan.algorithm == "hashed" and plan.table is not None and plan.table.hashed
    assert plan.apply is not None and plan.apply.name == "apply_table_v1"


def test_node_passes_cover_all_nodes_once_and_only_for_large_states_with_reused_wide_rows():
    plan = plan_launch(10**6, 10**7, 64, np.dtype(np.float32), H200_LIKE, vec=4)
    ranges = plan.node_ranges
    assert len(ranges) > 1 and ranges[0][0] == 0 and ranges[-1][1] == 10**6
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert len(plan_launch(10**6, 10**7, 1, np.dtype(np.float32), H200_LIKE, vec=1).node_ranges) == 1
    assert len(plan_launch(10**6, 10**6, 64, np.dtype(np.float32), H200_LIKE, vec=4).node_ranges) == 1
    assert len(plan_launch(10**6, 10**7, 64, np.dtype(np.float32), H200_LIKE, vec=4, node_passes=1).node_ranges) == 1


def test_grids_stay_within_one_resident_wave():
    for nodes, edges, features in [(10**6, 10**8, 1), (10**6, 10**5, 64), (10, 10, 3)]:  # the direct kernel: below
        plan = plan_launch(nodes, edges, features, np.dtype(np.float32), H200_LIKE, vec=1, algorithm="global")
        assert 1 <= plan.scatter.grid[0] * plan.scatter.grid[1] <= 8 * H200_LIKE.sm_count


def paired_plan(nodes, edges, dtype=np.float32, device=H200_LIKE, **overrides):
    args = dict(with_counts=True)
    args.update(overrides)
    algorithm = args.pop("algorithm", "auto")
    return plan_launch(nodes, edges, 1, np.dtype(dtype), device, vec=1, algorithm=algorithm, **args)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
def test_one_feature_with_counts_pairs_value_and_count_in_one_atomic(dtype):
    plan = paired_plan(10**6, 10**7, dtype)
    assert plan.paired and plan.algorithm == "global" and plan.scatter.name == "scatter_global_pairs"
    assert plan.fold is not None and plan.fold.name == "fold_pairs" and len(plan.node_ranges) == 1
    assert plan.fold.grid[0] * THREADS_PER_BLOCK >= 10**6  # a thread per node
    assert plan.table is None and plan.apply is None  # float16 too: the pairs replace its table


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
def test_paired_global_atomics_replace_large_shared_arrays_below_their_edges_per_node(dtype):
    big, small = PAIRS_OVER_SHARED_MIN_NODES, PAIRS_OVER_SHARED_MIN_NODES - 1
    below = paired_plan(big, SHARED_OVER_PAIRS_MIN_EDGES_PER_NODE * big - 1, dtype)
    assert below.algorithm == "global" and below.paired
    above = paired_plan(big, SHARED_OVER_PAIRS_MIN_EDGES_PER_NODE * big, dtype)
    assert above.algorithm == "shared" and not above.paired  # pairs do not pay in the shared kernel
    few_nodes = paired_plan(small, SHARED_MIN_EDGES_PER_NODE * small, dtype)
    assert few_nodes.algorithm == "shared" and not few_nodes.paired
    no_counts = paired_plan(big, SHARED_MIN_EDGES_PER_NODE * big, dtype, with_counts=False)
    # without counts float32 takes the direct kernel below SHARED_OVER_DIRECT_MIN_EDGES_PER_NODE (float16 too
    # with plan.HALF_DIRECT_INTO_TABLE, into its one-slot table: not yet measured on a GPU, off)
    assert no_counts.algorithm == ("direct" if dtype == np.float32 else "shared") and not no_counts.paired
    forced = paired_plan(1000, 10**6, dtype, algorithm="shared", paired=True)
    assert forced.algorithm == "shared" and forced.paired and forced.scatter.name == "scatter_shared_pairs"
    assert not paired_plan(1000, 10**6, dtype, algorithm="shared").paired


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float16"])
def test_pairs_only_where_they_fit_and_pay(dtype):
    assert not paired_plan(10**6, 10**7, dtype, with_counts=False).paired
    assert not paired_plan(10**6, 10**7, dtype, counts_aligned=False).paired  # the pairs live in the counts
    assert not paired_plan(10**6, 10**7, dtype, device=dataclasses.replace(H200_LIKE, arch=80)).paired
    assert not paired_plan(10**6, 10**6 - 1, dtype).paired  # E < N: the O(N) fold would cost more than it saves
    assert paired_plan(10**6, 10**6, dtype).paired
    wide = plan_launch(10**6, 10**7, 3, np.dtype(dtype), H200_LIKE, vec=1, with_counts=True)
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
    alone = paired_plan(nodes, PAIRED_MAX_EDGES + 1, dtype, algorithm="global", pairs_workspace=False)
    assert not alone.paired and alone.fold is None and alone.scatter.name == "scatter_global_v1"
    assert (alone.table is not None and alone.apply is not None) == (dtype == np.float16)
    with pytest.raises(ValueError, match="a workspace for the pairs"):
        paired_plan(nodes, PAIRED_MAX_EDGES + 1, dtype, paired=True, pairs_workspace=False)


def test_chunked_pairs_only_where_each_chunk_has_at_least_one_edge_per_node():
    # Every fold is O(N): 10^8 edges in 6 chunks pay for N = 10^6 (6e6 <= 1e8), not for N = 2e7 (1.2e8 > 1e8).
    assert paired_plan(10**6, 10**8).pair_chunks == 6
    assert not paired_plan(2 * 10**7, 10**8).paired


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
    partition = partition_layout((10**6 - 1) // 2, 1)  # without counts: E < N / 2 may partition (the table hashed)
    assert partition is not None
    split = 8 * split_table_capacity(2**18)  # the table is hashed for E <= 2^18 into 1e6 nodes
    assert scatter_add_workspace_size(10**6, 10**8, 1, np.float16, with_counts=False) == max(table.nbytes,
                                                                                              partition.nbytes, split)


def test_forcing_pairs_is_refused_where_they_cannot_be_used():
    assert paired_plan(10**6, 10**5, paired=True).paired
    assert paired_plan(10**6, 10**7, device=dataclasses.replace(H200_LIKE, arch=80), paired=True).paired
    assert not paired_plan(10**6, 10**7, paired=False).paired
    for refused in (dict(with_counts=False), dict(counts_aligned=False)):
        with pytest.raises(ValueError, match="paired path needs"):
            paired_plan(10**6, 10**7, paired=True, **refused)
    with pytest.raises(ValueError, match="paired path needs"):
        plan_launch(10**6, 10**7, 2, np.dtype(np.float32), H200_LIKE, vec=2, with_counts=True, paired=True)


def sorted_plan(nodes, edges, features, vec=4, **overrides):
    options = dict(with_counts=True, sort_workspace=True) | overrides
    return plan_launch(nodes, edges, features, np.dtype(np.float32), H200_LIKE, vec, **options)


@pytest.mark.parametrize("nodes, edges", [(1000, 10**6), (10**4, 10**6), (10**6, 10**6), (10**6, 10**8)])
def test_wide_rows_with_counts_and_many_edges_sort_the_edges(nodes, edges):
    plan = sorted_plan(nodes, edges, 64)
    assert plan.algorithm == "sorted" and plan.sort is not None and plan.table is None and not plan.zeroing
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
    (10**6, 10**6, 64, dict(with_counts=False, sort_workspace=False)),  # nothing O(N) without counts
    (10**6, 10**6, 64, dict(sort_workspace=False)),  # a workspace sized for smaller shapes
    (10**6, 10**6 - 1, 64, {}),  # fewer edges than nodes
    (1000, SORT_MIN_EDGES - 1, 64, {}),  # too few edges to pay for the sort's seven launches
    (1000, 10**6, SORT_MIN_FEATURES - 1, {}),  # narrow rows: few atomics per edge
])
def test_atomics_where_sorting_is_not_possible_or_does_not_pay(nodes, edges, features, overrides):
    assert sorted_plan(nodes, edges, features, vec=1, **overrides).algorithm != "sorted"


def test_float16_sorts_from_fewer_edges_than_float32_its_table_costing_more():
    half = np.dtype(np.float16)
    assert plan_launch(10**6, 10**5, 64, half, H200_LIKE, 4, with_counts=True, sort_workspace=True).algorithm == "sorted"
    assert sorted_plan(10**6, 10**5, 64).algorithm == "global"  # float32
    assert plan_launch(10**6, 6 * 10**4, 64, half, H200_LIKE, 4, with_counts=True, sort_workspace=True).sort is None
    assert scatter_add_workspace_size(10**6, 10**5, 64, half) >= sort_layout(10**6, 10**5, 64).nbytes


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
    for refused in (dict(with_counts=False), dict(sort_workspace=False)):
        with pytest.raises(ValueError, match="sorted path needs counts"):
            sorted_plan(1000, 10**6, 64, algorithm="sorted", **refused)
    assert sorted_plan(3, 1, 1, vec=1, algorithm="sorted").sort.fixup is None  # one range: no fixup


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("with_counts", [True, False])
def test_few_nodes_with_wide_rows_and_many_edges_sort_chunks_in_shared_memory(dtype, with_counts):
    plan = plan_launch(1000, 10**7, 64, np.dtype(dtype), H200_LIKE, 4, with_counts=with_counts, sort_workspace=True)
    assert plan.algorithm == "chunked" and plan.vec == 2 and plan.sort is None and not plan.zeroing
    assert plan.scatter.name == "chunk_reduce_v2" and plan.scatter.shared_bytes == chunk_shared_bytes(1000)
    # 3 resident blocks on each of 132 SMs: 1e7 edges in 396 chunks of 25280 (not 306 of 32768, a wave 77% full)
    assert H200_LIKE.shared_per_sm // (chunk_shared_bytes(1000) + 1024) == 3
    assert plan.scatter.grid == (396, 1) and plan.chunk_edges == 25280 and "chunk=25280" in describe(plan)
    assert (plan.table is not None and not plan.table.hashed and plan.apply is not None) == (dtype == np.float16)
    many = plan_launch(1000, 10**8, 64, np.dtype(dtype), H200_LIKE, 4, with_counts=with_counts)
    assert many.scatter.grid == (396, 1) and many.chunk_edges == 31584  # 8 rounds of 396 chunks (the last 395)
    for nodes, edges, features in ((CHUNK_MAX_NODES + 1, 10**7, 64), (1000, CHUNK_MIN_EDGES - 1, 64),
                                   (1000, 10**7, SORT_MIN_FEATURES - 1)):
        assert plan_launch(nodes, edges, features, np.dtype(dtype), H200_LIKE, 4, with_counts=True,
                           sort_workspace=True).algorithm != "chunked"


def test_forcing_the_chunked_path_is_refused_beyond_its_shared_memory():
    with pytest.raises(ValueError, match="at most 2048 nodes"):
        plan_launch(CHUNK_MAX_NODES + 1, 10**6, 64, np.dtype(np.float32), H200_LIKE, 4, algorithm="chunked")
    with pytest.raises(ValueError, match="one table slot per node"):  # float16 with a hashed table
        plan_launch(2000, 10, 64, np.dtype(np.float16), H200_LIKE, 4, algorithm="chunked")
    sliced = plan_launch(7, 100, 200, np.dtype(np.float32), H200_LIKE, 4, algorithm="chunked")
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
    plan = plan_launch(nodes, edges, features, np.dtype(np.float32), device, vec, algorithm="chunked")
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
        plan_launch(10**6, 10**7, 1, np.dtype(np.float32), H200_LIKE, vec=1, algorithm="shared")
    with pytest.raises(ValueError, match="unknown algorithm"):
        plan_launch(10, 10, 1, np.dtype(np.float32), H200_LIKE, vec=1, algorithm="fast")


# --- argument checks before any CUDA call (no GPU here) -----------------------------------------------------
# --- launches without counts: direct, owned, partitioned ----------------------------------------------------
@pytest.mark.parametrize("dtype, nodes, edges, features, expected", [
    (np.float32, 10**6, 10**4, 1, "direct"),         # a small update of a large state
    (np.float32, 10**8, 10**6, 1, "direct"),
    (np.float32, 10**4, 10**6, 1, "direct"),         # 100 edges per node: below the shared kernel's threshold
    (np.float32, 1000, 10**6, 1, "shared"),          # 1000 edges per node: shared memory first
    (np.float32, 10**6, 10**7, 64, "global"),        # 256 MB of wide, reused rows: node passes
    (np.float16, 10**8, 10**4, 1, "owned"),          # up to OWNED_MAX_EDGES: one launch, no workspace
    (np.float16, 10**6, 2**15, 4, "owned"),
    (np.float16, 10**6, 2**15, 5, "hashed"),         # rows wider than OWNED_MAX_FEATURES: the table
    (np.float16, 10**4, 10**4, 1, "global"),         # the table with one slot per node is faster
    (np.float16, 32768, 10**4, 1, "global"),         # still one slot per node (2^ceil(log2(2E)) = 32768)
    (np.float16, 32769, 10**4, 1, "owned"),
    (np.float16, 10**7, 10**6, 1, "partitioned"),    # (all without the split_table's workspace: below)
    (np.float16, 10**6, 10**6, 1, "global"),         # one slot per node
    (np.float16, 1000, 10**6, 1, "shared"),
    (np.float16, 10**7, 10**6, 2, "hashed"),         # partitioned takes F = 1 only ("auto")
    (np.float16, 10**8, PARTITION_MAX_EDGES + 1, 1, "hashed"),
])
def test_small_updates_without_counts_take_the_direct_owned_or_partitioned_path(dtype, nodes, edges, features,
                                                                                expected, monkeypatch):
    from plugin.kernels import plan as plans

    vec = 4 if features % 4 == 0 else 1
    plan = plan_launch(nodes, edges, features, np.dtype(dtype), H200_LIKE, vec, partition_workspace=True)
    assert plan.algorithm == expected
    if expected == "owned":  # clustered only when switched on, and from sm_90 (clusters); owned before
        monkeypatch.setattr(plans, "AUTO_CLUSTERED", True)
        assert plan_launch(nodes, edges, features, np.dtype(dtype), H200_LIKE, vec).algorithm == "clustered"
        older = dataclasses.replace(H200_LIKE, arch=80)
        assert plan_launch(nodes, edges, features, np.dtype(dtype), older, vec).algorithm == "owned"
        monkeypatch.setattr(plans, "AUTO_CLUSTERED", False)
    counted = plan_launch(nodes, edges, features, np.dtype(dtype), H200_LIKE, vec, with_counts=True)
    assert counted.algorithm not in ("direct", "owned", "clustered", "partitioned")  # with counts: as before
    if expected == "partitioned":  # without its workspace: the table
        assert plan_launch(nodes, edges, features, np.dtype(dtype), H200_LIKE, vec).algorithm == "hashed"


def test_direct_grid_covers_the_elements_up_to_its_blocks_per_sm():
    small = plan_launch(10**6, 10**4, 1, np.dtype(np.float32), H200_LIKE, 1)
    assert small.scatter == KernelLaunch("scatter_direct_v1", (-(-10**4 // THREADS_PER_BLOCK), 1))
    wide = plan_launch(10**5, 10**4, 64, np.dtype(np.float32), H200_LIKE, 4, algorithm="direct")
    assert wide.scatter.name == "scatter_direct_v4" and wide.scatter.grid[0] * THREADS_PER_BLOCK >= 16 * 10**4
    large = plan_launch(10**8, 10**8, 1, np.dtype(np.float32), H200_LIKE, 1)
    assert large.scatter.grid == (DIRECT_BLOCKS_PER_SM * H200_LIKE.sm_count, 1)  # a grid-stride loop beyond


@pytest.mark.parametrize("edges", [1, 255, 10**4, OWNED_MAX_EDGES, 10**6])
def test_owned_blocks_each_get_a_table_for_their_share_of_the_edges(edges):
    plan = plan_launch(10**8, edges, 1, np.dtype(np.float16), H200_LIKE, 1, algorithm="owned")
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


@pytest.mark.parametrize("edges, features", [(1, 1), (10**4, 1), (OWNED_MAX_EDGES, 4), (10**6, 1)])
def test_clustered_blocks_come_in_whole_clusters_with_tables_under_48_kib(edges, features):
    from plugin.kernels import plan as plans

    plan = plan_launch(10**8, edges, features, np.dtype(np.float16), H200_LIKE, 1, algorithm="clustered")
    blocks = plan.scatter.grid[0]
    assert plan.scatter.name == "scatter_clustered" and plan.scatter.block == plans.CLUSTER_THREADS
    assert blocks == plans.CLUSTER_GRID_BLOCKS and blocks % plans.CLUSTER_BLOCKS == 0
    capacity = plan.owned.capacity
    assert capacity & (capacity - 1) == 0 and plan.owned.probes == min(capacity, OWNED_MAX_PROBES)
    assert plan.scatter.shared_bytes == owned_shared_bytes(capacity, features) <= plans.CLUSTER_MAX_SHARED
    share = -(-edges // blocks)
    assert 3 * share <= 2 * capacity or 2 * owned_shared_bytes(capacity, features) > plans.CLUSTER_MAX_SHARED
    with pytest.raises(ValueError, match="sm_90"):
        plan_launch(10**8, edges, features, np.dtype(np.float16), dataclasses.replace(H200_LIKE, arch=80), 1,
                    algorithm="clustered")


@pytest.mark.parametrize("edges, features", [(1, 1), (4096, 1), (4097, 3), (10**6, 1), (PARTITION_MAX_EDGES, 1)])
def test_partition_layout_sections_are_aligned_disjoint_and_large_enough(edges, features):
    layout = partition_layout(edges, features)
    assert layout is not None
    assert layout.chunks * layout.chunk_edges >= edges > (layout.chunks - 1) * layout.chunk_edges
    assert layout.chunk_capacity >= layout.chunk_edges  # a chunk's table never fills
    assert 3 * -(-edges // layout.buckets) <= 2 * layout.bucket.capacity  # a bucket's average share: at most 2/3
    assert layout.bucket.probes == min(layout.bucket.capacity, OWNED_MAX_PROBES)
    offsets = [0, layout.sums_offset, layout.offsets_offset, layout.nbytes]
    assert all(offset % 256 == 0 for offset in offsets)
    sizes = [4 * edges, 4 * edges * features, 4 * layout.chunks * (layout.buckets + 1)]
    assert all(end - start >= size for start, end, size in zip(offsets, offsets[1:], sizes))
    assert partition_layout(0, 1) is None
    chunks, reduce = plan_launch(10**8, edges, features, np.dtype(np.float16), H200_LIKE, 1, algorithm="partitioned",
                                 partition_workspace=True).scatter, None
    assert chunks.grid == (layout.chunks, 1) and chunks.block == OWNED_THREADS


def test_partitioned_workspace_only_where_auto_may_partition_and_growing_with_the_sizes():
    half = np.float16
    from plugin.kernels.plan import grid_table_workspace_bytes

    assert scatter_add_workspace_size(10**8, OWNED_MAX_EDGES, 2, half, with_counts=True) == table_layout(
        10**8, OWNED_MAX_EDGES, 2).nbytes  # the owned path needs none (without counts: the grid_table path's table)
    table, partition = table_layout(10**8, 10**6, 1), partition_layout(10**6, 1)
    assert table is not None and partition is not None  # the float16 workspace serves the table too
    grid = grid_table_workspace_bytes(10**8, 10**6, 1, half, with_counts=False)
    assert scatter_add_workspace_size(10**8, 10**6, 1, half, with_counts=False) == max(table.nbytes, partition.nbytes,
                                                                                      grid)
    assert scatter_add_workspace_size(10**8, 10**6, 1, half, with_counts=True) == table.nbytes
    assert scatter_add_workspace_size(10**8, 10**6, 2, half, with_counts=False) == table_layout(10**8, 10**6, 2).nbytes
    assert scatter_add_workspace_size(10**8, 10**6, 1, np.float32, with_counts=False) == 0
    forced = scatter_add_workspace_size(1000, 10**5, 3, np.float32, with_counts=False, algorithm="partitioned")
    assert forced == partition_layout(10**5, 3).nbytes
    sizes = [scatter_add_workspace_size(n, e, 1, half, with_counts=False)
             for n, e in [(10**4, 10**5), (10**5, 10**5), (10**5, 10**6), (10**7, 10**6), (10**7, 10**7), (10**8, 10**7)]]
    assert sizes == sorted(sizes)


def test_paths_without_counts_refuse_counts_float16_direct_and_a_missing_workspace():
    half, single = np.dtype(np.float16), np.dtype(np.float32)
    for algorithm in ("direct", "owned", "clustered", "partitioned"):
        with pytest.raises(ValueError, match="without counts"):
            plan_launch(1000, 1000, 1, single, H200_LIKE, 1, algorithm=algorithm, with_counts=True,
                        partition_workspace=True)
    with pytest.raises(ValueError, match="would be hashed"):  # float16 direct needs the one-slot table
        plan_launch(10**6, 1000, 1, half, H200_LIKE, 1, algorithm="direct")
    one_slot = plan_launch(1000, 1000, 1, half, H200_LIKE, 1, algorithm="direct")
    assert one_slot.table is not None and not one_slot.table.hashed and one_slot.apply is not None
    with pytest.raises(ValueError, match="workspace of partition_layout bytes"):
        plan_launch(1000, 1000, 1, half, H200_LIKE, 1, algorithm="partitioned")
    with pytest.raises(ValueError, match="too wide"):
        plan_launch(1000, 1000, 10**5, half, H200_LIKE, 1, algorithm="owned")


def launch_args(**overrides):
    args = dict(state=256, src=512, index=768, counts=0, num_nodes=10, num_edges=5, num_features=2,
                dtype=np.float32, stream=0)
    args.update(overrides)
    return args


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(dtype=np.float64), "float32 or float16"),
        (dict(num_nodes=-1), "num_nodes"),
        (dict(num_edges=2.0), "num_edges"),
        (dict(num_features=0), "num_features"),
        (dict(num_nodes=MAX_NODES + 1), "32-bit node ids"),
        (dict(num_edges=MAX_EDGES + 1), "32-bit counts"),
        (dict(src=0), "src and index"),
        (dict(index=0), "src and index"),
        (dict(state=0), "state"),
        (dict(dtype=np.float16), "workspace"),
        (dict(dtype=np.float16, workspace=1024, workspace_size=8), "workspace of"),
        (dict(dtype=np.float16, num_features=1, counts=1024, workspace=1024, workspace_size=79), "workspace of"),
        (dict(dtype=np.float16, num_features=1, counts=1024), "workspace"),  # also where pairs would replace the table
    ],
)
def test_launch_refuses_bad_arguments_before_touching_cuda(overrides, message):
    with pytest.raises(ValueError, match=message):
        scatter_add_launch(**launch_args(**overrides))


@pytest.mark.parametrize(
    "state, src, index, message",
    [
        (np.zeros((4, 2), np.float32), np.zeros((3, 2), np.float16), np.zeros(3, np.int64), "dtype"),
        (np.zeros((4, 2), np.float32), np.zeros((3, 3), np.float32), np.zeros(3, np.int64), "features"),
        (np.zeros((4, 2), np.float32), np.zeros(3, np.float32), np.zeros(3, np.int64), r"\[N, F\]"),
        (np.zeros((4, 2), np.float32), np.zeros((3, 2), np.float32), np.zeros(4, np.int64), "one entry per src row"),
        (np.zeros((4, 2), np.float32), np.zeros((3, 2), np.float32), np.zeros(3, np.float32), "integers"),
        (np.zeros((4, 0), np.float32), np.zeros((3, 0), np.float32), np.zeros(3, np.int64), "at least one feature"),
        (np.zeros((4, 2), np.int32), np.zeros((3, 2), np.int32), np.zeros(3, np.int64), "float32 or float16"),
    ],
)
def test_host_entry_refuses_mismatched_arrays(state, src, index, message):
    with pytest.raises(ValueError, match=message):
        check_host_arrays(state, src, index)


def test_host_entry_accepts_flat_arrays_and_small_integer_indices():
    state, src, index = check_host_arrays(np.ones(4, np.float16), np.ones(3, np.float16), np.array([0, 1, 3], np.int32))
    assert state.shape == (4,) and index.dtype == np.int64


def test_prepared_kernel_arguments_hold_each_value_and_patch_pointers_with_offsets():
    # cuLaunchKernel reads each argument from the address in the void* array: 8-byte pointers and int64s, and
    # int32s from the low half of their slot (little-endian). Pointers are (position, offset) and follow the
    # pointer tuple; a null base stays null (an absent buffer, not a small address).
    import ctypes

    from plugin.kernels.launch import COUNTS, SRC, WORKSPACE, _KernelArguments

    arguments = _KernelArguments(((SRC, 0), -5, 2**40 + 3, (WORKSPACE, 256), (COUNTS, 0), 0))
    pointers = [ctypes.c_void_p.from_address(arguments.address + 8 * i).value for i in range(6)]

    def read(ctype, i):
        return ctype.from_address(pointers[i]).value

    assert read(ctypes.c_int32, 1) == -5 and read(ctypes.c_int64, 1) == -5
    assert read(ctypes.c_int64, 2) == 2**40 + 3
    arguments.patch((0x1000, 0x7F0000, 0, 0, 0x90000, 0))
    assert [read(ctypes.c_uint64, i) for i in (0, 3, 4, 5)] == [0x7F0000, 0x90000 + 256, 0, 0]
    arguments.patch((0, 0x7E0000, 0, 0x5000, 0xA0000, 0))
    assert [read(ctypes.c_uint64, i) for i in (0, 3, 4)] == [0x7E0000, 0xA0000 + 256, 0x5000]
    assert read(ctypes.c_int32, 1) == -5  # constants are written once and stay


# The C layout of scatter_global_v*'s 13 parameters (pointers and i64 8 bytes, int 4), as cuFuncGetParamInfo
# gives it: int arguments share 8-byte words, so the packed buffer is not 8-byte slots.
SCATTER_GLOBAL_LAYOUT = ((0, 8), (8, 8), (16, 8), (24, 8), (32, 4), (36, 4), (40, 8), (48, 8), (56, 4), (64, 8),
                         (72, 8), (80, 8), (88, 8))


def test_kernel_arguments_laid_out_at_the_kernel_offsets_make_one_packed_buffer_for_extra():
    import ctypes

    from plugin.kernels.launch import COUNTS, SRC, STATE, _KernelArguments

    values = ((SRC, 0), (SRC, 64), 10**4, 10**6, 3, -1, (STATE, 0), 0, 7, (COUNTS, 0), 0, 0, 2**40 + 5)
    arguments = _KernelArguments(values)
    arguments.lay_out(SCATTER_GLOBAL_LAYOUT)
    arguments.patch((0x7E0000, 0x7F0000, 0, 0x5000, 0, 0))
    marker_pointer, buffer, marker_size, size_address, end = (ctypes.c_void_p * 5).from_address(arguments.extra_address)
    assert (marker_pointer, marker_size, end) == (1, 2, None)  # CU_LAUNCH_PARAM_BUFFER_POINTER, _SIZE, _END
    assert ctypes.c_size_t.from_address(size_address).value == 96  # the end of the last parameter
    packed = ctypes.string_at(buffer, 96)

    def field(offset, size, signed=False):
        return int.from_bytes(packed[offset:offset + size], "little", signed=signed)

    assert [field(0, 8), field(8, 8), field(16, 8), field(24, 8)] == [0x7F0000, 0x7F0000 + 64, 10**4, 10**6]
    assert [field(32, 4), field(36, 4, signed=True), field(40, 8), field(48, 8), field(56, 4)] == [3, -1, 0x7E0000, 0, 7]
    assert [field(64, 8), field(72, 8), field(80, 8), field(88, 8)] == [0x5000, 0, 0, 2**40 + 5]
    # kernelParams points into the same buffer, at each parameter's offset
    params = (ctypes.c_void_p * 13).from_address(arguments.address)
    assert [params[i] - buffer for i in range(13)] == [offset for offset, _ in SCATTER_GLOBAL_LAYOUT]
    arguments.patch((0x1000, 0x2000, 0, 0, 0, 0))  # new pointers: the pointer words change, the constants stay
    packed = ctypes.string_at(buffer, 96)
    assert [field(0, 8), field(40, 8), field(64, 8), field(32, 4), field(88, 8)] == [0x2000, 0x1000, 0, 3, 2**40 + 5]


def test_kernel_arguments_refuse_a_layout_that_does_not_fit_them():
    from plugin.kernels.launch import SRC, _KernelArguments

    with pytest.raises(ValueError, match="takes 2 parameters; 3 prepared"):
        _KernelArguments(((SRC, 0), 1, 2)).lay_out(((0, 8), (8, 4)))
    with pytest.raises(ValueError, match="pointer parameter must be 8 bytes at an 8-byte offset; got 4 at 8"):
        _KernelArguments((1, (SRC, 0))).lay_out(((0, 4), (8, 4)))
    without_layout = _KernelArguments(((SRC, 0), 1))
    assert without_layout.extra_address == 0  # 8-byte slots: kernelParams only


def test_parameter_layout_reads_every_parameter_and_gives_up_where_the_driver_cannot_tell():
    from cuda.bindings import driver as cuda_driver

    from plugin.kernels.launch import parameter_layout

    success, invalid = cuda_driver.CUresult.CUDA_SUCCESS, cuda_driver.CUresult.CUDA_ERROR_INVALID_VALUE

    class Driver:
        def __init__(self, layout, fail_at=None):
            self.layout, self.fail_at, self.asked = layout, fail_at, []

        def cuFuncGetParamInfo(self, function, index):
            self.asked.append(index)
            if index == self.fail_at:
                return (cuda_driver.CUresult.CUDA_ERROR_NOT_SUPPORTED, 0, 0)
            return (success, *self.layout[index]) if index < len(self.layout) else (invalid, 0, 0)

    exact = Driver(SCATTER_GLOBAL_LAYOUT)
    assert parameter_layout(exact, "f", 13) == SCATTER_GLOBAL_LAYOUT and exact.asked == list(range(14))
    assert parameter_layout(Driver(SCATTER_GLOBAL_LAYOUT), "f", 12) is None  # the kernel takes one more
    assert parameter_layout(Driver(SCATTER_GLOBAL_LAYOUT), "f", 14) is None  # one fewer
    assert parameter_layout(Driver(SCATTER_GLOBAL_LAYOUT, fail_at=4), "f", 13) is None
    assert parameter_layout(object(), "f", 13) is None  # bindings without cuFuncGetParamInfo

    class OldDriver:
        def cuFuncGetParamInfo(self, function, index):
            raise RuntimeError('Function "cuFuncGetParamInfo" not found')

    assert parameter_layout(OldDriver(), "f", 13) is None


# --- the driver calls a prepared launch issues (cuda.bindings' launch calls recorded, no GPU) ----------------
class RecordingDriver:
    """Replaces cuda.bindings.driver's launch, memset and context-id calls with recorders (its types stay
    real): each call appends (name, arguments) and returns the status queued for that name, else success."""

    def __init__(self, monkeypatch, context_id=1):
        from cuda.bindings import driver

        self.CUresult = driver.CUresult
        self.calls, self.statuses, self.context_id = [], {}, context_id
        for name in ("cuLaunchKernel", "cuLaunchCooperativeKernel", "cuMemsetD32Async"):
            monkeypatch.setattr(driver, name, self._recorder(name))
        self.cuCtxGetId = self._recorder("cuCtxGetId")
        self.parameter_layouts = None  # {function handle: ((offset, size), ...)}; None: a driver without it
        monkeypatch.setattr(driver, "cuFuncGetParamInfo", self._parameter_info)
        # CUDA graphs: streams being captured, and what capture, instantiation and replay return
        self.capturing, self.graphs = set(), 0
        for name in ("cuStreamIsCapturing", "cuStreamCreate", "cuStreamBeginCapture", "cuStreamEndCapture",
                     "cuGraphInstantiate", "cuGraphDestroy", "cuGraphExecDestroy", "cuGraphLaunch"):
            monkeypatch.setattr(driver, name, self._recorder(name))
        self.capture_status = driver.CUstreamCaptureStatus
        self.graph_types = {"cuStreamCreate": driver.CUstream, "cuStreamEndCapture": driver.CUgraph,
                            "cuGraphInstantiate": driver.CUgraphExec}

    def _parameter_info(self, function, index):
        if self.parameter_layouts is None:  # what cuda.bindings does where the driver lacks the entry point
            raise RuntimeError('Function "cuFuncGetParamInfo" not found')
        layout = self.parameter_layouts[int(function)]
        if index >= len(layout):
            return (self.CUresult.CUDA_ERROR_INVALID_VALUE, 0, 0)
        return (self.CUresult.CUDA_SUCCESS, *layout[index])

    def _recorder(self, name):
        def call(*arguments):
            self.calls.append((name, arguments))
            status = self.statuses.get(name, [self.CUresult.CUDA_SUCCESS])
            result = status.pop(0) if len(status) > 1 else status[0]
            if name == "cuCtxGetId":
                return (result, self.context_id)
            if name == "cuStreamIsCapturing":
                capturing = int(arguments[0]) in self.capturing
                return (result, getattr(self.capture_status, "CU_STREAM_CAPTURE_STATUS_" + ("ACTIVE" if capturing else "NONE")))
            if name == "cuStreamBeginCapture":
                self.capturing.add(int(arguments[0]))
            if name == "cuStreamEndCapture":
                self.capturing.discard(int(arguments[0]))
            if name in self.graph_types:  # a new handle: streams 0xCA0.., graphs and executable graphs 0x6A0..
                self.graphs += 1
                return (result, self.graph_types[name]((0xCA0 if name == "cuStreamCreate" else 0x6A0) + self.graphs))
            return (result,)

        return call

    def names(self):
        return [name for name, _ in self.calls]


@pytest.fixture
def recorded(monkeypatch):
    """A launcher whose kernels are 'loaded' (fake function handles, H200_LIKE, cooperative groups) in
    context 1 and whose driver calls are recorded: (RecordingDriver, launch module)."""
    from cuda.bindings import driver as cuda_driver

    from plugin import cuda_graph
    from plugin.kernels import launch

    names = launch.KERNEL_NAMES + launch.ZEROING_KERNEL_NAMES
    functions = {name: cuda_driver.CUfunction(0x1000 + i) for i, name in enumerate(names)}
    kernels = launch.LoadedKernels(None, functions, H200_LIKE, grid_sync=True)
    driver = RecordingDriver(monkeypatch)
    monkeypatch.setattr(launch, "prepare_kernels", lambda dtype: kernels)
    monkeypatch.setattr(launch, "current_context", lambda: driver.context_id)
    monkeypatch.setattr(launch, "_current_id", driver.cuCtxGetId)
    monkeypatch.setattr(launch, "_prepared", launch._PreparedPerThread())
    monkeypatch.setattr(cuda_graph, "_capture_streams", cuda_graph._CaptureStreams())  # no fake stream outlives it
    monkeypatch.setattr(launch.PreparedScatterAdd, "graph_replay", False)  # the graph tests below turn it on
    return driver, launch


STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR = 0x7F0000000000, 0x7F1000000000, 0x7F2000000000, 0x7F3000000000


def argument_slots(parameters, count):
    """The first `count` arguments a recorded kernelParams address points at, each read as its 8-byte slot."""
    import ctypes

    return [ctypes.c_uint64.from_address(ctypes.c_void_p.from_address(parameters + 8 * i).value).value
            for i in range(count)]


def uncounted_float16(launch, nodes, edges, **options):
    """A prepared float16 launch without counts, F = 1, its workspace sized by scatter_add_workspace_size."""
    size = scatter_add_workspace_size(nodes, edges, 1, np.float16, with_counts=False,
                                      algorithm=options.get("algorithm", "auto"))
    return launch.PreparedScatterAdd(num_nodes=nodes, num_edges=edges, num_features=1, dtype=np.float16,
                                     with_counts=False, workspace_size=size, **options)


def test_prepared_launch_with_counts_is_one_cooperative_call_bound_once_per_pointers_and_stream(recorded):
    from cuda.bindings import driver as cuda_driver

    driver, launch = recorded
    prepared = launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                         with_counts=True)
    plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)
    assert plan.zeroing and driver.names() == ["cuLaunchCooperativeKernel"]
    function, *launch_shape, stream, parameters = driver.calls[0][1]
    assert function is launch.prepare_kernels(np.float32).functions["scatter_global_zeroing_v1"]
    assert launch_shape == [H200_LIKE.sm_count * RESIDENT_BLOCKS_PER_SM, 1, 1, THREADS_PER_BLOCK, 1, 1, 0]
    assert isinstance(stream, cuda_driver.CUstream) and int(stream) == 5
    slots = argument_slots(parameters, 13)
    assert slots[:3] == [SRC_PTR, INDEX_PTR, 10**4] and slots[6] == STATE_PTR and slots[9] == COUNTS_PTR
    calls_made = prepared._calls
    prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)
    assert prepared._calls is calls_made and driver.calls[1] == driver.calls[0]  # same pointers: nothing rebound
    prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 7)  # another stream
    assert int(driver.calls[2][1][8]) == 7
    prepared(STATE_PTR + 256, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 7)  # another state buffer
    assert argument_slots(parameters, 7)[6] == STATE_PTR + 256


def test_prepared_launch_with_a_memset_passes_the_counts_address_and_word_count(recorded):
    driver, launch = recorded
    prepared = launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                         with_counts=True, zero_in_kernel=False)
    prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)
    assert driver.names() == ["cuMemsetD32Async", "cuLaunchKernel"]
    address, value, words, stream = driver.calls[0][1]
    assert (int(address), value, words, int(stream)) == (COUNTS_PTR, 0, 2 * 10**6, 5)
    assert driver.calls[1][1][-1] == 0  # cuLaunchKernel's extra


def test_prepared_launch_passes_the_packed_buffer_as_extra_where_the_driver_gives_the_layout(recorded):
    # With cuFuncGetParamInfo (CUDA >= 12.4 drivers) a plain launch passes the arguments packed at the kernel's
    # offsets as cuLaunchKernel's `extra`, kernelParams None; the cooperative launch has no `extra` and keeps
    # kernelParams (into the same buffer); launch_form = "kernel_params" keeps kernelParams everywhere.
    import ctypes

    driver, launch = recorded
    functions = launch.prepare_kernels(np.float32).functions
    driver.parameter_layouts = {int(function): SCATTER_GLOBAL_LAYOUT for name, function in functions.items()
                                if name.startswith("scatter_global")}
    prepared = launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                         with_counts=False, algorithm="global")
    prepared.launch_form = "extra"
    prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0, 5)
    assert driver.names() == ["cuLaunchKernel"]
    *_, stream, parameters, extra = driver.calls[0][1]
    assert int(stream) == 5 and parameters is None and extra
    _, buffer, _, size_address, _ = (ctypes.c_void_p * 5).from_address(extra)
    assert ctypes.c_size_t.from_address(size_address).value == 96
    words = (ctypes.c_uint64 * 12).from_address(buffer)
    assert [words[0], words[1], words[2], words[5]] == [SRC_PTR, INDEX_PTR, 10**4, STATE_PTR]  # dest at offset 40
    assert words[4] & 0xFFFFFFFF == 1  # num_features: an int at offset 32
    prepared(STATE_PTR + 256, SRC_PTR, INDEX_PTR, 0, 0, 5)  # new pointers patch the packed buffer
    assert words[5] == STATE_PTR + 256 and driver.calls[1][1][-1] == extra

    del driver.calls[:]
    cooperative = launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                            with_counts=True)
    cooperative.launch_form = "extra"
    cooperative(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)
    assert driver.names() == ["cuLaunchCooperativeKernel"] and isinstance(driver.calls[0][1][-1], int)

    del driver.calls[:]
    kernel_params = launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                              with_counts=False)
    kernel_params.launch_form = "kernel_params"
    kernel_params(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0, 5)
    *_, parameters, extra = driver.calls[0][1]
    assert isinstance(parameters, int) and parameters and extra == 0


def test_prepared_sorted_launch_zeroes_the_counts_then_sorts_sums_and_fixes_up_in_the_workspace(recorded):
    driver, launch = recorded
    nodes, edges, features, workspace = 10**6, 10**6, 64, 0x7F4000000000
    size = scatter_add_workspace_size(nodes, edges, features, np.float32)
    layout = sort_layout(nodes, edges, features)
    prepared = launch.PreparedScatterAdd(num_nodes=nodes, num_edges=edges, num_features=features, dtype=np.float32,
                                         with_counts=True, workspace_size=size)
    plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, workspace, 5)
    assert plan.algorithm == "sorted"
    assert driver.names() == ["cuMemsetD32Async"] + ["cuLaunchKernel"] * 7
    functions = launch.prepare_kernels(np.float32).functions
    names = [next(n for n, f in functions.items() if f is call[1][0]) for call in driver.calls[1:]]
    assert names == ["sort_count", "sort_tile_sums", "sort_scan_tiles", "sort_cursors", "sort_place",
                     "sort_reduce_v2", "sort_fixup_v2"]

    parameters = [call[1][9] for call in driver.calls[1:]]
    assert argument_slots(parameters[0], 6) == [INDEX_PTR, edges, nodes, COUNTS_PTR, 0, 0]  # no skipped, no tallies
    assert argument_slots(parameters[5], 9) == [SRC_PTR, workspace + layout.sorted_offset, workspace, nodes,
                                                features, layout.span, STATE_PTR, workspace + layout.head_offset,
                                                workspace + layout.tail_offset]
    assert argument_slots(parameters[6], 6)[5] == layout.ranges
    with pytest.raises(ValueError, match="prepared with a workspace"):
        prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)

    del driver.calls[:]  # few nodes: one block scans them all (sort_cursors alone), tallies in shared memory
    few = launch.PreparedScatterAdd(num_nodes=1000, num_edges=edges, num_features=features, dtype=np.float32,
                                    with_counts=True, workspace_size=scatter_add_workspace_size(1000, edges, 64, "float32"))
    few(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, workspace, 5)
    names = [next(n for n, f in functions.items() if f is call[1][0]) for call in driver.calls[1:]]
    assert names == ["sort_count", "sort_cursors", "sort_place", "sort_reduce_v2", "sort_fixup_v2"]
    assert driver.calls[1][1][7] == 4 * 1000  # the tallies' shared memory


def test_prepared_chunked_launch_is_one_kernel_after_the_memsets_and_before_float16s_apply(recorded):
    driver, launch = recorded
    functions = launch.prepare_kernels(np.float32).functions
    for dtype, names in ((np.float32, ["cuMemsetD32Async", "cuLaunchKernel"]),
                         (np.float16, ["cuMemsetD32Async", "cuMemsetD32Async", "cuLaunchKernel", "cuLaunchKernel"])):
        del driver.calls[:]
        size = scatter_add_workspace_size(1000, 10**7, 64, dtype)
        prepared = launch.PreparedScatterAdd(num_nodes=1000, num_edges=10**7, num_features=64, dtype=dtype,
                                             with_counts=True, workspace_size=size)
        plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0x7F4000000000 if size else 0, 5)
        assert plan.algorithm == "chunked" and driver.names() == names
        call = next(c for c in driver.calls if c[0] == "cuLaunchKernel")
        assert call[1][0] is functions["chunk_reduce_v2"] and call[1][7] == chunk_shared_bytes(1000)
        slots = argument_slots(call[1][9], 9)
        dest = STATE_PTR if dtype == np.float32 else 0x7F4000000000 + plan.table.values_offset
        assert slots == [SRC_PTR, INDEX_PTR, 10**7, 1000, 64, plan.chunk_edges, dest, COUNTS_PTR, 0]
        assert plan.chunk_edges == 25280


def test_float16_direct_into_the_one_slot_table_is_taken_by_auto_only_when_switched_on(monkeypatch):
    from plugin.kernels import plan as plans

    half = np.dtype(np.float16)
    assert plan_launch(10**4, 10**4, 1, half, H200_LIKE, 1).algorithm == "global"
    monkeypatch.setattr(plans, "HALF_DIRECT_INTO_TABLE", True)
    switched = plan_launch(10**4, 10**4, 1, half, H200_LIKE, 1)
    assert switched.algorithm == "direct" and switched.table is not None and not switched.table.hashed
    assert plan_launch(1000, 10**6, 1, half, H200_LIKE, 1).algorithm == "shared"  # 1000 edges per node
    assert plan_launch(10**8, 10**4, 1, half, H200_LIKE, 1).algorithm == "owned"  # the table would be hashed


def test_prepared_float16_direct_zeroes_the_one_slot_table_adds_into_it_and_applies_it(recorded):
    driver, launch = recorded
    functions = launch.prepare_kernels(np.float16).functions
    workspace = 0x7F4000000000
    prepared = uncounted_float16(launch, 10**4, 10**4, algorithm="direct")
    plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace, 5)
    table = plan.table
    assert plan.algorithm == "direct" and table is not None and not table.hashed
    assert driver.names() == ["cuMemsetD32Async", "cuLaunchKernel", "cuLaunchKernel"]  # no keys to fill
    memset, scatter, apply = (call[1] for call in driver.calls)
    assert int(memset[0]) == workspace + table.values_offset and memset[1:3] == (0, table.capacity)
    assert scatter[0] is functions["scatter_direct_v1"] and apply[0] is functions["apply_table_v1"]
    assert argument_slots(scatter[9], 7) == [SRC_PTR, INDEX_PTR, 10**4, 10**4, 1, workspace + table.values_offset, 0]
    assert argument_slots(apply[9], 7) == [STATE_PTR, 0, workspace + table.values_offset, table.capacity, 1,
                                           plan.apply_lanes_log2, 10**4]


def test_prepared_launches_without_counts_are_one_or_two_kernels_with_their_blocks_and_workspace(recorded):
    driver, launch = recorded
    functions = launch.prepare_kernels(np.float16).functions
    workspace = 0x7F4000000000
    owned = launch.PreparedScatterAdd(num_nodes=10**8, num_edges=10**4, num_features=1, dtype=np.float16,
                                      with_counts=False, algorithm="owned", workspace_size=scatter_add_workspace_size(
                                          10**8, 10**4, 1, np.float16, with_counts=False))
    plan = owned(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace, 5)
    assert plan.algorithm == "owned" and driver.names() == ["cuLaunchKernel"]  # no memset, no apply
    function, grid_x, grid_y, grid_z, block_x, *_, shared, stream, parameters, extra = driver.calls[0][1]
    blocks = min(H200_LIKE.sm_count, -(-10**4 // OWNED_EDGES_PER_BLOCK))
    assert function is functions["scatter_owned"] and (grid_x, block_x) == (blocks, OWNED_THREADS)
    assert shared == plan.scatter.shared_bytes
    assert argument_slots(parameters, 9) == [SRC_PTR, INDEX_PTR, 10**4, 10**8, 1, plan.owned.capacity,
                                             plan.owned.probes, STATE_PTR, 0]

    del driver.calls[:]
    partitioned = uncounted_float16(launch, 10**7, 10**6, algorithm="partitioned")
    plan = partitioned(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace, 5)
    layout = plan.partition
    assert plan.algorithm == "partitioned" and driver.names() == ["cuLaunchKernel", "cuLaunchKernel"]
    first, second = (call[1] for call in driver.calls)
    assert first[0] is functions["partition_chunks"] and second[0] is functions["reduce_buckets"]
    assert (first[1], first[4], second[1], second[4]) == (layout.chunks, OWNED_THREADS, layout.buckets, OWNED_THREADS)
    nodes, sums, offsets = workspace, workspace + layout.sums_offset, workspace + layout.offsets_offset
    assert argument_slots(first[9], 12) == [SRC_PTR, INDEX_PTR, 10**6, 10**7, 1, layout.chunk_edges, layout.buckets,
                                            layout.chunk_capacity, nodes, sums, offsets, 0]
    assert argument_slots(second[9], 9) == [nodes, sums, offsets, 1, layout.chunk_edges, layout.chunks,
                                            layout.bucket.capacity, layout.bucket.probes, STATE_PTR]

    del driver.calls[:]
    direct = launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                       with_counts=False, with_skipped=True)
    assert direct(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0, 5, skipped=COUNTS_PTR).algorithm == "direct"
    assert driver.names() == ["cuMemsetD32Async", "cuLaunchKernel"]  # skipped zeroed first
    call = driver.calls[1][1]
    assert call[0] is functions["scatter_direct_v1"] and call[4] == THREADS_PER_BLOCK
    assert argument_slots(call[9], 7) == [SRC_PTR, INDEX_PTR, 10**4, 10**6, 1, STATE_PTR, COUNTS_PTR]


def test_a_failed_driver_call_raises_cuda_error_naming_the_call_and_the_kernel(recorded):
    driver, launch = recorded
    driver.statuses["cuLaunchKernel"] = [driver.CUresult.CUDA_ERROR_INVALID_VALUE]
    prepared = launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                         with_counts=False)
    with pytest.raises(CudaError, match=r"CUDA_ERROR_INVALID_VALUE.*cuLaunchKernel of scatter_direct_v1") as error:
        prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0, 5)
    assert error.value.name == "CUDA_ERROR_INVALID_VALUE"
    driver.statuses["cuMemsetD32Async"] = [driver.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS]
    with_memset = launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                            with_counts=True, zero_in_kernel=False)
    with pytest.raises(CudaError, match=r"CUDA_ERROR_ILLEGAL_ADDRESS.*cuMemsetD32Async of 2000000 words at the counts"):
        with_memset(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)


def test_a_cooperative_launch_too_large_for_the_device_falls_back_to_memset_and_launch(recorded):
    # Fewer resident blocks than planned (e.g. under MPS): that launch and every later one zero with a memset.
    driver, launch = recorded
    driver.statuses["cuLaunchCooperativeKernel"] = [driver.CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE]
    prepared = launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                         with_counts=True)
    plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)
    assert not plan.zeroing and prepared.zero_in_kernel is False
    assert driver.names() == ["cuLaunchCooperativeKernel", "cuStreamIsCapturing", "cuMemsetD32Async", "cuLaunchKernel"]
    prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)
    assert driver.names()[4:] == ["cuMemsetD32Async", "cuLaunchKernel"]


def test_keyword_entry_checks_the_context_with_one_call_and_prepares_again_in_another_context(recorded, monkeypatch):
    driver, launch = recorded
    prepared_in = []  # the current context at each PreparedScatterAdd made
    prepare = launch.PreparedScatterAdd.__init__

    def counting_prepare(self, **options):
        prepared_in.append(driver.context_id)
        prepare(self, **options)

    monkeypatch.setattr(launch.PreparedScatterAdd, "__init__", counting_prepare)

    def call(state=STATE_PTR, stream=5):
        return scatter_add_launch(state=state, src=SRC_PTR, index=INDEX_PTR, counts=0, num_nodes=10**6,
                                  num_edges=10**4, num_features=1, dtype="float32", stream=stream)

    call()
    del driver.calls[:]
    call()
    assert prepared_in == [1] and driver.names() == ["cuCtxGetId", "cuLaunchKernel"]
    assert driver.calls[0][1] == (None,)  # cuCtxGetId(NULL): the current context's id
    call(state=STATE_PTR + 512, stream=9)  # new pointers and stream: bound again, not prepared again
    parameters, stream = driver.calls[-1][1][9], driver.calls[-1][1][8]
    assert prepared_in == [1] and int(stream) == 9
    assert argument_slots(parameters, 7)[5] == STATE_PTR + 512  # scatter_direct_v1's dest
    driver.statuses["cuLaunchKernel"] = [driver.CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
                                         driver.CUresult.CUDA_SUCCESS]
    with pytest.raises(CudaError, match="CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES.*cuLaunchKernel of scatter_direct_v1"):
        call(state=STATE_PTR + 512, stream=9)
    driver.context_id = 2  # another context is current: its own module, functions and prepared launch
    call()
    assert prepared_in == [1, 2]
    driver.statuses["cuCtxGetId"] = [driver.CUresult.CUDA_ERROR_INVALID_CONTEXT]  # none current
    call()  # then current_context() decides (it makes device 0's primary context current)
    assert prepared_in == [1, 2]


def test_keyword_entry_alternating_between_two_launches_prepares_each_once_and_launches_the_right_one(recorded,
                                                                                                   monkeypatch):
    # The entry compares a call's key with the thread's last one before looking it up; alternating keys must
    # still find each prepared launch (and never launch the other one).
    driver, launch = recorded
    made = []
    prepare = launch.PreparedScatterAdd.__init__

    def counting_prepare(self, **options):
        made.append(options["with_counts"])
        prepare(self, **options)

    monkeypatch.setattr(launch.PreparedScatterAdd, "__init__", counting_prepare)

    def call(counts):
        scatter_add_launch(state=STATE_PTR, src=SRC_PTR, index=INDEX_PTR, counts=counts, num_nodes=10**6,
                           num_edges=10**4, num_features=1, dtype="float32", stream=5)

    for counts in (COUNTS_PTR, 0, COUNTS_PTR, 0, 0, COUNTS_PTR):
        call(counts)
    assert made == [True, False]
    launches = [name for name in driver.names() if name != "cuCtxGetId"]
    assert launches == ["cuLaunchCooperativeKernel", "cuLaunchKernel"] * 2 + ["cuLaunchKernel",
                                                                              "cuLaunchCooperativeKernel"]


def test_zeroing_in_the_scatter_kernel_only_for_one_global_launch_that_has_something_to_zero():
    # The cooperative scatter zeroes counts (and skipped) itself: one driver call instead of a memset and a
    # launch. Only where the plan is one global launch without pairs, table or node passes, and ("auto")
    # for small launches only (the device time of larger ones is shorter with the memset).
    def plan(nodes, edges, features, dtype=np.float32, **options):
        args = dict(with_counts=True, zero_in_kernel=None)
        args.update(options)
        return plan_launch(nodes, edges, features, np.dtype(dtype), H200_LIKE, vec=1, **args)

    small_update = plan(10**6, 10**4, 1)
    assert small_update.zeroing and small_update.scatter.name == "scatter_global_zeroing_v1"
    assert small_update.scatter.grid == (H200_LIKE.sm_count * RESIDENT_BLOCKS_PER_SM, 1)  # zero 1e6 counts fast
    few_counts = plan(1000, 10**4, 3, algorithm="global")  # 1000 counts: the edges decide the grid
    assert few_counts.zeroing and few_counts.scatter.grid == plan(1000, 10**4, 3, zero_in_kernel=False).scatter.grid
    assert plan(10**6, 10**4, 1, with_counts=False, with_skipped=True, algorithm="global").zeroing
    assert not plan(10**6, 10**4, 1, with_counts=False).zeroing  # nothing to zero
    assert not plan(10**6, 10**4, 1, zero_in_kernel=False).zeroing
    assert not plan(10**6, ZEROING_MAX_EDGES + 1, 3).zeroing  # auto: a larger launch takes the memset
    assert plan(10**6, ZEROING_MAX_EDGES + 1, 3, zero_in_kernel=True).zeroing  # forced (tests, benchmarks)
    assert not plan(10**6, 10**7, 1).zeroing  # pairs: the counts hold them, then fold
    assert not plan(10**6, 10**4, 1, np.float16).zeroing  # the float16 table is zeroed by memsets
    assert not plan_launch(10**6, 10**7, 64, np.dtype(np.float32), H200_LIKE, vec=4, with_counts=True,
                           zero_in_kernel=True).zeroing  # node passes: several launches
    assert not plan(1000, 10**6, 1).zeroing  # the shared-memory kernel
    assert "zeroing" in describe(small_update)


def test_cuda_graph_capture_refuses_the_legacy_default_stream():
    """Capturing stream 0 is a CUDA error; CapturedGraph says why before any driver call."""
    from plugin.cuda_graph import CapturedGraph

    with pytest.raises(ValueError, match="default stream 0"):
        CapturedGraph(0, lambda: None)


# --- graph replay: a prepared launch's driver calls captured once and replayed (recorded driver, no GPU) ------
@pytest.fixture
def replaying(recorded, monkeypatch):
    monkeypatch.setattr(recorded[1].PreparedScatterAdd, "graph_replay", True)
    return recorded


def cooperative_launch(launch):
    return launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                     with_counts=True)


def test_the_second_launch_with_the_same_pointers_captures_a_graph_and_later_ones_replay_it(replaying):
    driver, launch = replaying
    prepared = cooperative_launch(launch)
    pointers = (STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)
    prepared(*pointers)
    assert driver.names() == ["cuLaunchCooperativeKernel"]  # first use: the driver call
    direct = driver.calls[0][1]
    del driver.calls[:]
    prepared(*pointers)
    assert driver.names() == ["cuStreamIsCapturing", "cuStreamCreate", "cuStreamBeginCapture",
                              "cuLaunchCooperativeKernel", "cuStreamEndCapture", "cuGraphInstantiate",
                              "cuGraphDestroy", "cuStreamIsCapturing", "cuGraphLaunch"]
    captured, replayed = driver.calls[3][1], driver.calls[-1][1]
    capture_stream = int(driver.calls[2][1][0])  # cuStreamBeginCapture's
    assert int(captured[8]) == capture_stream != 5  # captured on the launcher's own stream, not the caller's
    assert captured[:8] == direct[:8] and captured[9:] == direct[9:]  # the same kernel, shape and arguments
    assert int(replayed[1]) == 5 and replayed[0] is prepared._replay[0]  # replayed on the caller's stream
    del driver.calls[:]
    prepared(*pointers)
    assert driver.names() == ["cuStreamIsCapturing", "cuGraphLaunch"]
    del driver.calls[:]
    prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 7)  # another stream: first use of these pointers
    assert driver.names() == ["cuLaunchCooperativeKernel"]


def test_a_launch_into_a_stream_being_captured_issues_the_driver_calls_into_that_capture(replaying):
    driver, launch = replaying
    prepared = cooperative_launch(launch)
    pointers = (STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)
    driver.capturing.add(5)  # the caller captures from the start (e.g. the engine captured at its first run)
    prepared(*pointers)
    prepared(*pointers)
    assert driver.names() == ["cuLaunchCooperativeKernel", "cuStreamIsCapturing", "cuLaunchCooperativeKernel"]
    driver.capturing.clear()
    prepared(*pointers)  # now the graph is captured and replayed
    assert driver.names()[-1] == "cuGraphLaunch"
    driver.capturing.add(5)
    del driver.calls[:]
    prepared(*pointers)  # a graph launched into a capture is CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: never tried
    assert driver.names() == ["cuStreamIsCapturing", "cuLaunchCooperativeKernel"]
    assert int(driver.calls[1][1][8]) == 5


def test_pointer_sets_in_rotation_each_replay_their_own_graph(replaying):
    driver, launch = replaying
    prepared = cooperative_launch(launch)
    batches = [(STATE_PTR, SRC_PTR + 4096 * k, INDEX_PTR + 8192 * k, COUNTS_PTR, 0, 5) for k in range(3)]
    for _ in range(2):
        for pointers in batches:
            prepared(*pointers)
    del driver.calls[:]
    for pointers in batches:
        prepared(*pointers)
    launches = [arguments for name, arguments in driver.calls if name == "cuGraphLaunch"]
    assert driver.names().count("cuLaunchCooperativeKernel") == 0 and len(launches) == 3
    assert len({int(executable) for executable, _ in launches}) == 3
    assert prepared._bound is False  # switched by their graphs: no driver calls bound on the way
    driver.capturing.add(5)
    for k in (1, 0):  # the caller captures: the driver calls, bound now to the right pointers
        del driver.calls[:]
        prepared(*batches[k])
        assert driver.names() == ["cuStreamIsCapturing", "cuLaunchCooperativeKernel"]
        assert argument_slots(driver.calls[1][1][-1], 2) == [SRC_PTR + 4096 * k, INDEX_PTR + 8192 * k]


@pytest.mark.parametrize("failing, status, second_call_ends", [
    ("cuStreamEndCapture", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", ["cuStreamEndCapture", "cuLaunchCooperativeKernel"]),
    ("cuGraphLaunch", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", ["cuGraphLaunch", "cuGraphExecDestroy",
                                                             "cuLaunchCooperativeKernel"]),
], ids=["capture fails", "replay fails"])
def test_a_failed_capture_or_replay_leaves_the_launch_to_the_driver_calls(replaying, failing, status,
                                                                         second_call_ends):
    """A capture that fails is not tried again for those pointers; a replay that fails frees the graphs and
    turns replay off. Either way the launch still happens, by the driver calls."""
    driver, launch = replaying
    prepared = cooperative_launch(launch)
    pointers = (STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)
    prepared(*pointers)
    driver.statuses[failing] = [getattr(driver.CUresult, status)]
    del driver.calls[:]
    prepared(*pointers)
    assert driver.names()[-len(second_call_ends):] == second_call_ends
    assert prepared.graph_replay is (failing != "cuGraphLaunch")
    del driver.calls[:]
    prepared(*pointers)
    assert driver.names() == ["cuLaunchCooperativeKernel"]


def test_keyword_entry_replays_from_its_third_call_with_the_same_pointers(replaying):
    driver, launch = replaying
    keywords = dict(state=STATE_PTR, src=SRC_PTR, index=INDEX_PTR, counts=0, num_nodes=10**6, num_edges=10**4,
                    num_features=1, dtype="float32", stream=5)
    for _ in range(3):
        launch.scatter_add_launch(**keywords)
    assert [name for name in driver.names() if name != "cuCtxGetId"][-2:] == ["cuStreamIsCapturing", "cuGraphLaunch"]
    assert driver.names().count("cuLaunchKernel") == 2  # the first call's, and the one captured at the second


def test_a_prepared_launchs_graphs_are_freed_with_it_and_the_finalizer_never_raises(replaying):
    import gc

    driver, launch = replaying
    prepared = cooperative_launch(launch)
    for _ in range(2):
        prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)
    del driver.calls[:]
    del prepared
    gc.collect()
    assert driver.names() == ["cuGraphExecDestroy"]
    prepared = cooperative_launch(launch)
    for _ in range(2):
        prepared(STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)
    driver.statuses["cuGraphExecDestroy"] = [driver.CUresult.CUDA_ERROR_CONTEXT_IS_DESTROYED]
    launch._close_graphs(prepared._replays, raising=False)  # what the finalizer calls
    assert prepared._replays == {}


# --- float16 grid_table: one cooperative launch (plan.py, scatter_add.cu scatter_grid_table) ------------------


def test_float16_auto_takes_the_grid_table_only_where_it_may_launch_cooperatively():
    from plugin.kernels.plan import (GRID_TABLE_MAX_EDGES, GRID_TABLE_THREADS, GridTable, KernelLaunch,
                                     grid_table_layout)

    half = np.dtype(np.float16)
    may = dict(zero_in_kernel=None, grid_table_workspace=True)  # cooperative launches; the workspace holds it

    def algorithm(nodes, edges, features=1, dtype=half, device=H200_LIKE, **options):
        return plan_launch(nodes, edges, features, dtype, device, 1, **{**may, **options}).algorithm

    for nodes, table in ((10**3, GridTable(10**3, False)), (2**18, GridTable(2**18, False)),
                         (2**18 + 1, GridTable(2**18, True)), (10**8, GridTable(2**18, True))):
        plan = plan_launch(nodes, 10**4, 1, half, H200_LIKE, 1, **may)
        assert plan.algorithm == "grid_table" and plan.table is None and plan.apply is None
        assert plan.scatter == KernelLaunch("scatter_grid_table", (-(-10**4 // GRID_TABLE_THREADS), 1), 0,
                                            GRID_TABLE_THREADS)
        assert plan.grid == grid_table_layout(nodes, 10**4) == table  # 16 slots per edge, rounded up: 2^18
        assert "table=262144h" in describe(plan) or not table.hashed
    assert plan_launch(10**8, 1, 1, half, H200_LIKE, 1, algorithm="grid_table", **may).grid == GridTable(16, True)
    # up to BLOCK_TABLE_MAX_EDGES edges of one feature block_table first, whatever the table and the launches
    # allowed (measured faster); wider rows into a hashed table owned, which alone takes them
    from plugin.kernels.plan import BLOCK_TABLE_MAX_EDGES

    for nodes in (1000, 10**8):
        for edges in (1, BLOCK_TABLE_MAX_EDGES):
            assert algorithm(nodes, edges, split_table_workspace=True) == "block_table"
            assert algorithm(nodes, edges, zero_in_kernel=False, grid_table_workspace=False) == "block_table"
    for edges in (2, BLOCK_TABLE_MAX_EDGES, BLOCK_TABLE_MAX_EDGES + 1):
        assert algorithm(10**8, edges, 4, split_table_workspace=True) == "owned"
    assert algorithm(10**8, BLOCK_TABLE_MAX_EDGES + 1) == "grid_table"
    assert algorithm(1000, BLOCK_TABLE_MAX_EDGES + 1) == "grid_table"  # one slot per node: not hashed
    assert algorithm(10**8, GRID_TABLE_MAX_EDGES, zero_in_kernel=True) == "grid_table"
    # not without cooperative launches or the workspace for its table (the default), for wider rows, more
    # edges, float32, counts, or a grid that might not be resident (8 SMs hold 64 blocks of the plan's 79)
    assert algorithm(10**8, 10**4, zero_in_kernel=False) == "owned"
    assert algorithm(10**8, 10**4, grid_table_workspace=False) == "owned"
    assert plan_launch(10**8, 10**4, 1, half, H200_LIKE, 1, zero_in_kernel=None).algorithm == "owned"
    assert algorithm(10**8, 10**4, features=2) == "owned"
    assert algorithm(10**8, GRID_TABLE_MAX_EDGES + 1) != "grid_table"
    assert algorithm(10**8, 10**4, dtype=np.dtype(np.float32)) == "direct"
    assert algorithm(10**8, 10**4, with_counts=True) != "grid_table"
    assert algorithm(10**8, 10**4, device=dataclasses.replace(H200_LIKE, sm_count=8)) == "owned"


def test_the_workspace_holds_the_grid_table_where_it_may_run_and_never_shrinks_as_sizes_grow():
    from plugin.kernels.plan import GRID_TABLE_MAX_EDGES, grid_table_workspace_bytes

    assert grid_table_workspace_bytes(10**8, 10**4, 1, np.float16, with_counts=False) == 8 * 2**18
    assert grid_table_workspace_bytes(10**3, 10**4, 1, np.float16, with_counts=False) == 8 * 10**3
    assert grid_table_workspace_bytes(10**8, 10**4, 3, np.float16, with_counts=False) == 8 * 2**18  # whatever F
    for dtype, counts in ((np.float32, False), (np.float16, True)):
        assert grid_table_workspace_bytes(10**8, 10**4, 1, dtype, with_counts=counts) == 0
    sizes = [grid_table_workspace_bytes(10**8, edges, 1, np.float16, with_counts=False)
             for edges in (1, 10**4, GRID_TABLE_MAX_EDGES, GRID_TABLE_MAX_EDGES + 1, 10**6)]
    assert sizes == sorted(sizes) and sizes[-1] == 8 * 2**19
    for nodes, edges in ((10**8, 10**4), (10**3, 10**4), (10**8, GRID_TABLE_MAX_EDGES), (10**7, 10**6)):
        assert scatter_add_workspace_size(nodes, edges, 1, np.float16, with_counts=False) >= (
            grid_table_workspace_bytes(nodes, edges, 1, np.float16, with_counts=False))


def test_forcing_the_grid_table_names_what_it_needs():
    half = np.dtype(np.float16)

    def forced(nodes=10**8, edges=10**4, features=1, dtype=half, **options):
        return plan_launch(nodes, edges, features, dtype, H200_LIKE, 1, algorithm="grid_table", **options)

    with pytest.raises(ValueError, match="cooperative launches"):
        forced(grid_table_workspace=True)  # zero_in_kernel=False
    with pytest.raises(ValueError, match="8-byte aligned workspace of grid_table_workspace_bytes"):
        forced(zero_in_kernel=None)  # grid_table_workspace=False
    with pytest.raises(ValueError, match="one feature, not 2 float16"):
        forced(features=2, zero_in_kernel=None, grid_table_workspace=True)
    with pytest.raises(ValueError, match="one feature, not 1 float32"):
        forced(dtype=np.dtype(np.float32), zero_in_kernel=None, grid_table_workspace=True)
    with pytest.raises(ValueError, match="runs without counts"):
        forced(zero_in_kernel=None, grid_table_workspace=True, with_counts=True)
    with pytest.raises(ValueError, match="at most 32768 edges, not 32769"):  # its workspace holds no more
        forced(nodes=10**6, edges=2**15 + 1, zero_in_kernel=None, grid_table_workspace=True)


def test_prepared_float16_grid_table_is_one_cooperative_launch_over_the_workspace(recorded):
    driver, launch = recorded
    functions = launch.prepare_kernels(np.float16).functions
    workspace = 0x7F4000000000
    for nodes in (10**3, 10**8):
        prepared = uncounted_float16(launch, nodes, 10**4, with_skipped=True)
        plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace, 5, skipped=COUNTS_PTR)
        assert plan.algorithm == "grid_table" and plan.grid is not None
        assert driver.names() == ["cuMemsetD32Async", "cuLaunchCooperativeKernel"]  # skipped zeroed, no table memset
        function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared, stream, parameters = driver.calls[1][1]
        assert function is functions["scatter_grid_table"]
        assert (grid_x, grid_y, grid_z, block_x, block_y, block_z, shared) == (79, 1, 1, 128, 1, 1, 0)
        assert argument_slots(parameters, 9) == [SRC_PTR, INDEX_PTR, 10**4, nodes, workspace, plan.grid.capacity,
                                                 int(plan.grid.hashed), STATE_PTR, COUNTS_PTR]
        del driver.calls[:]
    # a workspace that is not 8-byte aligned gets another plan (its own prepared driver calls), and so does
    # one too small for the grid table (sized by an older release, say)
    assert prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace + 4, 5, skipped=COUNTS_PTR).algorithm == "owned"
    small = launch.PreparedScatterAdd(num_nodes=10**8, num_edges=10**4, num_features=1, dtype=np.float16,
                                      with_counts=False, workspace_size=8 * 2**15)
    assert small(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace, 5).algorithm == "owned"
    assert "cuLaunchCooperativeKernel" not in driver.names()


def test_a_grid_table_launch_too_large_for_the_device_falls_back_to_another_float16_path(recorded):
    driver, launch = recorded
    driver.statuses["cuLaunchCooperativeKernel"] = [driver.CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE]
    prepared = uncounted_float16(launch, 10**8, 10**4)
    plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0x7F4000000000, 5)
    assert plan.algorithm == "split_table" and prepared.zero_in_kernel is False
    assert driver.names() == ["cuLaunchCooperativeKernel", "cuStreamIsCapturing", "cuMemsetD32Async", "cuLaunchKernel",
                              "cuLaunchKernel"]


@pytest.mark.parametrize("dtype, later", [
    (np.float32, ["cuMemsetD32Async", "cuLaunchKernel"]),  # with counts: the zeroing kernel, then a memset
    (np.float16, ["cuMemsetD32Async", "cuLaunchKernel", "cuLaunchKernel"]),  # grid_table, then split_table
])
def test_a_cooperative_launch_refused_during_a_capture_raises_and_later_launches_fall_back(recorded, dtype, later):
    # The refused launch has invalidated the caller's capture: nothing more is issued into it, the error says
    # why, and the launcher's fallback (no cooperative launch) holds for the launches after the capture.
    driver, launch = recorded
    driver.statuses["cuLaunchCooperativeKernel"] = [driver.CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE]
    if dtype == np.float32:
        prepared = launch.PreparedScatterAdd(num_nodes=10**6, num_edges=10**4, num_features=1, dtype=np.float32,
                                             with_counts=True)
        pointers = (STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR, 0, 5)
    else:
        prepared = uncounted_float16(launch, 10**8, 10**4)
        pointers = (STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0x7F4000000000, 5)
    driver.capturing.add(5)
    with pytest.raises(CudaError, match="refused .* while the stream was being captured") as error:
        prepared(*pointers)
    assert error.value.name == "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE" and "\n" not in str(error.value)
    assert driver.names() == ["cuLaunchCooperativeKernel", "cuStreamIsCapturing"]
    driver.capturing.clear()
    del driver.calls[:]
    plan = prepared(*pointers)
    assert not plan.cooperative and driver.names() == later


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
    if table is not None and table.hashed:  # where "auto" may take split_table
        assert largest >= 8 * split_table_capacity(e)


def test_float16_auto_takes_the_split_table_where_the_table_is_hashed_and_its_workspace_is_there():
    half = np.dtype(np.float16)

    def algorithm(nodes, edges, features=1, **options):
        return plan_launch(nodes, edges, features, half, H200_LIKE, 1, **{"split_table_workspace": True,
                                                                           "partition_workspace": True, **options})

    for nodes, edges in ((10**8, 10**4), (10**7, 10**6), (10**8, 2**15 + 1), (10**8, PARTITION_MAX_EDGES + 1)):
        plan = algorithm(nodes, edges)
        capacity = split_table_capacity(edges)
        assert plan.algorithm == "split_table" and plan.table is None and plan.apply is None
        assert plan.scatter == KernelLaunch("scatter_split_table", (-(-edges // THREADS_PER_BLOCK), 1))
        assert plan.split is not None and plan.split.capacity == capacity
        apply_blocks = min(-(-capacity // THREADS_PER_BLOCK), 32 * H200_LIKE.sm_count)
        assert plan.split.apply == KernelLaunch("apply_split_table", (apply_blocks, 1))
        assert f"table={capacity}h" in describe(plan)
    # the grid_table first where it may run; the one-slot table, wider rows, counts, float32 and a missing
    # workspace as before
    assert algorithm(10**8, 10**4, zero_in_kernel=None, grid_table_workspace=True).algorithm == "grid_table"
    assert algorithm(10**6, 10**6).algorithm == "global"
    assert algorithm(10**7, 10**6, 2).algorithm == "hashed"
    assert algorithm(10**8, 10**4, 2).algorithm == "owned"
    assert algorithm(10**7, 10**6, with_counts=True).algorithm == "hashed"
    assert plan_launch(10**7, 10**6, 1, np.dtype(np.float32), H200_LIKE, 1, split_table_workspace=True).algorithm == (
        "direct")
    assert algorithm(10**7, 10**6, split_table_workspace=False).algorithm == "partitioned"


def test_float16_block_table_is_one_block_with_a_shared_table_of_four_slots_per_edge():
    from plugin.kernels.plan import BLOCK_TABLE_MAX_EDGES, BLOCK_TABLE_THREADS, KernelLaunch, block_table_log2

    half = np.dtype(np.float16)
    assert [block_table_log2(e) for e in (0, 1, 16, 17, 1000, 1024)] == [6, 6, 6, 7, 12, 12]
    for nodes, edges in ((10**8, 1), (1000, 1000), (10**6, BLOCK_TABLE_MAX_EDGES)):
        plan = plan_launch(nodes, edges, 1, half, H200_LIKE, 1)
        log2 = block_table_log2(edges)
        assert plan.algorithm == "block_table" and plan.block_log2 == log2 and plan.table is None and plan.apply is None
        assert plan.scatter == KernelLaunch("scatter_block_table", (1, 1), 8 << log2, BLOCK_TABLE_THREADS)
        assert plan.scatter.shared_bytes <= 32 * 1024  # within the 48 KiB a launch gets without opting in
    # not for wider rows, float32, counts or more edges; forcing it names why
    assert plan_launch(10**8, 1000, 2, half, H200_LIKE, 1).algorithm == "owned"
    assert plan_launch(10**8, 1000, 1, np.dtype(np.float32), H200_LIKE, 1).algorithm == "direct"
    assert plan_launch(10**8, 1000, 1, half, H200_LIKE, 1, with_counts=True).algorithm != "block_table"
    assert plan_launch(10**8, BLOCK_TABLE_MAX_EDGES + 1, 1, half, H200_LIKE, 1).algorithm != "block_table"
    for features, dtype, edges, message in ((2, half, 10, "one feature, not 2 float16"),
                                            (1, np.dtype(np.float32), 10, "one feature, not 1 float32"),
                                            (1, half, 1025, "at most 1024 edges, not 1025")):
        with pytest.raises(ValueError, match=message):
            plan_launch(10**8, edges, features, dtype, H200_LIKE, 1, algorithm="block_table")


def test_prepared_float16_block_table_is_one_launch_without_workspace(recorded):
    driver, launch = recorded
    functions = launch.prepare_kernels(np.float16).functions
    prepared = uncounted_float16(launch, 10**8, 1000, with_skipped=True)
    plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0x7F4000000000, 5, skipped=COUNTS_PTR)
    assert plan.algorithm == "block_table"
    # skipped zeroed, then the one block; the workspace (every float16 launch gets one) is not touched
    assert driver.names() == ["cuMemsetD32Async", "cuLaunchKernel"]
    scatter = driver.calls[1][1]
    assert scatter[0] is functions["scatter_block_table"]
    assert tuple(scatter[1:8]) == (1, 1, 1, 1024, 1, 1, 8 << 12)  # one block of 1024, 32 KiB of shared memory
    assert argument_slots(scatter[9], 7) == [SRC_PTR, INDEX_PTR, 1000, 10**8, 12, STATE_PTR, COUNTS_PTR]


def test_forcing_the_split_table_names_what_it_needs():
    half = np.dtype(np.float16)

    def forced(nodes=10**8, edges=10**4, features=1, dtype=half, **options):
        return plan_launch(nodes, edges, features, dtype, H200_LIKE, 1, algorithm="split_table", **options)

    with pytest.raises(ValueError, match="8-byte aligned workspace of 8 split_table_capacity"):
        forced()
    with pytest.raises(ValueError, match="one feature, not 2 float16"):
        forced(features=2, split_table_workspace=True)
    with pytest.raises(ValueError, match="one feature, not 1 float32"):
        forced(dtype=np.dtype(np.float32), split_table_workspace=True)
    with pytest.raises(ValueError, match="runs without counts"):
        forced(split_table_workspace=True, with_counts=True)
    with pytest.raises(ValueError, match=r"at most 536870912 edges, not 536870913"):  # 2^31 slots: not an int
        forced(nodes=2**31 - 1, edges=2**29 + 1, split_table_workspace=True)
    assert forced(nodes=2**31 - 1, edges=2**29, split_table_workspace=True).split.capacity == 2**30
    assert forced(nodes=1000, edges=30_000, split_table_workspace=True).split.capacity == 2**17  # hashed even so
    assert scatter_add_workspace_size(1000, 30_000, 1, np.float16, with_counts=False, algorithm="split_table") == (
        8 * 2**17)


def test_prepared_float16_split_table_is_a_memset_and_two_launches_over_the_workspace(recorded):
    driver, launch = recorded
    functions = launch.prepare_kernels(np.float16).functions
    workspace = 0x7F4000000000
    prepared = uncounted_float16(launch, 10**7, 10**6, with_skipped=True)
    plan = prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace, 5, skipped=COUNTS_PTR)
    capacity = split_table_capacity(10**6)
    assert plan.algorithm == "split_table" and capacity == 2**21 and prepared.split_table_workspace
    assert driver.names() == ["cuMemsetD32Async", "cuMemsetD32Async", "cuLaunchKernel", "cuLaunchKernel"]
    address, value, words = driver.calls[1][1][:3]
    assert (int(address), value, words) == (workspace, 0xFFFFFFFF, 2 * capacity)  # every slot: node -1
    scatter, apply = driver.calls[2][1], driver.calls[3][1]
    assert scatter[0] is functions["scatter_split_table"] and scatter[1] == -(-10**6 // THREADS_PER_BLOCK)
    assert argument_slots(scatter[9], 7) == [SRC_PTR, INDEX_PTR, 10**6, 10**7, workspace, capacity, COUNTS_PTR]
    assert apply[0] is functions["apply_split_table"] and apply[1] == plan.split.apply.grid[0]
    assert argument_slots(apply[9], 4) == [workspace, capacity, 10**7, STATE_PTR]
    del driver.calls[:]
    # a workspace that is not 8-byte aligned, or one sized by an older release, gets another path
    assert prepared(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace + 4, 5, skipped=COUNTS_PTR).algorithm == "partitioned"
    forced = uncounted_float16(launch, 0, 100, algorithm="split_table")  # no float16 table: nothing else checks
    with pytest.raises(ValueError, match="prepared with a workspace; got none"):
        forced(STATE_PTR, SRC_PTR, INDEX_PTR, 0, 0, 5)
    table = table_layout(10**8, 10**4, 1)  # 2^15 keys and sums: half the split table's 2^16 slots
    assert table is not None and table.nbytes < 8 * split_table_capacity(10**4)
    small = launch.PreparedScatterAdd(num_nodes=10**8, num_edges=10**4, num_features=1, dtype=np.float16,
                                      with_counts=False, workspace_size=table.nbytes)
    assert small(STATE_PTR, SRC_PTR, INDEX_PTR, 0, workspace, 5).algorithm == "owned"
