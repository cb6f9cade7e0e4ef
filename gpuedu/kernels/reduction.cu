// reduction.cu: the sum of n floats, after Mark Harris's "Optimizing Parallel Reduction in CUDA".
//
// Each block reduces a slice of the input to one partial sum, out[blockIdx.x]; the launcher then
// reduces the partial sums the same way until one value is left (two or more passes), except for
// version 7, whose last block to finish adds the partial sums: one launch.
//
// version 1: interleaved addressing: at step s, threads whose id is a multiple of 2s add the value
//            s away. `tid % (2*s)` leaves most lanes of every warp idle (a divergent branch).
// version 2: interleaved addressing with contiguous threads: thread t works on index 2*s*t, so
//            whole warps are busy or idle; the strided shared-memory access now has bank conflicts.
// version 3: sequential addressing: at step s the first s threads add element t + s; no
//            divergence within a busy warp and consecutive threads touch consecutive banks.
// version 4: first add during load: each block reads 2*blockDim elements and adds a pair while
//            loading, so no thread is idle in the first step and half the blocks are needed.
// version 5: as 4, then once 64 values are left the last warp finishes with __shfl_down_sync
//            (registers, no shared memory, no __syncthreads).
// version 6: many elements per thread: a grid-stride loop sums into a register, each warp reduces
//            with shuffles, one shared slot per warp, and the first warp sums those slots.
//            The loop reads float4s, four in flight per thread before it adds them (a read-only
//            stream needs many bytes in flight to reach the memory bandwidth).
//            A grid of a few blocks per SM (at most 1024 blocks) covers any n.
// version 7: as 6, in one launch: each block writes its partial sum, takes a ticket with one
//            atomicInc, and the block that draws the last ticket adds the partial sums (in block
//            order, so the result's bits do not vary by run) into out[0]. No second launch and no
//            zeroing of out before it: on a GPU each of those leaves the device idle while the host
//            issues the next command. The ticket wraps back to 0 (atomicInc's wrap), ready for the
//            next launch.
//            Napkin math on an H200: 4 bytes an element at ~4.3 TB/s (the device copy's rate) is
//            0.93 ns per thousand elements; 1024 blocks x 256 threads x 64 bytes = 16 MB in flight.
//
// Versions 1-5 need a power-of-two block size (the tree halves it); 5-7 need at least 32 threads.
// Versions 1-5 take the shared array's size at launch: shared = blockDim.x * sizeof(float).
#include "common.cuh"

extern "C" __global__ void reduce_kernel1(float* out, const float* in, int n) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? in[i] : 0.0f;  // the partial last block pads with the identity, 0
    __syncthreads();                       // all loads are in shared memory before anyone adds
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0)            // divergent: only every (2s)-th lane works
            sdata[tid] += sdata[tid + s];
        __syncthreads();                   // this step's sums are written before the next reads them
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

extern "C" __global__ void reduce_kernel2(float* out, const float* in, int n) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        unsigned int index = 2 * s * tid;  // the first blockDim/(2s) threads do the work
        if (index < blockDim.x)
            sdata[index] += sdata[index + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

extern "C" __global__ void reduce_kernel3(float* out, const float* in, int n) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s)                       // the lower half adds the upper half onto itself
            sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

extern "C" __global__ void reduce_kernel4(float* out, const float* in, int n) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    // Each block owns 2*blockDim consecutive elements: thread t adds elements t and t + blockDim.
    unsigned int i = blockIdx.x * (2 * blockDim.x) + threadIdx.x;
    float v = (i < n) ? in[i] : 0.0f;
    if (i + blockDim.x < n) v += in[i + blockDim.x];
    sdata[tid] = v;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s)
            sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

extern "C" __global__ void reduce_kernel5(float* out, const float* in, int n) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (2 * blockDim.x) + threadIdx.x;
    float v = (i < n) ? in[i] : 0.0f;
    if (i + blockDim.x < n) v += in[i + blockDim.x];
    sdata[tid] = v;
    __syncthreads();
    // The tree in shared memory stops when 64 values are left ...
    for (unsigned int s = blockDim.x / 2; s > 32; s >>= 1) {
        if (tid < s)
            sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    // ... and the first warp adds them pairwise into 32 registers and finishes with shuffles.
    // (With a 32-thread block there is no upper half to add.)
    if (tid < 32) {
        v = sdata[tid];
        if (tid + 32 < blockDim.x) v += sdata[tid + 32];
        v = warp_reduce_sum(v);  // all 32 lanes of warp 0 take part, as the full mask promises
        if (tid == 0) out[blockIdx.x] = v;
    }
}

// The sum of v over the block: each warp reduces with shuffles, one shared slot per warp, and the
// first warp adds the slots. Thread 0 returns the total (the other threads' values are partial).
// Every thread of the block must call it; a second call needs a __syncthreads() between the two
// (warp 0 may still be reading the slots of the first).
__device__ inline float block_reduce_sum(float v) {
    __shared__ float warp_sums[WARP_SIZE];  // one slot per warp: at most 1024 / 32 = 32 warps
    int lane = threadIdx.x % WARP_SIZE;
    int warp = threadIdx.x / WARP_SIZE;
    int num_warps = (blockDim.x + WARP_SIZE - 1) / WARP_SIZE;
    v = warp_reduce_sum(v);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();  // every warp's sum is in shared memory before warp 0 reads them
    if (warp == 0) {
        v = (lane < num_warps) ? warp_sums[lane] : 0.0f;  // fewer than 32 warps: pad with 0
        v = warp_reduce_sum(v);
    }
    return v;
}

// Shared by versions 6 and 7: the grid-stride sum of this thread's elements, reduced over the
// block; thread 0 returns the block's total (the other threads' return values are partial).
// The loop reads float4s, four of them before adding any: 64 bytes a thread in flight, which is what
// keeps a memory system like an H200's (about 30 KB in flight per SM to cover its latency) busy.
// float4 loads need 16-byte aligned addresses, so the 0-3 elements before the first aligned one,
// and the 0-3 after the last whole float4, are added one at a time.
__device__ inline float block_sum_grid_stride(const float* in, int n) {
    int head = (int)(((16 - reinterpret_cast<size_t>(in) % 16) % 16) / sizeof(float));
    head = min(head, n);
    const float4* in4 = reinterpret_cast<const float4*>(in + head);
    int n4 = (n - head) / 4;                          // whole float4s after the head
    int tid = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
    float v = 0.0f;
    int i = tid;
    for (; i + 3 * stride < n4; i += 4 * stride) {    // four independent loads, then the adds
        float4 a = in4[i], b = in4[i + stride], c = in4[i + 2 * stride], d = in4[i + 3 * stride];
        v += ((a.x + a.y) + (a.z + a.w)) + ((b.x + b.y) + (b.z + b.w))
           + ((c.x + c.y) + (c.z + c.w)) + ((d.x + d.y) + (d.z + d.w));
    }
    for (; i < n4; i += stride) {                     // the last fewer-than-4 rounds
        float4 a = in4[i];
        v += (a.x + a.y) + (a.z + a.w);
    }
    if (tid < head) v += in[tid];                     // the unaligned head ...
    int tail = head + 4 * n4 + tid;
    if (tail < n) v += in[tail];                      // ... and the tail: fewer than 4 each
    return block_reduce_sum(v);
}

extern "C" __global__ void reduce_kernel6(float* out, const float* in, int n) {
    float v = block_sum_grid_stride(in, n);
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}

extern "C" __global__ void reduce_kernel7(float* out, float* partial, unsigned int* ticket,
                                          const float* in, int n) {
    __shared__ bool last;  // did this block draw the last ticket?
    float v = block_sum_grid_stride(in, n);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = v;
        // Make the partial sum visible to every block before the ticket says it is there.
        __threadfence();
        last = atomicInc(ticket, gridDim.x - 1) == gridDim.x - 1;
    }
    __syncthreads();  // every thread sees `last`; warp 0 is done with block_reduce_sum's slots
    if (last) {
        // The other blocks' partial sums: read through L2 (__ldcg), where their writes went,
        // not from a line this SM's L1 may hold from before.
        float s = 0.0f;
        for (int i = threadIdx.x; i < gridDim.x; i += blockDim.x) s += __ldcg(&partial[i]);
        s = block_reduce_sum(s);
        if (threadIdx.x == 0) out[0] = s;
    }
}
