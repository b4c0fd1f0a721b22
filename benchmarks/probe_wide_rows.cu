// Probe kernel of issue 26 item 3 (benchmarks/probe_wide_rows.py compiles it for sm_90): wide float32 rows
// (F = 64, 256 bytes) added into the state with Hopper's bulk reduce. Each warp takes UNROLL edges at a time:
// its lanes load the rows (8 bytes each per row), write them to shared memory, fence them for the async proxy,
// and lane 0 issues one cp.reduce.async.bulk .add.f32 per row (the L2 adds the row into state[index[e]]) and
// adds the edge's count. A ring of 2 x UNROLL row buffers per warp: before a buffer is rewritten, lane 0 waits
// until the bulk group that read it is done reading. Out-of-range targets are skipped. Not shipped.
#ifndef UNROLL
#define UNROLL 4
#endif
#define FEATURES 64
#define WARPS 8

extern "C" __global__ void __launch_bounds__(WARPS * 32)
bulk_reduce_rows(const float* __restrict__ src, const long long* __restrict__ index, long long num_edges,
                 long long num_nodes, float* __restrict__ state, unsigned long long* __restrict__ counts) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __shared__ __align__(128) float rows[WARPS][2 * UNROLL][FEATURES];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const long long first = ((long long)blockIdx.x * WARPS + warp) * UNROLL;
    const long long stride = (long long)gridDim.x * WARPS * UNROLL;
    int half = 0;
    for (long long base = first; base < num_edges; base += stride) {
        long long node[UNROLL];
        float2 value[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            const long long e = base + k;
            node[k] = e < num_edges ? __ldg(index + e) : -1;
            value[k] = e < num_edges ? __ldg(reinterpret_cast<const float2*>(src + e * FEATURES) + lane)
                                     : make_float2(0.0f, 0.0f);
        }
        // the group issued two rounds ago read this half of the ring: wait until at most one group is pending
        if (lane == 0) asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
        __syncwarp();
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) reinterpret_cast<float2*>(rows[warp][half * UNROLL + k])[lane] = value[k];
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncwarp();
        if (lane == 0) {
#pragma unroll
            for (int k = 0; k < UNROLL; ++k) {
                if (node[k] < 0 || node[k] >= num_nodes) continue;
                const unsigned from = (unsigned)__cvta_generic_to_shared(rows[warp][half * UNROLL + k]);
                asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;"
                             ::"l"(state + node[k] * FEATURES), "r"(from), "n"(FEATURES * 4) : "memory");
                if (counts != nullptr) atomicAdd(reinterpret_cast<unsigned*>(counts + node[k]), 1u);
            }
            asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        }
        half ^= 1;
    }
    if (lane == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}
