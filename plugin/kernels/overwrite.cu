// Row overwrite in place: state[index[e], :] = src[e, :] for e = 0 .. E-1 in order, so where an index repeats
// the LAST edge wins (a sequential loop's rule). Both plugins launch these kernels: the Python plugin from a
// CUBIN of this file (plugin/kernels/overwrite.py), the AOT plugins from its PTX (aliased_io::overwrite_claim and
// aliased_io::overwrite_rows, plugin/scatter_add_aot.py), so the parameters follow TensorRT's AOT order: input
// pointers, extra int32 arguments, output pointers (an aliased output's pointer is its input's again).
//
// Two passes over a hash table of `capacity` (T) slots, keys[T] = node and winners[T] = the largest edge index
// of that node, both int64 and filled with -1 before pass 1 (the Python plugin memsets its workspace, an AOT
// network makes them with ConstantOfShape): O(E) table work and O(E F) copying, nothing of size N.
//   overwrite_claim   pass 1: each edge claims its node's slot (linear probing over buckets of 4 keys, one
//                     sector each) and atomicMax-es its index into the slot's winner; a warp's edges into one
//                     node send one claim (the highest lane: the last edge)
//   overwrite_rows_*  pass 2: each (edge, word) of a row whose edge is its node's winner copies that word: rows
//                     are copied bit for bit (no arithmetic), 16, 8, 4 or 2 bytes at a time
//
// Rules that hold whatever the buffers hold (TensorRT may time a plugin on made-up inputs): index values < 0
// are skipped by both passes, values >= num_nodes by pass 2 (the claim kernel has no N: such a node may take a
// slot, never a write); a probe visits each slot at most once, so a full table ends the probe (that edge is
// dropped: its row is not written) instead of looping; state is written only at rows in [0, num_nodes). The
// table must have at least as many usable slots as distinct non-negative nodes: 4 floor(T / 4) where the keys
// are 32-byte aligned and T >= 4, else T (so T >= distinct nodes + 3 always does); 2 E + 1 (what both plugins
// give) always does, and keeps the table at most about half full, so probes stay short.

typedef long long i64;
typedef unsigned long long u64;

#define OVERWRITE_THREADS 256  // plugin/kernels/aot.py THREADS_PER_BLOCK
#define OVERWRITE_EMPTY (-1LL)

__device__ __forceinline__ i64 overwrite_first() { return (i64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ i64 overwrite_stride() { return (i64)gridDim.x * blockDim.x; }

// A node's home slot in [0, slots): a multiplicative hash, then a multiply-shift into range (no division).
__device__ __forceinline__ unsigned overwrite_hash(i64 node, unsigned slots) {
    const u64 hash = ((u64)node * 0x9E3779B97F4A7C15ull) >> 32;
    return (unsigned)((hash * (u64)slots) >> 32);
}

// A node's probe order. Where the keys are 32-byte aligned and hold at least one whole bucket of 4 (one sector),
// the home slot lies among the whole buckets' slots and the probe reads a bucket's 4 keys at once: the rest of
// the home bucket from the home slot round, then the next buckets in turn (wrapping; the 1 to 3 slots past the
// last whole bucket are never used: 2 E + 1 slots still hold E nodes). Otherwise slot by slot from home. Every
// slot is visited at most once, so the probe ends whatever the table holds; the claim and the lookup use the
// same order, so a lookup that meets an empty slot knows the node was never claimed.
__device__ __forceinline__ bool overwrite_bucketed(const i64* keys, int capacity) {
    return capacity >= 4 && ((u64)keys & 31u) == 0u;
}

__device__ __forceinline__ unsigned overwrite_home(const i64* keys, i64 node, int capacity) {
    const unsigned slots = overwrite_bucketed(keys, capacity) ? (unsigned)capacity & ~3u : (unsigned)capacity;
    return overwrite_hash(node, slots);
}

// Calls visit(slot, key) along `node`'s probe order (key: the value read there) until it returns nonzero: the
// slot for 1, -1 for -1; -1 when every slot was visited. Fresh: the keys read from L2 (the claim, while other SMs
// claim), else through the read-only cache (the lookup, after the claim kernel).
template <bool Fresh>
__device__ __forceinline__ longlong2 overwrite_load2(const longlong2* at) { return Fresh ? __ldcg(at) : __ldg(at); }
template <bool Fresh>
__device__ __forceinline__ i64 overwrite_load(const i64* at) { return Fresh ? __ldcg(at) : __ldg(at); }

template <bool Fresh, typename Visit>
__device__ __forceinline__ int overwrite_probe(const i64* keys, i64 node, int capacity, Visit visit) {
    if (capacity <= 0) return -1;
    const unsigned home = overwrite_home(keys, node, capacity);
    if (overwrite_bucketed(keys, capacity)) {
        const unsigned buckets = (unsigned)capacity / 4u;
        unsigned bucket = home / 4u;
        for (unsigned visited = 0; visited < buckets; ++visited) {
            const longlong2* sector = reinterpret_cast<const longlong2*>(keys + 4u * bucket);
            const longlong2 low = overwrite_load2<Fresh>(sector), high = overwrite_load2<Fresh>(sector + 1);
#pragma unroll
            for (unsigned t = 0; t < 4u; ++t) {
                const unsigned j = (home + t) & 3u;
                const longlong2 half = (j & 2u) ? high : low;  // selects: an array indexed at run time spills
                const i64 key = (j & 1u) ? half.y : half.x;
                const int verdict = visit(4u * bucket + j, key);
                if (verdict != 0) return verdict > 0 ? (int)(4u * bucket + j) : -1;
            }
            bucket = bucket + 1u == buckets ? 0u : bucket + 1u;
        }
        return -1;
    }
    unsigned slot = home;
    for (int probe = 0; probe < capacity; ++probe) {
        const int verdict = visit(slot, overwrite_load<Fresh>(keys + slot));
        if (verdict != 0) return verdict > 0 ? (int)slot : -1;
        slot = slot + 1u == (unsigned)capacity ? 0u : slot + 1u;
    }
    return -1;
}

// The slot holding `node`, or -1 (an empty slot or every slot visited first).
__device__ __forceinline__ int overwrite_find(const i64* __restrict__ keys, i64 node, int capacity) {
    return overwrite_probe<false>(keys, node, capacity, [&](unsigned, i64 key) {
        return key == node ? 1 : key == OVERWRITE_EMPTY ? -1 : 0;
    });
}

// The slot `node` holds or claims now, or -1 (no free slot). First one compare-and-swap at the home slot (it
// reads the key too: one round trip where the home is free or the node's, as it mostly is in a table at most
// half full); past it the probe reads a bucket per round trip and swaps only where it read a free slot.
__device__ __forceinline__ int overwrite_claim_slot(i64* keys, i64 node, int capacity) {
    if (capacity <= 0) return -1;
    const unsigned home = overwrite_home(keys, node, capacity);
    const i64 first = (i64)atomicCAS((u64*)(keys + home), (u64)OVERWRITE_EMPTY, (u64)node);
    if (first == OVERWRITE_EMPTY || first == node) return (int)home;
    return overwrite_probe<true>(keys, node, capacity, [&](unsigned slot, i64 key) {
        if (key == node) return 1;
        if (key != OVERWRITE_EMPTY) return 0;
        const i64 previous = (i64)atomicCAS((u64*)(keys + slot), (u64)OVERWRITE_EMPTY, (u64)node);
        return previous == OVERWRITE_EMPTY || previous == node ? 1 : 0;
    });
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
        const int slot = overwrite_claim_slot(keys_out, node, capacity);
        if (slot < 0) continue;  // a full table: this node's rows are not written
        // the winner's max is a reduction (red: no answer to wait for)
        asm volatile("red.global.max.s64 [%0], %1;" ::"l"(winners_out + slot), "l"(edge) : "memory");
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
