// gemm_warptile.cuh: the warp-tiled, double-buffered GEMM main loop behind matmul_kernel7 (matmul.cu)
// and every GEMM of the dense layer (nn_dense.cu).
//
// It computes one block tile of C = op(A) op(B) into registers and leaves the epilogue (the stores,
// a bias, an activation) to the kernel that calls it. op(A) is M x K and op(B) is K x N, each stored
// row-major either as itself or as its transpose:
//
//   A_TRANS = false: op(A)(m, k) = A[m * lda + k]   (A is M x K)     the forward X W, and dZ in dZ W^T
//   A_TRANS = true:  op(A)(m, k) = A[k * lda + m]   (A is K x M)     X in dW = X^T dZ
//   B_TRANS = false: op(B)(k, n) = B[k * ldb + n]   (B is K x N)
//   B_TRANS = true:  op(B)(k, n) = B[n * ldb + k]   (B is N x K)     W in dX = dZ W^T
//
// Each layout loads its tile with float4s along the dimension that is contiguous in memory, so a
// transposed operand is read as coalesced as a plain one; only the order of the stores into shared
// memory differs.
//
// The design (siboehm's "warptiling" SGEMM, plus double buffering):
// - block tile: the block owns BM x BN of C and steps through K in slabs of BK. Shared memory holds
//   the slab of op(A) as As[k][m] and of op(B) as Bs[k][n], so that for a fixed k the values a thread
//   needs are consecutive (one 16-byte shared load for 4 of them).
// - warp tile: warp w owns a WM x WN piece of the block tile. It covers it in WM_ITERS x WN_ITERS steps
//   of a (WM / WM_ITERS) x (WN / WN_ITERS) sub-tile, in which each of the 32 lanes owns a 4 x 4 patch.
//   A lane therefore accumulates (4 * WM_ITERS) x (4 * WN_ITERS) results in registers. Per k it loads
//   WM_ITERS + WN_ITERS float4s from shared memory and does 16 * WM_ITERS * WN_ITERS FMAs; the 32
//   lanes of a warp read 8 (A) and 4 (B) different float4s, all in one 128-byte row: broadcasts, no
//   bank conflicts.
// - double buffering: two copies of As and Bs. While the block multiplies slab t out of one copy, each
//   thread's float4 loads of slab t + 1 are already in flight from global memory into registers; they
//   are stored into the other copy after the math, so one __syncthreads() per slab suffices and the
//   global-memory latency hides behind the FMAs.
// - edges: loads past M, N or K fill zeros (which add nothing), so any M, N, K works; the float4 fast
//   path needs the row length (lda, ldb) to be a multiple of 4 (16-byte aligned rows), else the
//   same loads go one guarded float at a time.
// - every output sums its products in ascending k into one accumulator, exactly as the simpler
//   kernels of the course do: changing the tile shape does not change a single bit of the result.
#pragma once
#include "common.cuh"

// A tile shape. THREADS = 32 * (BM / WM) * (BN / WN); each lane of a warp owns a 4 x 4 patch of every
// sub-tile, so a sub-tile must be exactly 32 patches.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int WM_ITERS_, int WN_ITERS_>
struct WarpTile {
    static constexpr int BM = BM_, BN = BN_, BK = BK_;            // block tile and K slab
    static constexpr int WM = WM_, WN = WN_;                        // one warp's piece
    static constexpr int WM_ITERS = WM_ITERS_, WN_ITERS = WN_ITERS_;
    static constexpr int WSUB_M = WM / WM_ITERS, WSUB_N = WN / WN_ITERS;   // one sub-tile
    static constexpr int LANES_N = WSUB_N / 4;                      // lanes across a sub-tile's columns
    static constexpr int WARPS_N = BN / WN;                         // warps across the block tile
    static constexpr int THREADS = 32 * (BM / WM) * (BN / WN);
    static constexpr int ACC_M = 4 * WM_ITERS, ACC_N = 4 * WN_ITERS; // a thread's results
    static constexpr int PAD = 4;   // shared rows of BM + 4 floats stay 16-byte aligned, and the
                                    // transposing stores conflict 2-way instead of 4-way
    static constexpr int A_LOADS = BM * BK / 4 / THREADS;          // float4s a thread loads a slab
    static constexpr int B_LOADS = BK * BN / 4 / THREADS;
    static_assert((WSUB_M / 4) * (WSUB_N / 4) == 32, "a sub-tile must hold one 4x4 patch per lane");
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % WM_ITERS == 0 && WN % WN_ITERS == 0, "tiles must nest");
    static_assert(A_LOADS * THREADS * 4 == BM * BK && B_LOADS * THREADS * 4 == BK * BN,
                  "each thread must load the same whole number of float4s of each slab");
};

// The tile shapes the course uses (gpuedu/ops/gemm.py and ops/dense.py read them; registers and shared memory per
// thread/block as reported by `nvcc -cubin -arch=sm_90 -Xptxas -v`, see the kernels' headers):
//   128 x 128: 8 warps of 64 x 32, 8 x 8 results a thread: the big-GEMM shape (matmul v7)
//   64 x 64:   4 warps of 32 x 32, 4 x 8 results a thread: when 128 x 128 gives too few blocks
//   32 x 32:   2 warps of 32 x 16, 4 x 4 results a thread: small batches (M = 128)
//   64 x 16:   2 warps of 32 x 16, for narrow outputs (N <= 16, the logits of a classifier)
using Tile128x128 = WarpTile<128, 128, 16, 64, 32, 2, 2>;
using Tile64x64 = WarpTile<64, 64, 16, 32, 32, 1, 2>;
using Tile32x32 = WarpTile<32, 32, 16, 32, 16, 1, 1>;
using Tile64x16 = WarpTile<64, 16, 16, 32, 16, 1, 1>;

// p[row * ld + col .. col + 3] as a float4, zero where (row, col + i) is outside rows x cols.
// vec: ld is a multiple of 4, so a row's float4s are 16-byte aligned and one vector load is allowed.
__device__ __forceinline__ float4 load4_guarded(const float* p, int row, int col, int rows, int cols,
                                                int ld, bool vec) {
    if (vec && row < rows && col + 3 < cols)
        return *reinterpret_cast<const float4*>(&p[row * ld + col]);
    float4 v;   // the ragged edge, or an unaligned row length: one guarded float at a time
    v.x = (row < rows && col + 0 < cols) ? p[row * ld + col + 0] : 0.0f;
    v.y = (row < rows && col + 1 < cols) ? p[row * ld + col + 1] : 0.0f;
    v.z = (row < rows && col + 2 < cols) ? p[row * ld + col + 2] : 0.0f;
    v.w = (row < rows && col + 3 < cols) ? p[row * ld + col + 3] : 0.0f;
    return v;
}

// Global -> registers: this thread's float4s of the slab of op(A) that starts at k0.
// Thread t's e-th float4 is number t + e * THREADS of the slab, counted along the contiguous dimension.
template <class T, bool A_TRANS>
__device__ __forceinline__ void load_slab_a(float4 (&stage)[T::A_LOADS], const float* A, int M, int K,
                                            int lda, bool vec, int block_row, int k0) {
#pragma unroll
    for (int e = 0; e < T::A_LOADS; e++) {
        int idx = threadIdx.x + e * T::THREADS;
        if (!A_TRANS) {   // BM rows of BK / 4 float4s along k
            int r = idx / (T::BK / 4), c = (idx % (T::BK / 4)) * 4;
            stage[e] = load4_guarded(A, block_row + r, k0 + c, M, K, lda, vec);
        } else {          // BK rows (k) of BM / 4 float4s along m
            int r = idx / (T::BM / 4), c = (idx % (T::BM / 4)) * 4;
            stage[e] = load4_guarded(A, k0 + r, block_row + c, K, M, lda, vec);
        }
    }
}

// Registers -> shared memory, into As[k][m].
template <class T, bool A_TRANS>
__device__ __forceinline__ void store_slab_a(float (&As)[T::BK][T::BM + T::PAD], const float4 (&stage)[T::A_LOADS]) {
#pragma unroll
    for (int e = 0; e < T::A_LOADS; e++) {
        int idx = threadIdx.x + e * T::THREADS;
        if (!A_TRANS) {   // 4 consecutive k of one row m: transpose on the way in
            int r = idx / (T::BK / 4), c = (idx % (T::BK / 4)) * 4;
            As[c + 0][r] = stage[e].x;
            As[c + 1][r] = stage[e].y;
            As[c + 2][r] = stage[e].z;
            As[c + 3][r] = stage[e].w;
        } else {          // 4 consecutive m of one k: already in As's order
            int r = idx / (T::BM / 4), c = (idx % (T::BM / 4)) * 4;
            *reinterpret_cast<float4*>(&As[r][c]) = stage[e];
        }
    }
}

template <class T, bool B_TRANS>
__device__ __forceinline__ void load_slab_b(float4 (&stage)[T::B_LOADS], const float* B, int N, int K,
                                            int ldb, bool vec, int block_col, int k0) {
#pragma unroll
    for (int e = 0; e < T::B_LOADS; e++) {
        int idx = threadIdx.x + e * T::THREADS;
        if (!B_TRANS) {   // BK rows (k) of BN / 4 float4s along n
            int r = idx / (T::BN / 4), c = (idx % (T::BN / 4)) * 4;
            stage[e] = load4_guarded(B, k0 + r, block_col + c, K, N, ldb, vec);
        } else {          // BN rows (n) of BK / 4 float4s along k
            int r = idx / (T::BK / 4), c = (idx % (T::BK / 4)) * 4;
            stage[e] = load4_guarded(B, block_col + r, k0 + c, N, K, ldb, vec);
        }
    }
}

// Registers -> shared memory, into Bs[k][n].
template <class T, bool B_TRANS>
__device__ __forceinline__ void store_slab_b(float (&Bs)[T::BK][T::BN + T::PAD], const float4 (&stage)[T::B_LOADS]) {
#pragma unroll
    for (int e = 0; e < T::B_LOADS; e++) {
        int idx = threadIdx.x + e * T::THREADS;
        if (!B_TRANS) {
            int r = idx / (T::BN / 4), c = (idx % (T::BN / 4)) * 4;
            *reinterpret_cast<float4*>(&Bs[r][c]) = stage[e];
        } else {          // 4 consecutive k of one column n: transpose on the way in
            int r = idx / (T::BK / 4), c = (idx % (T::BK / 4)) * 4;
            Bs[c + 0][r] = stage[e].x;
            Bs[c + 1][r] = stage[e].y;
            Bs[c + 2][r] = stage[e].z;
            Bs[c + 3][r] = stage[e].w;
        }
    }
}

// Where this thread's patch starts inside the block tile: its warp's piece, then its lane's 4 x 4.
template <class T> __device__ __forceinline__ int thread_row_in_tile() {
    int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    return (warp / T::WARPS_N) * T::WM + (lane / T::LANES_N) * 4;
}
template <class T> __device__ __forceinline__ int thread_col_in_tile() {
    int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    return (warp % T::WARPS_N) * T::WN + (lane % T::LANES_N) * 4;
}

// The row and column of C that acc[i][j] of this thread belongs to (the epilogue's index math):
// acc rows come in groups of 4 (one lane patch), one group per sub-tile step down the warp's piece.
template <class T> __device__ __forceinline__ int acc_row(int i) {
    return blockIdx.y * T::BM + thread_row_in_tile<T>() + (i / 4) * T::WSUB_M + i % 4;
}
template <class T> __device__ __forceinline__ int acc_col(int j) {
    return blockIdx.x * T::BN + thread_col_in_tile<T>() + (j / 4) * T::WSUB_N + j % 4;
}

// acc = this thread's results of the block tile (blockIdx.y, blockIdx.x) of op(A) op(B).
// Launch with T::THREADS threads a block, grid (ceil_div(N, BN), ceil_div(M, BM)); every thread of the
// block must call it (it has barriers), and K must be at least 1.
template <class T, bool A_TRANS, bool B_TRANS> __device__ __forceinline__ void warptile_gemm(
        float (&acc)[T::ACC_M][T::ACC_N], const float* A, const float* B, int M, int N, int K, int lda, int ldb) {
    __shared__ __align__(16) float As[2][T::BK][T::BM + T::PAD];
    __shared__ __align__(16) float Bs[2][T::BK][T::BN + T::PAD];
    const int block_row = blockIdx.y * T::BM, block_col = blockIdx.x * T::BN;
    const int a_off = thread_row_in_tile<T>(), b_off = thread_col_in_tile<T>();   // columns of As, Bs
    const bool a_vec = (lda % 4 == 0), b_vec = (ldb % 4 == 0);
#pragma unroll
    for (int i = 0; i < T::ACC_M; i++)
#pragma unroll
        for (int j = 0; j < T::ACC_N; j++) acc[i][j] = 0.0f;

    float4 a_stage[T::A_LOADS], b_stage[T::B_LOADS];
    load_slab_a<T, A_TRANS>(a_stage, A, M, K, lda, a_vec, block_row, 0);
    load_slab_b<T, B_TRANS>(b_stage, B, N, K, ldb, b_vec, block_col, 0);
    store_slab_a<T, A_TRANS>(As[0], a_stage);
    store_slab_b<T, B_TRANS>(Bs[0], b_stage);
    __syncthreads();   // slab 0 is in shared memory before anyone multiplies

    const int slabs = ceil_div(K, T::BK);
    for (int s = 0; s < slabs; s++) {
        const int cur = s & 1;
        const bool has_next = s + 1 < slabs;   // the same for every thread: no divergent barrier below
        if (has_next) {   // issue the next slab's global loads now; they land while we compute
            load_slab_a<T, A_TRANS>(a_stage, A, M, K, lda, a_vec, block_row, (s + 1) * T::BK);
            load_slab_b<T, B_TRANS>(b_stage, B, N, K, ldb, b_vec, block_col, (s + 1) * T::BK);
        }
#pragma unroll
        for (int k = 0; k < T::BK; k++) {
            float a_frag[T::ACC_M], b_frag[T::ACC_N];
#pragma unroll
            for (int wi = 0; wi < T::WM_ITERS; wi++) {   // 4 consecutive rows: one 16-byte shared load
                float4 v = *reinterpret_cast<const float4*>(&As[cur][k][a_off + wi * T::WSUB_M]);
                a_frag[wi * 4 + 0] = v.x; a_frag[wi * 4 + 1] = v.y; a_frag[wi * 4 + 2] = v.z; a_frag[wi * 4 + 3] = v.w;
            }
#pragma unroll
            for (int wj = 0; wj < T::WN_ITERS; wj++) {
                float4 v = *reinterpret_cast<const float4*>(&Bs[cur][k][b_off + wj * T::WSUB_N]);
                b_frag[wj * 4 + 0] = v.x; b_frag[wj * 4 + 1] = v.y; b_frag[wj * 4 + 2] = v.z; b_frag[wj * 4 + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < T::ACC_M; i++)      // the outer product: ACC_M * ACC_N FMAs from
#pragma unroll
                for (int j = 0; j < T::ACC_N; j++)  // ACC_M + ACC_N values in registers
                    acc[i][j] += a_frag[i] * b_frag[j];
        }
        if (has_next) {   // the other copy was last read in slab s - 1, before the barrier that ended it
            store_slab_a<T, A_TRANS>(As[cur ^ 1], a_stage);
            store_slab_b<T, B_TRANS>(Bs[cur ^ 1], b_stage);
        }
        __syncthreads();  // slab s + 1 is stored, and everyone is done reading slab s
    }
}

// Store 4 consecutive results of row `row` at columns col .. col + 3 of the M x N row-major C:
// one float4 when N allows it (N % 4 == 0: 16-byte aligned rows), else only the columns inside C.
__device__ __forceinline__ void store4_guarded(float* C, int row, int col, int N, float4 v) {
    if (N % 4 == 0 && col + 3 < N) {
        *reinterpret_cast<float4*>(&C[row * N + col]) = v;
    } else {
        if (col + 0 < N) C[row * N + col + 0] = v.x;
        if (col + 1 < N) C[row * N + col + 1] = v.y;
        if (col + 2 < N) C[row * N + col + 2] = v.z;
        if (col + 3 < N) C[row * N + col + 3] = v.w;
    }
}
