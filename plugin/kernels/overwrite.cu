// Row overwrite in place: state[index[e], :] = src[e, :] for every edge e. One kernel, one thread per word of a
// row: O(E F), nothing of size N, no workspace. Both plugins launch it: the Python plugin from a CUBIN of this
// file (plugin/kernels/overwrite.py), the AOT plugin from its PTX (aliased_io::overwrite_rows,
// plugin/overwrite_op.py), so the parameters follow TensorRT's AOT order: input pointers, extra int32
// arguments, output pointers (the aliased output's pointer is its input's again).
//
// Rules:
// - Where an index repeats, every word of that row takes one of its edges' words, which one is undefined (as
//   with ONNX's ScatterND and torch's CUDA index_copy_): the edges' writes race. Rows written once are exact.
// - Rows are copied bit for bit (no arithmetic), 16, 8, 4 or 2 bytes at a time: the widest word that divides a
//   row and both buffers' alignment.
// - Whatever the buffers hold (TensorRT may time a plugin on made-up inputs), state is written only at rows in
//   [0, num_nodes): other index values are skipped.

typedef long long i64;

#define OVERWRITE_THREADS 256  // plugin/kernels/aot.py THREADS_PER_BLOCK

template <typename Word>
__device__ __forceinline__ void overwrite_copy(const Word* __restrict__ src, const i64* __restrict__ index,
                                               i64 num_nodes, int num_edges, int words, Word* state_out) {
    const i64 total = (i64)num_edges * words;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
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
        const Word value = __ldg(src + i);  // both loads in flight before the branch (src is in bounds)
        const i64 node = __ldg(index + edge);
        if (node < 0 || node >= num_nodes) continue;
        state_out[node * words + w] = value;
    }
}

__device__ __forceinline__ void overwrite_rows(const void* src, const i64* index, int num_nodes, int num_edges,
                                               int row_bytes, void* state_out) {
    if (row_bytes <= 0) return;
    const unsigned long long alignment = (unsigned long long)src | (unsigned long long)state_out | row_bytes;
    if ((alignment & 15u) == 0u) {
        overwrite_copy((const uint4*)src, index, num_nodes, num_edges, row_bytes / 16, (uint4*)state_out);
    } else if ((alignment & 7u) == 0u) {
        overwrite_copy((const uint2*)src, index, num_nodes, num_edges, row_bytes / 8, (uint2*)state_out);
    } else if ((alignment & 3u) == 0u) {
        overwrite_copy((const unsigned*)src, index, num_nodes, num_edges, row_bytes / 4, (unsigned*)state_out);
    } else {
        overwrite_copy((const unsigned short*)src, index, num_nodes, num_edges, row_bytes / 2,
                       (unsigned short*)state_out);
    }
}

extern "C" __global__ void __launch_bounds__(OVERWRITE_THREADS)
overwrite_rows_f32(const float* state_in, const float* src, const i64* index,
                   int num_nodes, int num_edges, int num_features,
                   float* state_out) {
    overwrite_rows(src, index, num_nodes, num_edges, num_features * 4, state_out);
}

extern "C" __global__ void __launch_bounds__(OVERWRITE_THREADS)
overwrite_rows_f16(const unsigned short* state_in, const unsigned short* src, const i64* index,
                   int num_nodes, int num_edges, int num_features,
                   unsigned short* state_out) {
    overwrite_rows(src, index, num_nodes, num_edges, num_features * 2, state_out);
}
