// Scatter-add of edge rows into node rows, in place: state[index[e], f] += src[e, f], counts[index[e]] += 1.
//
// Compiled at run time by NVRTC (plugin/kernels/compile.py), once per (architecture, dtype):
//   -DSCATTER_HALF=0  float32 state and src; the kernels add straight into the state.
//   -DSCATTER_HALF=1  float16 state and src; the kernels add into a float32 table in the workspace (one entry
//                     per touched node), then apply_table adds each entry into the half state with a single
//                     rounding. See README "float16 accumulation" for the scheme and its error bound.
//
// Work mapping (all kernels): a row of F features is cut into F / VEC chunks of VEC consecutive features;
// 2^lanes_log2 lanes of a warp share one row, one chunk each (looping when a row has more chunks than 32).
// Each lane loads ROWS_PER_LANE rows before it issues any atomic, so several loads are in flight.
// Loops are warp-uniform (every lane of a warp runs the same iterations), which the shuffles below need.
//
// Index values outside [0, num_nodes) are never written; each such row adds 1 to *skipped when given.

#include <cuda_fp16.h>

#if SCATTER_HALF
typedef __half scalar_t;
#else
typedef float scalar_t;
#endif

typedef long long i64;
typedef unsigned long long u64;

#define FULL_MASK 0xffffffffu
#define ROWS_PER_LANE 4
#define THREADS_PER_BLOCK 256  // the launcher uses the same block size
#define MIN_BLOCKS_PER_SM 4     // caps registers at 64 per thread: half the SM's threads resident
#define NO_SLOT (-1)  // an empty table slot, or a row this lane does not add (absent, skipped, merged away)

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ void store_scalar(float* p, float x) { *p = x; }
__device__ __forceinline__ void store_scalar(__half* p, float x) { *p = __float2half_rn(x); }

// VEC consecutive src elements as floats; streaming loads (each edge row is read once).
template <int VEC>
__device__ __forceinline__ void load_chunk(const scalar_t* p, float (&v)[VEC]) {
#if SCATTER_HALF
    if constexpr (VEC == 4) {
        uint2 raw = __ldcs(reinterpret_cast<const uint2*>(p));
        float2 lo = __half22float2(*reinterpret_cast<__half2*>(&raw.x));
        float2 hi = __half22float2(*reinterpret_cast<__half2*>(&raw.y));
        v[0] = lo.x; v[1] = lo.y; v[2] = hi.x; v[3] = hi.y;
    } else if constexpr (VEC == 2) {
        unsigned raw = __ldcs(reinterpret_cast<const unsigned*>(p));
        float2 f = __half22float2(*reinterpret_cast<__half2*>(&raw));
        v[0] = f.x; v[1] = f.y;
    } else {
        v[0] = __half2float(__ushort_as_half(__ldcs(reinterpret_cast<const unsigned short*>(p))));
    }
#else
    if constexpr (VEC == 4) {
        float4 f = __ldcs(reinterpret_cast<const float4*>(p));
        v[0] = f.x; v[1] = f.y; v[2] = f.z; v[3] = f.w;
    } else if constexpr (VEC == 2) {
        float2 f = __ldcs(reinterpret_cast<const float2*>(p));
        v[0] = f.x; v[1] = f.y;
    } else {
        v[0] = __ldcs(p);
    }
#endif
}

// dest[0:VEC] += v atomically; one vector atomic on sm_90+ global memory, else one per element.
template <int VEC>
__device__ __forceinline__ void atomic_add_chunk(float* dest, const float (&v)[VEC]) {
#if __CUDA_ARCH__ >= 900
    constexpr bool vector_atomics = true;
#else
    constexpr bool vector_atomics = false;
#endif
    if constexpr (vector_atomics && VEC == 4) {
        atomicAdd(reinterpret_cast<float4*>(dest), make_float4(v[0], v[1], v[2], v[3]));
    } else if constexpr (vector_atomics && VEC == 2) {
        atomicAdd(reinterpret_cast<float2*>(dest), make_float2(v[0], v[1]));
    } else {
#pragma unroll
        for (int k = 0; k < VEC; ++k) atomicAdd(dest + k, v[k]);
    }
}

// Sums entries that go to the same slot before any atomic: first a lane's own rows, then a tree across the
// warp's rows (lanes 2^lanes_log2 apart hold the same chunk of different rows). A merged-away entry gets
// slot NO_SLOT; its value and count live on in the entry that absorbed it, so each value is added once.
// This cuts atomics on hot nodes (degree 1e4 into one node: 32x fewer per warp) and shortens the chain of
// float32 additions into one address. Must be called by all 32 lanes.
template <int VEC>
__device__ __forceinline__ void combine_equal_targets(int (&slot)[ROWS_PER_LANE], float (&v)[ROWS_PER_LANE][VEC],
                                                      unsigned (&count)[ROWS_PER_LANE], int lanes_log2) {
#pragma unroll
    for (int r = 1; r < ROWS_PER_LANE; ++r) {
#pragma unroll
        for (int s = 0; s < r; ++s) {
            if (slot[r] != NO_SLOT && slot[s] == slot[r]) {
#pragma unroll
                for (int k = 0; k < VEC; ++k) v[s][k] += v[r][k];
                count[s] += count[r];
                slot[r] = NO_SLOT;
            }
        }
    }
    const int lane = threadIdx.x & 31;
    const int lanes = 1 << lanes_log2;
    for (int step = lanes; step < 32; step <<= 1) {
        const int pos = lane & (2 * step - 1);
        const bool root = pos < lanes;                          // absorbs the entry `step` lanes above
        const bool partner = pos >= step && pos < step + lanes;  // is absorbed by the entry `step` lanes below
#pragma unroll
        for (int r = 0; r < ROWS_PER_LANE; ++r) {
            const int above = __shfl_down_sync(FULL_MASK, slot[r], step);
            const int below = __shfl_up_sync(FULL_MASK, slot[r], step);
            float other[VEC];
#pragma unroll
            for (int k = 0; k < VEC; ++k) other[k] = __shfl_down_sync(FULL_MASK, v[r][k], step);
            const unsigned other_count = __shfl_down_sync(FULL_MASK, count[r], step);
            if (root && slot[r] != NO_SLOT && above == slot[r]) {
#pragma unroll
                for (int k = 0; k < VEC; ++k) v[r][k] += other[k];
                count[r] += other_count;
            }
            if (partner && slot[r] != NO_SLOT && below == slot[r]) slot[r] = NO_SLOT;
        }
    }
}

// Adds the warp's per-lane tallies of skipped rows into *skipped with one atomic per warp.
__device__ __forceinline__ void add_skipped(u64* skipped, unsigned skipped_here) {
    for (int offset = 16; offset > 0; offset >>= 1) skipped_here += __shfl_down_sync(FULL_MASK, skipped_here, offset);
    if ((threadIdx.x & 31) == 0 && skipped_here != 0) atomicAdd(skipped, (u64)skipped_here);
}

// The table slot of `node`: linear probing from a multiplicative hash, inserting the node if absent. The
// table has a power-of-two capacity of at least twice the number of distinct nodes, so probing ends.
__device__ __forceinline__ int find_or_insert(int* keys, int node, int table_log2) {
    const unsigned mask = (1u << table_log2) - 1u;
    unsigned slot = table_log2 == 0 ? 0u : ((unsigned)node * 2654435761u) >> (32 - table_log2);
    while (true) {
        const int key = *((volatile int*)&keys[slot]);
        if (key == node) return (int)slot;
        if (key == NO_SLOT) {
            const int previous = atomicCAS(&keys[slot], NO_SLOT, node);
            if (previous == NO_SLOT || previous == node) return (int)slot;
        }
        slot = (slot + 1u) & mask;
    }
}

// Rows whose node lies in [node_lo, node_hi) are added into dest (float32, num_features per slot):
//   HASHED = false: slot = node. dest is the float32 state, or the float16 path's table with one slot per
//                   node (then keys[node] = node marks it touched; keys = nullptr for float32).
//   HASHED = true:  slot = find_or_insert(keys, node): the float16 path's table for a state too large for
//                   one slot per node; its capacity, 2^table_log2, follows the number of edges.
// Splitting [0, num_nodes) into several launches (node ranges) keeps each range's rows in L2 while edges
// stream past; rows outside the range are left to another launch. Skipped rows are counted only by the
// launch whose range starts at 0.
template <int VEC, bool HASHED>
__device__ __forceinline__ void scatter_rows_global(const scalar_t* __restrict__ src, const i64* __restrict__ index,
                                                    i64 num_edges, i64 num_nodes, int num_features, int lanes_log2,
                                                    float* __restrict__ dest, int* __restrict__ keys, int table_log2,
                                                    u64* __restrict__ counts, u64* __restrict__ skipped, i64 node_lo,
                                                    i64 node_hi) {
    const int lane = threadIdx.x & 31;
    const int lanes = 1 << lanes_log2;
    const int rows_per_warp = 32 >> lanes_log2;
    const int row_in_warp = lane >> lanes_log2;
    const int chunk_lane = lane & (lanes - 1);
    const int chunks = num_features / VEC;
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 num_warps = ((i64)gridDim.x * blockDim.x) >> 5;
    const i64 rows_per_iteration = (i64)rows_per_warp * ROWS_PER_LANE;
    const bool count_skipped = skipped != nullptr && node_lo == 0;
    unsigned skipped_here = 0;

    for (i64 base = warp * rows_per_iteration; base < num_edges; base += num_warps * rows_per_iteration) {
        i64 node[ROWS_PER_LANE];
        int row_slot[ROWS_PER_LANE];
#pragma unroll
        for (int r = 0; r < ROWS_PER_LANE; ++r) {
            const i64 edge = base + (i64)r * rows_per_warp + row_in_warp;
            node[r] = edge < num_edges ? __ldcs(index + edge) : (i64)NO_SLOT;
            const bool in_range = node[r] >= 0 && node[r] < num_nodes;
            if (count_skipped && edge < num_edges && !in_range && chunk_lane == 0) ++skipped_here;
            row_slot[r] = (in_range && node[r] >= node_lo && node[r] < node_hi) ? (int)node[r] : NO_SLOT;
        }
#pragma unroll
        for (int r = 0; r < ROWS_PER_LANE; ++r) {
            if (row_slot[r] == NO_SLOT || keys == nullptr) continue;
            if constexpr (HASHED) {
                row_slot[r] = find_or_insert(keys, row_slot[r], table_log2);
            } else if (keys[row_slot[r]] != row_slot[r]) {
                keys[row_slot[r]] = row_slot[r];
            }
        }
        for (int first_chunk = 0; first_chunk < chunks; first_chunk += lanes) {
            const int chunk = first_chunk + chunk_lane;
            int slot[ROWS_PER_LANE];
            float v[ROWS_PER_LANE][VEC];
            unsigned count[ROWS_PER_LANE];
#pragma unroll
            for (int r = 0; r < ROWS_PER_LANE; ++r) {
                slot[r] = chunk < chunks ? row_slot[r] : NO_SLOT;
                count[r] = chunk == 0 ? 1u : 0u;
                if (slot[r] != NO_SLOT) {
                    const i64 edge = base + (i64)r * rows_per_warp + row_in_warp;
                    load_chunk<VEC>(src + edge * num_features + (i64)chunk * VEC, v[r]);
                } else {
#pragma unroll
                    for (int k = 0; k < VEC; ++k) v[r][k] = 0.0f;
                }
            }
            combine_equal_targets<VEC>(slot, v, count, lanes_log2);
#pragma unroll
            for (int r = 0; r < ROWS_PER_LANE; ++r) {
                if (slot[r] == NO_SLOT) continue;
                atomic_add_chunk<VEC>(dest + (i64)slot[r] * num_features + (i64)chunk * VEC, v[r]);
                if (counts != nullptr && count[r] != 0) atomicAdd(counts + node[r], (u64)count[r]);
            }
        }
    }
    if (count_skipped) add_skipped(skipped, skipped_here);
}

// Privatized variant for few nodes and many edges: each block sums its share of the edges into shared
// memory (float32 sums of a slice of features, slice_width wide, for all nodes, plus 32-bit counts), then
// adds every touched node's partial sums into dest with one atomic per chunk. blockIdx.y picks the feature
// slice; only slice 0 writes counts, touched marks and skipped. dest is the float32 state, or the float16
// path's table with one slot per node.
template <int VEC>
__device__ __forceinline__ void scatter_rows_shared(const scalar_t* __restrict__ src, const i64* __restrict__ index,
                                                    i64 num_edges, int num_nodes, int num_features, int lanes_log2,
                                                    int slice_width, float* __restrict__ dest, int* __restrict__ keys,
                                                    u64* __restrict__ counts, u64* __restrict__ skipped) {
    extern __shared__ float shared_sums[];
    unsigned* shared_counts = reinterpret_cast<unsigned*>(shared_sums + (i64)num_nodes * slice_width);
    const int first_feature = blockIdx.y * slice_width;
    const int width = min(slice_width, num_features - first_feature);
    const int chunks = width / VEC;
    const bool first_slice = blockIdx.y == 0;

    for (int i = threadIdx.x; i < num_nodes * (slice_width + 1); i += blockDim.x) shared_sums[i] = 0.0f;
    __syncthreads();

    const int lane = threadIdx.x & 31;
    const int lanes = 1 << lanes_log2;
    const int rows_per_warp = 32 >> lanes_log2;
    const int row_in_warp = lane >> lanes_log2;
    const int chunk_lane = lane & (lanes - 1);
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 num_warps = ((i64)gridDim.x * blockDim.x) >> 5;
    const i64 rows_per_iteration = (i64)rows_per_warp * ROWS_PER_LANE;
    unsigned skipped_here = 0;

    for (i64 base = warp * rows_per_iteration; base < num_edges; base += num_warps * rows_per_iteration) {
        int row_slot[ROWS_PER_LANE];
#pragma unroll
        for (int r = 0; r < ROWS_PER_LANE; ++r) {
            const i64 edge = base + (i64)r * rows_per_warp + row_in_warp;
            const i64 node = edge < num_edges ? __ldcs(index + edge) : (i64)NO_SLOT;
            const bool in_range = node >= 0 && node < num_nodes;
            if (edge < num_edges && !in_range && chunk_lane == 0) ++skipped_here;
            row_slot[r] = in_range ? (int)node : NO_SLOT;
        }
        for (int first_chunk = 0; first_chunk < chunks; first_chunk += lanes) {
            const int chunk = first_chunk + chunk_lane;
            int slot[ROWS_PER_LANE];
            float v[ROWS_PER_LANE][VEC];
            unsigned count[ROWS_PER_LANE];
#pragma unroll
            for (int r = 0; r < ROWS_PER_LANE; ++r) {
                slot[r] = chunk < chunks ? row_slot[r] : NO_SLOT;
                count[r] = chunk == 0 ? 1u : 0u;
                if (slot[r] != NO_SLOT) {
                    const i64 edge = base + (i64)r * rows_per_warp + row_in_warp;
                    load_chunk<VEC>(src + edge * num_features + first_feature + chunk * VEC, v[r]);
                } else {
#pragma unroll
                    for (int k = 0; k < VEC; ++k) v[r][k] = 0.0f;
                }
            }
            combine_equal_targets<VEC>(slot, v, count, lanes_log2);
#pragma unroll
            for (int r = 0; r < ROWS_PER_LANE; ++r) {
                if (slot[r] == NO_SLOT) continue;
                float* sums = shared_sums + slot[r] * slice_width + chunk * VEC;
#pragma unroll
                for (int k = 0; k < VEC; ++k) atomicAdd(sums + k, v[r][k]);
                if (count[r] != 0) atomicAdd(shared_counts + slot[r], count[r]);
            }
        }
    }
    if (skipped != nullptr && first_slice) add_skipped(skipped, skipped_here);
    __syncthreads();

    for (int i = threadIdx.x; i < num_nodes * chunks; i += blockDim.x) {
        const int node = i / chunks;
        const int chunk = i - node * chunks;
        const unsigned count = shared_counts[node];
        if (count == 0) continue;
        float v[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] = shared_sums[node * slice_width + chunk * VEC + k];
        atomic_add_chunk<VEC>(dest + (i64)node * num_features + first_feature + chunk * VEC, v);
        if (first_slice && chunk == 0) {
            if (counts != nullptr) atomicAdd(counts + node, (u64)count);
            if (keys != nullptr) keys[node] = node;
        }
    }
}

// float16 path, last step: for every touched slot (keys[slot] = its node), state[node] += table[slot],
// added in float32 and rounded to the state's type once.
template <int VEC>
__device__ __forceinline__ void apply_table(scalar_t* __restrict__ state, const int* __restrict__ keys,
                                            const float* __restrict__ values, i64 capacity, int num_features,
                                            int lanes_log2) {
    const int lane = threadIdx.x & 31;
    const int lanes = 1 << lanes_log2;
    const int rows_per_warp = 32 >> lanes_log2;
    const int chunks = num_features / VEC;
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 num_warps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 slot = warp * rows_per_warp + (lane >> lanes_log2); slot < capacity; slot += num_warps * rows_per_warp) {
        const int node = keys[slot];
        if (node == NO_SLOT) continue;
        for (int chunk = lane & (lanes - 1); chunk < chunks; chunk += lanes) {
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                scalar_t* p = state + (i64)node * num_features + chunk * VEC + k;
                store_scalar(p, to_float(*p) + values[slot * num_features + chunk * VEC + k]);
            }
        }
    }
}

// Entry points with C names, one per vector width.
#define SCATTER_ENTRY_POINTS(VEC)                                                                                    \
    extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK, MIN_BLOCKS_PER_SM)                                                                \
        scatter_global_v##VEC(const scalar_t* src, const i64* index, i64 num_edges, i64 num_nodes, int num_features,   \
                              int lanes_log2, float* dest, int* keys, int table_log2, u64* counts, u64* skipped,        \
                              i64 node_lo, i64 node_hi) {                                                              \
        scatter_rows_global<VEC, false>(src, index, num_edges, num_nodes, num_features, lanes_log2, dest, keys,       \
                                        table_log2, counts, skipped, node_lo, node_hi);                               \
    }                                                                                                                \
    extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK, MIN_BLOCKS_PER_SM)                                                                \
        scatter_hashed_v##VEC(const scalar_t* src, const i64* index, i64 num_edges, i64 num_nodes, int num_features,   \
                              int lanes_log2, float* dest, int* keys, int table_log2, u64* counts, u64* skipped,        \
                              i64 node_lo, i64 node_hi) {                                                              \
        scatter_rows_global<VEC, true>(src, index, num_edges, num_nodes, num_features, lanes_log2, dest, keys,        \
                                       table_log2, counts, skipped, node_lo, node_hi);                                \
    }                                                                                                                \
    extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK)                                                                \
        scatter_shared_v##VEC(const scalar_t* src, const i64* index, i64 num_edges, int num_nodes, int num_features,   \
                              int lanes_log2, int slice_width, float* dest, int* keys, u64* counts, u64* skipped) {     \
        scatter_rows_shared<VEC>(src, index, num_edges, num_nodes, num_features, lanes_log2, slice_width, dest, keys,  \
                                 counts, skipped);                                                                    \
    }                                                                                                                \
    extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK, MIN_BLOCKS_PER_SM)                                                                \
        apply_table_v##VEC(scalar_t* state, const int* keys, const float* values, i64 capacity, int num_features,      \
                           int lanes_log2) {                                                                          \
        apply_table<VEC>(state, keys, values, capacity, num_features, lanes_log2);                                    \
    }

SCATTER_ENTRY_POINTS(1)
SCATTER_ENTRY_POINTS(2)
SCATTER_ENTRY_POINTS(4)
