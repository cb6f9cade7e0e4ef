// wmma_gemm.cu: C = A @ B on tensor cores through nvcuda::wmma.
//
// A tensor core multiplies small matrix tiles in one warp-wide operation: with
// WMMA a warp holds a 16x16 tile of A and of B (FP16) in "fragments" spread over
// its 32 lanes' registers, and mma_sync adds their 16x16x16 product into a 16x16
// FP32 accumulator fragment.  The layout of a fragment across lanes is opaque:
// fragments are filled and emptied only with load_matrix_sync / store_matrix_sync.
//
// version 1 (wmma_gemm_kernel1): a block of 4 warps computes a 32x32 tile of C, one 16x16
//   tile per warp (2x2).  For each 16-wide step along K the block stages A's 32x16
//   and B's 16x32 tiles in shared memory, writing zeros past the matrix edges, so
//   any M, N, K works (the padding adds zero products).  Each warp then loads its
//   fragments from shared memory and issues one mma_sync.  The accumulator goes
//   through shared memory too, so the final write to C can be guarded per element.
//   A is M x K, B is K x N (row-major FP16), C is M x N row-major FP32.
//   blockDim must be (128, 1, 1); grid = (ceil(N/32), ceil(M/32)).
//
//   This is the plain version: no double buffering, no cp.async, one mma_sync per loaded
//   fragment, so it reaches only a small fraction of the tensor cores' peak (4.8 % of
//   cuBLAS's FP16 GEMM on an H200 at 4096^3, measured: benchmarks/results/nvidia-h200-fp16.json);
//   it shows the programming model.
//
// versions 2 and 3 (wmma_gemm_kernel2_nn, _tn, _nt, _tt; wmma_gemm_kernel3_*): C = alpha * op(A) @ op(B),
//   the design fast tensor-core GEMMs share (about 95% of cuBLAS on Ada with these pieces):
//   - Reuse per fragment.  A block of 8 warps (2 x 4) computes a 128x128 tile of C
//     (version 2), each warp a 64x32 warp tile = 4x2 accumulator fragments (64 FP32
//     registers per thread); per 16-wide step along K a warp loads 4 A and 2 B
//     fragments and issues 8 mma_sync, so each fragment feeds 2 or 4 products
//     instead of 1 (version 1): 2.7x less shared-memory traffic per tensor-core
//     operation.  Version 3: a 128x256 tile, 64x64 warp tiles (4x4 fragments, 128
//     accumulator registers), 8 loads for 16 mma_sync: 4x less than version 1, at
//     the price of one block per SM (registers) and more wasted work on the edges
//     of small matrices.
//   - A multistage pipeline.  K is walked in BK = 32 slices; STAGES = 3 slices of A
//     and B live in shared memory at once.  While the warps multiply slice k, the
//     copies of slices k+1 and k+2 are in flight, issued with cp.async
//     (__pipeline_memcpy_async, 16 bytes per copy, global -> shared without passing
//     through registers).  Bytes in flight per SM: version 2, 2 slices x 16 KB x 2
//     blocks = 64 KB; version 3, 2 x 24 KB x 1 block = 48 KB; both above the ~36 KB
//     that an SM's share of HBM bandwidth (4.8 TB/s / 132) times ~1 us of memory
//     latency needs (Little's law), so the loads stay hidden.
//     One __syncthreads per slice: after it every warp has finished the slice that
//     the next copies overwrite, and every thread's copies of this slice are visible.
//   - Padded shared rows.  Each row of a tile is padded by 8 halves (16 bytes):
//     rows 40, 136 or 264 halves (80, 272, 528 B) apart start 4 banks apart, so the
//     8 rows a fragment load reads at once hit 32 different banks (unpadded, 64,
//     256 or 512 B apart, they would pile up on the same banks).
//   - Layouts without copies.  op(A) = A or A^T: A^T is the same bytes read as a
//     col_major fragment from a tile staged K-major, so dW = X^T dZ and dX = dZ W^T
//     need no transposed copy.  n/t in the name: A, then B, plain or transposed.
//   - Any M, N, K.  Copies past an edge are zero-filled (the zfill of cp.async), so
//     edge tiles multiply zeros; the 16-byte path needs 16-byte aligned operands
//     whose rows are a multiple of 8 halves, otherwise each thread loads its chunk
//     element by element with guards (e.g. K = 37).
//   - Epilogue through shared memory.  Each warp scales its fragments by alpha,
//     stores them one at a time into a 16x20 float staging tile (in the pipeline's
//     memory, free after the loop) and writes them with guards as FP32 or FP16.
//   Shared memory (V2_SHARED_BYTES): 3 x (5120 + 5120) halves = 61,440 bytes
//   (version 2), 3 x (5120 + 10240) = 92,160 bytes (version 3), dynamic, above the
//   default 48 KB: the launcher raises the kernel's limit with
//   cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES).  blockDim (256, 1, 1), grid
//   (ceil(N / 128 or 256), ceil(M / 128)).  nvcc -Xptxas -v for sm_90: 94 registers
//   (version 2), 166 (version 3), no spills.  cp.async is sm_80+; below that,
//   cuda_pipeline.h itself turns __pipeline_memcpy_async into ordinary copies, so
//   the same source compiles for sm_75 (no overlap there, same results).
#include <cuda_fp16.h>
#include <mma.h>
#include <cuda_pipeline.h>

using namespace nvcuda;

#define WMMA_M 16
#define WMMA_N 16
#define WMMA_K 16
#define WARPS_M 2                      // warps stacked along M in a block
#define WARPS_N 2                      // and along N
#define BLOCK_M (WMMA_M * WARPS_M)     // 32 rows of C per block
#define BLOCK_N (WMMA_N * WARPS_N)     // 32 columns of C per block
#define THREADS1 (32 * WARPS_M * WARPS_N)              // version 1's blockDim.x: 128
#define STAGE_LOADS (BLOCK_M * WMMA_K / THREADS1)      // elements of each tile a thread stages: 4
static_assert(BLOCK_M * WMMA_K == WMMA_K * BLOCK_N && BLOCK_M * WMMA_K % THREADS1 == 0,
              "version 1 stages A's and B's tiles with the same number of loads per thread");

extern "C" __global__ void wmma_gemm_kernel1(float* __restrict__ C,
                                     const __half* __restrict__ A,
                                     const __half* __restrict__ B,
                                     int M, int N, int K)
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
        // 128 threads stage 512 elements of each tile, 4 each, zero past the edges.  The loop's
        // count is a constant, so nvcc unrolls it and each thread's 8 loads are in flight together
        // before the first store waits for one; a loop stepping by blockDim.x (known only at run
        // time) stays a loop, and each load then waits out the memory latency alone (on an H200
        // that made this kernel about twice as slow).
        __half a_val[STAGE_LOADS], b_val[STAGE_LOADS];
        #pragma unroll
        for (int r = 0; r < STAGE_LOADS; ++r) {
            int idx = threadIdx.x + r * THREADS1;
            int i = idx / WMMA_K, k = idx % WMMA_K;          // A's tile: row i, column k
            int gi = row0 + i, gk = k0 + k;
            a_val[r] = (gi < M && gk < K) ? A[gi * K + gk] : zero;
            int kb = idx / BLOCK_N, j = idx % BLOCK_N;       // B's tile: row kb, column j
            int gkb = k0 + kb, gj = col0 + j;
            b_val[r] = (gkb < K && gj < N) ? B[gkb * N + gj] : zero;
        }
        #pragma unroll
        for (int r = 0; r < STAGE_LOADS; ++r) {
            int idx = threadIdx.x + r * THREADS1;
            As[idx / WMMA_K][idx % WMMA_K] = a_val[r];
            Bs[idx / BLOCK_N][idx % BLOCK_N] = b_val[r];
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


// ---- versions 2 and 3 -----------------------------------------------------------------------
// Each pipelined version's shape: C tile per block (BM x BN), K slice per stage (BK), stages,
// and warps along M and N (warp tile BM / WARPS_M x BN / WARPS_N).
#define V2_BM 128                          // version 2: C tile per block 128 x 128, warp tiles 64 x 32
#define V2_BN 128
#define V2_BK 32                           // K slice per pipeline stage
#define V2_STAGES 3
#define V2_WARPS_M 2                       // 2 x 4 warps
#define V2_WARPS_N 4
#define V2_THREADS (32 * V2_WARPS_M * V2_WARPS_N)
#define V3_BM 128                          // version 3: 128 x 256, warp tiles 64 x 64
#define V3_BN 256
#define V3_BK 32
#define V3_STAGES 3
#define V3_WARPS_M 2
#define V3_WARPS_N 4
#define V3_THREADS (32 * V3_WARPS_M * V3_WARPS_N)
#define V2_PAD 8                           // halves of padding per shared row (16 bytes)
#define V2_EPI_LD (WMMA_N + 4)             // staging tile row: 20 floats (ldm multiple of 4)

// Shared memory of one operand's tile (either layout fits: rows BK wide, or BK rows of
// `wide` halves) and of the block: STAGES x (A tile, B tile).
#define V2_TILE_HALVES(wide, bk) ((wide) * ((bk) + V2_PAD) > (bk) * ((wide) + V2_PAD) ? \
                                  (wide) * ((bk) + V2_PAD) : (bk) * ((wide) + V2_PAD))
#define V2_SHARED_BYTES(bm, bn, bk, stages) ((stages) * (V2_TILE_HALVES(bm, bk) + V2_TILE_HALVES(bn, bk)) * 2)
// version 2: 3 x (5120 + 5120) halves = 61,440 bytes; version 3: 3 x (5120 + 10240) = 92,160 bytes

// Copy one tile (rows x cols halves, cols a multiple of 8) of a row-major matrix
// g [g_rows x g_cols, row stride ld] starting at (r0, c0) into shared memory s
// (row stride s_ld), zeros past the matrix's edges.  Each of the block's THREADS threads
// copies 8-half chunks: 16-byte cp.async when vec (g 16-byte aligned, ld a multiple of 8),
// element by element otherwise.
template <int THREADS>
__device__ __forceinline__ void v2_load_tile(__half* s, int s_ld, int rows, int cols,
                                             const __half* __restrict__ g, int g_rows, int g_cols,
                                             int ld, int r0, int c0, bool vec)
{
    const int chunks_per_row = cols / 8;
    for (int chunk = threadIdx.x; chunk < rows * chunks_per_row; chunk += THREADS) {
        int r = chunk / chunks_per_row, c = (chunk % chunks_per_row) * 8;
        int gr = r0 + r, gc = c0 + c;
        __half* dst = s + r * s_ld + c;
        // halves of this chunk inside the matrix: 0..8
        int valid = gr < g_rows ? min(max(g_cols - gc, 0), 8) : 0;
        if (vec) {
            // zfill = bytes not read: the source address is then never dereferenced
            // past the edge (a fully outside chunk reads nothing, from g itself).
            const __half* src = valid > 0 ? g + (size_t)gr * ld + gc : g;
            // A constant zfill in the common, whole-chunk case: cuda_pipeline.h turns a
            // run-time zfill into a switch over its 17 values.
            if (valid == 8) __pipeline_memcpy_async(dst, src, 16);
            else            __pipeline_memcpy_async(dst, src, 16, 16 - 2 * valid);
        } else {
            for (int e = 0; e < 8; ++e)
                dst[e] = e < valid ? g[(size_t)gr * ld + gc + e] : __float2half_rn(0.0f);
        }
    }
}

// A transposed operand is read as col_major fragments (element (r, c) at p[c * ldm + r]).
template <bool TRANSPOSED> struct v2_layout { typedef wmma::row_major type; };
template <> struct v2_layout<true> { typedef wmma::col_major type; };

// C = alpha * op(A) @ op(B) on a BM x BN tile per block.
// A is stored M x K (TRANS_A false) or K x M (true, op(A) = A^T), row stride lda;
// B is stored K x N (TRANS_B false) or N x K (true), row stride ldb; C is M x N,
// row-major, FP16 when c_half else FP32.
template <int BM, int BN, int BK, int STAGES, int WARPS_ALONG_M, int WARPS_ALONG_N, bool TRANS_A, bool TRANS_B>
__device__ __forceinline__ void wmma_gemm_pipelined(int M, int N, int K, float alpha,
                                                    const __half* __restrict__ A, int lda,
                                                    const __half* __restrict__ B, int ldb,
                                                    void* __restrict__ C, int c_half)
{
    // The block's dynamic shared memory: STAGES x (A tile, B tile), then the epilogue's staging tiles.
    extern __shared__ __align__(128) __half v2_smem[];
    constexpr int THREADS = 32 * WARPS_ALONG_M * WARPS_ALONG_N;
    constexpr int WM = BM / WARPS_ALONG_M;           // warp tile: 64 x 32 (v2) or 64 x 64 (v3)
    constexpr int WN = BN / WARPS_ALONG_N;
    constexpr int FM = WM / WMMA_M;                  // accumulator fragments per warp: 4 x 2 or 4 x 4
    constexpr int FN = WN / WMMA_N;
    constexpr int LD_K = BK + V2_PAD;                // 40: row stride of a tile whose rows are K-wide
    constexpr int LD_M = BM + V2_PAD;                // 136: of a K-major A tile
    constexpr int LD_N = BN + V2_PAD;                // 136 or 264: of a K-major B tile
    constexpr int A_TILE = V2_TILE_HALVES(BM, BK);
    constexpr int STAGE = A_TILE + V2_TILE_HALVES(BN, BK);
    using a_layout = typename v2_layout<TRANS_A>::type;
    using b_layout = typename v2_layout<TRANS_B>::type;

    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int warp_m = warp / WARPS_ALONG_N;         // v2, v3: 0..1, which 64-row half of the block tile
    const int warp_n = warp % WARPS_ALONG_N;         // v2, v3: 0..3, which quarter of its columns
    const int m0 = blockIdx.y * BM;
    const int n0 = blockIdx.x * BN;
    // The 16-byte path: aligned base and rows a multiple of 8 halves, so every chunk
    // (which starts at a column that is a multiple of 8) is 16-byte aligned.
    const bool vec_a = ((size_t)A % 16 == 0) && (lda % 8 == 0);
    const bool vec_b = ((size_t)B % 16 == 0) && (ldb % 8 == 0);
    const int k_tiles = (K + BK - 1) / BK;

    // Stage slice kt of op(A) (BM x BK) and op(B) (BK x BN) into stage s.
    auto load_stage = [&](int s, int kt) {
        __half* As = v2_smem + s * STAGE;
        __half* Bs = As + A_TILE;
        int k0 = kt * BK;
        if (TRANS_A) v2_load_tile<THREADS>(As, LD_M, BK, BM, A, K, M, lda, k0, m0, vec_a);   // As[k][m]
        else         v2_load_tile<THREADS>(As, LD_K, BM, BK, A, M, K, lda, m0, k0, vec_a);   // As[m][k]
        if (TRANS_B) v2_load_tile<THREADS>(Bs, LD_K, BN, BK, B, N, K, ldb, n0, k0, vec_b);   // Bs[n][k]
        else         v2_load_tile<THREADS>(Bs, LD_N, BK, BN, B, K, N, ldb, k0, n0, vec_b);   // Bs[k][n]
    };

    wmma::fragment<wmma::accumulator, WMMA_M, WMMA_N, WMMA_K, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    // Prologue: slices 0 .. STAGES-2 in flight, one commit (batch) per slice, even an
    // empty one, so that wait_prior below always counts slices.
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles) load_stage(s, s);
        __pipeline_commit();
    }

    for (int kt = 0; kt < k_tiles; ++kt) {
        __pipeline_wait_prior(STAGES - 2);   // this thread's copies of slice kt have landed
        __syncthreads();   // everyone's copies of slice kt are visible, and every warp is done
                           // with slice kt-1, whose stage the copies issued next overwrite
        int next = kt + STAGES - 1;
        if (next < k_tiles) load_stage(next % STAGES, next);
        __pipeline_commit();

        const __half* As = v2_smem + (kt % STAGES) * STAGE;
        const __half* Bs = As + A_TILE;
#pragma unroll
        for (int kk = 0; kk < BK; kk += WMMA_K) {
            wmma::fragment<wmma::matrix_a, WMMA_M, WMMA_N, WMMA_K, __half, a_layout> a_frag[FM];
            wmma::fragment<wmma::matrix_b, WMMA_M, WMMA_N, WMMA_K, __half, b_layout> b_frag[FN];
#pragma unroll
            for (int i = 0; i < FM; ++i) {
                int m = warp_m * WM + i * WMMA_M;
                // element (m, k) of op(A): As[m][k], or As[k][m] read column-major
                if (TRANS_A) wmma::load_matrix_sync(a_frag[i], As + kk * LD_M + m, LD_M);
                else         wmma::load_matrix_sync(a_frag[i], As + m * LD_K + kk, LD_K);
            }
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                int n = warp_n * WN + j * WMMA_N;
                // element (k, n) of op(B): Bs[k][n], or Bs[n][k] read column-major
                if (TRANS_B) wmma::load_matrix_sync(b_frag[j], Bs + n * LD_K + kk, LD_K);
                else         wmma::load_matrix_sync(b_frag[j], Bs + kk * LD_N + n, LD_N);
            }
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j)
                    wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);   // FP32 sums
        }
    }

    // Epilogue: the pipeline's memory becomes a staging tile of 16 x 20 floats per warp.
    __pipeline_wait_prior(0);   // no copy (of an empty batch) may still land in it
    __syncthreads();            // every warp is done reading the last slice
    float* stage = reinterpret_cast<float*>(v2_smem) + warp * WMMA_M * V2_EPI_LD;
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) {
#pragma unroll
            for (int e = 0; e < acc[i][j].num_elements; ++e) acc[i][j].x[e] *= alpha;
            wmma::store_matrix_sync(stage, acc[i][j], V2_EPI_LD, wmma::mem_row_major);
            __syncwarp();   // the fragment is in the staging tile before the lanes read it
            int row0 = m0 + warp_m * WM + i * WMMA_M;
            int col0 = n0 + warp_n * WN + j * WMMA_N;
            for (int e = lane; e < WMMA_M * WMMA_N; e += 32) {
                int r = e / WMMA_N, c = e % WMMA_N;
                int gi = row0 + r, gj = col0 + c;
                if (gi < M && gj < N) {   // the padded edge of C is not written
                    float v = stage[r * V2_EPI_LD + c];
                    if (c_half) reinterpret_cast<__half*>(C)[(size_t)gi * N + gj] = __float2half_rn(v);
                    else        reinterpret_cast<float*>(C)[(size_t)gi * N + gj] = v;
                }
            }
            __syncwarp();   // the lanes have read it before the next fragment overwrites it
        }
}

// The four layouts of each version: n = stored as op() wants it, t = transposed (see above).
#define PIPELINED_KERNEL(name, v, ta, tb)                                                          \
    extern "C" __global__ void __launch_bounds__(V##v##_THREADS) name(                             \
        void* __restrict__ C, const __half* __restrict__ A, const __half* __restrict__ B,          \
        int M, int N, int K, int lda, int ldb, float alpha, int c_half)                            \
    {                                                                                              \
        wmma_gemm_pipelined<V##v##_BM, V##v##_BN, V##v##_BK, V##v##_STAGES, V##v##_WARPS_M,         \
                            V##v##_WARPS_N, ta, tb>(M, N, K, alpha, A, lda, B, ldb, C, c_half);    \
    }
#ifndef WMMA_GEMM_NO_KERNELS   // a file that includes this one for its template can leave these out
PIPELINED_KERNEL(wmma_gemm_kernel2_nn, 2, false, false)
PIPELINED_KERNEL(wmma_gemm_kernel2_tn, 2, true, false)
PIPELINED_KERNEL(wmma_gemm_kernel2_nt, 2, false, true)
PIPELINED_KERNEL(wmma_gemm_kernel2_tt, 2, true, true)
PIPELINED_KERNEL(wmma_gemm_kernel3_nn, 3, false, false)
PIPELINED_KERNEL(wmma_gemm_kernel3_tn, 3, true, false)
PIPELINED_KERNEL(wmma_gemm_kernel3_nt, 3, false, true)
PIPELINED_KERNEL(wmma_gemm_kernel3_tt, 3, true, true)
#endif
