// nn_dense.cu: a dense (fully connected) layer, Y = act(X W + b), forward and backward.
//
//   dense_forward_<tile>   one launch: the GEMM X[B,K] W[K,N], then the epilogue adds the bias and
//                          applies the activation while the sums are still in registers (no extra pass
//                          over Y); it also keeps the pre-activation Z for the backward pass.
//   dense_act_grad_partial dZ = dY * act'(Z), and the column sums of dZ over chunks of rows
//   dense_bias_grad        db = the sum of those chunk sums, in a fixed order (deterministic)
//   gemm_tn_<tile>         dW[K,N] = X^T dZ: reads X, stored [B,K], as its transpose
//   gemm_nt_<tile>         dX[B,K] = dZ W^T: reads W, stored [K,N], as its transpose
//   gemm_splitk_sum,       the second pass when K is split among blocks (small outputs, long K: see
//   dense_splitk_epilogue  "Split K" below)
//
// All three GEMMs are one main loop, warptile_gemm in gemm_warptile.cuh (also matmul version 7): a
// block tile in shared memory, a warp tile per warp, a 4 x 4 register patch per lane, double-buffered
// slabs of K. The transposed operands are loaded with float4s along their contiguous dimension, so
// every global read is coalesced; no transpose is ever copied.
//
// <tile> is the block tile, picked per GEMM shape by the launcher (gpuedu/ops/dense.py) so that a small
// batch still gives the GPU enough blocks and a 10-wide output does not fill a 128-wide tile:
//   128x128 (256 threads), 64x64 (128), 32x32 (64), 64x16 (64, for N <= 16).
// Every output sums its products in ascending k into one register, whatever the tile: the tile changes
// the speed, not a bit of the result.
//
// Layout: row-major float32 everywhere; X is [batch, in], W is [in, out], Y and Z are [batch, out].
// Napkin math for the forward: 2*B*K*N FLOPs over 4*(B*K + K*N + 2*B*N) bytes; at B = 4096,
// K = N = 1024 that is 8.6 GFLOP on 37 MB, 230 FLOP a byte: compute-bound, like any large GEMM.
// Registers / shared memory per kernel: `nvcc -cubin -arch=sm_90 -Xptxas -v gpuedu/kernels/nn_dense.cu`.
#include "nn_activations.cuh"
#include "gemm_warptile.cuh"

// The forward's epilogue for one activation ACT, a compile-time constant: act_forward's switch folds
// away, so the unrolled loops below stay within the registers the main loop leaves free.
// acc is indexed by constants only (unrolled loops), so it stays in registers.
template <class T, int ACT> __device__ __forceinline__ void dense_epilogue(
        float* Y, float* Z, const float (&acc)[T::ACC_M][T::ACC_N], const float* bias, int B, int N) {
#pragma unroll
    for (int i = 0; i < T::ACC_M; i++) {
        int row = acc_row<T>(i);
        if (row >= B) continue;   // the edge block hangs over the batch
#pragma unroll
        for (int j = 0; j < T::ACC_N; j += 4) {   // 4 consecutive columns of one row at a time
            int col = acc_col<T>(j);
            float z[4], y[4];
#pragma unroll
            for (int q = 0; q < 4; q++) {
                z[q] = acc[i][j + q] + (col + q < N ? bias[col + q] : 0.0f);
                y[q] = act_forward(ACT, z[q]);
            }
            if (Z) store4_guarded(Z, row, col, N, make_float4(z[0], z[1], z[2], z[3]));
            store4_guarded(Y, row, col, N, make_float4(y[0], y[1], y[2], y[3]));
        }
    }
}

// acc -> the M x N row-major C, 4 consecutive columns (one float4 when N allows) at a time.
template <class T> __device__ __forceinline__ void store_acc(
        const float (&acc)[T::ACC_M][T::ACC_N], float* C, int M, int N) {
#pragma unroll
    for (int i = 0; i < T::ACC_M; i++) {
        int row = acc_row<T>(i);
        if (row >= M) continue;   // the edge block hangs over the last row
#pragma unroll
        for (int j = 0; j < T::ACC_N; j += 4)
            store4_guarded(C, row, acc_col<T>(j), N,
                           make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
    }
}

// Split K. A GEMM whose output has too few tiles to fill the GPU (a batch of 128, 10 logits) but a long
// K would leave most SMs idle while a few blocks walk all of K. Instead the grid gets a third dimension:
// block z sums only k in [z * k_split, z * k_split + k_split) and stores its partial tile to
// partial[z][M][N]; a second, elementwise kernel adds the gridDim.z partials in ascending z (the same
// bits every run, no atomics) and applies the epilogue. k_split is a multiple of the slab depth, so the
// operands shifted by z * k_split keep their 16-byte alignment. With gridDim.z == 1 (k_split >= K) the
// kernel does its epilogue itself, and each output is one ascending sum over all of K.

// Y[b,n] = act(sum_k X[b,k] W[k,n] + bias[n]); Z gets the pre-activation (pass Z = NULL to skip it,
// e.g. at inference).  grid = (ceil(N/BN), ceil(B/BM), splits), block = T::THREADS.
template <class T> __device__ __forceinline__ void dense_forward_tile(
        float* Y, float* Z, float* partial, const float* X, const float* W, const float* bias,
        int B, int K, int N, int k_split, int act) {
    int k0 = blockIdx.z * k_split;                 // this block's share of K
    float acc[T::ACC_M][T::ACC_N];
    warptile_gemm<T, false, false>(acc, X + k0, W + k0 * N, B, N, min(k_split, K - k0), /*lda=*/K, /*ldb=*/N);
    if (gridDim.z > 1) {                           // split K: the epilogue waits for the sum of the splits
        store_acc<T>(acc, partial + blockIdx.z * B * N, B, N);
        return;
    }
    switch (act) {   // the same for the whole grid: no divergence
    case ACT_RELU:    dense_epilogue<T, ACT_RELU>(Y, Z, acc, bias, B, N); break;
    case ACT_SIGMOID: dense_epilogue<T, ACT_SIGMOID>(Y, Z, acc, bias, B, N); break;
    case ACT_TANH:    dense_epilogue<T, ACT_TANH>(Y, Z, acc, bias, B, N); break;
    case ACT_GELU:    dense_epilogue<T, ACT_GELU>(Y, Z, acc, bias, B, N); break;
    default:          dense_epilogue<T, ACT_NONE>(Y, Z, acc, bias, B, N); break;
    }
}

// C[M,N] = op(A) op(B) with one operand read transposed (see gemm_warptile.cuh for the layouts).
// Split K: block z reads op(A)'s columns and op(B)'s rows from z * k_split on, and writes its partial
// product to C + z * M * N (the launcher passes the partials' buffer as C, then gemm_splitk_sum).
template <class T, bool A_TRANS, bool B_TRANS> __device__ __forceinline__ void gemm_tile(
        float* C, const float* A, const float* Bm, int M, int N, int K, int lda, int ldb, int k_split) {
    int k0 = blockIdx.z * k_split;
    const float* A_z = A_TRANS ? A + k0 * lda : A + k0;    // k runs down A's rows, or along them
    const float* B_z = B_TRANS ? Bm + k0 : Bm + k0 * ldb;
    float acc[T::ACC_M][T::ACC_N];
    warptile_gemm<T, A_TRANS, B_TRANS>(acc, A_z, B_z, M, N, min(k_split, K - k0), lda, ldb);
    store_acc<T>(acc, C + blockIdx.z * M * N, M, N);
}

// The kernels, one per role and tile (C names: PyCUDA looks kernels up by name, templates have none).
#define DENSE_FORWARD_ARGS float* Y, float* Z, float* partial, const float* X, const float* W, const float* bias, int B, int K, int N, int k_split, int act
#define DENSE_FORWARD_CALL Y, Z, partial, X, W, bias, B, K, N, k_split, act
extern "C" __global__ void __launch_bounds__(256, 2) dense_forward_128x128(DENSE_FORWARD_ARGS) { dense_forward_tile<Tile128x128>(DENSE_FORWARD_CALL); }
extern "C" __global__ void __launch_bounds__(128) dense_forward_64x64(DENSE_FORWARD_ARGS) { dense_forward_tile<Tile64x64>(DENSE_FORWARD_CALL); }
extern "C" __global__ void __launch_bounds__(64) dense_forward_32x32(DENSE_FORWARD_ARGS) { dense_forward_tile<Tile32x32>(DENSE_FORWARD_CALL); }
extern "C" __global__ void __launch_bounds__(64) dense_forward_64x16(DENSE_FORWARD_ARGS) { dense_forward_tile<Tile64x16>(DENSE_FORWARD_CALL); }

// dW[M=in, N=out] = X^T dZ over K = batch: A = X is stored [K, M] (lda = in), B = dZ is [K, N].
#define GEMM_ARGS float* C, const float* A, const float* Bm, int M, int N, int K, int lda, int ldb, int k_split
#define GEMM_CALL C, A, Bm, M, N, K, lda, ldb, k_split
extern "C" __global__ void __launch_bounds__(256, 2) gemm_tn_128x128(GEMM_ARGS) { gemm_tile<Tile128x128, true, false>(GEMM_CALL); }
extern "C" __global__ void __launch_bounds__(128) gemm_tn_64x64(GEMM_ARGS) { gemm_tile<Tile64x64, true, false>(GEMM_CALL); }
extern "C" __global__ void __launch_bounds__(64) gemm_tn_32x32(GEMM_ARGS) { gemm_tile<Tile32x32, true, false>(GEMM_CALL); }
extern "C" __global__ void __launch_bounds__(64) gemm_tn_64x16(GEMM_ARGS) { gemm_tile<Tile64x16, true, false>(GEMM_CALL); }

// dX[M=batch, N=in] = dZ W^T over K = out: A = dZ is [M, K], B = W is stored [N, K] (ldb = out).
extern "C" __global__ void __launch_bounds__(256, 2) gemm_nt_128x128(GEMM_ARGS) { gemm_tile<Tile128x128, false, true>(GEMM_CALL); }
extern "C" __global__ void __launch_bounds__(128) gemm_nt_64x64(GEMM_ARGS) { gemm_tile<Tile64x64, false, true>(GEMM_CALL); }
extern "C" __global__ void __launch_bounds__(64) gemm_nt_32x32(GEMM_ARGS) { gemm_tile<Tile32x32, false, true>(GEMM_CALL); }
extern "C" __global__ void __launch_bounds__(64) gemm_nt_64x16(GEMM_ARGS) { gemm_tile<Tile64x16, false, true>(GEMM_CALL); }

// Split K, second pass of the gradient GEMMs: C[i] = sum over z of partial[z * count + i], ascending z.
// One thread per element; grid = ceil(count / blockDim.x).
extern "C" __global__ void gemm_splitk_sum(float* C, const float* partial, int count, int splits) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    float total = 0.0f;
    for (int z = 0; z < splits; z++)
        total += partial[z * count + i];   // adjacent threads, adjacent addresses: coalesced
    C[i] = total;
}

// Split K, second pass of the forward: the sum of the splits, then the same epilogue as the fused one.
extern "C" __global__ void dense_splitk_epilogue(float* Y, float* Z, const float* partial, const float* bias,
                                                 int B, int N, int splits, int act) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * N) return;
    float z = 0.0f;
    for (int s = 0; s < splits; s++)
        z += partial[s * B * N + i];
    z += bias[i % N];
    if (Z) Z[i] = z;
    Y[i] = act_forward(act, z);
}

#define BIAS_COLS 32   // dense_act_grad_partial's block: 32 columns (one warp wide) ...
#define BIAS_ROWS 8    // ... by 8 rows of threads

// dZ = dY * act'(Z) (Y is the forward's output, used by sigmoid/tanh), and partial[c, n] = the sum of
// dZ[b, n] over the rows b of chunk c = blockIdx.y (rows_per_chunk of them).
// grid = (ceil(N / BIAS_COLS), ceil(B / rows_per_chunk)), block = (BIAS_COLS, BIAS_ROWS).
// A warp reads 32 consecutive columns of a row (coalesced); thread (x, y) walks rows y, y + 8, ... of
// the chunk, then the 8 row-sums of each column are added in shared memory in a fixed order. Enough
// blocks for any batch (4096 rows: 128 chunks x 32 column blocks for N = 1024), and no atomics.
extern "C" __global__ void dense_act_grad_partial(float* dZ, float* partial, const float* dY,
                                                  const float* Z, const float* Y, int B, int N,
                                                  int rows_per_chunk, int act) {
    __shared__ float sums[BIAS_ROWS][BIAS_COLS];
    int col = blockIdx.x * BIAS_COLS + threadIdx.x;
    int first = blockIdx.y * rows_per_chunk;
    int last = min(first + rows_per_chunk, B);   // the last chunk may be short
    float sum = 0.0f;
    if (col < N) {                               // the last block may run past the last column
        for (int b = first + threadIdx.y; b < last; b += BIAS_ROWS) {
            int i = b * N + col;
            float g = dY[i] * act_derivative(act, Z[i], Y[i]);
            dZ[i] = g;
            sum += g;
        }
    }
    sums[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();                             // every row-sum is in shared memory
    if (threadIdx.y == 0 && col < N) {
        float total = 0.0f;
        for (int r = 0; r < BIAS_ROWS; r++)      // always the same order: the same bits every run
            total += sums[r][threadIdx.x];
        partial[blockIdx.y * N + col] = total;
    }
}

// db[n] = sum over the chunks c of partial[c, n], in ascending c; one thread per column.
// grid = ceil(N / blockDim.x); adjacent threads read adjacent columns of each chunk's row.
extern "C" __global__ void dense_bias_grad(float* db, const float* partial, int chunks, int N) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= N) return;
    float total = 0.0f;
    for (int c = 0; c < chunks; c++)
        total += partial[c * N + col];
    db[col] = total;
}
