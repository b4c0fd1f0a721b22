// A ring-buffer write (inplace/examples/ring.py): rows [B, F] into buffer [C, F] at slots (pos + b) mod C, then
// pos = (pos + B) mod C. Parameters as TensorRT passes an AOT plugin's: input pointers (buffer, pos, rows), int32
// extra arguments (C, F, B), output pointers (buffer and pos: their inputs' memory). One block: every thread reads
// pos before the barrier, after which thread 0 advances it. Where B > C only the last C rows are written (each
// slot once, as a sequential write would leave it).

#define RING_WRITE(NAME, T)                                                                                          \
    extern "C" __global__ void NAME(const T* buffer_in, const long long* pos_in, const T* rows, int capacity,      \
                                    int features, int count, T* buffer_out, long long* pos_out)                   \
    {                                                                                                              \
        if (capacity <= 0 || features <= 0 || count < 0) return;                                                   \
        long long start = pos_in[0] % capacity;                                                                    \
        if (start < 0) start += capacity;                                                                          \
        const int first = count > capacity ? count - capacity : 0;                                                 \
        const long long total = (long long)(count - first) * features;                                             \
        for (long long i = threadIdx.x; i < total; i += blockDim.x) {                                              \
            const long long b = first + i / features;                                                              \
            const long long f = i % features;                                                                      \
            buffer_out[((start + b) % capacity) * features + f] = rows[b * features + f];                          \
        }                                                                                                          \
        __syncthreads();                                                                                           \
        if (threadIdx.x == 0) pos_out[0] = (start + count) % capacity;                                             \
    }

RING_WRITE(ring_write_f32, float)
RING_WRITE(ring_write_f16, unsigned short)  // float16 rows are copied, never computed on
