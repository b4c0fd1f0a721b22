// The scatter-add as kernels for TensorRT's ahead-of-time (AOT) plugins (plugin/scatter_add_aot.py,
// docs/aot_plugin.md). TensorRT launches one kernel per AOT plugin with the plugin's input pointers, then its extra
// int32 arguments, then its output pointers (an aliased output's pointer is its input's again), so each kernel
// writes through the output pointers. Zeroed counts, the -1 keys and the zero float32 table come from TensorRT
// layers in the network: nothing here zeroes or allocates global memory.
//
//   scatter_add_f32[_counts]    float32 state += src rows by index (and counts[index[e]] += 1)
//   scatter_table_f16[_counts]  float16, step 1: sums src rows (float32) into a hash table keyed by node
//   apply_table_f16             float16, step 2: state[key] = half(float(state[key]) + sum), one rounding
//   scatter_block_f16           float16, F = 1, no counts, a profile of at most BLOCK_MAX_EDGES edges: both steps
//                               in one block's shared memory, no table from the network
//
// Each kernel but scatter_block_f16 is a grid-stride loop over (row, feature) elements, so any grid of at least one
// block is correct (aot.py aot_launch_params sizes it). Rows whose index is outside [0, num_nodes) are skipped and
// never written; whatever the buffers hold, every kernel ends and stays inside them: a probe visits each slot at
// most once, and a key is used as a node only inside [0, num_nodes). Self-contained on purpose (an engine holds
// this PTX): these kernels change only when the AOT plugins do, not when scatter_add.cu is tuned.

#include <cuda_fp16.h>

typedef long long i64;
typedef unsigned long long u64;

#define AOT_THREADS_PER_BLOCK 256  // plugin/kernels/aot.py THREADS_PER_BLOCK
#define EMPTY_KEY (-1)             // the network fills the keys with -1
#define MAX_KEY 0x7fffffffLL       // node ids are stored as int32 keys
#define AOT_PRIVATE_MAX_FLOATS 10240      // plugin/kernels/aot.py PRIVATE_MAX_FLOATS: 40 KiB of shared memory
#define AOT_PRIVATE_MIN_EDGES_PER_NODE 256  // plugin/kernels/aot.py PRIVATE_MIN_EDGES_PER_NODE

__device__ __forceinline__ i64 first_element() { return (i64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ i64 element_stride() { return (i64)gridDim.x * blockDim.x; }

// Element i of a row-major [rows, num_features] array as (row, feature); 32-bit division where it fits
// (64-bit division is emulated and would dominate these loops).
__device__ __forceinline__ i64 split_element(i64 i, int num_features, int& feature) {
    if (num_features == 1) {
        feature = 0;
        return i;
    }
    if (i <= 0xffffffffLL) {
        const unsigned row = (unsigned)i / (unsigned)num_features;
        feature = (int)((unsigned)i - row * (unsigned)num_features);
        return row;
    }
    const i64 row = i / num_features;
    feature = (int)(i - row * num_features);
    return row;
}

// The table slot of `node`, inserting the node if absent; -1 when no slot holds it or is free. A node's home
// slot is a multiplicative hash modulo the table's whole buckets of 8 keys (one 32-byte sector each). The home key
// is read first; past it the table is read a bucket per round trip (the rest of the home bucket, then the next
// buckets in turn), and a key read empty is claimed with a compare-and-swap, which also reports a slot taken
// since the read. Every thread probes a node's slots in the same order, so a node lands in one slot. The
// network's table (2 E + 1 slots of -1) always has room in its whole buckets; smaller tables, or keys not 32-byte
// aligned, are probed one slot at a time. A table without a free slot drops the row: no slot is visited twice.
__device__ __forceinline__ bool claim_slot(int* keys, unsigned slot, int node) {
    const int previous = atomicCAS(&keys[slot], EMPTY_KEY, node);
    return previous == EMPTY_KEY || previous == node;
}

// Key j (0..7) of a bucket read as two int4, by selects (an array indexed at run time would go to local memory).
__device__ __forceinline__ int bucket_key(const int4& low, const int4& high, unsigned j) {
    const int4 half = (j & 4u) ? high : low;
    const int even = (j & 2u) ? half.z : half.x, odd = (j & 2u) ? half.w : half.y;
    return (j & 1u) ? odd : even;
}

__device__ __forceinline__ int find_or_insert(int* keys, int node, int capacity) {
    if (capacity <= 0) return -1;
    const u64 hash = (u64)(unsigned)node * 2654435761ull;
    const unsigned buckets = (unsigned)capacity / 8u;
    if (buckets >= 1u && ((unsigned long long)keys & 31ull) == 0ull) {
        const unsigned home = (unsigned)(hash % (8u * buckets));
        const int first = __ldcg(keys + home);  // L2's copy: other SMs insert there
        if (first == node || (first == EMPTY_KEY && claim_slot(keys, home, node))) return (int)home;
        unsigned bucket = home / 8u;
        for (unsigned visited = 0; visited < buckets; ++visited) {
            const int4* sector = reinterpret_cast<const int4*>(keys + 8u * bucket);
            const int4 low = __ldcg(sector), high = __ldcg(sector + 1);
#pragma unroll
            for (unsigned t = 0; t < 8u; ++t) {
                if (visited == 0 && t == 0) continue;  // the home slot: another node's
                const unsigned j = (home + t) & 7u;
                const int key = bucket_key(low, high, j);
                const unsigned slot = 8u * bucket + j;
                if (key == node || (key == EMPTY_KEY && claim_slot(keys, slot, node))) return (int)slot;
            }
            bucket = bucket + 1u == buckets ? 0u : bucket + 1u;
        }
        return -1;
    }
    unsigned slot = (unsigned)(hash % (unsigned)capacity);
    for (int probe = 0; probe < capacity; ++probe) {
        const int key = *((volatile int*)&keys[slot]);
        if (key == node || (key == EMPTY_KEY && claim_slot(keys, slot, node))) return (int)slot;
        slot = slot + 1u == (unsigned)capacity ? 0u : slot + 1u;
    }
    return -1;
}

// Lanes of the warp with the same key (match.any, sm_70+): each lane gets its group's sum of v; returns the
// group's lanes. Every lane of the warp calls it.
__device__ __forceinline__ unsigned combine_warp_peers(long long key, float& v) {
    const int lane = threadIdx.x & 31;
    const unsigned peers = __match_any_sync(0xffffffffu, key);
    if (__all_sync(0xffffffffu, peers == (1u << lane))) return peers;
    float sum = 0.0f;
    for (unsigned rest = peers; rest != 0u; rest &= rest - 1u) sum += __shfl_sync(peers, v, __ffs(rest) - 1);
    v = sum;
    return peers;
}

// Whether some lane holds the same key as the lane `step` below it (step >= 32: never): the cheap test before
// the costly match.any (on every element it would cost more than it saves). Every lane of the warp calls it.
__device__ __forceinline__ bool neighbour_duplicates(long long key, bool valid, int step) {
    if (step >= 32) return false;
    const int lane = threadIdx.x & 31;
    const long long below = __shfl_up_sync(0xffffffffu, key, step);
    return __any_sync(0xffffffffu, valid && lane >= step && below == key);
}

__device__ __forceinline__ unsigned sm_count() {
    unsigned n;
    asm("mov.u32 %0, %%nsmid;" : "=r"(n));
    return n;
}

// Whether a float32 launch sums in shared memory first (few nodes, many edges each): then the launch parameters
// gave each block 4 N (F + counts) bytes of dynamic shared memory (plugin/kernels/aot.py aot_shared_bytes).
__device__ __forceinline__ bool privatised(int num_nodes, int num_edges, int num_features, bool counts) {
    return num_nodes > 0 && (i64)num_nodes * (num_features + counts) <= AOT_PRIVATE_MAX_FLOATS
           && (i64)num_edges >= (i64)AOT_PRIVATE_MIN_EDGES_PER_NODE * num_nodes;
}

// state_out[index[e], f] += src[e, f]; with counts_out, counts_out[index[e]] += 1 (once per edge). Where
// neighbouring edges of a warp share a target (runs, hubs), the warp's equal targets are summed first and added
// by one atomic. Privatised (few nodes): the first min(gridDim, 2 x SMs) blocks sum their elements in shared
// memory, then add each nonzero sum (and count) with one atomic, each block starting at its own node; the other
// blocks return at once.
__device__ __forceinline__ void scatter_rows_f32(const float* __restrict__ src, const i64* __restrict__ index,
                                                 int num_nodes, int num_edges, int num_features,
                                                 float* state_out, u64* counts_out) {
    const int lane = threadIdx.x & 31;
    const i64 total = (i64)num_edges * num_features;
    if (privatised(num_nodes, num_edges, num_features, counts_out != nullptr)) {
        extern __shared__ float private_sums[];  // [N * F], then the counts [N]
        unsigned* private_counts = reinterpret_cast<unsigned*>(private_sums + (i64)num_nodes * num_features);
        const unsigned blocks = min(gridDim.x, 2 * sm_count());
        if (blockIdx.x >= blocks) return;
        const int words = num_nodes * (num_features + (counts_out != nullptr));
        for (int i = threadIdx.x; i < words; i += blockDim.x) private_sums[i] = 0.0f;
        __syncthreads();
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)blocks * blockDim.x) {
            int feature;
            const i64 edge = split_element(i, num_features, feature);
            const i64 node = __ldg(index + edge);
            if (node < 0 || node >= num_nodes) continue;
            atomicAdd(private_sums + node * num_features + feature, __ldg(src + i));
            if (counts_out != nullptr && feature == 0) atomicAdd(private_counts + node, 1u);
        }
        __syncthreads();
        const int elements = num_nodes * num_features;
        const int start = (int)(((i64)blockIdx.x * num_nodes / blocks) * num_features);
        for (int j = threadIdx.x; j < elements; j += blockDim.x) {
            const int k = j + start < elements ? j + start : j + start - elements;
            const float sum = private_sums[k];
            if (__float_as_uint(sum) != 0u) atomicAdd(state_out + k, sum);
        }
        if (counts_out != nullptr) {
            const int first = (int)((i64)blockIdx.x * num_nodes / blocks);
            for (int j = threadIdx.x; j < num_nodes; j += blockDim.x) {
                const int n = j + first < num_nodes ? j + first : j + first - num_nodes;
                if (private_counts[n] != 0u) atomicAdd(counts_out + n, (u64)private_counts[n]);
            }
        }
        return;
    }
    // warp-uniform loop (the match needs every lane): the warp's first element, then whole grid strides
    for (i64 base = first_element() - lane; base < total; base += element_stride()) {
        const i64 i = base + lane;
        const bool present = i < total;
        int feature = 0;
        const i64 edge = present ? split_element(i, num_features, feature) : 0;
        const i64 node = present ? __ldg(index + edge) : -1;
        float v = present ? __ldg(src + i) : 0.0f;  // beside the index (in bounds): one round trip
        const bool ok = node >= 0 && node < num_nodes;
        const long long key = ok ? node * num_features + feature : -1ll - lane;
        unsigned peers = 1u << lane;
        if (neighbour_duplicates(key, ok, num_features)) peers = combine_warp_peers(key, v);
        if (!ok || __ffs(peers) - 1 != lane) continue;
        atomicAdd(state_out + node * num_features + feature, v);
        if (counts_out != nullptr && feature == 0) atomicAdd(counts_out + node, (u64)__popc(peers));
    }
}

// values_out[slot(index[e]), f] += float(src[e, f]) with keys_out[slot] = index[e]; nodes in [0, node_limit).
// Without counts node_limit is 2^31 - 1 (apply_table_f16 skips keys >= N); with counts it is N.
__device__ __forceinline__ void scatter_table_rows_f16(const __half* __restrict__ src, const i64* __restrict__ index,
                                                       i64 node_limit, int num_edges, int num_features,
                                                       int capacity, int* keys_out, float* values_out,
                                                       u64* counts_out) {
    const i64 total = (i64)num_edges * num_features;
    for (i64 i = first_element(); i < total; i += element_stride()) {
        int feature;
        const i64 edge = split_element(i, num_features, feature);
        const i64 node = __ldg(index + edge);
        if (node < 0 || node >= node_limit) continue;
        const int slot = find_or_insert(keys_out, (int)node, capacity);
        if (slot < 0) continue;  // a full table: the row is dropped
        atomicAdd(values_out + (i64)slot * num_features + feature, __half2float(src[i]));
        if (counts_out != nullptr && feature == 0) atomicAdd(counts_out + node, 1ull);
    }
}

extern "C" __global__ void __launch_bounds__(AOT_THREADS_PER_BLOCK)
scatter_add_f32(const float* state_in, const float* src, const i64* index,
                int num_nodes, int num_edges, int num_features,
                float* state_out) {
    scatter_rows_f32(src, index, num_nodes, num_edges, num_features, state_out, nullptr);
}

extern "C" __global__ void __launch_bounds__(AOT_THREADS_PER_BLOCK)
scatter_add_f32_counts(const float* state_in, const float* src, const i64* index, const i64* counts_in,
                       int num_nodes, int num_edges, int num_features,
                       float* state_out, u64* counts_out) {
    scatter_rows_f32(src, index, num_nodes, num_edges, num_features, state_out, counts_out);
}

extern "C" __global__ void __launch_bounds__(AOT_THREADS_PER_BLOCK)
scatter_table_f16(const __half* src, const i64* index, const int* keys_in, const float* values_in,
                  int num_edges, int num_features, int capacity,
                  int* keys_out, float* values_out) {
    scatter_table_rows_f16(src, index, MAX_KEY, num_edges, num_features, capacity, keys_out, values_out, nullptr);
}

extern "C" __global__ void __launch_bounds__(AOT_THREADS_PER_BLOCK)
scatter_table_f16_counts(const __half* src, const i64* index, const int* keys_in, const float* values_in,
                         const i64* counts_in,
                         int num_nodes, int num_edges, int num_features, int capacity,
                         int* keys_out, float* values_out, u64* counts_out) {
    scatter_table_rows_f16(src, index, num_nodes, num_edges, num_features, capacity, keys_out, values_out,
                           counts_out);
}

// state_out[keys[s], f] = half(float(state_out[keys[s], f]) + values[s, f]) for every filled slot s whose key
// is a node of this state (in [0, num_nodes)); a node has at most one slot, so no two threads write one element.
// Sums still +0.0 are skipped, so a touched node whose sum is +0.0 keeps its value bit for bit.
extern "C" __global__ void __launch_bounds__(AOT_THREADS_PER_BLOCK)
apply_table_f16(const __half* state_in, const int* keys, const float* values,
                int num_nodes, int num_features, int capacity,
                __half* state_out) {
    const i64 total = (i64)capacity * num_features;
    for (i64 i = first_element(); i < total; i += element_stride()) {
        int feature;
        const i64 slot = split_element(i, num_features, feature);
        const int node = __ldg(keys + slot);
        if (node < 0 || node >= num_nodes) continue;  // EMPTY_KEY (-1) too
        const float sum = __ldg(values + i);
        if (__float_as_uint(sum) == 0u) continue;
        __half* element = state_out + (i64)node * num_features + feature;
        *element = __float2half_rn(__half2float(*element) + sum);
    }
}

// scatter_block_f16: float16 rows of one feature, no counts, for a network whose profile allows at most aot.py
// BLOCK_MAX_EDGES edges. Block 0 (the launch has one) claims each edge's node in a shared table of AOT_BLOCK_SLOTS
// int32 keys (linear probing from a multiplicative hash), sums in float32 there and, after one block barrier,
// rounds each claimed node's sum into the state once. A node that finds no slot (more distinct nodes than the
// profile allows) is added straight into the state with a half atomic, one rounding per edge.
#define AOT_BLOCK_THREADS 1024     // plugin/kernels/aot.py BLOCK_THREADS
#define AOT_BLOCK_SLOTS_LOG2 12    // plugin/kernels/aot.py BLOCK_SLOTS = 4096: 4 per edge at 1024 edges, 32 KiB
#define AOT_BLOCK_SLOTS (1 << AOT_BLOCK_SLOTS_LOG2)
extern "C" __global__ void __launch_bounds__(AOT_BLOCK_THREADS)
scatter_block_f16(const __half* state_in, const __half* src, const i64* index,
                  int num_nodes, int num_edges,
                  __half* state_out) {
    __shared__ int block_keys[AOT_BLOCK_SLOTS];
    __shared__ float block_sums[AOT_BLOCK_SLOTS];
    if (blockIdx.x != 0) return;  // one block sums every edge: a second would add them twice
    for (int s = threadIdx.x; s < AOT_BLOCK_SLOTS; s += blockDim.x) {
        block_keys[s] = EMPTY_KEY;
        block_sums[s] = 0.0f;
    }
    __syncthreads();
    for (i64 edge = threadIdx.x; edge < num_edges; edge += blockDim.x) {
        const i64 node = __ldg(index + edge);
        if (node < 0 || node >= num_nodes) continue;
        const float value = __half2float(src[edge]);
        unsigned slot = ((unsigned)node * 2654435761u) >> (32 - AOT_BLOCK_SLOTS_LOG2);
        bool added = false;
        for (int probe = 0; probe < AOT_BLOCK_SLOTS && !added; ++probe) {
            if (claim_slot(block_keys, slot, (int)node)) {
                atomicAdd(block_sums + slot, value);
                added = true;
            }
            slot = (slot + 1u) & (AOT_BLOCK_SLOTS - 1u);
        }
        if (!added) atomicAdd(state_out + node, __float2half_rn(value));  // a full table: never the profile's
    }
    __syncthreads();
    for (int s = threadIdx.x; s < AOT_BLOCK_SLOTS; s += blockDim.x) {
        const int node = block_keys[s];
        const float sum = block_sums[s];
        if (node == EMPTY_KEY || __float_as_uint(sum) == 0u) continue;  // +0.0 keeps a -0.0 state bit for bit
        state_out[node] = __float2half_rn(__half2float(state_out[node]) + sum);
    }
}
