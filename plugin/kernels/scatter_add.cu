// Scatter-add of edge rows into node rows, in place: state[index[e], f] += src[e, f], counts[index[e]] += 1.
// plan.py decides which of these kernels a launch runs (its table of paths); docs/kernel.md describes each path.
//
// Compiled at run time by NVRTC (plugin/kernels/compile.py), once per (architecture, dtype):
//   -DSCATTER_HALF=0  float32 state and src; the kernels add straight into the state.
//   -DSCATTER_HALF=1  float16 state and src; the kernels sum in float32 (a table in the workspace with one entry
//                     per touched node, (value, count) pairs, shared memory or registers) and round each node into
//                     the half state once (docs/kernel.md "float16 accumulation": the scheme and its error bound).
//   -DSCATTER_GRID_SYNC=1 where cooperative_groups.h compiles: grid_table's kernel.
//   -DSCATTER_AOT_ONLY=1 the AOT plugins' PTX (plugin/kernels/aot.py): the entry points named aot_* at the end alone.
//
// Index values outside [0, num_nodes) are never written; each such row adds 1 to *skipped when given. Every kernel
// ends and stays inside its buffers whatever they hold (an index, a table, a workspace of made-up bytes): a probe
// visits at most the table's capacity, and a node, edge or position read from a buffer is used only inside its
// range. Garbage in may give garbage out. counts are int64 zeroed by the launcher; the kernels add to their low
// 32-bit word (the launcher requires num_edges < 2^32). Loops that shuffle or vote are warp-uniform.

#include <cuda_fp16.h>
#if SCATTER_AOT_ONLY  // the AOT plugins' PTX: their entry points alone (the others: templates never instantiated)
#define PLUGIN_KERNEL template <int = 0> __global__ void
#else
#define PLUGIN_KERNEL extern "C" __global__ void
#endif
#if SCATTER_GRID_SYNC
#include <cooperative_groups.h>
#endif

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
#define WARPS_PER_BLOCK (THREADS_PER_BLOCK / 32)
#define MIN_BLOCKS_PER_SM 3     // caps registers at 80 per thread (no spills): 768 threads per SM
#define WINDOW_LOADS 8          // index loads per lane per window (the global kernel: at most)
#define WINDOW_ROWS (32 * WINDOW_LOADS)
#define NO_SLOT (-1)  // an empty table slot, or a row this lane does not add (absent, skipped, merged away)

// The edges of one window that a warp must add: offset in the window, slot and node (both < 2^31);
// 24 KiB per block (plan.py QUEUE_BYTES_PER_BLOCK).
struct RowQueue {
    int offset[WINDOW_ROWS];
    int slot[WINDOW_ROWS];
    int node[WINDOW_ROWS];
};

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

// pair[0] += value, pair[1] += count: one 8-byte vector atomic on sm_90+ global memory, else two.
__device__ __forceinline__ void atomic_add_pair(float* pair, float value, unsigned count) {
#if __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float2*>(pair), make_float2(value, (float)count));
#else
    atomicAdd(pair, value);
    atomicAdd(pair + 1, (float)count);
#endif
}

// Sums entries that go to the same slot before any atomic: first a lane's own rows, then a tree across the
// warp's rows (lanes 2^lanes_log2 apart hold the same chunk of different rows). A merged-away entry gets
// slot NO_SLOT; its value and count live on in the entry that absorbed it, so each value is added once.
// Must be called by all 32 lanes.
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

// The table slot of `node`: linear probing from a multiplicative hash scaled to [0, capacity) (for a power of two
// 2^k, its top k bits), inserting the node if absent; NO_SLOT when none of the `capacity` slots holds it or is
// free. The launcher's table (cleared, at least twice the distinct nodes) always has room; one without a free slot
// (made-up keys) drops the row instead of probing forever.
__device__ __forceinline__ int find_or_insert(int* keys, int node, unsigned capacity) {
    unsigned slot = (unsigned)(((u64)((unsigned)node * 2654435761u) * capacity) >> 32);
    for (unsigned probe = 0; probe < capacity; ++probe) {
        const int key = *((volatile int*)&keys[slot]);
        if (key == node) return (int)slot;
        if (key == NO_SLOT) {
            const int previous = atomicCAS(&keys[slot], NO_SLOT, node);
            if (previous == NO_SLOT || previous == node) return (int)slot;
        }
        slot = slot + 1u == capacity ? 0u : slot + 1u;
    }
    return NO_SLOT;
}

// Adds count to the low 32-bit word of an int64 count (zeroed by the launcher, which keeps num_edges < 2^32).
__device__ __forceinline__ void add_count(u64* counts, int node, unsigned count) {
    atomicAdd(reinterpret_cast<unsigned*>(counts + node), count);
}

// Reads the targets of edges [base, base + 32 loads), one coalesced load per lane and step, and queues,
// compacted with a ballot, those whose node lies in [node_lo, node_hi): slot = node, or (HASHED) the table slot of
// node, inserted if new. Counts out-of-range targets into skipped_here when count_skipped. Returns how many edges
// were queued (the same on all lanes).
template <bool HASHED>
__device__ __forceinline__ int scan_window(const i64* __restrict__ index, i64 base, i64 num_edges, i64 num_nodes,
                                           i64 node_lo, i64 node_hi, int* __restrict__ keys, unsigned capacity,
                                           int loads, bool count_skipped, unsigned& skipped_here, RowQueue& queue) {
    const int lane = threadIdx.x & 31;
    i64 node[WINDOW_LOADS];
#pragma unroll
    for (int k = 0; k < WINDOW_LOADS; ++k) {
        const i64 edge = base + k * 32 + lane;
        node[k] = k < loads && edge < num_edges ? __ldcs(index + edge) : 0;
    }
    int queued = 0;
#pragma unroll
    for (int k = 0; k < WINDOW_LOADS; ++k) {
        if (k == loads) break;  // warp-uniform
        const bool present = base + k * 32 + lane < num_edges;
        const bool in_range = present && node[k] >= 0 && node[k] < num_nodes;
        if (count_skipped && present && !in_range) ++skipped_here;
        const bool active = in_range && node[k] >= node_lo && node[k] < node_hi;
        int slot = (int)node[k];
        if constexpr (HASHED) {
            if (active) slot = find_or_insert(keys, slot, capacity);
        }
        const unsigned active_lanes = __ballot_sync(FULL_MASK, active);
        if (active) {
            const int position = queued + __popc(active_lanes & ((1u << lane) - 1u));
            queue.offset[position] = k * 32 + lane;
            queue.slot[position] = slot;
            queue.node[position] = (int)node[k];
        }
        queued += __popc(active_lanes);
    }
    __syncwarp();
    return queued;
}

// Adds the queued rows of src, `chunks` chunks of VEC features each: 2^lanes_log2 lanes share a row, a chunk
// each, and each lane loads ROWS_PER_LANE rows before its first atomic. For each queued row and chunk,
// add(slot, node, chunk, values, count) once per distinct slot after combine_equal_targets (count is the number
// of rows summed into values, 0 on chunks other than 0).
template <int VEC, typename Add>
__device__ __forceinline__ void add_queued_rows(const scalar_t* __restrict__ src, i64 base, int num_features,
                                                int chunks, int lanes_log2, const RowQueue& queue, int queued,
                                                Add add) {
    const int lane = threadIdx.x & 31;
    const int lanes = 1 << lanes_log2;
    const int rows_per_warp = 32 >> lanes_log2;
    const int row_in_warp = lane >> lanes_log2;
    const int chunk_lane = lane & (lanes - 1);
    for (int first = 0; first < queued; first += rows_per_warp * ROWS_PER_LANE) {
        int row_slot[ROWS_PER_LANE], node[ROWS_PER_LANE];
        i64 edge[ROWS_PER_LANE];
#pragma unroll
        for (int r = 0; r < ROWS_PER_LANE; ++r) {
            const int position = first + r * rows_per_warp + row_in_warp;
            const bool live = position < queued;
            row_slot[r] = live ? queue.slot[position] : NO_SLOT;
            node[r] = live ? queue.node[position] : 0;
            edge[r] = base + (live ? queue.offset[position] : 0);
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
                    load_chunk<VEC>(src + edge[r] * num_features + (i64)chunk * VEC, v[r]);
                } else {
#pragma unroll
                    for (int k = 0; k < VEC; ++k) v[r][k] = 0.0f;
                }
            }
            combine_equal_targets<VEC>(slot, v, count, lanes_log2);
#pragma unroll
            for (int r = 0; r < ROWS_PER_LANE; ++r) {
                if (slot[r] != NO_SLOT) add(slot[r], node[r], chunk, v[r], count[r]);
            }
        }
    }
    __syncwarp();  // the queue is rewritten by the next window
}

// Edges whose node lies in [node_lo, node_hi) (one launch per node range: plan.py node passes) are added into
// dest (float32, num_features per slot); out-of-range targets are counted by the launch whose range starts at 0.
// Each warp takes windows of 32 x window_loads edges (1 to WINDOW_LOADS: plan.py window_loads_for).
//   HASHED = false: slot = node. dest is the float32 state, or the float16 path's table with one slot per
//                   node (keys unused).
//   HASHED = true:  slot = find_or_insert(keys, node): the float16 path's hashed table of `capacity` slots.
//   PAIRED = true:  (VEC = 1, slot = node) dest is the counts buffer holding (value, count) float32 pairs:
//                   one atomic_add_pair per slot; counts unused (fold_pairs writes them).
template <int VEC, bool HASHED, bool PAIRED>
__device__ __forceinline__ void scatter_rows_global(RowQueue* queues, const scalar_t* __restrict__ src,
                                                    const i64* __restrict__ index,
                                                    i64 num_edges, i64 num_nodes, int num_features, int lanes_log2,
                                                    int window_loads, float* __restrict__ dest,
                                                    int* __restrict__ keys, unsigned capacity,
                                                    u64* __restrict__ counts, u64* __restrict__ skipped, i64 node_lo,
                                                    i64 node_hi) {
    static_assert(!PAIRED || (VEC == 1 && !HASHED), "pairs hold one feature per node");
    RowQueue& queue = queues[threadIdx.x >> 5];
    const int loads = min(max(window_loads, 1), WINDOW_LOADS);
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 num_warps = ((i64)gridDim.x * blockDim.x) >> 5;
    const bool count_skipped = skipped != nullptr && node_lo == 0;
    const int chunks = num_features / VEC;
    unsigned skipped_here = 0;
    auto add = [&](int slot, int node, int chunk, const float (&v)[VEC], unsigned count) {
        if constexpr (PAIRED) {
            atomic_add_pair(dest + 2 * (i64)slot, v[0], count);
        } else {
            atomic_add_chunk<VEC>(dest + (i64)slot * num_features + (i64)chunk * VEC, v);
            if (counts != nullptr && count != 0) add_count(counts, node, count);
        }
    };
    for (i64 base = warp * 32 * loads; base < num_edges; base += num_warps * 32 * loads) {
        const int queued = scan_window<HASHED>(index, base, num_edges, num_nodes, node_lo, node_hi, keys, capacity,
                                               loads, count_skipped, skipped_here, queue);
        add_queued_rows<VEC>(src, base, num_features, chunks, lanes_log2, queue, queued, add);
    }
    if (count_skipped) add_skipped(skipped, skipped_here);
}

// Few nodes, many edges: each block sums its share of the edges into shared memory (shared_sums: float32 rows of
// all nodes, plus 32-bit counts), then adds every touched node's sums into dest with one atomic per chunk. dest as in
// scatter_rows_global without HASHED; PAIRED (VEC = 1): one atomic_add_pair per touched node.
template <int VEC, bool PAIRED>
__device__ __forceinline__ void scatter_rows_shared(RowQueue* queues, float* shared_sums,
                                                    const scalar_t* __restrict__ src,
                                                    const i64* __restrict__ index,
                                                    i64 num_edges, int num_nodes, int num_features, int lanes_log2,
                                                    float* __restrict__ dest, u64* __restrict__ counts,
                                                    u64* __restrict__ skipped) {
    RowQueue& queue = queues[threadIdx.x >> 5];
    unsigned* shared_counts = reinterpret_cast<unsigned*>(shared_sums + num_nodes * num_features);
    const int chunks = num_features / VEC;

    for (int i = threadIdx.x; i < num_nodes * (num_features + 1); i += blockDim.x) shared_sums[i] = 0.0f;
    __syncthreads();

    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 num_warps = ((i64)gridDim.x * blockDim.x) >> 5;
    unsigned skipped_here = 0;
    auto add = [&](int slot, int node, int chunk, const float (&v)[VEC], unsigned count) {
        float* sums = shared_sums + slot * num_features + chunk * VEC;
#pragma unroll
        for (int k = 0; k < VEC; ++k) atomicAdd(sums + k, v[k]);
        if (count != 0) atomicAdd(shared_counts + slot, count);
    };
    for (i64 base = warp * WINDOW_ROWS; base < num_edges; base += num_warps * WINDOW_ROWS) {
        const int queued = scan_window<false>(index, base, num_edges, num_nodes, 0, num_nodes, nullptr, 0, WINDOW_LOADS,
                                              skipped != nullptr, skipped_here, queue);
        add_queued_rows<VEC>(src, base, num_features, chunks, lanes_log2, queue, queued, add);
    }
    if (skipped != nullptr) add_skipped(skipped, skipped_here);
    __syncthreads();

    for (int i = threadIdx.x; i < num_nodes * chunks; i += blockDim.x) {
        const int node = i / chunks;
        const int chunk = i - node * chunks;
        const unsigned count = shared_counts[node];
        if (count == 0) continue;
        float v[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] = shared_sums[node * num_features + chunk * VEC + k];
        if constexpr (PAIRED) {
            atomic_add_pair(dest + 2 * (i64)node, v[0], count);
        } else {
            atomic_add_chunk<VEC>(dest + (i64)node * num_features + chunk * VEC, v);
            if (chunk == 0 && counts != nullptr) add_count(counts, node, count);
        }
    }
}

// float16 path, last step: state[node] += table[slot], added in float32 and rounded to the state's type once.
// Hashed table (keys != nullptr): node = keys[slot]; empty slots (NO_SLOT) and other keys outside [0, num_nodes)
// skipped. One slot per node (keys == nullptr): node = slot, and entries still +0.0 are skipped, so a node without
// edges keeps its value bit for bit (adding +0.0 would only turn -0.0 into +0.0).
template <int VEC>
__device__ __forceinline__ void apply_table(scalar_t* __restrict__ state, const int* __restrict__ keys,
                                            const float* __restrict__ values, i64 capacity, int num_features,
                                            int lanes_log2, i64 num_nodes) {
    const int lane = threadIdx.x & 31;
    const int lanes = 1 << lanes_log2;
    const int rows_per_warp = 32 >> lanes_log2;
    const int chunks = num_features / VEC;
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 num_warps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 slot = warp * rows_per_warp + (lane >> lanes_log2); slot < capacity; slot += num_warps * rows_per_warp) {
        const int node = keys != nullptr ? keys[slot] : (int)slot;
        if (node < 0 || node >= num_nodes) continue;  // NO_SLOT too
        for (int chunk = lane & (lanes - 1); chunk < chunks; chunk += lanes) {
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const float sum = values[slot * num_features + chunk * VEC + k];
                if (__float_as_uint(sum) == 0u) continue;
                scalar_t* p = state + (i64)node * num_features + chunk * VEC + k;
                store_scalar(p, to_float(*p) + sum);
            }
        }
    }
}

// The slots of a hashed table of 2^table_log2 slots (0 for a log2 no 32-bit capacity holds).
__device__ __forceinline__ unsigned table_capacity(int table_log2) {
    return (unsigned)table_log2 < 32u ? 1u << table_log2 : 0u;
}

// Entry points with C names (instantiated per vector width by ENTRY_POINTS, at the end). The paired path's
// take the arguments of scatter_global_v1 / scatter_shared_v1 with dest = the counts buffer, zeroed, as (value,
// count) float32 pairs and counts unused; fold_pairs follows them.
#define GLOBAL_ENTRY_POINT(NAME, VEC, HASHED, PAIRED)                                                            \
    PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK, MIN_BLOCKS_PER_SM)                                        \
    NAME(const scalar_t* src, const i64* index, i64 num_edges, i64 num_nodes, int num_features, int lanes_log2,  \
         int window_loads, float* dest, int* keys, int table_log2, u64* counts, u64* skipped, i64 node_lo,       \
         i64 node_hi) {                                                                                          \
        __shared__ RowQueue queues[WARPS_PER_BLOCK];                                                             \
        scatter_rows_global<VEC, HASHED, PAIRED>(queues, src, index, num_edges, num_nodes, num_features,         \
                                                 lanes_log2, window_loads, dest, keys,                           \
                                                 table_capacity(table_log2), counts, skipped, node_lo, node_hi); \
    }
#define SHARED_ENTRY_POINT(NAME, VEC, PAIRED)                                                                    \
    PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK)                                                           \
    NAME(const scalar_t* src, const i64* index, i64 num_edges, int num_nodes, int num_features, int lanes_log2,  \
         float* dest, u64* counts, u64* skipped) {                                                               \
        __shared__ RowQueue queues[WARPS_PER_BLOCK];                                                             \
        extern __shared__ float shared_rows[];                                                                   \
        scatter_rows_shared<VEC, PAIRED>(queues, shared_rows, src, index, num_edges, num_nodes, num_features,    \
                                         lanes_log2, dest, counts, skipped);                                     \
    }
#define SCATTER_ENTRY_POINTS(VEC)                                                                                \
    GLOBAL_ENTRY_POINT(scatter_global_v##VEC, VEC, false, false)                                                 \
    GLOBAL_ENTRY_POINT(scatter_hashed_v##VEC, VEC, true, false)                                                  \
    SHARED_ENTRY_POINT(scatter_shared_v##VEC, VEC, false)                                                        \
    PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK, MIN_BLOCKS_PER_SM)                                        \
    apply_table_v##VEC(scalar_t* state, const int* keys, const float* values, i64 capacity, int num_features,    \
                       int lanes_log2, i64 num_nodes) {                                                          \
        apply_table<VEC>(state, keys, values, capacity, num_features, lanes_log2, num_nodes);                    \
    }

GLOBAL_ENTRY_POINT(scatter_global_pairs, 1, false, true)
SHARED_ENTRY_POINT(scatter_shared_pairs, 1, true)

// Paired path, last step, a thread per node: counts[node] holds the node's (value, count) float32 pair (value in
// the low word); it becomes the int64 count (exact: the launcher pairs at most 2^24 edges per launch, plan.py
// PAIRED_MAX_EDGES), and state[node] += value, rounded once (nodes without edges keep their value bit for bit).
__device__ __forceinline__ void fold_pairs_body(scalar_t* __restrict__ state, u64* __restrict__ counts,
                                                i64 num_nodes) {
    const i64 node = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (node >= num_nodes) return;
    const u64 pair = counts[node];
    const float value = __uint_as_float((unsigned)pair);
    const float count = __uint_as_float((unsigned)(pair >> 32));
    counts[node] = (u64)count;
    if (count != 0.0f) store_scalar(state + node, to_float(state[node]) + value);
}
PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK)
fold_pairs(scalar_t* __restrict__ state, u64* __restrict__ counts, i64 num_nodes) {
    fold_pairs_body(state, counts, num_nodes);
}

// Paired path beyond 2^24 edges, after each chunk of at most 2^24, a thread per node: the pairs live in the workspace
// (float2 per node, zeroed by the launcher). The chunk's count is added into the int64 count and zeroed; the value
// keeps summing in float32 over all chunks and is rounded into the state once after the last.
__device__ __forceinline__ void fold_pair_chunk_body(scalar_t* __restrict__ state, float2* __restrict__ pairs,
                                                     u64* __restrict__ counts, i64 num_nodes, bool last) {
    const i64 node = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (node >= num_nodes) return;
    const float2 pair = pairs[node];
    u64 count = counts[node];
    if (pair.y != 0.0f) {
        count += (u64)pair.y;
        counts[node] = count;
        if (!last) pairs[node].y = 0.0f;
    }
    if (last && count != 0) store_scalar(state + node, to_float(state[node]) + pair.x);
}
PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK)
fold_pair_chunk(scalar_t* __restrict__ state, float2* __restrict__ pairs, u64* __restrict__ counts, i64 num_nodes,
                int last) {
    fold_pair_chunk_body(state, pairs, counts, num_nodes, last != 0);
}

// ---------------------------------------------------------------------------------------------------------
// Sorted path (counts, wide rows, many edges): no atomics on the state. The edges are counting-sorted by target
// node in the workspace (plan.py SortLayout; 32-bit positions), then each warp sums a contiguous range of sorted
// rows in registers and writes every node it owns once; a node that straddles warp ranges gets partial sums that
// sort_fixup adds once. Steps: memset counts -> sort_count -> [sort_tile_sums -> sort_scan_tiles: more than one
// tile of nodes] -> sort_cursors -> sort_place per node range -> sort_reduce_v* -> [sort_fixup_v*].

#define SORT_MAX_TILES 1024

// Node of edge e if in range, else -1.
__device__ __forceinline__ int target_of(const i64* __restrict__ index, i64 e, i64 num_nodes) {
    const i64 node = __ldg(index + e);
    return node >= 0 && node < num_nodes ? (int)node : -1;
}

// The block's share of [0, num_edges): contiguous, a multiple of 32 edges long.
__device__ __forceinline__ void block_edges(i64 num_edges, i64& first, i64& last) {
    const i64 per_block = ((num_edges + gridDim.x - 1) / gridDim.x + 31) & ~31ll;
    first = min((i64)blockIdx.x * per_block, num_edges);
    last = min(first + per_block, num_edges);
}

#define SORT_EDGES_PER_THREAD 4  // edges a thread reads, then counts or places, per step (atomics in flight)
#define NO_EDGE (-2)              // target_of gives -1 for an out-of-range id; this marks a lane past the end

// The targets of the block's edges first + k * blockDim + threadIdx, k < SORT_EDGES_PER_THREAD (NO_EDGE past
// last): independent loads, so that the atomics that follow are in flight together.
__device__ __forceinline__ void step_targets(const i64* __restrict__ index, i64 first, i64 last, i64 num_nodes,
                                             int (&node)[SORT_EDGES_PER_THREAD]) {
#pragma unroll
    for (int k = 0; k < SORT_EDGES_PER_THREAD; ++k) {
        const i64 e = first + k * blockDim.x + threadIdx.x;
        node[k] = e < last ? target_of(index, e, num_nodes) : NO_EDGE;
    }
}

// counts[n] (int64, zeroed by the launcher) = in-degree of n; out-of-range targets add to *skipped.
// private_nodes > 0: a block counts its edges in shared memory (private_nodes = N words) and adds each
// nonzero tally once (few nodes: many edges per node would contend on global atomics).
__device__ __forceinline__ void sort_count_body(const i64* __restrict__ index, i64 num_edges, i64 num_nodes,
                                                u64* __restrict__ counts, u64* __restrict__ skipped,
                                                int private_nodes) {
    extern __shared__ unsigned tally[];
    i64 first, last;
    block_edges(num_edges, first, last);
    for (int n = threadIdx.x; n < private_nodes; n += blockDim.x) tally[n] = 0u;
    __syncthreads();
    unsigned skipped_here = 0;
    for (i64 step = first; step < last; step += SORT_EDGES_PER_THREAD * blockDim.x) {
        int node[SORT_EDGES_PER_THREAD];
        step_targets(index, step, last, num_nodes, node);
#pragma unroll
        for (int k = 0; k < SORT_EDGES_PER_THREAD; ++k) {
            if (node[k] == -1) {
                ++skipped_here;
            } else if (node[k] >= 0 && private_nodes > 0) {
                atomicAdd(tally + node[k], 1u);
            } else if (node[k] >= 0) {
                add_count(counts, node[k], 1u);
            }
        }
    }
    if (skipped != nullptr) add_skipped(skipped, skipped_here);  // every warp runs this: blockDim is 256
    if (private_nodes > 0) {
        __syncthreads();
        for (int n = threadIdx.x; n < private_nodes; n += blockDim.x) {
            if (tally[n] != 0u) add_count(counts, n, tally[n]);
        }
    }
}
PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK)
sort_count(const i64* __restrict__ index, i64 num_edges, i64 num_nodes, u64* __restrict__ counts,
           u64* __restrict__ skipped, int private_nodes) {
    sort_count_body(index, num_edges, num_nodes, counts, skipped, private_nodes);
}

// Inclusive scan of one value per lane across the warp (every lane of the warp calls it).
__device__ __forceinline__ unsigned warp_inclusive_scan(unsigned value) {
    const int lane = threadIdx.x & 31;
    for (int offset = 1; offset < 32; offset <<= 1) {
        const unsigned up = __shfl_up_sync(FULL_MASK, value, offset);
        if (lane >= offset) value += up;
    }
    return value;
}

// Inclusive scan of one value per thread across the block (blockDim = THREADS_PER_BLOCK); total = block sum.
__device__ __forceinline__ unsigned block_inclusive_scan(unsigned value, unsigned& total) {
    __shared__ unsigned warp_sums[WARPS_PER_BLOCK];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    value = warp_inclusive_scan(value);
    if (lane == 31) warp_sums[warp] = value;
    __syncthreads();
    unsigned before = 0;
    total = 0;
    for (int w = 0; w < WARPS_PER_BLOCK; ++w) {
        const unsigned s = warp_sums[w];
        if (w < warp) before += s;
        total += s;
    }
    __syncthreads();  // warp_sums is reused by the next call
    return value + before;
}

#define SORT_LOADS 8  // counts a thread of the scan kernels loads before it adds them (loads in flight)

// The SORT_LOADS counts[n] (as 32-bit) for n = base + k * stride below hi, k < SORT_LOADS (0 beyond hi).
__device__ __forceinline__ void load_counts(const u64* __restrict__ counts, i64 base, i64 hi, i64 stride,
                                            unsigned (&value)[SORT_LOADS]) {
#pragma unroll
    for (int k = 0; k < SORT_LOADS; ++k) {
        const i64 n = base + k * stride;
        value[k] = n < hi ? (unsigned)counts[n] : 0u;
    }
}

// Sum of counts[n] for n = lo, lo + stride, ... below hi.
__device__ __forceinline__ unsigned sum_counts(const u64* __restrict__ counts, i64 lo, i64 hi, i64 stride) {
    unsigned sum = 0;
    for (i64 base = lo; base < hi; base += SORT_LOADS * stride) {
        unsigned value[SORT_LOADS];
        load_counts(counts, base, hi, stride, value);
#pragma unroll
        for (int k = 0; k < SORT_LOADS; ++k) sum += value[k];
    }
    return sum;
}

// tile_sums[t] = sum of the in-degrees of tile t (tile_nodes nodes per tile, one block per tile).
__device__ __forceinline__ void sort_tile_sums_body(const u64* __restrict__ counts, i64 num_nodes, i64 tile_nodes,
                                                    unsigned* __restrict__ tile_sums) {
    const i64 first = (i64)blockIdx.x * tile_nodes;
    const i64 last = min(first + tile_nodes, num_nodes);
    unsigned total;
    block_inclusive_scan(sum_counts(counts, first + threadIdx.x, last, blockDim.x), total);
    if (threadIdx.x == 0) tile_sums[blockIdx.x] = total;
}
PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK)
sort_tile_sums(const u64* __restrict__ counts, i64 num_nodes, i64 tile_nodes, unsigned* __restrict__ tile_sums) {
    sort_tile_sums_body(counts, num_nodes, tile_nodes, tile_sums);
}

// One block: tile_sums becomes its exclusive scan; cursor[num_nodes] = the number of valid edges.
__device__ __forceinline__ void sort_scan_tiles_body(unsigned* __restrict__ tile_sums, int num_tiles,
                                                     unsigned* __restrict__ cursor, i64 num_nodes) {
    unsigned carry = 0;
    for (int base = 0; base < num_tiles; base += blockDim.x) {
        const int t = base + threadIdx.x;
        const unsigned value = t < num_tiles ? tile_sums[t] : 0u;
        unsigned total;
        const unsigned inclusive = block_inclusive_scan(value, total);
        if (t < num_tiles) tile_sums[t] = carry + inclusive - value;
        carry += total;
    }
    if (threadIdx.x == 0) cursor[num_nodes] = carry;
}
PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK)
sort_scan_tiles(unsigned* __restrict__ tile_sums, int num_tiles, unsigned* __restrict__ cursor, i64 num_nodes) {
    sort_scan_tiles_body(tile_sums, num_tiles, cursor, num_nodes);
}

// cursor[n] = number of valid edges into nodes 0..n (the end of node n's sorted range). Each warp sums a contiguous
// eighth of the tile's nodes, the block scans the eight sums, then the warp writes its nodes' inclusive scan from
// its start. One block (one tile) needs no tile sums: it starts from 0 and writes cursor[num_nodes] itself.
__device__ __forceinline__ void sort_cursors_body(const u64* __restrict__ counts, i64 num_nodes, i64 tile_nodes,
                                                  const unsigned* __restrict__ tile_sums,
                                                  unsigned* __restrict__ cursor) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const i64 first = (i64)blockIdx.x * tile_nodes;
    const i64 last = min(first + tile_nodes, num_nodes);
    const i64 per_warp = ((last - first + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK + 31) & ~31ll;
    const i64 lo = min(last, first + warp * per_warp), hi = min(last, lo + per_warp);
    unsigned warp_sum = sum_counts(counts, lo + lane, hi, 32);
    for (int offset = 16; offset > 0; offset >>= 1) warp_sum += __shfl_xor_sync(FULL_MASK, warp_sum, offset);
    unsigned total;
    const unsigned through_warp = block_inclusive_scan(lane == 0 ? warp_sum : 0u, total);  // lane 0's: warps <= warp
    unsigned running = __shfl_sync(FULL_MASK, through_warp - warp_sum, 0) + (gridDim.x == 1 ? 0u : tile_sums[blockIdx.x]);
    for (i64 base = lo; base < hi; base += 32 * SORT_LOADS) {
        unsigned value[SORT_LOADS];
        load_counts(counts, base + lane, hi, 32, value);
#pragma unroll
        for (int k = 0; k < SORT_LOADS; ++k) {
            const unsigned scanned = warp_inclusive_scan(value[k]);
            const i64 n = base + k * 32 + lane;
            if (n < hi) cursor[n] = running + scanned;
            running += __shfl_sync(FULL_MASK, scanned, 31);
        }
    }
    if (gridDim.x == 1 && threadIdx.x == 0) cursor[num_nodes] = total;
}
PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK)
sort_cursors(const u64* __restrict__ counts, i64 num_nodes, i64 tile_nodes, const unsigned* __restrict__ tile_sums,
             unsigned* __restrict__ cursor) {
    sort_cursors_body(counts, num_nodes, tile_nodes, tile_sums, cursor);
}

// Each valid edge e whose node n lies in [node_lo, node_hi) takes a position p in its node's range (cursor[n]
// counts down to the range's start) and sorted[p] = (e, n). private_nodes > 0: a block first tallies its edges per
// node in shared memory and takes each node's positions with one atomic. One launch per node range keeps the part
// of `sorted` it writes in L2 until complete, where the scattered 8-byte writes merge.
__device__ __forceinline__ void sort_place_body(const i64* __restrict__ index, i64 num_edges, i64 num_nodes,
                                                unsigned* __restrict__ cursor, int2* __restrict__ sorted,
                                                int private_nodes, i64 node_lo, i64 node_hi) {
    extern __shared__ unsigned next[];
    i64 first, last;
    block_edges(num_edges, first, last);
    auto in_range = [&](int node) { return node >= node_lo && node < node_hi; };  // false for -1, NO_EDGE
    if (private_nodes > 0) {
        for (int n = threadIdx.x; n < private_nodes; n += blockDim.x) next[n] = 0u;
        __syncthreads();
        for (i64 step = first; step < last; step += SORT_EDGES_PER_THREAD * blockDim.x) {
            int node[SORT_EDGES_PER_THREAD];
            step_targets(index, step, last, num_nodes, node);
#pragma unroll
            for (int k = 0; k < SORT_EDGES_PER_THREAD; ++k) {
                if (in_range(node[k])) atomicAdd(next + node[k], 1u);
            }
        }
        __syncthreads();
        for (int n = node_lo + threadIdx.x; n < node_hi; n += blockDim.x) {
            const unsigned tally = next[n];
            if (tally != 0u) next[n] = atomicSub(cursor + n, tally) - tally;
        }
        __syncthreads();
    }
    for (i64 step = first; step < last; step += SORT_EDGES_PER_THREAD * blockDim.x) {
        int node[SORT_EDGES_PER_THREAD];
        unsigned position[SORT_EDGES_PER_THREAD];
        step_targets(index, step, last, num_nodes, node);
#pragma unroll
        for (int k = 0; k < SORT_EDGES_PER_THREAD; ++k) {
            if (in_range(node[k])) {
                position[k] = private_nodes > 0 ? atomicAdd(next + node[k], 1u) : atomicSub(cursor + node[k], 1u) - 1u;
            }
        }
#pragma unroll
        for (int k = 0; k < SORT_EDGES_PER_THREAD; ++k) {  // a position beyond E: made-up cursors
            if (in_range(node[k]) && position[k] < num_edges) {
                sorted[position[k]] = make_int2((int)(step + k * blockDim.x + threadIdx.x), node[k]);
            }
        }
    }
}
PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK)
sort_place(const i64* __restrict__ index, i64 num_edges, i64 num_nodes, unsigned* __restrict__ cursor,
           int2* __restrict__ sorted, int private_nodes, i64 node_lo, i64 node_hi) {
    sort_place_body(index, num_edges, num_nodes, cursor, sorted, private_nodes, node_lo, node_hi);
}

// VEC state elements as floats, and back (one rounding for float16).
template <int VEC>
__device__ __forceinline__ void add_into_state(scalar_t* p, const float (&v)[VEC]) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) store_scalar(p + k, to_float(p[k]) + v[k]);
}

template <int VEC>
__device__ __forceinline__ void store_floats(float* p, const float (&v)[VEC]) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) p[k] = v[k];
}

#ifndef SORT_UNROLL
#define SORT_UNROLL 8  // rows each lane loads before it adds them (loads in flight per warp)
#endif

// Sums, in order, the rows of a warp's sorted positions [begin, end), 32 lanes per row, VEC features per lane
// (blockIdx.y picks a slice of 32 * VEC features): at(p) gives position p's (edge, node), the edge counted from
// `rows`, for the positions of this lane (p % 32 == lane); flush(node, sum, first_run, last_run) gets each
// run of equal nodes' sums (on every lane, whether its column is in the row or not: `active`).
template <int VEC, typename At, typename Flush>
__device__ __forceinline__ void sum_runs(const scalar_t* __restrict__ rows, int num_features, i64 begin, i64 end,
                                         At at, Flush flush) {
    const int lane = threadIdx.x & 31;
    const int column = (blockIdx.y * 32 + lane) * VEC;
    const bool active = column < num_features;
    float sum[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) sum[k] = 0.0f;
    int node = -1;
    bool first_run = true;
    for (i64 base = begin; base < end; base += 32) {
        const int here = (int)min((i64)32, end - base);
        const int2 mine = lane < here ? at(base + lane) : make_int2(0, -1);
        for (int j0 = 0; j0 < here; j0 += SORT_UNROLL) {
            float v[SORT_UNROLL][VEC];
            int nodes[SORT_UNROLL];
#pragma unroll
            for (int u = 0; u < SORT_UNROLL; ++u) {
                const int edge = __shfl_sync(FULL_MASK, mine.x, (j0 + u) & 31);
                nodes[u] = __shfl_sync(FULL_MASK, mine.y, (j0 + u) & 31);
                if (active && j0 + u < here) {
                    load_chunk<VEC>(rows + (i64)edge * num_features + column, v[u]);
                } else {
#pragma unroll
                    for (int k = 0; k < VEC; ++k) v[u][k] = 0.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < SORT_UNROLL; ++u) {
                if (j0 + u >= here) break;
                if (nodes[u] != node) {
                    if (node >= 0) {
                        flush(node, sum, first_run, false);
                        first_run = false;
                    }
                    node = nodes[u];
#pragma unroll
                    for (int k = 0; k < VEC; ++k) sum[k] = v[u][k];
                } else {
#pragma unroll
                    for (int k = 0; k < VEC; ++k) sum[k] += v[u][k];
                }
            }
        }
    }
    if (node >= 0) flush(node, sum, first_run, true);
}

// Warp w sums the rows of sorted positions [w * span, (w + 1) * span) (valid edges only: at most num_edges, and a
// pair whose edge or node is out of range, from made-up cursors or pairs, is dropped). A node whose
// positions all lie in the range is added into the state once (read, add, write: no other warp touches it).
// The range's first node, if it began in an earlier range, goes to head[w]; its last node, if it goes on in
// the next range and did not begin in an earlier one, to tail[w]; sort_fixup adds those.
template <int VEC>
__device__ __forceinline__ void sort_reduce(const scalar_t* __restrict__ src, const int2* __restrict__ sorted,
                                            const unsigned* __restrict__ cursor, i64 num_nodes, int num_features,
                                            int span, scalar_t* __restrict__ state, float* __restrict__ head,
                                            float* __restrict__ tail, i64 num_edges) {
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 valid = min((i64)cursor[num_nodes], num_edges);
    const i64 begin = warp * span;
    if (begin >= valid) return;
    const i64 end = min(begin + span, valid);
    const int column = (blockIdx.y * 32 + (threadIdx.x & 31)) * VEC;
    const bool head_partial = begin > 0 && sorted[begin - 1].y == sorted[begin].y;
    const bool tail_partial = end < valid && sorted[end].y == sorted[end - 1].y;
    auto at = [&](i64 p) {
        const int2 pair = sorted[p];
        const bool ok = pair.x >= 0 && pair.x < num_edges && pair.y >= 0 && pair.y < num_nodes;
        return ok ? pair : make_int2(0, -1);  // node -1: sum_runs drops the row
    };
    auto flush = [&](int node, const float (&sum)[VEC], bool first_run, bool last_run) {
        if (column >= num_features) return;
        const i64 partial = warp * num_features + column;
        if (first_run && head_partial) {
            store_floats<VEC>(head + partial, sum);
        } else if (last_run && tail_partial) {
            store_floats<VEC>(tail + partial, sum);
        } else {
            add_into_state<VEC>(state + (i64)node * num_features + column, sum);
        }
    };
    sum_runs<VEC>(src, num_features, begin, end, at, flush);
}

// A warp per boundary b between ranges b - 1 and b: the node that crosses it, if this is the first boundary
// it crosses (its positions start in range b - 1), gets tail[b - 1] + head[b] + ... + head[w_last], its
// partial sums in every range it touches, added into the state once.
template <int VEC>
__device__ __forceinline__ void sort_fixup(const int2* __restrict__ sorted, const unsigned* __restrict__ cursor,
                                           i64 num_nodes, int num_features, int span, i64 num_ranges,
                                           scalar_t* __restrict__ state, const float* __restrict__ head,
                                           const float* __restrict__ tail) {
    const int lane = threadIdx.x & 31;
    const i64 b = (((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5) + 1;
    const i64 valid = cursor[num_nodes];
    const i64 position = b * span;
    if (b >= num_ranges || position >= valid) return;
    const int node = sorted[position].y;
    if (sorted[position - 1].y != node || node < 0 || node >= num_nodes) return;
    const i64 start = cursor[node], stop = cursor[node + 1];
    if (start / span != b - 1) return;  // an earlier boundary's warp adds this node
    const int column = (blockIdx.y * 32 + lane) * VEC;
    if (column >= num_features) return;
    float sum[VEC];
    const float* t = tail + (b - 1) * num_features + column;
#pragma unroll
    for (int k = 0; k < VEC; ++k) sum[k] = t[k];
    for (i64 w = b; w <= (stop - 1) / span && w < num_ranges; ++w) {
        const float* h = head + w * num_features + column;
#pragma unroll
        for (int k = 0; k < VEC; ++k) sum[k] += h[k];
    }
    add_into_state<VEC>(state + (i64)node * num_features + column, sum);
}

// ---------------------------------------------------------------------------------------------------------
// Chunked path (few nodes, many edges, wide rows): each block counting-sorts a chunk of at most 65536 edges by
// target node in shared memory (cursor uint32 [N + 1], uint16 offsets [chunk_edges]), then each warp sums an eighth
// of the sorted rows in registers and adds every run of equal nodes into dest with one vector atomic per lane.
// dest as in scatter_rows_global without HASHED; blockIdx.y picks a slice of 32 * VEC features (a warp's width);
// only slice 0 writes counts and skipped.
template <int VEC>
__device__ __forceinline__ void chunk_reduce(const scalar_t* __restrict__ src, const i64* __restrict__ index,
                                             i64 num_edges, int num_nodes, int num_features, int chunk_edges,
                                             float* __restrict__ dest, u64* __restrict__ counts,
                                             u64* __restrict__ skipped) {
    extern __shared__ unsigned cursor[];  // [num_nodes + 1], then the chunk's order
    unsigned short* order = reinterpret_cast<unsigned short*>(cursor + num_nodes + 1);
    const bool first_slice = blockIdx.y == 0;
    const int column = (blockIdx.y * 32 + (threadIdx.x & 31)) * VEC;
    const int nodes_per_thread = (num_nodes + blockDim.x - 1) / blockDim.x;
    unsigned skipped_here = 0;
    for (i64 first = (i64)blockIdx.x * chunk_edges; first < num_edges; first += (i64)gridDim.x * chunk_edges) {
        const int here = (int)min((i64)chunk_edges, num_edges - first);
        for (int n = threadIdx.x; n <= num_nodes; n += blockDim.x) cursor[n] = 0u;
        __syncthreads();
        for (int i = threadIdx.x; i < here; i += blockDim.x) {  // tallies
            const int node = target_of(index, first + i, num_nodes);
            if (node >= 0) {
                atomicAdd(cursor + node, 1u);
            } else if (first_slice) {
                ++skipped_here;
            }
        }
        __syncthreads();
        // counts, then cursor[n] = start of node n's positions (each thread scans its own run of nodes)
        const int lo = min(num_nodes, (int)threadIdx.x * nodes_per_thread);
        const int hi = min(num_nodes, lo + nodes_per_thread);
        unsigned mine = 0;
        for (int n = lo; n < hi; ++n) {
            if (counts != nullptr && first_slice && cursor[n] != 0u) add_count(counts, n, cursor[n]);
            mine += cursor[n];
        }
        unsigned total;
        unsigned start = block_inclusive_scan(mine, total) - mine;
        for (int n = lo; n < hi; ++n) {
            const unsigned tally = cursor[n];
            cursor[n] = start;
            start += tally;
        }
        if (threadIdx.x == 0) cursor[num_nodes] = total;
        __syncthreads();
        for (int i = threadIdx.x; i < here; i += blockDim.x) {  // place: cursor[n] ends at node n's end
            const int node = target_of(index, first + i, num_nodes);
            if (node >= 0) order[atomicAdd(cursor + node, 1u)] = (unsigned short)i;
        }
        __syncthreads();
        // Warp w sums positions [w * per_warp, (w + 1) * per_warp); position p belongs to the first node whose
        // end (cursor[n], now) is beyond p.
        const i64 valid = cursor[num_nodes];
        const i64 per_warp = (valid + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
        const i64 begin = min(valid, (i64)(threadIdx.x >> 5) * per_warp);
        const i64 end = min(valid, begin + per_warp);
        auto at = [&](i64 p) {
            int low = 0, high = num_nodes - 1;  // the node n with cursor[n - 1] <= p < cursor[n]
            while (low < high) {
                const int middle = (low + high) >> 1;
                if (cursor[middle] > (unsigned)p) high = middle; else low = middle + 1;
            }
            return make_int2((int)order[p], low);
        };
        auto flush = [&](int node, const float (&sum)[VEC], bool, bool) {
            if (column < num_features) atomic_add_chunk<VEC>(dest + (i64)node * num_features + column, sum);
        };
        sum_runs<VEC>(src + first * num_features, num_features, begin, end, at, flush);
        __syncthreads();  // cursor and order are rewritten by the next chunk
    }
    if (skipped != nullptr && first_slice) add_skipped(skipped, skipped_here);
}

#define SORT_ENTRY_POINTS(VEC)                                                                                   \
    PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK)                                                           \
    sort_reduce_v##VEC(const scalar_t* src, const int2* sorted, const unsigned* cursor, i64 num_nodes,           \
                       int num_features, int span, scalar_t* state, float* head, float* tail, i64 num_edges) {   \
        sort_reduce<VEC>(src, sorted, cursor, num_nodes, num_features, span, state, head, tail, num_edges);      \
    }                                                                                                            \
    PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK)                                                           \
    sort_fixup_v##VEC(const int2* sorted, const unsigned* cursor, i64 num_nodes, int num_features, int span,     \
                      i64 num_ranges, scalar_t* state, const float* head, const float* tail) {                   \
        sort_fixup<VEC>(sorted, cursor, num_nodes, num_features, span, num_ranges, state, head, tail);           \
    }
#define CHUNK_ENTRY_POINT(VEC)                                                                                   \
    PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK)                                                           \
    chunk_reduce_v##VEC(const scalar_t* src, const i64* index, i64 num_edges, int num_nodes, int num_features,   \
                        int chunk_edges, float* dest, u64* counts, u64* skipped) {                               \
        chunk_reduce<VEC>(src, index, num_edges, num_nodes, num_features, chunk_edges, dest, counts, skipped);   \
    }

// ---------------------------------------------------------------------------------------------------------
// Launches without counts (plan.py direct, block_table, grid_table, split_table, owned): what a small in-place
// update runs; none of them does O(N) work. grid_table and split_table share claim_or_add's slot table.

#define OWNED_EMPTY (-1)
#define OWNED_THREADS 1024  // plan.py OWNED_THREADS: scatter_owned's block size
#define FULL_RANGE (1ull << 32)

// murmur3's 32-bit finaliser: a bijection of 32-bit words that mixes every input bit into every output bit.
__device__ __forceinline__ unsigned mix32(unsigned x) {
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}
// The block of `owners` that owns node n on the owned path: Fibonacci hashing scaled to [0, owners), two
// instructions (every block hashes every target). Ids it spreads badly only cost passes, never a wrong sum.
__device__ __forceinline__ unsigned owned_by(int node, unsigned owners) {
    return (unsigned)(((u64)((unsigned)node * 0x9e3779b1u) * owners) >> 32);
}
__device__ __forceinline__ unsigned subrange_hash(int node) { return mix32((unsigned)node) * 0x9e3779b1u; }  // a bijection
__device__ __forceinline__ bool in_subrange(int node, unsigned lo, u64 width) {
    return width == FULL_RANGE || (u64)(unsigned)(subrange_hash(node) - lo) < width;
}

// The slot of node in a shared table of `capacity` keys (inserted if absent): linear probing from a hash scaled
// to [0, capacity), at most `probes` slots; beyond, -1 and *overflow raised (the pass is retried on a smaller
// sub-range of the block's nodes). No count of insertions: a shared counter would serialise every insert.
__device__ __forceinline__ int owned_insert(int* keys, int capacity, int node, int probes, int* overflow) {
    unsigned slot = (unsigned)(((u64)mix32((unsigned)node ^ 0x5bd1e995u) * (unsigned)capacity) >> 32);
    for (int probe = 0; probe < probes; ++probe) {
        const int key = *((volatile int*)&keys[slot]);
        if (key == node) return (int)slot;
        if (key == OWNED_EMPTY) {
            const int previous = atomicCAS(&keys[slot], OWNED_EMPTY, node);
            if (previous == OWNED_EMPTY || previous == node) return (int)slot;
        }
        slot = slot + 1u == (unsigned)capacity ? 0u : slot + 1u;
    }
    *((volatile int*)overflow) = 1;
    return -1;
}

// Whether some lane holds the same key as the lane `step` below it (step 0: never): a cheap test, before the
// costly match.any, that a warp has equal targets to sum (runs of one target, hubs). Every lane calls it.
template <typename Key>
__device__ __forceinline__ bool warp_has_neighbour_duplicates(Key key, bool valid, int step) {
    if (step <= 0 || step >= 32) return false;
    const int lane = threadIdx.x & 31;
    const Key below = __shfl_up_sync(FULL_MASK, key, step);
    return __any_sync(FULL_MASK, valid && lane >= step && below == key);
}

// Lanes of the warp with equal keys (match.any): each lane gets its group's sum of v; returns whether it is the
// group's leader (its lowest lane). Every lane of the warp calls it.
template <int VEC>
__device__ __forceinline__ bool combine_warp_peers(long long key, float (&v)[VEC]) {
    const int lane = threadIdx.x & 31;
    const unsigned peers = __match_any_sync(FULL_MASK, key);
    if (__all_sync(FULL_MASK, peers == (1u << lane))) return true;
    float sum[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) sum[k] = 0.0f;
    for (unsigned rest = peers; rest != 0u; rest &= rest - 1u) {  // the same bits, in order, on every lane of a group
        const int from = __ffs(rest) - 1;
#pragma unroll
        for (int k = 0; k < VEC; ++k) sum[k] += __shfl_sync(peers, v[k], from);
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = sum[k];
    return __ffs(peers) - 1 == lane;
}

// direct (float32): dest[index[e], chunk c] += src[e, chunk c], a thread per (edge, chunk) element: the index and
// the src row are loaded side by side, then one vector atomic. Where neighbouring lanes share a target (runs,
// hubs) the warp sums its equal targets first. Out-of-range targets add 1 to *skipped (chunk 0 only).
template <int VEC>
__device__ __forceinline__ void scatter_direct(const scalar_t* __restrict__ src, const i64* __restrict__ index,
                                               i64 num_edges, i64 num_nodes, int num_features,
                                               float* __restrict__ dest, u64* __restrict__ skipped) {
    const int lane = threadIdx.x & 31;
    const int chunks = num_features / VEC;
    const i64 total = num_edges * chunks;
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 num_warps = ((i64)gridDim.x * blockDim.x) >> 5;
    unsigned skipped_here = 0;
    for (i64 base = warp * 32; base < total; base += num_warps * 32) {
        const i64 element = base + lane;
        const bool present = element < total;
        const i64 edge = chunks == 1 ? element : element / chunks;
        const int chunk = (int)(element - edge * chunks);
        const i64 node = present ? __ldcs(index + edge) : -1;
        float v[VEC];  // loaded beside the index (in bounds for every present element): one round trip
        if (present) {
            load_chunk<VEC>(src + edge * num_features + (i64)chunk * VEC, v);
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) v[k] = 0.0f;
        }
        const bool ok = present && node >= 0 && node < num_nodes;
        if (present && !ok && chunk == 0) ++skipped_here;
        const long long key = ok ? node * chunks + chunk : -1ll - lane;
        bool leader = true;
        if (warp_has_neighbour_duplicates(key, ok, chunks)) leader = combine_warp_peers<VEC>(key, v);
        if (ok && leader) atomic_add_chunk<VEC>(dest + node * num_features + (i64)chunk * VEC, v);
    }
    if (skipped != nullptr) add_skipped(skipped, skipped_here);
}

#define DIRECT_ENTRY_POINT(VEC)                                                                                  \
    PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK)                                                           \
    scatter_direct_v##VEC(const scalar_t* src, const i64* index, i64 num_edges, i64 num_nodes, int num_features, \
                          float* dest, u64* skipped) {                                                           \
        scatter_direct<VEC>(src, index, num_edges, num_nodes, num_features, dest, skipped);                      \
    }

#define ENTRY_POINTS(VEC) SCATTER_ENTRY_POINTS(VEC) SORT_ENTRY_POINTS(VEC) CHUNK_ENTRY_POINT(VEC)
ENTRY_POINTS(1)
ENTRY_POINTS(2)
ENTRY_POINTS(4)
#if !SCATTER_HALF  // float16 takes the table paths
DIRECT_ENTRY_POINT(1)
DIRECT_ENTRY_POINT(2)
DIRECT_ENTRY_POINT(4)
#endif

// add(node, feature, value) of an owned block's pass: the value into the node's float32 sum, the node inserted if
// new. A functor, not a generic lambda: NVRTC 12.9 rejects those in device code.
struct OwnedAdd {
    int* keys;
    float* sums;
    int* overflow;
    int capacity, probes, num_features;

    __device__ __forceinline__ void operator()(int node, int feature, float value) const {
        const int slot = owned_insert(keys, capacity, node, probes, overflow);
        if (slot < 0) return;
        atomicAdd(sums + slot * num_features + feature, value);
    }
};

// Adds every node's float32 sum of an owned table (keys[capacity], sums[capacity * F]) into the state with one
// rounding; sums still +0.0 are skipped (such a node keeps its value bit for bit). Every thread of the block
// calls it.
__device__ __forceinline__ void apply_owned_table(scalar_t* __restrict__ state, const int* keys, const float* sums,
                                                  int capacity, int num_features) {
    for (int i = threadIdx.x; i < capacity * num_features; i += blockDim.x) {
        const int slot = num_features == 1 ? i : i / num_features;
        const int node = keys[slot];
        const float sum = sums[i];
        if (node == OWNED_EMPTY || __float_as_uint(sum) == 0u) continue;
        scalar_t* p = state + (i64)node * num_features + (i - slot * num_features);
        store_scalar(p, to_float(*p) + sum);
    }
}

// An owned block's passes over its shared table (dynamic shared memory: keys[capacity], OWNED_EMPTY when free,
// then sums[capacity * F] float32). A pass covers the nodes whose subrange_hash lies in [lo, lo + width):
// feed(lo, width, add) calls add(node, feature, value) (OwnedAdd) for each value of such a node, then the table
// is applied. A node that finds no slot within `probes` fails the pass: nothing was written, and the block retries
// on half the sub-range, so no node is added or rounded twice. Every thread of the block calls it.
template <typename Feed>
__device__ __forceinline__ void owned_passes(scalar_t* __restrict__ state, int num_features, int capacity, int probes,
                                             Feed feed) {
    extern __shared__ int owned_keys[];
    float* sums = reinterpret_cast<float*>(owned_keys + capacity);
    __shared__ int overflow;
    const OwnedAdd add{owned_keys, sums, &overflow, capacity, probes, num_features};
    u64 lo = 0, width = FULL_RANGE;
    while (lo < FULL_RANGE) {
        for (int i = threadIdx.x; i < capacity; i += blockDim.x) owned_keys[i] = OWNED_EMPTY;
        for (int i = threadIdx.x; i < capacity * num_features; i += blockDim.x) sums[i] = 0.0f;
        if (threadIdx.x == 0) overflow = 0;
        __syncthreads();
        feed((unsigned)lo, width, add);
        __syncthreads();
        const bool failed = overflow != 0;
        if (!failed) apply_owned_table(state, owned_keys, sums, capacity, num_features);
        __syncthreads();  // everyone has read `overflow` and the table before the next pass clears them
        if (failed) {
            width >>= 1;  // the same lo, half the sub-range (width 1 holds one node: it always fits)
            continue;
        }
        lo += width;
        while (width < FULL_RANGE && (lo & (2 * width - 1)) == 0) width <<= 1;
    }
}

#define OWNED_LOADS 8  // targets each thread of scatter_owned reads before it adds (loads in flight)

// The sum of v over the lanes of `peers` (match.any's group of this lane; every lane of the group calls it).
__device__ __forceinline__ float sum_over_peers(unsigned peers, float v) {
    if ((peers & (peers - 1u)) == 0u) return v;
    float sum = 0.0f;
    for (unsigned rest = peers; rest != 0u; rest &= rest - 1u) sum += __shfl_sync(peers, v, __ffs(rest) - 1);
    return sum;
}

// owned (float16, few edges): block b adds the rows of every edge whose target n (in range) has owned_by(n,
// gridDim.x) == b in float32 in its shared table (owned_passes) and rounds each node into the state once. Every
// block reads all E targets, so a target it does not own costs a range check, a two-instruction hash and a vote
// per warp; only the owned edges' src values are read. For F = 1 a warp whose neighbouring lanes share a target
// sums its equal targets first (match.any). Block 0 counts the out-of-range targets into *skipped when given.
PLUGIN_KERNEL __launch_bounds__(OWNED_THREADS)
scatter_owned(const scalar_t* __restrict__ src, const i64* __restrict__ index, i64 num_edges, i64 num_nodes,
              int num_features, int capacity, int probes, scalar_t* __restrict__ state, u64* __restrict__ skipped) {
    const unsigned owners = gridDim.x, me = blockIdx.x;
    const int lane = threadIdx.x & 31;
    auto feed = [&](unsigned lo, u64 width, const OwnedAdd& add) {
        // warp-uniform: every lane runs every step (the votes and the match need them all)
        for (i64 first = threadIdx.x - lane; first < num_edges; first += OWNED_LOADS * (i64)blockDim.x) {
            i64 node[OWNED_LOADS];
#pragma unroll
            for (int k = 0; k < OWNED_LOADS; ++k) {
                const i64 e = first + lane + k * (i64)blockDim.x;
                node[k] = e < num_edges ? __ldg(index + e) : -1;
            }
            unsigned mine = 0;  // bit k: this lane's k-th target is this block's (and in this pass's sub-range)
            float one[OWNED_LOADS];  // F = 1: the owned edges' values, loaded together
#pragma unroll
            for (int k = 0; k < OWNED_LOADS; ++k) {
                const int n = (int)node[k];
                const bool owned = (u64)node[k] < (u64)num_nodes && owned_by(n, owners) == me && in_subrange(n, lo, width);
                mine |= (unsigned)owned << k;
                one[k] = num_features == 1 && owned ? to_float(src[first + lane + k * (i64)blockDim.x]) : 0.0f;
            }
            if (__ballot_sync(FULL_MASK, mine != 0u) == 0u) continue;
#pragma unroll
            for (int k = 0; k < OWNED_LOADS; ++k) {
                const bool owned = (mine >> k) & 1u;
                if (__ballot_sync(FULL_MASK, owned) == 0u) continue;
                const int n = (int)node[k];
                if (num_features == 1) {
                    const int key = owned ? n : -1 - lane;
                    float sum = one[k];
                    bool leader = true;
                    if (warp_has_neighbour_duplicates(key, owned, 1)) {  // a run of one target: one atomic for it
                        const unsigned peers = __match_any_sync(FULL_MASK, key);
                        sum = sum_over_peers(peers, sum);
                        leader = __ffs(peers) - 1 == lane;
                    }
                    if (owned && leader) add(n, 0, sum);
                } else if (owned) {
                    const i64 e = first + lane + k * (i64)blockDim.x;
                    for (int f = 0; f < num_features; ++f) add(n, f, to_float(src[e * num_features + f]));
                }
            }
        }
    };
    owned_passes(state, num_features, capacity, probes, feed);
    if (skipped != nullptr && me == 0) {
        unsigned bad = 0;
        for (i64 e = threadIdx.x; e < num_edges; e += blockDim.x) {
            const i64 node = __ldg(index + e);
            if (node < 0 || node >= num_nodes) ++bad;
        }
        add_skipped(skipped, bad);
    }
}

// The (node, sum) slot table of grid_table and split_table: 64-bit slots, a node (low word) and its float32 sum
// (high word); SLOT_EMPTY (all ones: node -1) marks a free one, so a 32-bit memset clears the table. A node's first
// edge claims a free slot with one compare-and-swap that also writes its value; later edges add into the sum's
// word. hashed: linear probing from mix32(node); else slot = node (capacity = N). A probe visits at most
// `capacity` slots (a table without room drops the row). Returns the slot this edge claimed, else -1.
// The 32-bit add into a high word overlaps the 64-bit word others compare-and-swap, but only follows the claim,
// so no compare-and-swap that could succeed meets it, and a failing one compares the low word, which the add never
// changes. The PTX memory model does not promise atomicity between overlapping atomics of different sizes; the
// GPU tests and fuzz cases check it where they run.
#define SLOT_EMPTY 0xffffffffffffffffull
__device__ __forceinline__ int claim_or_add(u64* slots, unsigned capacity, bool hashed, int node, float value) {
    const u64 mine = ((u64)__float_as_uint(value) << 32) | (u64)(unsigned)node;
    unsigned slot = hashed ? (unsigned)(((u64)mix32((unsigned)node) * capacity) >> 32) : (unsigned)node;
    for (unsigned probe = 0; probe < capacity && slot < capacity; ++probe) {
        const u64 previous = atomicCAS(&slots[slot], SLOT_EMPTY, mine);
        if (previous == SLOT_EMPTY) return (int)slot;
        if ((int)(unsigned)previous == node) {
            atomicAdd(reinterpret_cast<float*>(&slots[slot]) + 1, value);
            return -1;
        }
        slot = slot + 1u == capacity ? 0u : slot + 1u;
    }
    return -1;
}

// split_table (float16, F = 1): the launcher's memset clears `capacity` hashed slots, scatter_split_table claims or
// adds a thread per edge, and apply_split_table rounds each claimed node's sum into the state once.
__device__ __forceinline__ void scatter_split_table_body(const scalar_t* __restrict__ src,
                                                         const i64* __restrict__ index, i64 num_edges, i64 num_nodes,
                                                         u64* __restrict__ slots, int capacity,
                                                         u64* __restrict__ skipped) {
    const i64 edge = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 node = edge < num_edges ? __ldg(index + edge) : 0;
    const bool ok = edge < num_edges && (u64)node < (u64)num_nodes;
    if (ok) claim_or_add(slots, (unsigned)capacity, true, (int)node, to_float(src[edge]));
    if (skipped != nullptr) add_skipped(skipped, edge < num_edges && !ok ? 1u : 0u);
}
PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK)
scatter_split_table(const scalar_t* src, const i64* index, i64 num_edges, i64 num_nodes, u64* slots, int capacity,
                    u64* skipped) {
    scatter_split_table_body(src, index, num_edges, num_nodes, slots, capacity, skipped);
}

// The float32 sum of a node (claimed in a slot table) added into its state element with one rounding; a node
// outside [0, num_nodes) (an empty slot, made-up keys) or a sum still +0.0 leaves the state as it is.
__device__ __forceinline__ void round_into_state(unsigned node, unsigned sum_bits, i64 num_nodes, scalar_t* state) {
    if ((i64)node < num_nodes && sum_bits != 0u) store_scalar(state + node, to_float(state[node]) + __uint_as_float(sum_bits));
}

__device__ __forceinline__ void apply_split_table_body(const u64* __restrict__ slots, int capacity, i64 num_nodes,
                                                       scalar_t* __restrict__ state) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < capacity; i += (i64)gridDim.x * blockDim.x) {
        const u64 slot = slots[i];
        round_into_state((unsigned)slot, (unsigned)(slot >> 32), num_nodes, state);
    }
}
PLUGIN_KERNEL __launch_bounds__(THREADS_PER_BLOCK)
apply_split_table(const u64* slots, int capacity, i64 num_nodes, scalar_t* state) {
    apply_split_table_body(slots, capacity, num_nodes, state);
}

// block_table (float16, F = 1, at most plan.py BLOCK_TABLE_MAX_EDGES edges): one block sums the whole batch in
// shared memory, 2^capacity_log2 int32 keys then as many float32 sums, each edge's node claimed by linear probing
// from a multiplicative hash; after one block barrier it rounds each claimed node's sum into the state once.
#define BLOCK_TABLE_THREADS 1024  // plan.py BLOCK_TABLE_THREADS
__device__ __forceinline__ void scatter_block_table_body(const scalar_t* __restrict__ src,
                                                         const i64* __restrict__ index, i64 num_edges, i64 num_nodes,
                                                         int capacity_log2, scalar_t* __restrict__ state,
                                                         u64* __restrict__ skipped) {
    extern __shared__ int block_keys[];  // [capacity] keys (-1: empty), then [capacity] float32 sums
    const unsigned capacity = 1u << capacity_log2, mask = capacity - 1u;
    float* sums = reinterpret_cast<float*>(block_keys + capacity);
    for (unsigned s = threadIdx.x; s < capacity; s += blockDim.x) {
        block_keys[s] = -1;
        sums[s] = 0.0f;
    }
    __syncthreads();
    unsigned skipped_here = 0;
    for (i64 edge = threadIdx.x; edge < num_edges; edge += blockDim.x) {
        const i64 node = __ldg(index + edge);
        if ((u64)node >= (u64)num_nodes) {
            ++skipped_here;
            continue;
        }
        const float value = to_float(src[edge]);
        unsigned slot = capacity_log2 == 0 ? 0u : ((unsigned)node * 2654435761u) >> (32 - capacity_log2);
        for (unsigned probe = 0; probe < capacity; ++probe) {  // a table without room (never the plan's) drops the row
            const int previous = atomicCAS(block_keys + slot, -1, (int)node);
            if (previous == -1 || previous == (int)node) {
                atomicAdd(sums + slot, value);
                break;
            }
            slot = (slot + 1u) & mask;
        }
    }
    if (skipped != nullptr) add_skipped(skipped, skipped_here);  // every warp runs this: blockDim is 1024
    __syncthreads();
    for (unsigned s = threadIdx.x; s < capacity; s += blockDim.x) {
        round_into_state((unsigned)block_keys[s], __float_as_uint(sums[s]), num_nodes, state);
    }
}
PLUGIN_KERNEL __launch_bounds__(BLOCK_TABLE_THREADS)
scatter_block_table(const scalar_t* src, const i64* index, i64 num_edges, i64 num_nodes, int capacity_log2,
                    scalar_t* state, u64* skipped) {
    scatter_block_table_body(src, index, num_edges, num_nodes, capacity_log2, state, skipped);
}

#if SCATTER_GRID_SYNC
// grid_table (float16, F = 1, a cooperative launch of a thread per edge, no memset): the grid clears the
// workspace's `capacity` slots and meets at a grid barrier; each thread claims or adds its edge (claim_or_add), the
// claiming thread loads the node's state at once and, after a second barrier, rounds the node's sum into it.
#define GRID_TABLE_THREADS 128            // plan.py GRID_TABLE_THREADS
#define GRID_TABLE_BLOCKS_PER_SM 8        // plan.py GRID_TABLE_RESIDENT_BLOCKS_PER_SM
PLUGIN_KERNEL __launch_bounds__(GRID_TABLE_THREADS, GRID_TABLE_BLOCKS_PER_SM)
scatter_grid_table(const scalar_t* __restrict__ src, const i64* __restrict__ index, i64 num_edges, i64 num_nodes,
                   u64* __restrict__ slots, int capacity, int hashed, scalar_t* __restrict__ state,
                   u64* __restrict__ skipped) {
    const i64 edge = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (i64 i = edge; i < capacity; i += (i64)gridDim.x * blockDim.x) slots[i] = SLOT_EMPTY;
    const i64 node = edge < num_edges ? __ldg(index + edge) : -1;
    const float value = edge < num_edges ? to_float(src[edge]) : 0.0f;
    cooperative_groups::this_grid().sync();  // the table is clear
    const bool ok = edge < num_edges && (u64)node < (u64)num_nodes;
    const int claimed = ok ? claim_or_add(slots, (unsigned)capacity, hashed != 0, (int)node, value) : -1;
    scalar_t current;
    if (claimed >= 0) current = state[node];  // needed after the barrier: its latency hides behind it
    if (skipped != nullptr) add_skipped(skipped, edge < num_edges && !ok ? 1u : 0u);
    cooperative_groups::this_grid().sync();  // every edge is in its node's sum
    if (claimed >= 0) {
        const float sum = __uint_as_float(*(reinterpret_cast<const unsigned*>(&slots[claimed]) + 1));
        if (__float_as_uint(sum) != 0u) store_scalar(state + node, to_float(current) + sum);
    }
}
#endif

// ---------------------------------------------------------------------------------------------------------
// AOT entry points (plugin/scatter_add_op.py describes their plugins, chains and launches): the paths above as
// TensorRT's AOT plugins launch them, ONE kernel per plugin with (input pointers..., int32 extra arguments...,
// output pointers...); an aliased output's pointer is its input's, so a kernel writes through its output pointers.
// No workspace: tables and counts are scratch tensors the network makes and fills (keys -1, sums and counts 0).
// TensorRT makes no opt-in to more than 48 KiB of dynamic shared memory, and a kernel uses shared memory only where
// its launch gave enough (%dynamic_smem_size): it stays in bounds whatever the launch and the tensors hold. Decided
// here from the extra arguments and pointers: the vector width (F and alignment, plan.py vector_width) and a hashed
// table or one slot per node (capacity C < N); `mode` (AOT_ATOMICS, AOT_SHARED, AOT_CHUNKED) comes from
// scatter_add_op.py's launch expressions of the sizes. The row queues live in dynamic shared memory, so a launch
// of the direct kernel asks for none.

#if SCATTER_AOT_ONLY
// One plugin's PTX holds its kernel alone: -DAOT_KERNEL_<name>=1 compiles entry point <name>, -DAOT_ALL_KERNELS=1 all.

__device__ __forceinline__ unsigned dynamic_smem_bytes() {
    unsigned bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
    return bytes;
}

// The widest of 4, 2, 1 dividing num_features with every row chunk of both arrays aligned (plan.py vector_width).
__device__ __forceinline__ int aot_vector_width(int num_features, const void* a, int a_item, const void* b,
                                                int b_item) {
    for (int vec = 4; vec > 1; vec >>= 1) {
        if (num_features % vec == 0 && (u64)a % (u64)(a_item * vec) == 0 && (u64)b % (u64)(b_item * vec) == 0) {
            return vec;
        }
    }
    return 1;
}

// plan.py lanes_log2_for: log2 of the power of two >= chunks, at most 5 (a warp).
__device__ __forceinline__ int aot_lanes_log2(int chunks) { return chunks <= 1 ? 0 : min(5, 32 - __clz(chunks - 1)); }

// plan.py window_loads_for over this grid's warps.
__device__ __forceinline__ int aot_window_loads(i64 num_edges) {
    const i64 lanes = (i64)gridDim.x * THREADS_PER_BLOCK;
    return (int)max((i64)1, min((i64)WINDOW_LOADS, (num_edges + lanes - 1) / lanes));
}

#define AOT_QUEUE_BYTES (WARPS_PER_BLOCK * (unsigned)sizeof(RowQueue))  // plan.py QUEUE_BYTES_PER_BLOCK
#define AOT_ATOMICS 0  // modes (scatter_add_op.py): global atomics (float32 without counts: the direct kernel)
#define AOT_SHARED 1   // the shared-memory kernel: row queues, then N (F + 1) words, in dynamic shared memory
#define AOT_CHUNKED 2  // chunk_reduce: N + 1 cursors and a chunk's uint16 order in dynamic shared memory
#define AOT_CHUNK_MAX_EDGES 32768  // plan.py CHUNK_EDGES: a chunk's offsets are uint16

// chunk_reduce at the narrowest width dividing VEC whose 32 lanes cover the row (plan.py warp_row_vec), the edges
// split as plan.py Chunked splits them over the grid: R = ceil(E / (blocks * most)) rounds (`most`: the edges the
// shared memory holds beside the cursors), chunks of ceil(E / (blocks * R)) edges rounded up to a multiple of 32, so
// every block runs R or R - 1 rounds, whatever the grid. False where it cannot run: one node per slot needed, more
// feature slices than the grid's y, or too little memory.
template <int VEC>
__device__ __forceinline__ bool aot_chunked(const scalar_t* src, const i64* index, int num_nodes, int num_edges,
                                            int num_features, float* dest, u64* counts, unsigned given) {
    constexpr int WIDTH = VEC;
    const int vec = 32 >= num_features ? 1 : (VEC >= 2 && 64 >= num_features) ? 2 : WIDTH;
    const int slices = (num_features + 32 * vec - 1) / (32 * vec);
    const u64 cursor_bytes = 4ull * ((u64)num_nodes + 1u);
    if (num_nodes < 1 || (unsigned)slices > gridDim.y || cursor_bytes + 64u > given) return false;
    if ((int)blockIdx.y >= slices) return true;
    const i64 most = (i64)min((u64)AOT_CHUNK_MAX_EDGES, ((given - cursor_bytes) / 2u) & ~31ull);
    const i64 edges = max((i64)num_edges, (i64)1), blocks = (i64)gridDim.x;
    const i64 rounds = (edges + blocks * most - 1) / (blocks * most);
    const int chunk = (int)min(most, 32 * ((edges + 32 * blocks * rounds - 1) / (32 * blocks * rounds)));
    if (vec == 1) {
        chunk_reduce<1>(src, index, num_edges, num_nodes, num_features, chunk, dest, counts, nullptr);
    } else if (vec == 2) {
        chunk_reduce<(VEC >= 2 ? 2 : 1)>(src, index, num_edges, num_nodes, num_features, chunk, dest, counts, nullptr);
    } else {
        chunk_reduce<VEC>(src, index, num_edges, num_nodes, num_features, chunk, dest, counts, nullptr);
    }
    return true;
}

// src rows into dest (float32 rows of N nodes, or of a table of `capacity` slots hashed by `keys`) in `mode`, where
// the launch's dynamic shared memory holds what the mode needs, else global atomics (or, float32 without counts,
// `direct`: the direct kernel, which needs none); a launch that gave too little for any adds nothing.
template <int VEC>
__device__ __forceinline__ void aot_scatter_rows(const scalar_t* src, const i64* index, int num_nodes, int num_edges,
                                                 int num_features, int mode, bool direct, float* dest, int* keys,
                                                 unsigned capacity, u64* counts) {
    extern __shared__ __align__(16) unsigned char aot_shared[];
    RowQueue* queues = reinterpret_cast<RowQueue*>(aot_shared);
    const unsigned given = dynamic_smem_bytes();
    const bool dense = keys == nullptr;
    if (mode == AOT_CHUNKED && dense
        && aot_chunked<VEC>(src, index, num_nodes, num_edges, num_features, dest, counts, given)) {
        return;
    }
    if (blockIdx.y != 0) return;  // a chunked launch's other feature slices
    const int lanes_log2 = aot_lanes_log2(num_features / VEC);
    const u64 rows_bytes = 4ull * (u64)max(num_nodes, 0) * ((u64)num_features + 1u);
    if (mode == AOT_SHARED && dense && AOT_QUEUE_BYTES + rows_bytes <= given) {
        float* rows = reinterpret_cast<float*>(aot_shared + AOT_QUEUE_BYTES);
        scatter_rows_shared<VEC, false>(queues, rows, src, index, num_edges, num_nodes, num_features, lanes_log2,
                                        dest, counts, nullptr);
#if !SCATTER_HALF
    } else if (direct) {
        scatter_direct<VEC>(src, index, num_edges, num_nodes, num_features, dest, nullptr);
#endif
    } else if (given < AOT_QUEUE_BYTES) {
        return;
    } else if (!dense) {
        scatter_rows_global<VEC, true, false>(queues, src, index, num_edges, num_nodes, num_features, lanes_log2,
                                              aot_window_loads(num_edges), dest, keys, capacity, counts, nullptr, 0,
                                              num_nodes);
    } else {
        scatter_rows_global<VEC, false, false>(queues, src, index, num_edges, num_nodes, num_features, lanes_log2,
                                               aot_window_loads(num_edges), dest, nullptr, 0u, counts, nullptr, 0,
                                               num_nodes);
    }
}

// aot_scatter_rows at the vector width of the rows and dest.
__device__ __forceinline__ void aot_scatter_any_width(const scalar_t* src, const i64* index, int num_nodes,
                                                      int num_edges, int num_features, int mode, bool direct,
                                                      float* dest, int* keys, unsigned capacity, u64* counts) {
    if (num_features < 1) return;
    const int vec = aot_vector_width(num_features, src, sizeof(scalar_t), dest, sizeof(float));
    if (vec == 4) {
        aot_scatter_rows<4>(src, index, num_nodes, num_edges, num_features, mode, direct, dest, keys, capacity,
                            counts);
    } else if (vec == 2) {
        aot_scatter_rows<2>(src, index, num_nodes, num_edges, num_features, mode, direct, dest, keys, capacity,
                            counts);
    } else {
        aot_scatter_rows<1>(src, index, num_nodes, num_edges, num_features, mode, direct, dest, keys, capacity,
                            counts);
    }
}

// Global atomics (or the direct kernel) as a function of its own: the chunked entry points' fallback, kept out of
// their register allocation.
__device__ __noinline__ void aot_scatter_atomics_apart(const scalar_t* src, const i64* index, int num_nodes,
                                                       int num_edges, int num_features, bool direct, float* dest,
                                                       int* keys, unsigned capacity, u64* counts) {
    aot_scatter_any_width(src, index, num_nodes, num_edges, num_features, AOT_ATOMICS, direct, dest, keys, capacity,
                          counts);
}

// chunk_reduce at the width of the rows and dest, else (it cannot run: hashed table, too many nodes or feature
// slices for the launch) aot_scatter_atomics_apart.
__device__ __forceinline__ void aot_scatter_chunked(const scalar_t* src, const i64* index, int num_nodes,
                                                    int num_edges, int num_features, bool direct, float* dest,
                                                    int* keys, unsigned capacity, u64* counts) {
    if (num_features < 1) return;
    const int vec = aot_vector_width(num_features, src, sizeof(scalar_t), dest, sizeof(float));
    const unsigned given = dynamic_smem_bytes();
    const bool done =
        keys == nullptr
        && (vec == 4   ? aot_chunked<4>(src, index, num_nodes, num_edges, num_features, dest, counts, given)
            : vec == 2 ? aot_chunked<2>(src, index, num_nodes, num_edges, num_features, dest, counts, given)
                       : aot_chunked<1>(src, index, num_nodes, num_edges, num_features, dest, counts, given));
    if (!done) aot_scatter_atomics_apart(src, index, num_nodes, num_edges, num_features, direct, dest, keys, capacity,
                                         counts);
}

// F = 1 with counts (both dtypes), at most plan.py PAIRED_MAX_EDGES edges: (value, count) float32 pairs summed in
// the counts (zeroed by the network, 8-byte aligned as TensorRT's tensors are), by the shared-memory kernel where
// `mode` is AOT_SHARED and the launch gave its memory, else global atomics; then aot_fold_pairs.
#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_scatter_pairs)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK, MIN_BLOCKS_PER_SM)
aot_scatter_pairs(const scalar_t* src, const i64* index, const i64* counts_in,
                  int num_nodes, int num_edges, int mode,
                  u64* counts_out) {
    extern __shared__ __align__(16) unsigned char aot_shared[];
    RowQueue* queues = reinterpret_cast<RowQueue*>(aot_shared);
    const unsigned given = dynamic_smem_bytes();
    float* pairs = reinterpret_cast<float*>(counts_out);
    if (((u64)counts_out & 7ull) != 0ull || given < AOT_QUEUE_BYTES) return;
    if (mode == AOT_SHARED && num_nodes >= 0 && AOT_QUEUE_BYTES + 8ull * (u64)num_nodes <= given) {
        float* rows = reinterpret_cast<float*>(aot_shared + AOT_QUEUE_BYTES);
        scatter_rows_shared<1, true>(queues, rows, src, index, num_edges, num_nodes, 1, 0, pairs, nullptr, nullptr);
    } else {
        scatter_rows_global<1, false, true>(queues, src, index, num_edges, num_nodes, 1, 0,
                                            aot_window_loads(num_edges), pairs, nullptr, 0u, nullptr, nullptr, 0,
                                            num_nodes);
    }
}
#endif

// Each node's pair: the count into the int64 count, the value rounded into the state once (fold_pairs).
#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_fold_pairs)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK)
aot_fold_pairs(const scalar_t* state_in, const i64* counts_in,
               int num_nodes,
               scalar_t* state_out, u64* counts_out) {
    fold_pairs_body(state_out, counts_out, num_nodes);
}
#endif

// F = 1 with counts beyond plan.py PAIRED_MAX_EDGES edges (scatter_add_op.py pair_chunks_chain), one chunk of the
// edges [first_edge, first_edge + 2^24) per pair of steps: global atomics of its (value, count) pairs into `pairs`
// (float2 [N], zeroed by the network), then aot_fold_pair_chunk (fold_pair_chunk: the counts into the int64
// counts; the values rounded into the state by the last chunk that holds edges). A chunk beyond E does nothing.
#define AOT_PAIR_CHUNK_EDGES (1ll << 24)  // plan.py PAIRED_MAX_EDGES
#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_scatter_pair_chunk)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK, MIN_BLOCKS_PER_SM)
aot_scatter_pair_chunk(const scalar_t* src, const i64* index, const float* pairs_in,
                       int num_nodes, int num_edges, int first_edge,
                       float* pairs_out) {
    extern __shared__ __align__(16) unsigned char aot_shared[];
    RowQueue* queues = reinterpret_cast<RowQueue*>(aot_shared);
    if (((u64)pairs_out & 7ull) != 0ull || dynamic_smem_bytes() < AOT_QUEUE_BYTES || first_edge < 0
        || first_edge >= num_edges) {
        return;
    }
    const i64 edges = min((i64)num_edges - first_edge, AOT_PAIR_CHUNK_EDGES);
    scatter_rows_global<1, false, true>(queues, src + first_edge, index + first_edge, edges, num_nodes, 1, 0,
                                        aot_window_loads(edges), pairs_out, nullptr, 0u, nullptr, nullptr, 0,
                                        num_nodes);
}
#endif

#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_fold_pair_chunk)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK)
aot_fold_pair_chunk(const scalar_t* state_in, const i64* index, const float* pairs_in, const i64* counts_in,
                    int num_nodes, int num_edges, int first_edge,
                    scalar_t* state_out, float* pairs_out, u64* counts_out) {
    if (((u64)pairs_out & 7ull) != 0ull || first_edge < 0 || (first_edge > 0 && first_edge >= num_edges)) return;
    fold_pair_chunk_body(state_out, reinterpret_cast<float2*>(pairs_out), counts_out, num_nodes,
                         (i64)num_edges - first_edge <= AOT_PAIR_CHUNK_EDGES);
}
#endif

// The sorted path as a chain (both dtypes; scatter_add_op.py sorted_chain): its kernels with the network's scratch
// (counts, zeroed; cursors, tile sums, sorted pairs and partial sums, whatever they hold) in place of the workspace.
// Tallies in shared memory only where the launch gave N words of it (else in global memory).
__device__ __forceinline__ int aot_private_nodes(int private_nodes, int num_nodes) {
    return private_nodes > 0 && private_nodes == num_nodes && 4ull * (u64)private_nodes <= dynamic_smem_bytes()
               ? private_nodes : 0;
}

// state, tile_sums, cursor, sorted, head and tail are unused here: the step reads the state for its shape (F, the
// partial sums' width); the others are the chain's unfilled scratch tensors, outputs TensorRT allocates for this
// step that the steps after it write before they read them.
#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_sort_count)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK)
aot_sort_count(const scalar_t* state, const i64* index, const i64* counts_in,
               int num_nodes, int num_edges, int private_nodes,
               u64* counts_out, unsigned* tile_sums, unsigned* cursor, int2* sorted, float* head, float* tail) {
    sort_count_body(index, num_edges, num_nodes, counts_out, nullptr, aot_private_nodes(private_nodes, num_nodes));
}
#endif

#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_sort_tile_sums)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK)
aot_sort_tile_sums(const i64* counts, const unsigned* tile_sums_in,
                   int num_nodes, int tile_nodes,
                   unsigned* tile_sums_out) {
    if (blockIdx.x >= SORT_MAX_TILES) return;
    sort_tile_sums_body(reinterpret_cast<const u64*>(counts), num_nodes, tile_nodes, tile_sums_out);
}
#endif

#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_sort_scan_tiles)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK)
aot_sort_scan_tiles(const i64* counts, const unsigned* tile_sums_in, const unsigned* cursor_in,
                    int num_nodes, int num_tiles,
                    unsigned* tile_sums_out, unsigned* cursor_out) {
    sort_scan_tiles_body(tile_sums_out, min(num_tiles, SORT_MAX_TILES), cursor_out, num_nodes);
}
#endif

#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_sort_cursors)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK)
aot_sort_cursors(const i64* counts, const unsigned* tile_sums, const unsigned* cursor_in,
                 int num_nodes, int tile_nodes,
                 unsigned* cursor_out) {
    if (blockIdx.x >= SORT_MAX_TILES) return;
    sort_cursors_body(reinterpret_cast<const u64*>(counts), num_nodes, tile_nodes, tile_sums, cursor_out);
}
#endif

#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_sort_place)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK)
aot_sort_place(const i64* index, const i64* counts, const unsigned* cursor_in, const int2* sorted_in,
               int num_nodes, int num_edges, int private_nodes, int node_lo, int node_hi,
               unsigned* cursor_out, int2* sorted_out) {
    sort_place_body(index, num_edges, num_nodes, cursor_out, sorted_out, aot_private_nodes(private_nodes, num_nodes),
                    node_lo, node_hi);
}
#endif

// A warp's row at the narrowest width dividing the aligned width whose 32 lanes cover it (plan.py warp_row_vec);
// blocks of feature slices beyond the row's return (the grid's y has one per 32 features).
__device__ __forceinline__ int aot_row_vec(int num_features, const void* a, int a_item, const void* b, int b_item) {
    const int vec = aot_vector_width(num_features, a, a_item, b, b_item);
    return 32 >= num_features ? 1 : (vec >= 2 && 64 >= num_features) ? 2 : vec;
}

// sort_reduce at the row's width, at most WIDEST: 4 for rows of more than 64 features (plan.py warp_row_vec's width
// there); rows of at most 64 take width 1 or 2 (plan.py's), so their kernel holds those alone and fits 64 registers:
// 4 blocks per SM where the one holding width 4 too needs 78-80 (3 blocks; the reduce waits on its gathers, so
// resident warps pay). Either kernel sums any F correctly (narrower widths: more feature slices).
template <int WIDEST>
__device__ __forceinline__ void aot_sort_reduce_body(const scalar_t* src, const int2* sorted, const unsigned* cursor,
                                                     int num_nodes, int num_edges, int num_features, int span,
                                                     scalar_t* state, float* head, float* tail) {
    if (num_features < 1 || span < 1) return;
    const int vec = min(aot_row_vec(num_features, src, sizeof(scalar_t), state, sizeof(scalar_t)), WIDEST);
    if ((int)blockIdx.y >= (num_features + 32 * vec - 1) / (32 * vec)) return;
    if (WIDEST >= 4 && vec == 4) {
        sort_reduce<(WIDEST >= 4 ? 4 : 1)>(src, sorted, cursor, num_nodes, num_features, span, state, head, tail,
                                          num_edges);
    } else if (vec == 2) {
        sort_reduce<2>(src, sorted, cursor, num_nodes, num_features, span, state, head, tail, num_edges);
    } else {
        sort_reduce<1>(src, sorted, cursor, num_nodes, num_features, span, state, head, tail, num_edges);
    }
}

#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_sort_reduce)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK, 4)
aot_sort_reduce(const scalar_t* src, const int2* sorted, const unsigned* cursor, const scalar_t* state_in,
                const float* head_in, const float* tail_in,
                int num_nodes, int num_edges, int num_features, int span,
                scalar_t* state_out, float* head_out, float* tail_out) {
    aot_sort_reduce_body<2>(src, sorted, cursor, num_nodes, num_edges, num_features, span, state_out, head_out,
                            tail_out);
}
#endif

#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_sort_reduce_wide)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK)
aot_sort_reduce_wide(const scalar_t* src, const int2* sorted, const unsigned* cursor, const scalar_t* state_in,
                     const float* head_in, const float* tail_in,
                     int num_nodes, int num_edges, int num_features, int span,
                     scalar_t* state_out, float* head_out, float* tail_out) {
    aot_sort_reduce_body<4>(src, sorted, cursor, num_nodes, num_edges, num_features, span, state_out, head_out,
                            tail_out);
}
#endif

#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_sort_fixup)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK)
aot_sort_fixup(const int2* sorted, const unsigned* cursor, const scalar_t* state_in, const float* head,
               const float* tail,
               int num_nodes, int num_features, int span, int num_ranges,
               scalar_t* state_out) {
    if (num_features < 1 || span < 1) return;
    const int vec = aot_row_vec(num_features, state_out, sizeof(scalar_t), state_out, sizeof(scalar_t));
    if ((int)blockIdx.y >= (num_features + 32 * vec - 1) / (32 * vec)) return;
    if (vec == 4) {
        sort_fixup<4>(sorted, cursor, num_nodes, num_features, span, num_ranges, state_out, head, tail);
    } else if (vec == 2) {
        sort_fixup<2>(sorted, cursor, num_nodes, num_features, span, num_ranges, state_out, head, tail);
    } else {
        sort_fixup<1>(sorted, cursor, num_nodes, num_features, span, num_ranges, state_out, head, tail);
    }
}
#endif

// The scatter kernels' tactics (scatter_add_op.py _scatter_kernels) are NAME_atomics and NAME_chunked: NAME
// compiled apart (plugin/kernels/aot.py) with AOT_TACTIC 1 or 2 and renamed, the same parameters. NAME runs `mode`,
// the launch's choice for each run's sizes (tactic 0); tactic 1 global atomics alone (the direct kernel for float32
// without counts) and tactic 2 chunk_reduce (global atomics apart where it cannot run), whatever `mode` says.
// Holding every mode and width, NAME spills registers under MIN_BLOCKS_PER_SM's cap; holding one mode, tactic 1
// fits without spills at AOT_ATOMICS_MIN_BLOCKS blocks per SM and tactic 2 at MIN_BLOCKS_PER_SM.
#ifndef AOT_TACTIC
#define AOT_TACTIC 0
#endif
#define AOT_ATOMICS_MIN_BLOCKS 2
#if AOT_TACTIC == 1
#define AOT_SCATTER_MIN_BLOCKS AOT_ATOMICS_MIN_BLOCKS
#else
#define AOT_SCATTER_MIN_BLOCKS MIN_BLOCKS_PER_SM
#endif

// A scatter kernel's body at this compilation's tactic.
__device__ __forceinline__ void aot_scatter_tactic(const scalar_t* src, const i64* index, int num_nodes, int num_edges,
                                                   int num_features, int mode, bool direct, float* dest, int* keys,
                                                   unsigned capacity, u64* counts) {
#if AOT_TACTIC == 2
    aot_scatter_chunked(src, index, num_nodes, num_edges, num_features, direct, dest, keys, capacity, counts);
#else
    aot_scatter_any_width(src, index, num_nodes, num_edges, num_features, AOT_TACTIC == 1 ? AOT_ATOMICS : mode, direct,
                          dest, keys, capacity, counts);
#endif
}

#if !SCATTER_HALF
// float32: state[index[e]] += src[e] (shared memory, chunked, else the direct kernel).
#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_scatter_state)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK, AOT_SCATTER_MIN_BLOCKS)
aot_scatter_state(const float* state_in, const float* src, const i64* index,
                  int num_nodes, int num_edges, int num_features, int mode,
                  float* state_out) {
    aot_scatter_tactic(src, index, num_nodes, num_edges, num_features, mode, true, state_out, nullptr, 0u,
                       nullptr);
}
#endif

// float32 with counts (zeroed by the network): shared memory, chunked, else global atomics.
#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_scatter_state_counts)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK, AOT_SCATTER_MIN_BLOCKS)
aot_scatter_state_counts(const float* state_in, const float* src, const i64* index, const i64* counts_in,
                         int num_nodes, int num_edges, int num_features, int mode,
                         float* state_out, u64* counts_out) {
    aot_scatter_tactic(src, index, num_nodes, num_edges, num_features, mode, false, state_out, nullptr, 0u,
                       counts_out);
}
#endif
#else
// float16, step 1: float32 sums of src rows in the table (keys -1 and values 0 from the network): one slot per node
// where capacity >= N, else `capacity` slots hashed by keys (which then has `capacity` entries).
#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_scatter_table)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK, AOT_SCATTER_MIN_BLOCKS)
aot_scatter_table(const scalar_t* state, const scalar_t* src, const i64* index, const int* keys_in,
                  const float* values_in,
                  int num_nodes, int num_edges, int num_features, int capacity, int mode,
                  int* keys_out, float* values_out) {
    const bool hashed = capacity < num_nodes;
    aot_scatter_tactic(src, index, num_nodes, num_edges, num_features, mode, false, values_out,
                       hashed ? keys_out : nullptr, hashed ? (unsigned)max(capacity, 0) : 0u, nullptr);
}
#endif

#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_scatter_table_counts)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK, AOT_SCATTER_MIN_BLOCKS)
aot_scatter_table_counts(const scalar_t* state, const scalar_t* src, const i64* index, const int* keys_in,
                         const float* values_in,
                         const i64* counts_in,
                         int num_nodes, int num_edges, int num_features, int capacity, int mode,
                         int* keys_out, float* values_out, u64* counts_out) {
    const bool hashed = capacity < num_nodes;
    aot_scatter_tactic(src, index, num_nodes, num_edges, num_features, mode, false, values_out,
                       hashed ? keys_out : nullptr, hashed ? (unsigned)max(capacity, 0) : 0u, counts_out);
}
#endif

// float16, step 2: each node's float32 sum rounded into the state once (apply_table).
#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_apply_table)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK, MIN_BLOCKS_PER_SM)
aot_apply_table(const scalar_t* state_in, const i64* index, const int* keys, const float* values,
                int num_nodes, int num_features, int capacity,
                scalar_t* state_out) {
    if (num_features < 1) return;
    const int* slot_keys = capacity < num_nodes ? keys : nullptr;
    const int vec = aot_vector_width(num_features, state_out, sizeof(scalar_t), values, sizeof(float));
    const int lanes_log2 = aot_lanes_log2(num_features / vec);
    if (vec == 4) {
        apply_table<4>(state_out, slot_keys, values, capacity, num_features, lanes_log2, num_nodes);
    } else if (vec == 2) {
        apply_table<2>(state_out, slot_keys, values, capacity, num_features, lanes_log2, num_nodes);
    } else {
        apply_table<1>(state_out, slot_keys, values, capacity, num_features, lanes_log2, num_nodes);
    }
}
#endif

// float16, F = 1, no counts, at most plan.py BLOCK_TABLE_MAX_EDGES edges: scatter_block_table with the table of
// block_table_log2(E) slots, or the largest the launch's dynamic shared memory holds (one block of 1024 threads).
#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_block_table)
extern "C" __global__ void __launch_bounds__(BLOCK_TABLE_THREADS)
aot_block_table(const scalar_t* state_in, const scalar_t* src, const i64* index,
                int num_nodes, int num_edges,
                scalar_t* state_out) {
    int log2 = max(6, 32 - __clz(max(4 * min(num_edges, 1 << 28), 1) - 1));
    while (log2 > 0 && (8u << log2) > dynamic_smem_bytes()) --log2;
    if ((8u << log2) > dynamic_smem_bytes()) return;
    scatter_block_table_body(src, index, num_edges, num_nodes, log2, state_out, nullptr);
}
#endif

// float16, F = 1, no counts: split_table's two kernels over `capacity` 64-bit slots (all ones from the network).
#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_split_table)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK)
aot_split_table(const scalar_t* state, const scalar_t* src, const i64* index, const u64* slots_in,
                int num_nodes, int num_edges, int capacity,
                u64* slots_out) {
    scatter_split_table_body(src, index, num_edges, num_nodes, slots_out, capacity, nullptr);
}
#endif

#if defined(AOT_ALL_KERNELS) || defined(AOT_KERNEL_aot_apply_split_table)
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK)
aot_apply_split_table(const scalar_t* state_in, const i64* index, const u64* slots,
                      int num_nodes, int capacity,
                      scalar_t* state_out) {
    apply_split_table_body(slots, capacity, num_nodes, state_out);
}
#endif
#endif
#endif  // SCATTER_AOT_ONLY
