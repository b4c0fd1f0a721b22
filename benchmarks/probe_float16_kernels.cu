// Probe kernels of issue 26 (benchmarks/probe_float16_small.py appends this file to scatter_add.cu before it
// compiles): float16 small-update designs measured on the H200 and not shipped. plugin/kernels/NOTES.md
// "Issue 26, second session" has their times; scatter_grid_table (scatter_add.cu) is the one shipped.

// cluster_table (float16, F = 1, E <= TABLE_CLUSTER_MAX_EDGES, sm_90+): ONE cluster of TABLE_CLUSTER_BLOCKS
// blocks holds the batch's float32 sums in a hash table spread over its shared memory: node n lives in block
// owned_by(n, TABLE_CLUSTER_BLOCKS), in a part of `capacity` >= E slots, so no insertion can fail and there are
// no passes. Each edge is read once, by one thread. The thread whose insertion claims a node's slot loads the
// node's state right away (its latency hides behind the insertions and the barrier) and, after the cluster
// barrier, adds the node's float32 sum into it with one rounding. The first and last barriers are split
// (arrive, then wait later) so that clearing the table overlaps the loads and the state stores overlap the exit.
#ifndef TABLE_CLUSTER_BLOCKS
#define TABLE_CLUSTER_BLOCKS 8      // plan.py TABLE_CLUSTER_BLOCKS (8: the portable cluster size)
#endif
#ifndef TABLE_CLUSTER_THREADS
#define TABLE_CLUSTER_THREADS 1024  // plan.py TABLE_CLUSTER_THREADS
#endif
#ifndef TABLE_CLUSTER_LOADS
#define TABLE_CLUSTER_LOADS 2       // edges per thread: E <= LOADS x BLOCKS x THREADS (plan.py)
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void cluster_barrier() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
template <typename T>
__device__ __forceinline__ T* cluster_map(T* pointer, unsigned rank) {  // the same shared variable in block `rank`
    u64 mapped;
    asm volatile("mapa.u64 %0, %1, %2;" : "=l"(mapped) : "l"((u64)pointer), "r"(rank));
    return reinterpret_cast<T*>(mapped);
}
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
#define TABLE_CLUSTER_DIMS __cluster_dims__(TABLE_CLUSTER_BLOCKS, 1, 1)
#else
#define TABLE_CLUSTER_DIMS
#endif

extern "C" __global__ void TABLE_CLUSTER_DIMS __launch_bounds__(TABLE_CLUSTER_THREADS, 1)
scatter_cluster_table(const scalar_t* __restrict__ src, const i64* __restrict__ index, i64 num_edges, i64 num_nodes,
                      int capacity, scalar_t* __restrict__ state, u64* __restrict__ skipped) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ int table_keys[];
    float* table_sums = reinterpret_cast<float*>(table_keys + capacity);
    for (int i = threadIdx.x; i < capacity; i += blockDim.x) {
        table_keys[i] = OWNED_EMPTY;
        table_sums[i] = 0.0f;
    }
    cluster_arrive();  // this block's part is clear (released to the cluster)
    const i64 stride = (i64)TABLE_CLUSTER_BLOCKS * blockDim.x;
    const i64 first = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    i64 node[TABLE_CLUSTER_LOADS];
    float value[TABLE_CLUSTER_LOADS];
#pragma unroll
    for (int k = 0; k < TABLE_CLUSTER_LOADS; ++k) {
        const i64 e = first + k * stride;
        node[k] = e < num_edges ? __ldg(index + e) : -1;
        value[k] = e < num_edges ? to_float(src[e]) : 0.0f;
    }
    unsigned bad = 0;
    int claimed[TABLE_CLUSTER_LOADS];  // the slot this thread claimed for node[k], else -1
    unsigned owner[TABLE_CLUSTER_LOADS];
    scalar_t current[TABLE_CLUSTER_LOADS];
    cluster_wait();  // every part of the table is clear
#pragma unroll
    for (int k = 0; k < TABLE_CLUSTER_LOADS; ++k) {
        claimed[k] = -1;
        owner[k] = 0;
        if (first + k * stride >= num_edges) continue;
        if ((u64)node[k] >= (u64)num_nodes) {
            ++bad;
            continue;
        }
        const int n = (int)node[k];
        owner[k] = owned_by(n, TABLE_CLUSTER_BLOCKS);
        int* keys = cluster_map(table_keys, owner[k]);
        unsigned slot = (unsigned)(((u64)mix32((unsigned)n ^ 0x5bd1e995u) * (unsigned)capacity) >> 32);
        for (;;) {  // ends: the part has a free slot for every distinct node (capacity >= E)
            const int key = *((volatile int*)&keys[slot]);
            if (key == n) break;
            if (key == OWNED_EMPTY) {
                const int previous = atomicCAS(&keys[slot], OWNED_EMPTY, n);
                if (previous == OWNED_EMPTY) {
                    claimed[k] = (int)slot;
                    current[k] = state[n];  // needed after the barrier: its latency hides behind it
                    break;
                }
                if (previous == n) break;
            }
            slot = slot + 1u == (unsigned)capacity ? 0u : slot + 1u;
        }
        atomicAdd(cluster_map(table_sums, owner[k]) + slot, value[k]);
    }
    cluster_barrier();  // every insertion is done
    float sum[TABLE_CLUSTER_LOADS];
#pragma unroll
    for (int k = 0; k < TABLE_CLUSTER_LOADS; ++k)
        sum[k] = claimed[k] >= 0 ? *((volatile float*)(cluster_map(table_sums, owner[k]) + claimed[k])) : 0.0f;
    cluster_arrive();  // this thread is done with the other blocks' shared memory
#pragma unroll
    for (int k = 0; k < TABLE_CLUSTER_LOADS; ++k) {  // sums still +0.0 leave the node bit for bit as it was
        if (claimed[k] >= 0 && __float_as_uint(sum[k]) != 0u)
            store_scalar(state + node[k], to_float(current[k]) + sum[k]);
    }
    if (skipped != nullptr) add_skipped(skipped, bad);
    cluster_wait();  // no block leaves while another may still read its part
#endif
}

// cluster_inbox (float16, F = 1, probe): ONE cluster of INBOX_BLOCKS blocks, no remote atomics. Block s reads
// edges [s P, (s + 1) P) (P = per_sender), and writes each (node, value) into the inbox of the block that owns
// the node (owned_by), in the segment kept for s, at a position counted in s's own shared memory: remote
// stores only. Then each sender writes its counts into the owners, one cluster barrier, and each owner sums
// its inbox per node in a shared table of `capacity` > E slots (it cannot fill) and adds every sum into the
// state with one rounding (the state was prefetched into L2 by the senders).
#ifndef INBOX_BLOCKS
#define INBOX_BLOCKS 16
#endif
#ifndef INBOX_LOADS
#define INBOX_LOADS 1
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define INBOX_DIMS __cluster_dims__(INBOX_BLOCKS, 1, 1)
#else
#define INBOX_DIMS
#endif
extern "C" __global__ void INBOX_DIMS __launch_bounds__(1024, 1)
scatter_cluster_inbox(const scalar_t* __restrict__ src, const i64* __restrict__ index, i64 num_edges, i64 num_nodes,
                      int per_sender, int capacity, scalar_t* __restrict__ state, u64* __restrict__ skipped) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ int inbox_nodes[];
    float* inbox_values = reinterpret_cast<float*>(inbox_nodes + INBOX_BLOCKS * per_sender);
    int* keys = reinterpret_cast<int*>(inbox_values + INBOX_BLOCKS * per_sender);
    float* sums = reinterpret_cast<float*>(keys + capacity);
    __shared__ int received[INBOX_BLOCKS];  // entries each sender wrote here
    __shared__ int sent[INBOX_BLOCKS];      // entries this block wrote to each owner
    const unsigned me = blockIdx.x;
    const i64 begin = (i64)me * per_sender;
    const i64 end = min(num_edges, begin + per_sender);
    i64 node[INBOX_LOADS];
    float value[INBOX_LOADS];
#pragma unroll
    for (int k = 0; k < INBOX_LOADS; ++k) {
        const i64 e = begin + k * (i64)blockDim.x + threadIdx.x;
        node[k] = e < end ? __ldg(index + e) : -1;
        value[k] = e < end ? to_float(src[e]) : 0.0f;
    }
    if (threadIdx.x < INBOX_BLOCKS) sent[threadIdx.x] = 0;
    __syncthreads();
    unsigned bad = 0;
#pragma unroll
    for (int k = 0; k < INBOX_LOADS; ++k) {
        const i64 e = begin + k * (i64)blockDim.x + threadIdx.x;
        if (e >= end) continue;
        if ((u64)node[k] >= (u64)num_nodes) {
            ++bad;
            continue;
        }
        const int n = (int)node[k];
        asm volatile("prefetch.global.L2 [%0];" ::"l"(state + n));
        const unsigned owner = owned_by(n, INBOX_BLOCKS);
        const int at = (int)me * per_sender + atomicAdd(&sent[owner], 1);
        *cluster_map(inbox_nodes + at, owner) = n;
        *cluster_map(inbox_values + at, owner) = value[k];
    }
    __syncthreads();
    if (threadIdx.x < INBOX_BLOCKS) *cluster_map(received + me, threadIdx.x) = sent[threadIdx.x];
    cluster_barrier();  // every inbox and every count is written (release / acquire)
    int total = 0;
    for (unsigned from = 0; from < INBOX_BLOCKS; ++from) total += received[from];
    int used = 64;  // a table of at least twice the entries (never more than `capacity` > E: it cannot fill)
    while (used < 2 * total && used < capacity) used <<= 1;
    used = min(used, capacity);
    for (int i = threadIdx.x; i < used; i += blockDim.x) {
        keys[i] = OWNED_EMPTY;
        sums[i] = 0.0f;
    }
    __syncthreads();
    for (unsigned from = 0; from < INBOX_BLOCKS; ++from) {
        const int count = received[from];
        for (int i = threadIdx.x; i < count; i += blockDim.x) {
            const int n = inbox_nodes[from * per_sender + i];
            unsigned slot = (unsigned)(((u64)mix32((unsigned)n ^ 0x5bd1e995u) * (unsigned)used) >> 32);
            for (;;) {  // ends: used > the entries
                const int key = keys[slot];
                if (key == n) break;
                if (key == OWNED_EMPTY) {
                    const int previous = atomicCAS(&keys[slot], OWNED_EMPTY, n);
                    if (previous == OWNED_EMPTY || previous == n) break;
                }
                slot = slot + 1u == (unsigned)used ? 0u : slot + 1u;
            }
            atomicAdd(&sums[slot], inbox_values[from * per_sender + i]);
        }
    }
    __syncthreads();
    for (int base = 0; base < used; base += 8 * blockDim.x) {  // 8 slots per thread: their state loads in flight together
        int n[8];
        float sum[8];
        scalar_t current[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int slot = base + j * blockDim.x + threadIdx.x;
            n[j] = slot < used ? keys[slot] : OWNED_EMPTY;
            sum[j] = slot < used ? sums[slot] : 0.0f;
            if (n[j] != OWNED_EMPTY && __float_as_uint(sum[j]) != 0u) current[j] = state[n[j]];
        }
#pragma unroll
        for (int j = 0; j < 8; ++j)
            if (n[j] != OWNED_EMPTY && __float_as_uint(sum[j]) != 0u) store_scalar(state + n[j], to_float(current[j]) + sum[j]);
    }
    if (skipped != nullptr) add_skipped(skipped, bad);
#endif
}

#if SCATTER_GRID_SYNC
// grid_table (float16, F = 1, probe): a table of 64-bit slots in global memory, (node, float32 sum) packed, so
// that a node's first edge claims its slot and writes its value with one compare-and-swap; later edges add
// into the sum's half. The claiming thread loads the node's state at once, and after a grid-wide barrier adds
// the node's sum into it with one rounding. CLEAR: the table is scratch, cleared first behind a barrier of
// its own; else it is kept between launches and each claimer empties its slot again (self-cleaning).
#ifndef GRID_TABLE_LOADS
#define GRID_TABLE_LOADS 8
#endif
#ifndef GRID_TABLE_PRELOAD
#define GRID_TABLE_PRELOAD 1  // read the slot before the compare-and-swap
#endif
#ifndef GRID_TABLE_PREFETCH
#define GRID_TABLE_PREFETCH 0  // prefetch the node's state into L2 before inserting
#endif
__device__ __forceinline__ void grid_barrier_counted(unsigned* words) {  // words: count, generation (start 0, 0)
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned* generation = words + 1;
        const unsigned seen = *generation;
        __threadfence();
        if (atomicAdd(words, 1u) == gridDim.x - 1) {
            words[0] = 0u;
            __threadfence();
            atomicAdd(words + 1, 1u);
        } else {
            while (*generation == seen) {}
        }
        __threadfence();
    }
    __syncthreads();
}

#define GRID_TABLE_EMPTY 0x00000000ffffffffull  // node -1, sum +0.0: the probe's tables start so (kept ones too)
template <bool CLEAR, bool OWN_BARRIER>
__device__ __forceinline__ void probe_grid_table(const scalar_t* __restrict__ src, const i64* __restrict__ index,
                                           i64 num_edges, i64 num_nodes, u64* slots, int capacity,
                                           scalar_t* __restrict__ state, u64* __restrict__ skipped, unsigned* words) {
    const i64 thread = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 threads = (i64)gridDim.x * blockDim.x;
    if (CLEAR) {
        for (i64 i = thread; i < capacity; i += threads) slots[i] = GRID_TABLE_EMPTY;
    }
    i64 node[GRID_TABLE_LOADS];
    float value[GRID_TABLE_LOADS];
#pragma unroll
    for (int k = 0; k < GRID_TABLE_LOADS; ++k) {
        const i64 e = thread + k * threads;
        node[k] = e < num_edges ? __ldg(index + e) : -1;
        value[k] = e < num_edges ? to_float(src[e]) : 0.0f;
    }
    if (CLEAR) {
        if (OWN_BARRIER) grid_barrier_counted(words); else cooperative_groups::this_grid().sync();
    }
    unsigned bad = 0;
    int claimed[GRID_TABLE_LOADS];
    scalar_t current[GRID_TABLE_LOADS];
#pragma unroll
    for (int k = 0; k < GRID_TABLE_LOADS; ++k) {
        claimed[k] = -1;
        if (thread + k * threads >= num_edges) continue;
        if ((u64)node[k] >= (u64)num_nodes) {
            ++bad;
            continue;
        }
        const int n = (int)node[k];
        const u64 mine = ((u64)__float_as_uint(value[k]) << 32) | (u64)(unsigned)n;
        unsigned slot = (mix32((unsigned)n) * 0x9e3779b1u) & (unsigned)(capacity - 1);
        if (GRID_TABLE_PREFETCH) asm volatile("prefetch.global.L2 [%0];" ::"l"(state + n));
        for (;;) {  // ends: capacity > E >= the distinct nodes
            int key = GRID_TABLE_PRELOAD ? (int)(unsigned)*((volatile u64*)&slots[slot]) : OWNED_EMPTY;
            if (key == OWNED_EMPTY) {
                const u64 previous = atomicCAS(&slots[slot], GRID_TABLE_EMPTY, mine);
                if (previous == GRID_TABLE_EMPTY) {
                    claimed[k] = (int)slot;
                    current[k] = state[n];
                    break;
                }
                key = (int)(unsigned)previous;
            }
            if (key == n) {
                atomicAdd(reinterpret_cast<float*>(&slots[slot]) + 1, value[k]);
                break;
            }
            slot = (slot + 1u) & (unsigned)(capacity - 1);
        }
    }
    if (OWN_BARRIER) grid_barrier_counted(words); else cooperative_groups::this_grid().sync();
#pragma unroll
    for (int k = 0; k < GRID_TABLE_LOADS; ++k) {
        if (claimed[k] < 0) continue;
        const float sum = __uint_as_float(*((volatile unsigned*)&slots[claimed[k]] + 1));
        if (__float_as_uint(sum) != 0u) store_scalar(state + node[k], to_float(current[k]) + sum);
        if (!CLEAR) slots[claimed[k]] = GRID_TABLE_EMPTY;
    }
    if (skipped != nullptr) add_skipped(skipped, bad);
}

#define PROBE_GRID_TABLE_ENTRY(NAME, CLEAR, OWN)                                                                       \
    extern "C" __global__ void __launch_bounds__(1024)                                                           \
    NAME(const scalar_t* src, const i64* index, i64 num_edges, i64 num_nodes, u64* slots, int capacity,         \
         scalar_t* state, u64* skipped, unsigned* words) {                                                       \
        probe_grid_table<CLEAR, OWN>(src, index, num_edges, num_nodes, slots, capacity, state, skipped, words);        \
    }
PROBE_GRID_TABLE_ENTRY(scatter_grid_table_clear, true, false)
PROBE_GRID_TABLE_ENTRY(scatter_grid_table_kept, false, false)
PROBE_GRID_TABLE_ENTRY(scatter_grid_table_kept_own, false, true)
#endif



// split_table with the state read early (not shipped): the claiming thread of scatter_split_table_preload also
// copies its node's state into `copies[slot]`, so that apply_split_table_preload, scanning the slots in order,
// reads the copy beside the slot and only stores into the state (one random access per node instead of a load
// and a store after it).
extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK)
scatter_split_table_preload(const scalar_t* __restrict__ src, const i64* __restrict__ index, i64 num_edges,
                            i64 num_nodes, u64* __restrict__ slots, int capacity, const scalar_t* __restrict__ state,
                            scalar_t* __restrict__ copies) {
    const i64 edge = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (edge >= num_edges) return;
    const i64 node = __ldg(index + edge);
    if ((u64)node >= (u64)num_nodes) return;
    const int claimed = claim_or_add(slots, (unsigned)capacity, true, (int)node, to_float(src[edge]));
    if (claimed >= 0) copies[claimed] = state[node];
}

extern "C" __global__ void __launch_bounds__(THREADS_PER_BLOCK)
apply_split_table_preload(const u64* __restrict__ slots, const scalar_t* __restrict__ copies, int capacity,
                          i64 num_nodes, scalar_t* __restrict__ state) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < capacity; i += (i64)gridDim.x * blockDim.x) {
        const u64 slot = slots[i];
        const unsigned node = (unsigned)slot, sum = (unsigned)(slot >> 32);
        if ((i64)node < num_nodes && sum != 0u) store_scalar(state + node, to_float(copies[i]) + __uint_as_float(sum));
    }
}
