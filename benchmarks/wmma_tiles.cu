// wmma_tiles.cu: the pipelined tensor-core GEMM of gpuedu/kernels/wmma_gemm.cu at other shapes, for
// benchmarks/gpu_probe.py's tile sweep (which shape feeds a given GPU's tensor cores best).
//
// Each kernel is wmma_gemm_pipelined<BM, BN, BK, STAGES, WARPS_M, WARPS_N, TRANS_A, TRANS_B>, named
// tile_<BM>x<BN>x<BK>_s<STAGES>_w<WARPS_M>x<WARPS_N>_<layout>; same parameters as wmma_gemm_kernel2_*.
// A _b<N> suffix: __launch_bounds__ also asks for N blocks per SM, which caps the registers per thread
// (65,536 / (N x threads)) so that more warps fit on an SM.
#define WMMA_GEMM_NO_KERNELS
#include "wmma_gemm.cu"

#define TILE_KERNEL(bm, bn, bk, st, wm, wn, layout, ta, tb)                                           \
    extern "C" __global__ void __launch_bounds__(32 * wm * wn)                                        \
    tile_##bm##x##bn##x##bk##_s##st##_w##wm##x##wn##_##layout(                                        \
        void* __restrict__ C, const __half* __restrict__ A, const __half* __restrict__ B,             \
        int M, int N, int K, int lda, int ldb, float alpha, int c_half)                               \
    {                                                                                                 \
        wmma_gemm_pipelined<bm, bn, bk, st, wm, wn, ta, tb>(M, N, K, alpha, A, lda, B, ldb, C, c_half); \
    }
#define TILE_LAYOUTS(bm, bn, bk, st, wm, wn)                      \
    TILE_KERNEL(bm, bn, bk, st, wm, wn, nn, false, false)         \
    TILE_KERNEL(bm, bn, bk, st, wm, wn, tn, true, false)          \
    TILE_KERNEL(bm, bn, bk, st, wm, wn, nt, false, true)

// The shapes gpu_probe.py sweeps (keep its TILE_SHAPES in step with this list).
TILE_LAYOUTS(128, 128, 32, 3, 2, 4)   // version 2
TILE_LAYOUTS(128, 128, 64, 3, 2, 4)   // a deeper K slice: half the barriers per FLOP
TILE_LAYOUTS(128, 128, 32, 4, 2, 4)   // one more stage in flight
TILE_LAYOUTS(128, 128, 64, 4, 2, 4)
TILE_LAYOUTS(128, 256, 32, 3, 2, 4)   // version 3
TILE_LAYOUTS(128, 256, 64, 3, 2, 4)
TILE_LAYOUTS(256, 128, 32, 3, 4, 2)   // 64 x 64 warp tiles, taller
TILE_LAYOUTS(256, 128, 64, 3, 4, 2)
TILE_LAYOUTS(128, 128, 32, 3, 2, 2)   // 4 warps of 64 x 64: more blocks per SM
TILE_LAYOUTS(128, 128, 64, 3, 2, 2)
TILE_LAYOUTS(128, 128, 32, 4, 2, 2)
TILE_LAYOUTS(128, 128, 64, 4, 2, 2)

#define TILE_KERNEL_B(bm, bn, bk, st, wm, wn, b, layout, ta, tb)                                      \
    extern "C" __global__ void __launch_bounds__(32 * wm * wn, b)                                     \
    tile_##bm##x##bn##x##bk##_s##st##_w##wm##x##wn##_b##b##_##layout(                                \
        void* __restrict__ C, const __half* __restrict__ A, const __half* __restrict__ B,             \
        int M, int N, int K, int lda, int ldb, float alpha, int c_half)                               \
    {                                                                                                 \
        wmma_gemm_pipelined<bm, bn, bk, st, wm, wn, ta, tb>(M, N, K, alpha, A, lda, B, ldb, C, c_half); \
    }
#define TILE_LAYOUTS_B(bm, bn, bk, st, wm, wn, b)                  \
    TILE_KERNEL_B(bm, bn, bk, st, wm, wn, b, nn, false, false)     \
    TILE_KERNEL_B(bm, bn, bk, st, wm, wn, b, tn, true, false)      \
    TILE_KERNEL_B(bm, bn, bk, st, wm, wn, b, nt, false, true)

TILE_LAYOUTS_B(128, 128, 32, 3, 2, 4, 3)   // version 2's shape, 3 blocks (24 warps) per SM: <= 80 registers
TILE_LAYOUTS_B(128, 128, 32, 2, 2, 4, 4)   // 2 stages, 4 blocks (32 warps) per SM: <= 64 registers
