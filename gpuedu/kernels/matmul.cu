// matmul.cu: C = A @ B for row-major A (M x K), B (K x N), C (M x N), in float32.
//
// 2*M*N*K FLOPs on (M*K + K*N + M*N) * 4 bytes: for square matrices of side n the arithmetic
// intensity is n/6 FLOP per byte if every element moved once, so a GEMM can be compute-bound;
// the ladder below is about reusing each loaded element as often as possible.
//
// version 1: naive: one thread per C element, with threadIdx.x running down a column of C, so
//            the 32 threads of a warp read 32 different rows of A (uncoalesced).
// version 2: coalesced: threadIdx.x runs along a row of C: the warp reads one element of A
//            (a broadcast) and 32 consecutive elements of B.
// version 3: shared-memory tiles: the block stages a TILE x TILE tile of A and of B in shared
//            memory, each element loaded from global memory once per block instead of TILE times.
// version 4: 1D register blocking: each thread computes TM4 results down a column of a BM4 x BN4
//            block tile, reusing each B value from a register TM4 times.
// version 5: 2D register blocking: each thread computes a TM x TN patch from TM values of A and
//            TN values of B held in registers (TM*TN FMAs per TM+TN shared-memory loads).
// version 6: as 5, with 16-byte (float4) global loads and stores where the row length allows it
//            (K % 4 == 0 for A, N % 4 == 0 for B and C; scalar guarded accesses otherwise), and the
//            A tile stored transposed so that a thread's TM values of A are consecutive in shared memory.
// version 7: warp tiling with double buffering (the main loop is in gemm_warptile.cuh, shared with the
//            dense layer): a 128 x 128 block tile, BK = 16, 256 threads = 8 warps, each warp owning a
//            64 x 32 piece that it covers as 2 x 2 sub-tiles of 32 x 16, one 4 x 4 patch per lane in
//            each (8 x 8 results a thread, as in 6). What the warp level buys: a warp's 32 lanes read
//            only 8 + 4 distinct float4s of the shared tiles per k (broadcasts in one 128-byte row,
//            no bank conflicts) and reuse each 8 + 8 registers for 64 FMAs; the schedule is the same
//            for every warp. Two shared buffers let the global loads of slab t + 1 be in flight while
//            slab t is multiplied, with one __syncthreads() per slab instead of two.
//            Napkin math for 4096^3 on an H200: 137 GFLOP / 67 TFLOP/s = 2.1 ms if the FMA pipes
//            never wait; each block reads (128 + 128) * 16 * 4 = 16 KB per slab for 128 * 128 * 16 FMAs
//            (64 FLOP a byte from L2), and 4096^2 / 128^2 = 1024 blocks at 2 a SM are 3.9 waves.
//            nvcc -arch=sm_90 -Xptxas -v: 128 registers (capped by __launch_bounds__(256, 2), no spills),
//            33 KB of shared memory a block (two buffers of 16 x 132 floats for A and for B).
//
// Every tile load is guarded and zero-filled past the edges, so M, N, K need not be multiples
// of anything. Launch shapes (the launcher in gpuedu/ops/gemm.py computes them):
//   1: block (B, B), grid (ceil_div(M, B), ceil_div(N, B))   2: block (B, B), grid (ceil_div(N, B), ceil_div(M, B))
//   3: block (TILE, TILE), grid (ceil_div(N, TILE), ceil_div(M, TILE))
//   4: block (BM4 * BN4 / TM4), grid (ceil_div(N, BN4), ceil_div(M, BM4))     (512 threads)
//   5, 6: block (BM5 * BN5 / (TM * TN)), grid (ceil_div(N, BN5), ceil_div(M, BM5)) (256 threads)
//   7: block (Tile128x128::THREADS) = 256, grid (ceil_div(N, 128), ceil_div(M, 128))
#include "common.cuh"
#include "gemm_warptile.cuh"   // before the TM/TN macros below, which its names must not meet

#ifndef TILE
#define TILE 32
#endif
// Version 4's block tile: BM4 rows x BN4 columns of C, stepping BK4 along K, TM4 results a thread.
#ifndef BM4
#define BM4 64
#endif
#ifndef BN4
#define BN4 64
#endif
#ifndef BK4
#define BK4 8
#endif
#ifndef TM4
#define TM4 8
#endif
// Version 5's block tile: BM5 x BN5 of C, stepping BK5 along K, a TM x TN patch a thread.
#ifndef BM5
#define BM5 128
#endif
#ifndef BN5
#define BN5 128
#endif
#ifndef BK5
#define BK5 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif

extern "C" __global__ void matmul_kernel1(float* C, const float* A, const float* B, int M, int N, int K) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;  // consecutive threads: consecutive rows
    int col = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {  // the edge blocks stick out past C
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}

extern "C" __global__ void matmul_kernel2(float* C, const float* A, const float* B, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;  // consecutive threads: consecutive columns
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}

extern "C" __global__ void matmul_kernel3(float* C, const float* A, const float* B, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // Each thread loads one element of each tile; past the edge of A or B it loads 0, which
        // adds nothing to the dot products (this is what makes ragged sizes work).
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();  // both tiles are complete before anyone multiplies
        for (int k = 0; k < TILE; k++)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();  // everyone is done with these tiles before the next loop overwrites them
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}

extern "C" __global__ void matmul_kernel4(float* C, const float* A, const float* B, int M, int N, int K) {
    __shared__ float As[BM4][BK4];
    __shared__ float Bs[BK4][BN4];
    // BM4 * BN4 / TM4 threads: thread t computes rows (t / BN4) * TM4 ... + TM4 - 1 of column t % BN4.
    int t = threadIdx.x;
    int thread_col = t % BN4;
    int thread_row = t / BN4;
    int block_row = blockIdx.y * BM4, block_col = blockIdx.x * BN4;
    float acc[TM4];
    for (int i = 0; i < TM4; i++) acc[i] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK4) {
        // BM4*BK4 and BK4*BN4 elements to load with BM4*BN4/TM4 threads: loop in strides of the block.
        for (int e = t; e < BM4 * BK4; e += blockDim.x) {
            int r = e / BK4, c = e % BK4;
            As[r][c] = (block_row + r < M && k0 + c < K) ? A[(block_row + r) * K + k0 + c] : 0.0f;
        }
        for (int e = t; e < BK4 * BN4; e += blockDim.x) {
            int r = e / BN4, c = e % BN4;
            Bs[r][c] = (k0 + r < K && block_col + c < N) ? B[(k0 + r) * N + block_col + c] : 0.0f;
        }
        __syncthreads();  // tiles complete
        for (int k = 0; k < BK4; k++) {
            float b = Bs[k][thread_col];  // one shared load, reused TM4 times from a register
#pragma unroll
            for (int i = 0; i < TM4; i++)
                acc[i] += As[thread_row * TM4 + i][k] * b;
        }
        __syncthreads();  // tiles no longer needed
    }
    for (int i = 0; i < TM4; i++) {
        int row = block_row + thread_row * TM4 + i, col = block_col + thread_col;
        if (row < M && col < N)
            C[row * N + col] = acc[i];
    }
}

extern "C" __global__ void matmul_kernel5(float* C, const float* A, const float* B, int M, int N, int K) {
    __shared__ float As[BM5][BK5];
    __shared__ float Bs[BK5][BN5];
    // (BM5 / TM) x (BN5 / TN) threads; thread t owns the TM x TN patch at (t / (BN5/TN), t % (BN5/TN)).
    int t = threadIdx.x;
    int thread_col = t % (BN5 / TN);
    int thread_row = t / (BN5 / TN);
    int block_row = blockIdx.y * BM5, block_col = blockIdx.x * BN5;
    float acc[TM][TN];
    for (int i = 0; i < TM; i++)
        for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;
    float a_reg[TM], b_reg[TN];
    for (int k0 = 0; k0 < K; k0 += BK5) {
        for (int e = t; e < BM5 * BK5; e += blockDim.x) {
            int r = e / BK5, c = e % BK5;
            As[r][c] = (block_row + r < M && k0 + c < K) ? A[(block_row + r) * K + k0 + c] : 0.0f;
        }
        for (int e = t; e < BK5 * BN5; e += blockDim.x) {
            int r = e / BN5, c = e % BN5;
            Bs[r][c] = (k0 + r < K && block_col + c < N) ? B[(k0 + r) * N + block_col + c] : 0.0f;
        }
        __syncthreads();  // tiles complete
        for (int k = 0; k < BK5; k++) {
            // TM + TN shared loads feed TM * TN multiply-adds: the outer product of a column of
            // the A tile and a row of the B tile. Unrolled (nvcc unrolls a loop of a constant count by
            // itself; the pragma says so), the loops leave acc, a_reg and b_reg in registers.
#pragma unroll
            for (int i = 0; i < TM; i++) a_reg[i] = As[thread_row * TM + i][k];
#pragma unroll
            for (int j = 0; j < TN; j++) b_reg[j] = Bs[k][thread_col * TN + j];
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++)
                    acc[i][j] += a_reg[i] * b_reg[j];
        }
        __syncthreads();  // tiles no longer needed
    }
    for (int i = 0; i < TM; i++) {
        int row = block_row + thread_row * TM + i;
        for (int j = 0; j < TN; j++) {
            int col = block_col + thread_col * TN + j;
            if (row < M && col < N)
                C[row * N + col] = acc[i][j];
        }
    }
}

#if TN % 4 != 0
#error "matmul_kernel6 stores C in float4s: TN must be a multiple of 4"
#endif
extern "C" __global__ void matmul_kernel6(float* C, const float* A, const float* B, int M, int N, int K) {
    __shared__ float As[BK5][BM5];   // transposed: As[k][r] = A[block_row + r][k0 + k]
    __shared__ float Bs[BK5][BN5];
    int t = threadIdx.x;
    int thread_col = t % (BN5 / TN);
    int thread_row = t / (BN5 / TN);
    int block_row = blockIdx.y * BM5, block_col = blockIdx.x * BN5;
    // A float4 access needs a 16-byte aligned address: rows of A start at multiples of K floats,
    // rows of B and C at multiples of N, so those must be multiples of 4 (the base pointers from
    // mem_alloc are aligned).
    bool a_vec = (K % 4 == 0), bn_vec = (N % 4 == 0);
    float acc[TM][TN];
    for (int i = 0; i < TM; i++)
        for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;
    float a_reg[TM], b_reg[TN];
    for (int k0 = 0; k0 < K; k0 += BK5) {
        // The A tile is BM5 x BK5 floats = BM5 * BK5 / 4 float4s; each thread moves them in strides
        // of the block (one each with the default 128 x 8 tile and 256 threads).
        for (int e = t; e < BM5 * BK5 / 4; e += blockDim.x) {
            int r = e / (BK5 / 4), c = (e % (BK5 / 4)) * 4;
            int row = block_row + r, k = k0 + c;
            float4 v;
            if (a_vec && row < M && k + 3 < K) {
                v = *reinterpret_cast<const float4*>(&A[row * K + k]);
            } else {  // the ragged edge (or an unaligned K): one guarded float at a time
                v.x = (row < M && k + 0 < K) ? A[row * K + k + 0] : 0.0f;
                v.y = (row < M && k + 1 < K) ? A[row * K + k + 1] : 0.0f;
                v.z = (row < M && k + 2 < K) ? A[row * K + k + 2] : 0.0f;
                v.w = (row < M && k + 3 < K) ? A[row * K + k + 3] : 0.0f;
            }
            As[c + 0][r] = v.x;
            As[c + 1][r] = v.y;
            As[c + 2][r] = v.z;
            As[c + 3][r] = v.w;
        }
        for (int e = t; e < BK5 * BN5 / 4; e += blockDim.x) {
            int r = e / (BN5 / 4), c = (e % (BN5 / 4)) * 4;
            int k = k0 + r, col = block_col + c;
            float4 v;
            if (bn_vec && k < K && col + 3 < N) {
                v = *reinterpret_cast<const float4*>(&B[k * N + col]);
            } else {
                v.x = (k < K && col + 0 < N) ? B[k * N + col + 0] : 0.0f;
                v.y = (k < K && col + 1 < N) ? B[k * N + col + 1] : 0.0f;
                v.z = (k < K && col + 2 < N) ? B[k * N + col + 2] : 0.0f;
                v.w = (k < K && col + 3 < N) ? B[k * N + col + 3] : 0.0f;
            }
            Bs[r][c + 0] = v.x;
            Bs[r][c + 1] = v.y;
            Bs[r][c + 2] = v.z;
            Bs[r][c + 3] = v.w;
        }
        __syncthreads();  // tiles complete
        for (int k = 0; k < BK5; k++) {
#pragma unroll
            for (int i = 0; i < TM; i++) a_reg[i] = As[k][thread_row * TM + i];  // consecutive now
#pragma unroll
            for (int j = 0; j < TN; j++) b_reg[j] = Bs[k][thread_col * TN + j];
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++)
                    acc[i][j] += a_reg[i] * b_reg[j];
        }
        __syncthreads();  // tiles no longer needed
    }
    for (int i = 0; i < TM; i++) {
        int row = block_row + thread_row * TM + i;
        if (row >= M) break;  // later rows of the patch are further out
        for (int j = 0; j < TN; j += 4) {
            int col = block_col + thread_col * TN + j;
            if (bn_vec && col + 3 < N) {
                *reinterpret_cast<float4*>(&C[row * N + col]) =
                    make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
            } else {
                for (int jj = j; jj < j + 4 && col + (jj - j) < N; jj++)
                    C[row * N + col + (jj - j)] = acc[i][jj];
            }
        }
    }
}

#define TWO_BLOCKS_OF_256 __launch_bounds__(256, 2)   // at most 256 threads; fit 2 blocks an SM

// The tile of version 7 and why it suits sm_90 (65536 registers and 228 KB of shared memory an SM):
// 8 x 8 accumulators + 8 + 8 fragments + 4 staged float4s are ~100 live floats a thread, so
// __launch_bounds__(256, 2) caps the kernel at 128 registers and lets 2 blocks (16 warps) share an
// SM; the two shared buffers are 2 * 16 * (132 + 132) * 4 = 33 KB a block. Bigger tiles would need
// more registers than 2 blocks can have; smaller ones load more bytes per FMA.
extern "C" __global__ void TWO_BLOCKS_OF_256 matmul_kernel7(float* C, const float* A, const float* B, int M, int N, int K) {
    using T = Tile128x128;
    float acc[T::ACC_M][T::ACC_N];
    warptile_gemm<T, false, false>(acc, A, B, M, N, K, /*lda=*/K, /*ldb=*/N);
#pragma unroll
    for (int i = 0; i < T::ACC_M; i++) {
        int row = acc_row<T>(i);
        if (row >= M) continue;   // the edge block hangs over the last row of C
#pragma unroll
        for (int j = 0; j < T::ACC_N; j += 4)   // 4 consecutive columns: one float4 store
            store4_guarded(C, row, acc_col<T>(j), N,
                           make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
    }
}
