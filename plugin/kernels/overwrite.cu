// Row overwrite in place: state[index[e], :] = src[e, :] for e = 0 .. E-1 in order, so where an index repeats
// the LAST edge wins (a sequential loop's rule). Both plugins launch these kernels: the Python plugin from a
// CUBIN of this file (plugin/kernels/overwrite.py), the AOT plugins from its PTX (aliased_io::overwrite_claim and
// aliased_io::overwrite_rows, plugin/scatter_add_aot.py), so the parameters follow TensorRT's AOT order: input
// pointers, extra int32 arguments, output pointers (an aliased output's pointer is its input's again).
//
// Two passes over a hash table of `capacity` (T) slots, keys[T] = node and winners[T] = the largest edge index
// of that node, both int64 and filled with -1 before pass 1 (the Python plugin memsets its workspace, an AOT
// network makes them with ConstantOfShape): O(E) table work and O(E F) copying, nothing of size N.
//   overwrite_claim   pass 1: each edge claims its node's slot (linear probing, one compare-and-swap per slot)
//                     and atomicMax-es its index into the slot's winner; a warp's edges into one node send one
//                     claim (the highest lane: the last edge)
//   overwrite_rows_*  pass 2: each (edge, word) of a row whose edge is its node's winner copies that word: rows
//                     are copied bit for bit (no arithmetic), 16, 8, 4 or 2 bytes at a time
//
// Rules that hold whatever the buffers hold (TensorRT may time a plugin on made-up inputs): index values < 0
// are skipped by both passes, values >= num_nodes by pass 2 (the claim kernel has no N: such a node may take a
// slot, never a write); a probe visits each slot at most once, so a full table ends the probe (that edge is
// dropped: its row is not written) instead of looping; state is written only at rows in [0, num_nodes). The
// table must have at least as many slots as distinct non-negative nodes; 2 E + 1 (what both plugins give) always
// has, and keeps it at most half full, so probes stay short.

typedef long long i64;
typedef unsigned long long u64;

#define OVERWRITE_THREADS 256  // plugin/kernels/aot.py THREADS_PER_BLOCK
#define OVERWRITE_EMPTY (-1LL)

__device__ __forceinline__ i64 overwrite_first() { return (i64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ i64 overwrite_stride() { return (i64)gridDim.x * blockDim.x; }

// A node's home slot in [0, capacity): a multiplicative hash, then a multiply-shift into range (no division).
__device__ __forceinline__ unsigned overwrite_home(i64 node, int capacity) {
    const u64 hash = ((u64)node * 0x9E3779B97F4A7C15ull) >> 32;
    return (unsigned)((hash * (u64)(unsigned)capacity) >> 32);
}

// The slot holding `node`, or -1: probes from its home until the node, an empty slot or `capacity` slots.
__device__ __forceinline__ int overwrite_find(const i64* __restrict__ keys, i64 node, int capacity) {
    unsigned slot = overwrite_home(node, capacity);
    for (int probe = 0; probe < capacity; ++probe) {
        const i64 key = __ldg(keys + slot);
        if (key == node) return (int)slot;
        if (key == OVERWRITE_EMPTY) return -1;
        slot = slot + 1u == (unsigned)capacity ? 0u : slot + 1u;
    }
    return -1;
}

// Pass 1. winners_out[slot(index[e])] = max over the node's edges e; keys_out[slot] = the node. keys_in and
// winners_in are the same memory (aliased) and are not read through.
extern "C" __global__ void __launch_bounds__(OVERWRITE_THREADS)
overwrite_claim(const i64* index, const i64* keys_in, const i64* winners_in,
                int num_edges, int capacity,
                i64* keys_out, i64* winners_out) {
    if (capacity <= 0) return;
    const int lane = threadIdx.x & 31;
    // warp-uniform loop (the match needs every lane): the warp's first edge, then whole grid strides
    for (i64 base = overwrite_first() - lane; base < num_edges; base += overwrite_stride()) {
        const i64 edge = base + lane;
        const i64 node = edge < num_edges ? __ldg(index + edge) : OVERWRITE_EMPTY;
        // lanes of one node: only the highest (its last edge) goes on; -1 groups the absent and negative ones
        const unsigned peers = __match_any_sync(0xffffffffu, node < 0 ? OVERWRITE_EMPTY : node);
        if (node < 0 || 31 - __clz(peers) != lane) continue;
        // One compare-and-swap per slot probed (it reads the key too: one round trip, no read before it); the
        // winner's max is a reduction (red: no answer to wait for).
        unsigned slot = overwrite_home(node, capacity);
        for (int probe = 0; probe < capacity; ++probe) {
            const i64 key = (i64)atomicCAS((u64*)(keys_out + slot), (u64)OVERWRITE_EMPTY, (u64)node);
            if (key == OVERWRITE_EMPTY || key == node) {
                asm volatile("red.global.max.s64 [%0], %1;" ::"l"(winners_out + slot), "l"(edge) : "memory");
                break;
            }
            slot = slot + 1u == (unsigned)capacity ? 0u : slot + 1u;
        }
    }
}

// Pass 2 for rows of `words` Words each: word w of edge e goes to state row index[e] where e is its node's winner.
template <typename Word>
__device__ __forceinline__ void overwrite_copy(const Word* __restrict__ src, const i64* __restrict__ index,
                                               const i64* __restrict__ keys, const i64* __restrict__ winners,
                                               i64 num_nodes, int num_edges, int words, int capacity,
                                               Word* state_out) {
    const i64 total = (i64)num_edges * words;
    for (i64 i = overwrite_first(); i < total; i += overwrite_stride()) {
        i64 edge;
        int w;
        if (words == 1) {
            edge = i, w = 0;
        } else if (i <= 0xffffffffLL) {  // 32-bit division where it fits (64-bit is emulated)
            const unsigned row = (unsigned)i / (unsigned)words;
            edge = row, w = (int)((unsigned)i - row * (unsigned)words);
        } else {
            edge = i / words, w = (int)(i - edge * words);
        }
        const Word value = __ldg(src + i);  // beside the index (in bounds): the same round trip
        const i64 node = __ldg(index + edge);
        if (node < 0 || node >= num_nodes) continue;
        const int slot = overwrite_find(keys, node, capacity);
        if (slot < 0 || __ldg(winners + slot) != edge) continue;
        state_out[node * words + w] = value;
    }
}

// The widest word (16, 8, 4 bytes, else 2) that divides a row and both buffers' alignment.
__device__ __forceinline__ void overwrite_rows(const void* src, const i64* index, const i64* keys,
                                               const i64* winners, int num_nodes, int num_edges, int row_bytes,
                                               int capacity, void* state_out) {
    if (capacity <= 0 || row_bytes <= 0) return;
    const u64 alignment = (u64)src | (u64)state_out | (u64)row_bytes;
    if ((alignment & 15u) == 0u) {
        overwrite_copy((const uint4*)src, index, keys, winners, num_nodes, num_edges, row_bytes / 16, capacity,
                       (uint4*)state_out);
    } else if ((alignment & 7u) == 0u) {
        overwrite_copy((const uint2*)src, index, keys, winners, num_nodes, num_edges, row_bytes / 8, capacity,
                       (uint2*)state_out);
    } else if ((alignment & 3u) == 0u) {
        overwrite_copy((const unsigned*)src, index, keys, winners, num_nodes, num_edges, row_bytes / 4, capacity,
                       (unsigned*)state_out);
    } else {
        overwrite_copy((const unsigned short*)src, index, keys, winners, num_nodes, num_edges, row_bytes / 2,
                       capacity, (unsigned short*)state_out);
    }
}

extern "C" __global__ void __launch_bounds__(OVERWRITE_THREADS)
overwrite_rows_f32(const float* state_in, const float* src, const i64* index, const i64* keys, const i64* winners,
                   int num_nodes, int num_edges, int num_features, int capacity,
                   float* state_out) {
    overwrite_rows(src, index, keys, winners, num_nodes, num_edges, num_features * 4, capacity, state_out);
}

extern "C" __global__ void __launch_bounds__(OVERWRITE_THREADS)
overwrite_rows_f16(const unsigned short* state_in, const unsigned short* src, const i64* index, const i64* keys,
                   const i64* winners, int num_nodes, int num_edges, int num_features, int capacity,
                   unsigned short* state_out) {
    overwrite_rows(src, index, keys, winners, num_nodes, num_edges, num_features * 2, capacity, state_out);
}
