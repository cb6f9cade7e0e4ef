// mma_gemm.cu: C = alpha * op(A) @ op(B) on tensor cores, in the tensor cores' own instructions
// (inline PTX: mma.sync, ldmatrix, cp.async) instead of nvcuda::wmma.
//
// wmma_gemm.cu's fragments are opaque: load_matrix_sync and store_matrix_sync move them, and nvcc
// decides how.  The WMMA kernels are bound by registers and shared-memory traffic: on an H200 at
// 4096^3 the best of them reached 28.0-30.5 % of cuBLAS's FP16 GEMM (measured, four runs:
// benchmarks/results/nvidia-h200*.json; 28.9 % at the best of 14 tile shapes,
// nvidia-h200-probe-tiles.json).  Fast GEMMs issue the PTX that WMMA compiles to, and control the
// three things WMMA hides:
//   - where each element of a fragment lives (which lane, which register): the C tile is written
//     straight from the registers, with no staging tile in shared memory;
//   - how fragments come out of shared memory: ldmatrix fills a whole warp's fragment in one
//     instruction, where each lane would otherwise load its pieces one by one;
//   - how a tile lies in shared memory: a swizzle, so that neither the copies that fill a tile
//     nor the ldmatrix that read it wait on a bank.
//
// The instructions (PTX ISA: "Warp-level matrix multiply-accumulate instructions", "ldmatrix",
// "cp.async"), each wrapped once in ptx_sm80.cuh, need sm_80 or later:
//   MmaF16::fma       mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: D = A B + C, A 16x16,
//                     B 16x8 (FP16), C and D 16x8 (FP32), one warp-wide instruction
//   ldmatrix_x4       ldmatrix.sync.aligned.m8n8.x4.shared.b16: four 8x8 matrices of halves from
//   ldmatrix_x4_trans shared memory into the warp's registers (.trans: each transposed)
//   cp_async16        cp.async.cg.shared.global: 16 bytes global -> shared without registers,
//                     zero-filled past a source size
//   cp_async_commit / cp_async_wait<N>: close a group of copies; wait until at most N are in flight
//
// The fragments of mma.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point
// type").  Lane l of the warp is in group g = l / 4, at place t = l % 4 of its group:
//   A (16 x 16, row-major), four 32-bit registers of two halves each (the lower half first):
//       a[0] = A[g][2t], A[g][2t+1]          a[2] = A[g][2t+8], A[g][2t+9]
//       a[1] = A[g+8][2t], A[g+8][2t+1]      a[3] = A[g+8][2t+8], A[g+8][2t+9]
//   B (16 x 8, "col": a register holds two consecutive k of one column n), two registers:
//       b[0] = B[2t][g], B[2t+1][g]          b[1] = B[2t+8][g], B[2t+9][g]
//   C and D (16 x 8), four floats:
//       c[0], c[1] = C[g][2t], C[g][2t+1]    c[2], c[3] = C[g+8][2t], C[g+8][2t+1]
// ldmatrix .x4: lanes 8j .. 8j+7 give the addresses of the 8 rows (16 bytes each) of matrix j, which
// lands in register j; lane l receives row l/4, halves 2(l%4) and 2(l%4)+1: A's and B's layouts
// above, four 8x8 quarters at a time.  With .trans lane l receives column l/4 instead.
//
// Every version: C = alpha * op(A) @ op(B), A and B FP16 (row-major, rows lda and ldb halves apart),
// sums in FP32, C M x N row-major, FP16 when c_half else FP32.  A block of 8 warps (2 x 4) computes a
// BM x BN tile of C, each warp a WM x WN warp tile: (WM/16) x (WN/8) accumulators of 4 floats.  K is
// walked in slices of BK = 32, staged in shared memory.  Edges: elements past M, N or K are staged
// as zeros and the stores of C are guarded, so any M, N, K works.  Rows are copied in 16-byte chunks
// (8 halves) when A or B is 16-byte aligned and its rows are a multiple of 8 halves; otherwise
// each thread loads its chunk element by element with guards (e.g. K = 37).  The epilogue scales
// each accumulator by alpha and writes it from its registers, the two columns a lane holds as one
// half2 or float2 store.
//
// version 6 (mma_gemm_kernel6): mma.sync with fragments each lane loads itself.
//   A 128 x 128 tile of C per block, warp tiles 64 x 32 (4 x 4 mma tiles, 64 FP32 accumulator
//   registers per thread), one stage: the block copies A's 128 x 32 and B's 32 x 128 slices into
//   shared memory through registers, waits, multiplies, waits.  Each lane reads its fragments with
//   plain loads, following the layout above: A's pairs of halves are consecutive in a row (one
//   32-bit load each), B's are not (B's tile is [k][n]: two 16-bit loads and a pack per register).
//   The rows of a tile are 64 or 256 bytes apart, so the 8 groups of a warp read the same banks:
//   A's loads are 4-way bank conflicts, B's 4-way.
//
// version 7 (mma_gemm_kernel7): + ldmatrix.
//   One ldmatrix.x4 per A fragment (4 registers), one ldmatrix.x4.trans per pair of B fragments
//   (.trans turns B's [k][n] rows into the "col" fragment: no pack, no 16-bit loads): 6 instructions
//   per 16-wide step of K where version 6 issued 48 loads (16 of 32 bits for A, 32 of 16 bits for
//   B).  The tiles are laid out as before, so each 8-row matrix still lands on the same banks:
//   ldmatrix's reads of A are 4-way conflicts, B's 8-way (B's rows, 256 bytes apart, all start in
//   bank 0).
//
// version 8 (mma_gemm_kernel8): + an XOR-swizzled shared layout: 0 bank conflicts (tests/nn/
//   test_mma_gemm.py checks it on the offsets these functions compute, for every tile here).
//   Shared memory has 32 banks of 4 bytes: 128 consecutive bytes, 8 chunks of 16 bytes, touch each
//   bank once.  An ldmatrix reads one 16-byte chunk from each of 8 rows; a copy into the tile writes
//   8 consecutive chunks of a row per quarter of the warp.  The swizzle stores chunk c of row r at
//   chunk c ^ key(r) of the same row, key(r) = r % 8 for rows of 8 chunks or more:
//
//                stored at:   0    1    2    3    4    5    6    7    (16 bytes each: the 32 banks)
//       row 0   (key 0)       c0   c1   c2   c3   c4   c5   c6   c7
//       row 1   (key 1)       c1   c0   c3   c2   c5   c4   c7   c6
//       row 2   (key 2)       c2   c3   c0   c1   c6   c7   c4   c5
//       row 3   (key 3)       c3   c2   c1   c0   c7   c6   c5   c4
//       row 4   (key 4)       c4   c5   c6   c7   c0   c1   c2   c3
//       ...
//       row 7   (key 7)       c7   c6   c5   c4   c3   c2   c1   c0
//
//   Chunk c of rows 0-7 (what one ldmatrix matrix reads) lies in 8 different columns of banks;
//   chunks 0-7 of one row (what 8 lanes copy) too, permuted.  Rows of 4 chunks (BK = 32 halves,
//   64 bytes) put two rows in one 128-byte line: key(r) = (r / 2) % 4 on chunks 0-3, so rows
//   0-7's chunk c lie at 0 and 4, 1 and 5, 2 and 6, 3 and 7 of the banks' line:
//
//                stored at:   0    1    2    3  |  4    5    6    7
//       rows 0, 1 (key 0)     0.0  0.1  0.2  0.3 | 1.0  1.1  1.2  1.3      (r.c: row r, chunk c)
//       rows 2, 3 (key 1)     2.1  2.0  2.3  2.2 | 3.1  3.0  3.3  3.2
//       rows 4, 5 (key 2)     4.2  4.3  4.0  4.1 | 5.2  5.3  5.0  5.1
//       rows 6, 7 (key 3)     6.3  6.2  6.1  6.0 | 7.3  7.2  7.1  7.0
//
//   Nothing else changes: the swizzle costs an XOR per address and no memory.  (Padding each row
//   by 16 bytes, as wmma_gemm.cu does, costs memory, and rows of 4 chunks then lie 5 chunks apart:
//   the 8 chunks a quarter-warp copies, two rows' worth, meet in one place of the line, 2-way.)
//
// version 9 (mma_gemm_kernel9): + a multi-stage cp.async pipeline.
//   MMA_STAGES = 4 slices of A and B live in shared memory (64 KB, dynamic: above the default 48 KB,
//   the launcher raises the kernel's limit).  While the warps multiply slice k, the copies of slices
//   k+1 .. k+3 are in flight: cp.async copies 16 bytes from global to shared memory without passing
//   through registers, and its source size zero-fills the bytes past an edge (a chunk wholly outside
//   the matrix reads nothing).  Each thread commits one group of copies per slice (an empty one
//   past the last slice, so that the count stays one per slice) and waits, before reading slice k,
//   until at most MMA_STAGES - 2 groups are in flight; one __syncthreads per slice then makes every
//   thread's copies visible and tells that every warp is done with the stage the next copies
//   overwrite.
//
// version 10 (mma_gemm_kernel10_nn, _tn, _nt, _tt): a warp tile sized to the register file.
//   128 x 256 per block, 64 x 64 per warp: 4 x 8 mma tiles, 128 accumulator registers per thread,
//   and per 16-wide step of K 4 ldmatrix.x4 for A and 4 for B feed 32 mma (version 9: 4 + 2 for 16):
//   each A fragment loaded feeds 8 products instead of 4.  The price: one block of 8 warps per
//   SM (registers), 96 KB of shared memory for its 4 stages, and more wasted work on the edges of
//   small matrices.  Every layout: op(A) = A^T is A stored K x M, staged [k][m] and read with
//   ldmatrix.x4.trans; op(B) = B^T is B stored N x K, staged [n][k] and read without .trans (the
//   plain B tile [k][n] is the one that needs it), so dW = X^T dZ and dX = dZ W^T need no
//   transposed copy.  n/t in the name: A, then B, plain or transposed.  gpuedu.nn.amp runs every
//   GEMM of its step on this version.
//
// Sizes: blockDim (256, 1, 1); grid (ceil(N / 128), ceil(M / 128)) for versions 6-9,
// (ceil(N / 256), ceil(M / 128)) for version 10.  Shared memory: versions 6-8 16 KB, static;
// version 9 MMA_STAGES x 16 KB and version 10 MMA10_STAGES x 24 KB, dynamic (MMA_SHARED_BYTES).
// nvcc -Xptxas -v for sm_90: 103, 104, 122 and 126 registers (versions 6-9), 210-225 (version 10's
// four layouts), no spills: two blocks per SM for versions 6-9, one for version 10.
#include <cuda_fp16.h>
#include "ptx_sm80.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "mma_gemm.cu needs sm_80 or later (mma.sync m16n8k16, cp.async): on an older GPU use wmma_gemm.cu"
#endif

#define MMA_M 16                           // one mma.sync: a 16 x 8 tile of C, 16 deep in K
#define MMA_N 8
#define MMA_K 16
#define MMA_BM 128                         // versions 6-9: C tile per block 128 x 128
#define MMA_BN 128
#define MMA_BK 32                          // K slice staged per step (per pipeline stage)
#define MMA_WARPS_M 2                      // 2 x 4 warps: warp tiles 64 x 32
#define MMA_WARPS_N 4
#define MMA_THREADS (32 * MMA_WARPS_M * MMA_WARPS_N)
#define MMA_STAGES 4                       // version 9's pipeline depth
#define MMA10_BM 128                       // version 10: 128 x 256, warp tiles 64 x 64
#define MMA10_BN 256
#define MMA10_BK 32
#define MMA10_WARPS_M 2
#define MMA10_WARPS_N 4
#define MMA10_THREADS (32 * MMA10_WARPS_M * MMA10_WARPS_N)
#define MMA10_STAGES 4
// Dynamic shared memory of a pipelined version: stages x (A slice + B slice) halves x 2 bytes; the
// swizzle needs no padding.  Version 9: 4 x (4096 + 4096) x 2 = 65,536 bytes; version 10:
// 4 x (4096 + 8192) x 2 = 98,304 bytes.
#define MMA_SHARED_BYTES(bm, bn, bk, stages) ((stages) * ((bm) * (bk) + (bk) * (bn)) * 2)


// ---- the instructions: ptx_sm80.cuh's wrappers (cp_async16, cp_async_commit, cp_async_wait<N>, ldmatrix_x4,
// ldmatrix_x4_trans, MmaF16::fma), one each, their fragment layouts written beside them -----------------------


// ---- tiles in shared memory ---------------------------------------------------------------------

// Where chunk c (8 halves, 16 bytes) of row r of a tile whose rows are ROW_CHUNKS chunks long is
// stored (the picture in the header): c ^ (r % 8) for rows of 8 chunks or more; rows of 4 chunks
// share a 128-byte line two by two, keyed by the pair, (r / 2) % 4.
template <int ROW_CHUNKS>
__device__ __forceinline__ int swizzle(int r, int c)
{
    static_assert(ROW_CHUNKS == 4 || ROW_CHUNKS % 8 == 0, "the swizzle is for rows of 4 or 8k chunks");
    return ROW_CHUNKS >= 8 ? c ^ (r & 7) : c ^ ((r >> 1) & 3);
}

// The offset in halves of element (r, col) of a tile with rows COLS halves long, col a multiple of 8
// (the start of a chunk), swizzled or not.
template <int COLS, bool SWIZZLED>
__device__ __forceinline__ int tile_offset(int r, int col)
{
    return r * COLS + (SWIZZLED ? swizzle<COLS / 8>(r, col / 8) : col / 8) * 8;
}

// Two halves as one 32-bit register, lo in the lower half (an operand of mma.sync).
__device__ __forceinline__ unsigned pack_halves(__half lo, __half hi)
{
    __half2 pair = __halves2half2(lo, hi);
    return *reinterpret_cast<unsigned*>(&pair);
}

// Halves of a 16-byte chunk starting at (gr, gc) of a g_rows x g_cols matrix that lie inside it: 0..8.
__device__ __forceinline__ int chunk_inside(int g_rows, int g_cols, int gr, int gc)
{
    return gr < g_rows ? min(max(g_cols - gc, 0), 8) : 0;
}

// The 8 halves at (gr, gc .. gc+7) of a row-major matrix g (rows ld apart), zeros past its edges:
// one 16-byte load when vec and the chunk is whole, else element by element.
__device__ __forceinline__ uint4 load_chunk(const __half* __restrict__ g, int g_rows, int g_cols, int ld,
                                            int gr, int gc, bool vec)
{
    const int inside = chunk_inside(g_rows, g_cols, gr, gc);
    const __half* row = g + (size_t)gr * ld + gc;
    if (vec && inside == 8) return *reinterpret_cast<const uint4*>(row);
    const __half zero = __float2half_rn(0.0f);
    unsigned w[4];
#pragma unroll
    for (int p = 0; p < 4; ++p)
        w[p] = pack_halves(2 * p < inside ? row[2 * p] : zero, 2 * p + 1 < inside ? row[2 * p + 1] : zero);
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// Versions 6-8: copy a ROWS x COLS tile at (r0, c0) of g into shared memory s through registers,
// every load of this thread issued before its first store (so they are in flight together).
template <int THREADS, int ROWS, int COLS, bool SWIZZLED>
__device__ __forceinline__ void fill_tile(__half* s, const __half* __restrict__ g, int g_rows, int g_cols,
                                          int ld, int r0, int c0, bool vec)
{
    constexpr int ROW_CHUNKS = COLS / 8;
    constexpr int PER_THREAD = ROWS * ROW_CHUNKS / THREADS;
    static_assert(ROWS * ROW_CHUNKS % THREADS == 0, "every thread copies the same number of chunks");
    uint4 v[PER_THREAD];
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
        int chunk = threadIdx.x + i * THREADS;        // 8 consecutive lanes: 8 consecutive chunks of a row
        int r = chunk / ROW_CHUNKS, c = chunk % ROW_CHUNKS;
        v[i] = load_chunk(g, g_rows, g_cols, ld, r0 + r, c0 + 8 * c, vec);
    }
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
        int chunk = threadIdx.x + i * THREADS;
        int r = chunk / ROW_CHUNKS, c = chunk % ROW_CHUNKS;
        *reinterpret_cast<uint4*>(s + tile_offset<COLS, SWIZZLED>(r, 8 * c)) = v[i];
    }
}

// Versions 9-10: the same copy with cp.async (vec), or element by element through registers.
template <int THREADS, int ROWS, int COLS>
__device__ __forceinline__ void fill_tile_async(__half* s, const __half* __restrict__ g, int g_rows, int g_cols,
                                                int ld, int r0, int c0, bool vec)
{
    constexpr int ROW_CHUNKS = COLS / 8;
    static_assert(ROWS * ROW_CHUNKS % THREADS == 0, "every thread copies the same number of chunks");
#pragma unroll
    for (int i = 0; i < ROWS * ROW_CHUNKS / THREADS; ++i) {
        int chunk = threadIdx.x + i * THREADS;
        int r = chunk / ROW_CHUNKS, c = chunk % ROW_CHUNKS;
        int gr = r0 + r, gc = c0 + 8 * c;
        __half* dst = s + tile_offset<COLS, true>(r, 8 * c);
        if (vec) {
            // The source size zero-fills the rest: a chunk wholly outside reads nothing (the address
            // is then g itself, never dereferenced), a chunk across the edge only its inside.
            int inside = chunk_inside(g_rows, g_cols, gr, gc);
            const __half* src = inside > 0 ? g + (size_t)gr * ld + gc : g;
            cp_async16(shared_address(dst), src, 2 * inside);
        } else {
            *reinterpret_cast<uint4*>(dst) = load_chunk(g, g_rows, g_cols, ld, gr, gc, false);
        }
    }
}

// Fragments from a tile by ldmatrix: the tile element (row, column) whose 16 bytes this lane gives.
// op(A)'s 16 x 16 fragment at (m, k):
//   plain, As[m][k] (rows BK long): matrices (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15),
//     (m 8-15, k 8-15); lane l gives row m + l % 16 at column k + 8 (l / 16);
//   transposed, As[k][m] (rows BM long), with .trans: the same matrices, lane l gives row
//     k + l % 8 + 8 (l / 16) at column m + 8 ((l / 8) % 2).
template <bool TRANS>
__device__ __forceinline__ int2 a_fragment_row(int m, int k, int lane)
{
    return TRANS ? make_int2(k + (lane & 7) + ((lane >> 4) << 3), m + (((lane >> 3) & 1) << 3))
                 : make_int2(m + (lane & 15), k + ((lane >> 4) << 3));
}

// op(B)'s two 16 x 8 fragments at (k, n) and (k, n + 8), b0 for columns n .. n+7, b1 for n+8 .. n+15:
//   plain, Bs[k][n] (rows BN long), with .trans: matrices (k 0-7, n 0-7), (k 8-15, n 0-7),
//     (k 0-7, n 8-15), (k 8-15, n 8-15); lane l gives row k + l % 16 at column n + 8 (l / 16);
//   transposed, Bs[n][k] (rows BK long): the same matrices, lane l gives row n + l % 8 + 8 (l / 16)
//     at column k + 8 ((l / 8) % 2).
template <bool TRANS>
__device__ __forceinline__ int2 b_fragment_row(int k, int n, int lane)
{
    return TRANS ? make_int2(n + (lane & 7) + ((lane >> 4) << 3), k + (((lane >> 3) & 1) << 3))
                 : make_int2(k + (lane & 15), n + ((lane >> 4) << 3));
}

template <bool TRANS, int COLS, bool SWIZZLED>
__device__ __forceinline__ void load_a_fragment(unsigned (&a)[4], const __half* As, int m, int k, int lane)
{
    const int2 at = a_fragment_row<TRANS>(m, k, lane);
    const unsigned address = shared_address(As + tile_offset<COLS, SWIZZLED>(at.x, at.y));
    if (TRANS) ldmatrix_x4_trans(a, address);
    else       ldmatrix_x4(a, address);
}

template <bool TRANS, int COLS, bool SWIZZLED>
__device__ __forceinline__ void load_b_fragments(unsigned (&b0)[2], unsigned (&b1)[2], const __half* Bs, int k, int n,
                                                 int lane)
{
    const int2 at = b_fragment_row<TRANS>(k, n, lane);
    const unsigned address = shared_address(Bs + tile_offset<COLS, SWIZZLED>(at.x, at.y));
    unsigned r[4];
    if (TRANS) ldmatrix_x4(r, address);         // Bs[n][k] rows are already B's "col" layout
    else       ldmatrix_x4_trans(r, address);   // Bs[k][n] rows: transposed on the way
    b0[0] = r[0]; b0[1] = r[1];
    b1[0] = r[2]; b1[1] = r[3];
}

// ---- the epilogue: alpha * accumulators, from their registers to C ------------------------------

// Two neighbours of a row of C, (row, col) and (row, col + 1): one half2 / float2 store when both are
// inside and the address is aligned for it, else each inside one alone.
__device__ __forceinline__ void store_pair(void* __restrict__ C, int c_half, size_t at, int col, int N,
                                           float v0, float v1)
{
    if (c_half) {
        __half* p = reinterpret_cast<__half*>(C) + at;
        if (col + 1 < N && reinterpret_cast<size_t>(p) % 4 == 0) {
            *reinterpret_cast<__half2*>(p) = __floats2half2_rn(v0, v1);
        } else {
            if (col < N) p[0] = __float2half_rn(v0);
            if (col + 1 < N) p[1] = __float2half_rn(v1);
        }
    } else {
        float* p = reinterpret_cast<float*>(C) + at;
        if (col + 1 < N && reinterpret_cast<size_t>(p) % 8 == 0) {
            *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
        } else {
            if (col < N) p[0] = v0;
            if (col + 1 < N) p[1] = v1;
        }
    }
}

// A warp's FM x FN accumulators (its tile starts at row0, col0 of C): accumulator (i, j) holds
// C[row0 + 16i + g (+8)][col0 + 8j + 2t (+1)] (the C layout in the header).
template <int FM, int FN>
__device__ __forceinline__ void store_accumulators(void* __restrict__ C, const float (&acc)[FM][FN][4], int M,
                                                   int N, int row0, int col0, int lane, float alpha, int c_half)
{
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {                 // rows g and g + 8
                int row = row0 + i * MMA_M + g + 8 * h;
                int col = col0 + j * MMA_N + 2 * t;
                if (row < M && col < N)
                    store_pair(C, c_half, (size_t)row * N + col, col, N, alpha * acc[i][j][2 * h],
                               alpha * acc[i][j][2 * h + 1]);
            }
}

// Whether a matrix's 16-byte chunks are 16-byte aligned: its base is, and its rows are a multiple
// of 8 halves.
__device__ __forceinline__ bool chunks_aligned(const __half* p, int ld)
{
    return reinterpret_cast<size_t>(p) % 16 == 0 && ld % 8 == 0;
}


// ---- version 6: mma.sync, fragments loaded lane by lane ------------------------------------------
#ifndef MMA_GEMM_NO_KERNELS   // a file that includes this one for its helpers can leave the kernels out

// Version 6: one mma.sync per 16 x 8 x 16 tile, its fragments read by each lane from the places the
// PTX ISA's layout gives it (a[] by 32-bit loads, b[] by 16-bit loads packed in pairs); one stage.
extern "C" __global__ void __launch_bounds__(MMA_THREADS) mma_gemm_kernel6(
    void* __restrict__ C, const __half* __restrict__ A, const __half* __restrict__ B,
    int M, int N, int K, int lda, int ldb, float alpha, int c_half)
{
    constexpr int WM = MMA_BM / MMA_WARPS_M, WN = MMA_BN / MMA_WARPS_N;   // warp tile 64 x 32
    constexpr int FM = WM / MMA_M, FN = WN / MMA_N;                       // 4 x 4 mma tiles
    __shared__ __align__(128) __half As[MMA_BM * MMA_BK];                  // As[m][k]
    __shared__ __align__(128) __half Bs[MMA_BK * MMA_BN];                  // Bs[k][n]

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane >> 2, t = lane & 3;                                 // group and place in it
    const int wm = (warp / MMA_WARPS_N) * WM, wn = (warp % MMA_WARPS_N) * WN;
    const int m0 = blockIdx.y * MMA_BM, n0 = blockIdx.x * MMA_BN;
    const bool vec_a = chunks_aligned(A, lda), vec_b = chunks_aligned(B, ldb);

    float acc[FM][FN][4] = {};
    for (int k0 = 0; k0 < K; k0 += MMA_BK) {
        fill_tile<MMA_THREADS, MMA_BM, MMA_BK, false>(As, A, M, K, lda, m0, k0, vec_a);
        fill_tile<MMA_THREADS, MMA_BK, MMA_BN, false>(Bs, B, K, N, ldb, k0, n0, vec_b);
        __syncthreads();   // the slices are complete before any warp reads them
#pragma unroll
        for (int kk = 0; kk < MMA_BK; kk += MMA_K) {
            unsigned a[FM][4], b[FN][2];
#pragma unroll
            for (int i = 0; i < FM; ++i) {
                // a[0..3] = rows g, g+8 at columns 2t and 2t+8: each a pair of halves, one 32-bit load
                const __half* p = As + (wm + i * MMA_M + g) * MMA_BK + kk + 2 * t;
                a[i][0] = *reinterpret_cast<const unsigned*>(p);
                a[i][1] = *reinterpret_cast<const unsigned*>(p + 8 * MMA_BK);
                a[i][2] = *reinterpret_cast<const unsigned*>(p + 8);
                a[i][3] = *reinterpret_cast<const unsigned*>(p + 8 * MMA_BK + 8);
            }
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                // b[0] = rows 2t, 2t+1 of column g; b[1] = rows 2t+8, 2t+9: a column of Bs[k][n], so
                // two 16-bit loads per register, packed
                const __half* p = Bs + (kk + 2 * t) * MMA_BN + wn + j * MMA_N + g;
                b[j][0] = pack_halves(p[0], p[MMA_BN]);
                b[j][1] = pack_halves(p[8 * MMA_BN], p[9 * MMA_BN]);
            }
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) MmaF16::fma(acc[i][j], a[i], b[j][0], b[j][1]);
        }
        __syncthreads();   // every warp has read the slices before the next step overwrites them
    }
    store_accumulators<FM, FN>(C, acc, M, N, m0 + wm, n0 + wn, lane, alpha, c_half);
}


// ---- versions 7 and 8: ldmatrix; then the swizzled layout ----------------------------------------

// Versions 7 (SWIZZLED false) and 8 (true): version 6 with each fragment loaded by one ldmatrix.x4 for
// the warp (load_a_fragment, load_b_fragments), from tiles stored plainly or swizzled (tile_offset).
template <bool SWIZZLED>
__device__ __forceinline__ void mma_gemm_staged(void* __restrict__ C, const __half* __restrict__ A,
                                                const __half* __restrict__ B, int M, int N, int K, int lda,
                                                int ldb, float alpha, int c_half)
{
    constexpr int WM = MMA_BM / MMA_WARPS_M, WN = MMA_BN / MMA_WARPS_N;   // warp tile 64 x 32
    constexpr int FM = WM / MMA_M, FN = WN / MMA_N;                       // 4 x 4 mma tiles
    __shared__ __align__(128) __half As[MMA_BM * MMA_BK];                  // As[m][k]
    __shared__ __align__(128) __half Bs[MMA_BK * MMA_BN];                  // Bs[k][n]

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / MMA_WARPS_N) * WM, wn = (warp % MMA_WARPS_N) * WN;
    const int m0 = blockIdx.y * MMA_BM, n0 = blockIdx.x * MMA_BN;
    const bool vec_a = chunks_aligned(A, lda), vec_b = chunks_aligned(B, ldb);

    float acc[FM][FN][4] = {};
    for (int k0 = 0; k0 < K; k0 += MMA_BK) {
        fill_tile<MMA_THREADS, MMA_BM, MMA_BK, SWIZZLED>(As, A, M, K, lda, m0, k0, vec_a);
        fill_tile<MMA_THREADS, MMA_BK, MMA_BN, SWIZZLED>(Bs, B, K, N, ldb, k0, n0, vec_b);
        __syncthreads();   // the slices are complete before any warp reads them
#pragma unroll
        for (int kk = 0; kk < MMA_BK; kk += MMA_K) {
            unsigned a[FM][4], b[FN][2];
#pragma unroll
            for (int i = 0; i < FM; ++i)
                load_a_fragment<false, MMA_BK, SWIZZLED>(a[i], As, wm + i * MMA_M, kk, lane);
#pragma unroll
            for (int j = 0; j < FN; j += 2)
                load_b_fragments<false, MMA_BN, SWIZZLED>(b[j], b[j + 1], Bs, kk, wn + j * MMA_N, lane);
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) MmaF16::fma(acc[i][j], a[i], b[j][0], b[j][1]);
        }
        __syncthreads();   // every warp has read the slices before the next step overwrites them
    }
    store_accumulators<FM, FN>(C, acc, M, N, m0 + wm, n0 + wn, lane, alpha, c_half);
}

// Version 7: + ldmatrix.
extern "C" __global__ void __launch_bounds__(MMA_THREADS) mma_gemm_kernel7(
    void* __restrict__ C, const __half* __restrict__ A, const __half* __restrict__ B,
    int M, int N, int K, int lda, int ldb, float alpha, int c_half)
{
    mma_gemm_staged<false>(C, A, B, M, N, K, lda, ldb, alpha, c_half);
}

// Version 8: + the swizzled layout, with no bank conflicts.
extern "C" __global__ void __launch_bounds__(MMA_THREADS) mma_gemm_kernel8(
    void* __restrict__ C, const __half* __restrict__ A, const __half* __restrict__ B,
    int M, int N, int K, int lda, int ldb, float alpha, int c_half)
{
    mma_gemm_staged<true>(C, A, B, M, N, K, lda, ldb, alpha, c_half);
}


// ---- versions 9 and 10: the cp.async pipeline; then the warp tile sized to the registers ---------

// C = alpha * op(A) @ op(B) on a BM x BN tile per block, STAGES slices of BK in flight.
// A is stored M x K (TRANS_A false) or K x M (true), rows lda apart; B is stored K x N (TRANS_B
// false) or N x K (true), rows ldb apart.
template <int BM, int BN, int BK, int STAGES, int WARPS_ALONG_M, int WARPS_ALONG_N, bool TRANS_A, bool TRANS_B>
__device__ __forceinline__ void mma_gemm_pipelined(void* __restrict__ C, const __half* __restrict__ A,
                                                   const __half* __restrict__ B, int M, int N, int K, int lda,
                                                   int ldb, float alpha, int c_half)
{
    extern __shared__ __align__(128) __half mma_smem[];   // STAGES x (A slice, B slice)
    constexpr int THREADS = 32 * WARPS_ALONG_M * WARPS_ALONG_N;
    constexpr int WM = BM / WARPS_ALONG_M, WN = BN / WARPS_ALONG_N;        // 64 x 32 (v9) or 64 x 64 (v10)
    constexpr int FM = WM / MMA_M, FN = WN / MMA_N;                        // 4 x 4 or 4 x 8 mma tiles
    constexpr int A_COLS = TRANS_A ? BM : BK;              // a row of the A slice: As[m][k] or As[k][m]
    constexpr int B_COLS = TRANS_B ? BK : BN;              // of the B slice: Bs[k][n] or Bs[n][k]
    constexpr int STAGE = BM * BK + BK * BN;               // halves per stage
    static_assert(FN % 2 == 0, "B's fragments come two by two from one ldmatrix.x4");

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / WARPS_ALONG_N) * WM, wn = (warp % WARPS_ALONG_N) * WN;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const bool vec_a = chunks_aligned(A, lda), vec_b = chunks_aligned(B, ldb);
    const int k_tiles = (K + BK - 1) / BK;

    // Slice kt of op(A) (BM x BK) and op(B) (BK x BN) into stage s, as stored: a transposed operand's
    // slice is its stored rows k0 .. k0+BK-1, or the rows m0 / n0 .. of a plain one.
    auto load_stage = [&](int s, int kt) {
        __half* As = mma_smem + s * STAGE;
        __half* Bs = As + BM * BK;
        const int k0 = kt * BK;
        if (TRANS_A) fill_tile_async<THREADS, BK, BM>(As, A, K, M, lda, k0, m0, vec_a);   // As[k][m]
        else         fill_tile_async<THREADS, BM, BK>(As, A, M, K, lda, m0, k0, vec_a);   // As[m][k]
        if (TRANS_B) fill_tile_async<THREADS, BN, BK>(Bs, B, N, K, ldb, n0, k0, vec_b);   // Bs[n][k]
        else         fill_tile_async<THREADS, BK, BN>(Bs, B, K, N, ldb, k0, n0, vec_b);   // Bs[k][n]
    };

    float acc[FM][FN][4] = {};
    // Prologue: slices 0 .. STAGES-2 in flight, one group per slice (an empty one past the last), so
    // that the wait below counts slices.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles) load_stage(s, s);
        cp_async_commit();
    }

    for (int kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<STAGES - 2>();   // this thread's copies of slice kt have landed
        __syncthreads();   // everyone's copies of slice kt are visible, and every warp is done with
                           // slice kt-1, whose stage the copies issued next overwrite
        const int next = kt + STAGES - 1;
        if (next < k_tiles) load_stage(next % STAGES, next);
        cp_async_commit();

        const __half* As = mma_smem + (kt % STAGES) * STAGE;
        const __half* Bs = As + BM * BK;
#pragma unroll
        for (int kk = 0; kk < BK; kk += MMA_K) {
            unsigned a[FM][4], b[FN][2];
#pragma unroll
            for (int i = 0; i < FM; ++i)
                load_a_fragment<TRANS_A, A_COLS, true>(a[i], As, wm + i * MMA_M, kk, lane);
#pragma unroll
            for (int j = 0; j < FN; j += 2)
                load_b_fragments<TRANS_B, B_COLS, true>(b[j], b[j + 1], Bs, kk, wn + j * MMA_N, lane);
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) MmaF16::fma(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
    cp_async_wait<0>();   // nothing left in flight (the groups past the last slice are empty)
    store_accumulators<FM, FN>(C, acc, M, N, m0 + wm, n0 + wn, lane, alpha, c_half);
}

// Version 9: + the cp.async pipeline, MMA_STAGES slices deep, on version 8's tiles and warp tiles.
extern "C" __global__ void __launch_bounds__(MMA_THREADS) mma_gemm_kernel9(
    void* __restrict__ C, const __half* __restrict__ A, const __half* __restrict__ B,
    int M, int N, int K, int lda, int ldb, float alpha, int c_half)
{
    mma_gemm_pipelined<MMA_BM, MMA_BN, MMA_BK, MMA_STAGES, MMA_WARPS_M, MMA_WARPS_N, false, false>(
        C, A, B, M, N, K, lda, ldb, alpha, c_half);
}

// Version 10's four layouts: n = stored as op() wants it, t = transposed (see the header).
#define MMA10_KERNEL(name, ta, tb)                                                                      \
    extern "C" __global__ void __launch_bounds__(MMA10_THREADS) name(                                   \
        void* __restrict__ C, const __half* __restrict__ A, const __half* __restrict__ B,              \
        int M, int N, int K, int lda, int ldb, float alpha, int c_half)                                \
    {                                                                                                  \
        mma_gemm_pipelined<MMA10_BM, MMA10_BN, MMA10_BK, MMA10_STAGES, MMA10_WARPS_M, MMA10_WARPS_N,    \
                           ta, tb>(C, A, B, M, N, K, lda, ldb, alpha, c_half);                         \
    }
MMA10_KERNEL(mma_gemm_kernel10_nn, false, false)
MMA10_KERNEL(mma_gemm_kernel10_tn, true, false)
MMA10_KERNEL(mma_gemm_kernel10_nt, false, true)
MMA10_KERNEL(mma_gemm_kernel10_tt, true, true)
#endif
