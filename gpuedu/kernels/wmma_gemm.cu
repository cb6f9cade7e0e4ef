// wmma_gemm.cu: C = A @ B on tensor cores through nvcuda::wmma.
//
// A tensor core multiplies small matrix tiles in one warp-wide operation: with
// WMMA a warp holds a 16x16 tile of A and of B (FP16) in "fragments" spread over
// its 32 lanes' registers, and mma_sync adds their 16x16x16 product into a 16x16
// FP32 accumulator fragment.  The layout of a fragment across lanes is opaque:
// fragments are filled and emptied only with load_matrix_sync / store_matrix_sync.
//
// version 1 (wmma_gemm): a block of 4 warps computes a 32x32 tile of C, one 16x16
//   tile per warp (2x2).  For each 16-wide step along K the block stages A's 32x16
//   and B's 16x32 tiles in shared memory, writing zeros past the matrix edges, so
//   any M, N, K works (the padding adds zero products).  Each warp then loads its
//   fragments from shared memory and issues one mma_sync.  The accumulator goes
//   through shared memory too, so the final write to C can be guarded per element.
//   A is M x K, B is K x N (row-major FP16), C is M x N row-major FP32.
//   blockDim must be (128, 1, 1); grid = (ceil(N/32), ceil(M/32)).
//
// This is the plain version: no double buffering, no cp.async, so it reaches only a
// small fraction of the tensor cores' peak; it shows the programming model.
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

#define WMMA_M 16
#define WMMA_N 16
#define WMMA_K 16
#define WARPS_M 2                      // warps stacked along M in a block
#define WARPS_N 2                      // and along N
#define BLOCK_M (WMMA_M * WARPS_M)     // 32 rows of C per block
#define BLOCK_N (WMMA_N * WARPS_N)     // 32 columns of C per block

extern "C" __global__ void wmma_gemm(int M, int N, int K,
                                     const __half* __restrict__ A,
                                     const __half* __restrict__ B,
                                     float* __restrict__ C)
{
    // load_matrix_sync / store_matrix_sync need 256-bit aligned pointers.
    __shared__ __align__(32) __half As[BLOCK_M][WMMA_K];
    __shared__ __align__(32) __half Bs[WMMA_K][BLOCK_N];
    __shared__ __align__(32) float Cs[WARPS_M * WARPS_N][WMMA_M][WMMA_N];

    const int warp = threadIdx.x / 32;                   // 0..3
    const int lane = threadIdx.x % 32;
    const int warp_row = warp / WARPS_N;                 // which 16-row band of the block tile
    const int warp_col = warp % WARPS_N;
    const int row0 = blockIdx.y * BLOCK_M;
    const int col0 = blockIdx.x * BLOCK_N;
    const __half zero = __float2half_rn(0.0f);

    wmma::fragment<wmma::matrix_a, WMMA_M, WMMA_N, WMMA_K, __half, wmma::row_major> a_frag;
    wmma::fragment<wmma::matrix_b, WMMA_M, WMMA_N, WMMA_K, __half, wmma::row_major> b_frag;
    wmma::fragment<wmma::accumulator, WMMA_M, WMMA_N, WMMA_K, float> acc;
    wmma::fill_fragment(acc, 0.0f);

    for (int k0 = 0; k0 < K; k0 += WMMA_K) {
        // 128 threads stage 512 elements of each tile, 4 each, zero past the edges.
        for (int idx = threadIdx.x; idx < BLOCK_M * WMMA_K; idx += blockDim.x) {
            int i = idx / WMMA_K, k = idx % WMMA_K;
            int gi = row0 + i, gk = k0 + k;
            As[i][k] = (gi < M && gk < K) ? A[gi * K + gk] : zero;
        }
        for (int idx = threadIdx.x; idx < WMMA_K * BLOCK_N; idx += blockDim.x) {
            int k = idx / BLOCK_N, j = idx % BLOCK_N;
            int gk = k0 + k, gj = col0 + j;
            Bs[k][j] = (gk < K && gj < N) ? B[gk * N + gj] : zero;
        }
        __syncthreads();   // tiles complete before the warps load fragments from them

        // leading dimensions: As rows are WMMA_K halves apart, Bs rows BLOCK_N halves
        wmma::load_matrix_sync(a_frag, &As[warp_row * WMMA_M][0], WMMA_K);
        wmma::load_matrix_sync(b_frag, &Bs[0][warp_col * WMMA_N], BLOCK_N);
        wmma::mma_sync(acc, a_frag, b_frag, acc);        // acc += a @ b, 16x16x16, FP32 sums
        __syncthreads();   // fragments loaded before the next step overwrites the tiles
    }

    wmma::store_matrix_sync(&Cs[warp][0][0], acc, WMMA_N, wmma::mem_row_major);
    __syncwarp();          // the warp's tile is in shared memory before its lanes read it
    for (int e = lane; e < WMMA_M * WMMA_N; e += 32) {
        int i = e / WMMA_N, j = e % WMMA_N;
        int gi = row0 + warp_row * WMMA_M + i;
        int gj = col0 + warp_col * WMMA_N + j;
        if (gi < M && gj < N) C[gi * N + gj] = Cs[warp][i][j];   // drop the padded edge
    }
}
