// common.cuh: helpers shared by the kernel files of gpuedu (this folder is on the include path).
//
// Every __global__ kernel in this folder orders its parameters the same way, so that a launch reads
// like an assignment, out = f(in), as in matmul_kernel1(C, A, B, M, N, K):
//   1. the pointers it writes: its outputs, and the buffers it reads and updates in place (weights,
//      optimizer state, the loss scaler's state); the main result first, e.g. Y before the saved Z,
//      dlogits before the loss;
//   2. the pointers it only reads (const), in the order the computation takes them (A before B);
//      optional device flags such as `const int* skip` (NULL: absent) come last among them, and a
//      table of addresses (nn_optim.cu's *_multi kernels) counts here: the kernel only reads the table;
//   3. sizes: shapes, counts, strides and leading dimensions, lengths of splits and chunks;
//   4. the other scalars and flags: coefficients (alpha, the learning rate), activation codes,
//      switches (relu, c_half).
// tests/test_kernels_loader.py checks what can be checked from the declarations: no pointer after a
// non-pointer, and no written pointer after a const one. Device helpers (not __global__) are free.
#pragma once

// Number of blocks (or tiles) of size d needed to cover n items: the last one may be partial,
// which is why every kernel guards its indices.
__host__ __device__ inline int ceil_div(int n, int d) { return (n + d - 1) / d; }

#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu

// Sum of v over the 32 lanes of a warp, by halving the distance each step (16, 8, 4, 2, 1).
// Every lane must call it (the mask names all 32); lane 0 ends up with the total
// (the other lanes hold partial sums).
__device__ inline float warp_reduce_sum(float v) {
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2)
        v += __shfl_down_sync(FULL_MASK, v, offset);
    return v;
}

// Maximum of v over the 32 lanes of a warp; with xor shuffles every lane ends up with the result.
__device__ inline float warp_allreduce_max(float v) {
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2)
        v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, offset));
    return v;
}

// Sum over the 32 lanes of a warp; with xor shuffles every lane ends up with the result.
__device__ inline float warp_allreduce_sum(float v) {
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2)
        v += __shfl_xor_sync(FULL_MASK, v, offset);
    return v;
}
