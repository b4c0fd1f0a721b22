"""TMA rows: a baseline scatter-add of whole rows by Hopper's bulk-copy (TMA) unit, one kernel, sm_90 and newer.

Per edge e with node = index[e] in [0, N) (other indices are skipped), the row src[e] is brought into shared memory
and added into state[node] by `cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32` (float32) or
`.add.noftz.f16` (float16) (PTX ISA 8.0, sm_90): the mechanism of torch's newer scatter_add fast path and FBGEMM's
scatter_add_along_first_dim, written here from the PTX ISA as this repository's own kernel (as the label-loop and
PyG baselines are). Only for rows of a multiple of 16 bytes at 16-byte aligned pointers (applies()). The reduction
is done in memory per edge: in float16 every edge's sum is rounded to float16 (one rounding per edge, not per
node), so it is an anchor for speed, not for accuracy (error_bound()).

The kernel: a CTA of WARPS warps; each warp takes stages of edges, grid-stride (int64 offsets, any E). A stage is
up to 32 rows (or one piece of STAGE_BYTES of a wider row) loaded by the warp with ld.global.nc.v4 into one of
STAGES shared buffers of the warp; after `fence.proxy.async.shared::cta` lane r issues the bulk reduce of the
stage's row r and every lane commits a bulk group; before a buffer is written again each lane waits for its
groups of that buffer to have been read (`cp.async.bulk.wait_group.read STAGES - 1`), and at the end for all
(`cp.async.bulk.wait_group 0`). The next stage's indices are loaded while the current stage's rows are in flight.

    tma_rows_ptx()                         the PTX (compute_90, ISA 8.0) of both kernels; NVRTC, no GPU
    TmaRows(state, inputs)(i)              one launch on input set i, on torch's current stream
    check_tma_rows(state, src, index)      the relative error against float64, raising above error_bound()
"""

import functools
import math
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

WARPS = 4  # warps per CTA
STAGES = 4  # shared buffers per warp
STAGE_BYTES = 2048  # one buffer: up to 32 rows, or a piece of a wider row
SHARED_BYTES = WARPS * STAGES * STAGE_BYTES  # 32 KiB: no opt-in needed
ARCH = 90
PTX_ISA = (8, 0)  # cp.reduce.async.bulk's ISA
KERNELS = {"float32": "tma_rows_f32", "float16": "tma_rows_f16"}
ITEMSIZE = {"float32": 4, "float16": 2}
UNIT_ROUNDOFF = {"float32": 2.0**-24, "float16": 2.0**-11}
FLOOR_BOUND = {"float32": 1e-5, "float16": 2e-3}

SOURCE = r"""
// TMA rows (benchmarks/tma_rows.py): scatter-add of whole rows by the bulk-copy unit. sm_90+, PTX ISA 8.0.
#define WARPS %(warps)d
#define STAGES %(stages)d
#define STAGE_CHUNKS %(stage_chunks)d  // 16-byte chunks of one buffer
#define LOADS (STAGE_CHUNKS / 32)      // chunks each lane loads per stage
#define FULL 0xffffffffu

__device__ __forceinline__ uint4 load_streaming(const char* address) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%%0, %%1, %%2, %%3}, [%%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(address));
    return v;
}

template <bool HALF>
__device__ __forceinline__ void bulk_reduce(char* destination, unsigned source, unsigned bytes) {
    if constexpr (HALF) {
        asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.f16 [%%0], [%%1], %%2;"
                     :: "l"(destination), "r"(source), "r"(bytes) : "memory");
    } else {
        asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%%0], [%%1], %%2;"
                     :: "l"(destination), "r"(source), "r"(bytes) : "memory");
    }
}

// The edge (-1: none, or its node is out of range), piece and node of lane `lane`'s row in stage `stage`.
__device__ __forceinline__ void stage_row(const long long* __restrict__ index, long long stage, int lane,
                                          int per_stage, int pieces, long long items, long long num_nodes,
                                          long long& edge, int& piece, long long& node) {
    edge = -1;
    piece = 0;
    node = -1;
    const long long item = stage * per_stage + lane;
    if (lane < per_stage && item < items) {
        const long long e = pieces == 1 ? item : item / pieces;
        const long long n = __ldg(index + e);
        if (n >= 0 && n < num_nodes) {
            edge = e;
            piece = (int)(item - e * pieces);
            node = n;
        }
    }
}

template <bool HALF>
__device__ __forceinline__ void tma_rows(const char* __restrict__ src, const long long* __restrict__ index,
                                         char* state, long long num_edges, long long num_nodes, int row_chunks) {
    extern __shared__ __align__(128) uint4 shared_rows[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int piece_chunks = row_chunks < STAGE_CHUNKS ? row_chunks : STAGE_CHUNKS;
    const int pieces = (row_chunks + piece_chunks - 1) / piece_chunks;
    const int per_stage = STAGE_CHUNKS / piece_chunks < 32 ? STAGE_CHUNKS / piece_chunks : 32;
    const int stage_chunks = per_stage * piece_chunks;
    const long long row_bytes = (long long)row_chunks * 16;
    const long long items = num_edges * pieces;
    const long long stages = (items + per_stage - 1) / per_stage;
    const long long step = (long long)gridDim.x * WARPS;
    uint4* buffers = shared_rows + warp * (STAGES * STAGE_CHUNKS);

    long long stage = (long long)blockIdx.x * WARPS + warp;
    long long edge, node;
    int piece;
    stage_row(index, stage, lane, per_stage, pieces, items, num_nodes, edge, piece, node);
    for (int k = 0; stage < stages; stage += step, k = k + 1 == STAGES ? 0 : k + 1) {
        uint4 values[LOADS];
        unsigned loaded = 0;
#pragma unroll
        for (int t = 0; t < LOADS; ++t) {
            const int j = lane + 32 * t;
            const int r = j / piece_chunks;
            const int q = j - r * piece_chunks;
            const long long e = __shfl_sync(FULL, edge, r & 31);
            const int p = __shfl_sync(FULL, piece, r & 31);
            const int chunk = p * piece_chunks + q;
            if (j < stage_chunks && e >= 0 && chunk < row_chunks) {
                values[t] = load_streaming(src + e * row_bytes + (long long)chunk * 16);
                loaded |= 1u << t;
            }
        }
        // this lane's row of the stage, and the next stage's rows (their index loads overlap the row loads)
        const long long my_node = node;
        const int my_piece = piece;
        stage_row(index, stage + step, lane, per_stage, pieces, items, num_nodes, edge, piece, node);

        uint4* buffer = buffers + k * STAGE_CHUNKS;
        // this lane's bulk reduces from this buffer (STAGES groups ago) have read it; then every lane's have
        asm volatile("cp.async.bulk.wait_group.read %%0;" :: "n"(STAGES - 1) : "memory");
        __syncwarp();
#pragma unroll
        for (int t = 0; t < LOADS; ++t) {
            if (loaded & (1u << t)) buffer[lane + 32 * t] = values[t];
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the stores, seen by the bulk-copy unit
        __syncwarp();
        if (my_node >= 0) {
            const int first = my_piece * piece_chunks;
            const int chunks = row_chunks - first < piece_chunks ? row_chunks - first : piece_chunks;
            const unsigned source = (unsigned)__cvta_generic_to_shared(buffer + lane * piece_chunks);
            bulk_reduce<HALF>(state + my_node * row_bytes + (long long)first * 16, source, (unsigned)chunks * 16);
        }
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
tma_rows_f32(const char* __restrict__ src, const long long* __restrict__ index, char* state,
             long long num_edges, long long num_nodes, int row_chunks) {
    tma_rows<false>(src, index, state, num_edges, num_nodes, row_chunks);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
tma_rows_f16(const char* __restrict__ src, const long long* __restrict__ index, char* state,
             long long num_edges, long long num_nodes, int row_chunks) {
    tma_rows<true>(src, index, state, num_edges, num_nodes, row_chunks);
}
""" % dict(warps=WARPS, stages=STAGES, stage_chunks=STAGE_BYTES // 16)


def applies(num_features: int, dtype_name: str, *pointers: int) -> bool:
    """Whether the kernel takes rows of num_features values of dtype_name (float32, float16) at these pointers:
    a row a positive multiple of 16 bytes, every pointer 16-byte aligned."""
    if dtype_name not in ITEMSIZE:
        return False
    row_bytes = num_features * ITEMSIZE[dtype_name]
    return row_bytes > 0 and row_bytes % 16 == 0 and all(pointer % 16 == 0 for pointer in pointers)


def error_bound(dtype_name: str, num_nodes: int, num_edges: int) -> float:
    """The relative (Frobenius) error against float64 that check_tma_rows accepts, for standard normal state and
    src and uniform targets. Every edge's add is rounded (unit roundoff u, relative error uniform in [-u, u]): a
    node of degree d (its state and d values, partial sums S_k of variance k + 1) gathers an error of variance
    about (u^2 / 3) sum_k (k + 1) ~ u^2 d^2 / 6, against a sum of variance d + 1: relative error
    ~ u sqrt(d / 6), with d the mean degree E / N (a sequential float16 simulation in numpy measured 0.7x to
    0.75x of it at d = 100, 524, 4200). The bound is 4x that (the per-node degree spread and the tail), and at
    least FLOOR_BOUND (1e-5 float32, the AOT check's; 2e-3 float16)."""
    degree = num_edges / max(num_nodes, 1)
    return max(FLOOR_BOUND[dtype_name], 4 * UNIT_ROUNDOFF[dtype_name] * math.sqrt(1 + degree / 6))


def _nvrtc_ptx(source: str, name: str, architecture: str) -> bytes:
    from common.nvrtc import declare_ptx_isa, nvrtc_compile, nvrtc_options

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(source)
        ptx, _ = nvrtc_compile(path, nvrtc_options(architecture), ptx=True, target=f" for {architecture}")
    return declare_ptx_isa(ptx.rstrip(b"\0"), PTX_ISA)


@functools.cache
def tma_rows_ptx() -> bytes:
    """The PTX of tma_rows_f32 and tma_rows_f16: NVRTC for compute_90, `.version` declared 8.0 (the driver JITs
    it for the device, as it does the AOT plugins' PTX). NvrtcError with the log where it does not compile."""
    return _nvrtc_ptx(SOURCE, "tma_rows.cu", f"compute_{ARCH}")


def supported() -> bool:
    """Whether the current CUDA device is sm_90 or newer (the bulk-copy unit)."""
    import torch

    return torch.cuda.get_device_capability() >= (ARCH // 10, ARCH % 10)


class TmaRows:
    """The kernel prepared for `state` [N, F] and each (src [E, F], index [E] int64) of `inputs`: call(i) is one
    cuLaunchKernel on input set i, on torch's current stream (the one when it was made)."""

    def __init__(self, state: Any, inputs: Sequence[tuple[Any, Any]]) -> None:
        import ctypes

        import torch
        from cuda.bindings import driver

        from common.cuda_check import check
        from inplace.launch import PreparedKernel, load_function

        dtype_name = {torch.float32: "float32", torch.float16: "float16"}[state.dtype]
        num_nodes, num_features = state.shape
        row_chunks = num_features * ITEMSIZE[dtype_name] // 16
        function = load_function(tma_rows_ptx(), KERNELS[dtype_name])
        per_sm = check(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(function, WARPS * 32, SHARED_BYTES))
        sms = torch.cuda.get_device_properties(state.device).multi_processor_count
        stream = torch.cuda.current_stream().cuda_stream
        types = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int32)
        self.launches: list[Any] = []
        for src, index in inputs:
            if not (applies(num_features, dtype_name, state.data_ptr(), src.data_ptr())
                    and state.is_contiguous() and src.is_contiguous() and index.is_contiguous()
                    and src.dtype == state.dtype and index.dtype == torch.int64 and src.shape[1] == num_features):
                raise ValueError(f"TMA rows takes contiguous rows of a multiple of 16 bytes at 16-byte aligned "
                                 f"pointers and int64 indices, not {dtype_name} F = {num_features}")
            num_edges = index.shape[0]
            pieces = -(-row_chunks // min(row_chunks, STAGE_BYTES // 16))
            per_stage = min(32, (STAGE_BYTES // 16) // min(row_chunks, STAGE_BYTES // 16))
            stages = -(-num_edges * pieces // per_stage)
            if stages == 0:
                self.launches.append(lambda: None)
                continue
            grid = max(1, min(max(int(per_sm), 1) * sms, -(-stages // WARPS)))
            values = (src.data_ptr(), index.data_ptr(), state.data_ptr(), num_edges, num_nodes, row_chunks)
            self.launches.append(PreparedKernel(function, (grid, 1, 1), (WARPS * 32, 1, 1), SHARED_BYTES, values,
                                                types, stream, KERNELS[dtype_name]))

    def __call__(self, i: int) -> None:
        self.launches[i]()


def check_tma_rows(state: Any, src: Any, index: Any) -> str:
    """Runs the kernel once on a copy of the state and returns its relative error against float64 (torch's
    index_add_ in float64); AssertionError above error_bound()."""
    import torch

    copy = state.clone()
    TmaRows(copy, [(src, index)])(0)
    torch.cuda.synchronize()
    expected = state.double().index_add_(0, index, src.double())
    error = ((copy.double() - expected).norm() / expected.norm().clamp_min(1e-30)).item()
    dtype_name = "float32" if state.dtype == torch.float32 else "float16"
    bound = error_bound(dtype_name, state.shape[0], index.shape[0])
    if not error <= bound:
        raise AssertionError(f"TMA rows relative error {error:.3g} > {bound:.3g} at N={state.shape[0]}, "
                             f"E={index.shape[0]}, F={state.shape[1]}, {dtype_name}")
    return f"{error:.1e}"
