// fp16_gemm.cu: C = alpha * A @ B with FP16 storage, and where the sums happen.
//
// A is M x K, B is K x N, C is M x N row-major.  A's element (i, k) is read at
// A[i*a_row_stride + k*a_col_stride] (likewise B), so a transposed operand is
// passed by swapping its strides instead of copying it: A^T of a row-major K x M
// matrix has strides (1, M).
//
// version 1 (hgemm_naive_half_accum): one thread per output, the running sum kept
//   in a __half.  Every += rounds to 11 significant bits: once the sum is large,
//   small products round away entirely, and the error grows with K.  Shown to be
//   avoided.
// version 2 (hgemm_naive): the same loop with a float accumulator: FP16 in memory,
//   FP32 sums.  This is what "mixed precision" means inside a GEMM.
// version 3 (hgemm_tiled, hgemm_tiled_f32out): 64x64 tiles of C per block of
//   16x16 threads, A and B staged through shared memory in 64x16 / 16x64 FP16 tiles
//   (half the bytes of float tiles), each thread accumulating a 4x4 block of C in
//   FP32 registers.  Edges are guarded: any M, N, K.
#include <cuda_fp16.h>

extern "C" __global__ void hgemm_naive_half_accum(__half* __restrict__ C,
        const __half* __restrict__ A, const __half* __restrict__ B, int M, int N, int K,
        int a_row_stride, int a_col_stride, int b_row_stride, int b_col_stride, float alpha)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    __half sum = __float2half_rn(0.0f);
    for (int k = 0; k < K; ++k) {
        sum = __hfma(A[row * a_row_stride + k * a_col_stride],
                     B[k * b_row_stride + col * b_col_stride], sum);  // rounds to half every step
    }
    C[row * N + col] = __float2half_rn(alpha * __half2float(sum));
}

extern "C" __global__ void hgemm_naive(__half* __restrict__ C,
        const __half* __restrict__ A, const __half* __restrict__ B, int M, int N, int K,
        int a_row_stride, int a_col_stride, int b_row_stride, int b_col_stride, float alpha)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) {
        sum += __half2float(A[row * a_row_stride + k * a_col_stride])
             * __half2float(B[k * b_row_stride + col * b_col_stride]);
    }
    C[row * N + col] = __float2half_rn(alpha * sum);   // one rounding, at the end
}

#define TILE_M 64
#define TILE_N 64
#define TILE_K 16
#define THREADS_X 16            // blockDim must be (16, 16, 1)
#define THREADS_Y 16
#define PER_THREAD_M (TILE_M / THREADS_Y)   // 4 rows of C per thread
#define PER_THREAD_N (TILE_N / THREADS_X)   // 4 columns of C per thread

__device__ inline void store_out(__half* C, int idx, float v) { C[idx] = __float2half_rn(v); }
__device__ inline void store_out(float* C, int idx, float v) { C[idx] = v; }

template <typename OutT>
__device__ void hgemm_tiled_body(OutT* __restrict__ C,
        const __half* __restrict__ A, const __half* __restrict__ B, int M, int N, int K,
        int a_row_stride, int a_col_stride, int b_row_stride, int b_col_stride, float alpha)
{
    // A's tile is stored k-major (As[k][i]) so that, in the inner loop, the 16
    // threads of a row read 16 consecutive halves of one k row.  The loads write
    // it along k (neighbouring threads: neighbouring k), so rows are padded by 2
    // halves: a row is then 33 words long and the 16 writes hit 16 different banks.
    __shared__ __half As[TILE_K][TILE_M + 2];
    __shared__ __half Bs[TILE_K][TILE_N];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * THREADS_X + tx;                 // 0..255
    const int row0 = blockIdx.y * TILE_M;                // first row of C of this block
    const int col0 = blockIdx.x * TILE_N;
    const __half zero = __float2half_rn(0.0f);

    float acc[PER_THREAD_M][PER_THREAD_N];
    for (int m = 0; m < PER_THREAD_M; ++m)
        for (int n = 0; n < PER_THREAD_N; ++n) acc[m][n] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += TILE_K) {
        // Each of the 256 threads loads 4 of the 1024 elements of each tile.
        // Out-of-range elements are loaded as 0, so they add nothing to the sums.
        for (int l = 0; l < (TILE_M * TILE_K) / (THREADS_X * THREADS_Y); ++l) {
            int idx = tid + l * THREADS_X * THREADS_Y;
            int i = idx / TILE_K, k = idx % TILE_K;      // consecutive threads walk k: A's row
            int gi = row0 + i, gk = k0 + k;
            As[k][i] = (gi < M && gk < K) ? A[gi * a_row_stride + gk * a_col_stride] : zero;
        }
        for (int l = 0; l < (TILE_K * TILE_N) / (THREADS_X * THREADS_Y); ++l) {
            int idx = tid + l * THREADS_X * THREADS_Y;
            int k = idx / TILE_N, j = idx % TILE_N;      // consecutive threads walk j: B's row
            int gk = k0 + k, gj = col0 + j;
            Bs[k][j] = (gk < K && gj < N) ? B[gk * b_row_stride + gj * b_col_stride] : zero;
        }
        __syncthreads();   // the tiles are complete before anyone reads them

        for (int k = 0; k < TILE_K; ++k) {
            float a[PER_THREAD_M], b[PER_THREAD_N];
            // Thread (tx, ty) owns rows ty + 16*m and columns tx + 16*n: strided
            // ownership keeps a warp's C writes and shared reads contiguous.
            for (int m = 0; m < PER_THREAD_M; ++m) a[m] = __half2float(As[k][ty + THREADS_Y * m]);
            for (int n = 0; n < PER_THREAD_N; ++n) b[n] = __half2float(Bs[k][tx + THREADS_X * n]);
            for (int m = 0; m < PER_THREAD_M; ++m)
                for (int n = 0; n < PER_THREAD_N; ++n) acc[m][n] += a[m] * b[n];
        }
        __syncthreads();   // everyone is done with the tiles before the next load overwrites them
    }

    for (int m = 0; m < PER_THREAD_M; ++m) {
        int gi = row0 + ty + THREADS_Y * m;
        for (int n = 0; n < PER_THREAD_N; ++n) {
            int gj = col0 + tx + THREADS_X * n;
            if (gi < M && gj < N) store_out(C, gi * N + gj, alpha * acc[m][n]);
        }
    }
}

extern "C" __global__ void hgemm_tiled(__half* __restrict__ C,
        const __half* __restrict__ A, const __half* __restrict__ B, int M, int N, int K,
        int a_row_stride, int a_col_stride, int b_row_stride, int b_col_stride, float alpha)
{
    hgemm_tiled_body(C, A, B, M, N, K, a_row_stride, a_col_stride, b_row_stride, b_col_stride, alpha);
}

extern "C" __global__ void hgemm_tiled_f32out(float* __restrict__ C,
        const __half* __restrict__ A, const __half* __restrict__ B, int M, int N, int K,
        int a_row_stride, int a_col_stride, int b_row_stride, int b_col_stride, float alpha)
{
    hgemm_tiled_body(C, A, B, M, N, K, a_row_stride, a_col_stride, b_row_stride, b_col_stride, alpha);
}
