// common.cuh: helpers shared by the kernel files of gpuedu (this folder is on the include path).
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
