// attention.cu: scaled dot-product attention, O = softmax(mask(Q K^T * scale)) V, three ways, and the
// backward pass of the tiled one.
//
// Layout. Q, K, V, O (and dQ, dK, dV, dO) are [batch, seq, heads * HEAD_DIM] row-major: head h of a row is
// the HEAD_DIM floats at h * HEAD_DIM (the heads split along the last axis, as a layer's x W_q comes out),
// so no transpose is ever needed. A launch covers batch * heads independent problems, "bh" below, each an
// N x HEAD_DIM slice (N = seq). The score and probability matrices of versions 1 and 2 are [bh][N][N];
// the row log-sum-exp of version 3 is [bh][N]. HEAD_DIM is compiled in (-DHEAD_DIM=16 ...): the rows a
// thread owns then live in registers, indexed by constants.
// Causal masking: query i sees keys j <= i only (the score of j > i counts as -inf, its weight as 0).
// scale is usually 1 / sqrt(HEAD_DIM).
//
// version 1 (naive): three launches and two N x N matrices in global memory.
//     attention_scores   S = mask(Q K^T * scale), one thread per score        writes N*N floats
//     softmax_rows       P = softmax(S) (softmax.cu, version 3)               reads and writes N*N floats
//     attention_pv       O = P V, one thread per output                       reads N*N floats (each row of P
//                                                                             by HEAD_DIM threads, through
//                                                                             the cache)
// version 2 (fused softmax): the scores, the scale, the mask and the softmax in one launch, one warp a
//     query row: a first pass keeps the online softmax's running (max, sum) per lane and merges the lanes
//     with shuffles (softmax.cu's version 3), a second pass recomputes each score and writes P. S never
//     reaches memory; P does (N*N floats written, then read by attention_pv).
// version 3 (tiled, FlashAttention-style): one launch, no N x N matrix anywhere. A block takes FLASH_ROWS
//     query rows (one thread each, its q row and output row in registers) and streams K and V through
//     shared memory FLASH_KEYS rows at a time. For each tile a thread computes its FLASH_KEYS scores, the
//     tile's maximum, rescales what it has so far by exp(m_old - m_new) (the online softmax, now applied
//     to the output row too), and adds p_j V_j. At the end O = o / l, and it saves L = m + log(l), the
//     row's log-sum-exp, for the backward pass. Global traffic: Q read and O written once (N * HEAD_DIM
//     floats each), K and V read once per query tile (2 * N * HEAD_DIM * ceil(N / FLASH_ROWS) floats: still
//     growing as N^2, but reads of two N * HEAD_DIM arrays, which a GPU's L2 cache can hold), and nothing
//     N x N written or read.
//     attention_flash_forward_half is the same kernel on __half Q, K, V and O (half the bytes moved): each
//     element is widened to float as it enters shared memory, every product, maximum and sum is float, and
//     O is rounded to half once, at the end; the log-sum-exp stays float.
// version 4 (tensor cores, FlashAttention-2 style): version 3's online softmax with both products on the
//     tensor cores (mma.sync m16n8k16: FP16 or BF16 inputs, FP32 sums; the PTX wrappers of ptx_sm80.cuh),
//     for Q, K, V and O in FP16 (attention_mma_forward) or BF16 (attention_mma_forward_bf16, the elements
//     as their 16-bit patterns). A block of MMA_WARPS warps owns MMA_ROWS query rows, a warp 16 of them:
//       - Q comes in once, as A fragments (ldmatrix), and stays in registers;
//       - K and V stream through shared memory MMA_KEYS rows at a time, copied by cp.async into one of two
//         buffers while the warps compute on the other (commit_group / wait_group), read with ldmatrix
//         (.trans for V: V's rows arrive as the columns B wants);
//       - S = Q K^T for the warp's 16 rows and the tile's keys is a row of m16n8 accumulator fragments, in
//         registers. The running maximum and sum are computed there: a lane holds two rows of each fragment
//         (groupID and groupID + 8), and the 4 lanes of a group hold the rest of those rows, so a row's
//         maximum is the lane's, then two __shfl_xor_sync (1 and 2) across its group;
//       - P = exp(S - m) is rounded to FP16/BF16 in registers and used as the A operand of O += P V as it
//         is: the C fragments of two neighbouring n8 tiles are, element for element, one k16 A fragment
//         (a comment at mma_forward shows the match), so P never touches shared memory;
//       - O (16 x HEAD_DIM a warp, HEAD_DIM / 8 accumulator fragments) is rescaled by exp(m_old - m_new)
//         as in version 3, divided by l at the end, rounded once and written through shared memory in
//         16-byte rows; L = m + log(l) is saved as version 3 saves it, so attention_backward works from it.
//     What changes against version 3: the products run on the tensor cores, a warp shares a row's work
//     among 4 lanes instead of a thread doing all of it, and K, V arrive while the previous tile is being
//     used. What it costs: P is rounded to 16 bits before P V (a relative 2^-11 in FP16, 2^-8 in BF16, each
//     weight). HEAD_DIM must be a multiple of 16 (a k16 step of Q K^T): 16, 32, 48 or 64; the GPU sm_80 or
//     later (ptx_sm80.cuh's wrappers trap on older ones, where ops.attention refuses version 4).
//
// Backward of versions 3 and 4, by recomputation. With S = scale Q K^T, P = softmax(S) row by row, O = P V and
// dO = dL/dO given:
//     dV = P^T dO                                 (O = P V)
//     dP = dO V^T
//     dS = P o (dP - rowsum(dO o O))              (the softmax's Jacobian: dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik),
//                                                  and sum_k P_ik dP_ik = sum_k P_ik (dO_i . V_k) = dO_i . O_i)
//     dQ = scale dS K,   dK = scale dS^T Q        (S = scale Q K^T)
// P is never stored: each kernel recomputes P_ij = exp(scale q_i . k_j - L_i) from the saved L, exactly the
// probabilities of the forward (L_i = log sum_j exp(S_ij)). That costs the QK^T products again but keeps
// the backward's memory O(N) as well. Three launches:
//     attention_backward_rowdot  D_i = dO_i . O_i, one warp a row
//     attention_backward_dkdv    a block per FLASH_ROWS keys (a thread per key, dk and dv in registers)
//                                streams Q, dO, L, D in tiles of BWD_TILE query rows: dV_j += P_ij dO_i and
//                                dK_j += dS_ij q_i
//     attention_backward_dq      a block per FLASH_ROWS queries (a thread per query, dq in registers)
//                                streams K, V in tiles of BWD_TILE key rows: dQ_i += dS_ij k_j
// Splitting dK, dV from dQ recomputes P twice, but each output has one writer and its sums run in a
// fixed order: no atomics, the same bits every run.
#include <cuda_fp16.h>

#include "common.cuh"
#include "ptx_sm80.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#define MAX_HEAD_DIM 64      // shared memory: version 3's and the backward's tiles fit 48 KiB up to here
#define FLASH_ROWS 64        // version 3 and backward: rows a block owns, one thread each
#define FLASH_KEYS 32        // version 3: key and value rows a shared-memory tile holds
#define BWD_TILE 16          // backward: rows of the streamed operand a shared-memory tile holds
#define PAIR_TILE 16         // versions 1-2: the 16 x 16 thread blocks of attention_scores and attention_pv
#define ROW_WARPS 4          // version 2 and the row dot products: warps a block, one row each
#define MMA_WARPS 4          // version 4: warps a block, 16 query rows each
#define MMA_ROWS 64          // version 4: query rows a block owns (16 a warp: MMA_WARPS * 16)
#define MMA_KEYS 64          // version 4: key and value rows a shared-memory tile holds (a multiple of 16)
#define MMA_PITCH (HEAD_DIM + 8)   // version 4: halves a shared row holds: 8 more than HEAD_DIM (16 bytes),
                                   // so that the 8 rows an ldmatrix reads start 16 bytes apart modulo 128
                                   // and hit 32 different banks (rows 128 bytes apart would share 4)

#if HEAD_DIM > MAX_HEAD_DIM
#error "HEAD_DIM must be at most MAX_HEAD_DIM"
#endif
#if MMA_ROWS != 16 * MMA_WARPS
#error "MMA_ROWS must be 16 * MMA_WARPS: a warp owns 16 query rows"
#endif

// Offset of row i of problem bh: batch b = bh / heads, head h = bh % heads, in a [batch, N, heads * HEAD_DIM]
// array.
__device__ inline size_t row_offset(int bh, int i, int N, int heads) {
    int b = bh / heads, h = bh % heads;
    return ((size_t)b * N + i) * ((size_t)heads * HEAD_DIM) + (size_t)h * HEAD_DIM;
}

// Copy rows first .. first+ROWS-1 of one head (HEAD_DIM floats each) into a shared tile, all the block's
// threads together, consecutive threads on consecutive floats (coalesced); rows past N are zero.
// Elements of global memory as float and back: float as it is, __half widened exactly / rounded to nearest.
__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__half v) { return __half2float(v); }
__device__ inline void from_float(float& out, float v) { out = v; }
__device__ inline void from_float(__half& out, float v) { out = __float2half_rn(v); }

template <int ROWS, int PITCH, class T>
__device__ inline void load_rows(float (*tile)[PITCH], const T* src, int bh, int first, int N, int heads) {
    for (int e = threadIdx.x; e < ROWS * HEAD_DIM; e += blockDim.x) {
        int r = e / HEAD_DIM, c = e % HEAD_DIM;
        tile[r][c] = first + r < N ? to_float(src[row_offset(bh, first + r, N, heads) + c]) : 0.0f;
    }
}

// The reverse: a shared tile to rows first .. of one head, rows past N skipped.
template <int ROWS, int PITCH, class T>
__device__ inline void store_rows(T* dst, float (*tile)[PITCH], int bh, int first, int N, int heads) {
    for (int e = threadIdx.x; e < ROWS * HEAD_DIM; e += blockDim.x) {
        int r = e / HEAD_DIM, c = e % HEAD_DIM;
        if (first + r < N) from_float(dst[row_offset(bh, first + r, N, heads) + c], tile[r][c]);
    }
}

// ---- version 1 ---------------------------------------------------------------------------------------
// S[bh][i][j] = scale q_i . k_j, or -inf where the mask hides key j from query i.
// Block PAIR_TILE x PAIR_TILE: x runs along j (consecutive threads write consecutive scores), y along i;
// grid (ceil(N / PAIR_TILE), ceil(N / PAIR_TILE), batch * heads).
extern "C" __global__ void attention_scores(float* S, const float* Q, const float* K, int N, int heads,
                                            float scale, int causal) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int bh = blockIdx.z;
    if (i >= N || j >= N) return;
    float s = -INFINITY;
    if (!(causal && j > i)) {
        const float* q = Q + row_offset(bh, i, N, heads);
        const float* k = K + row_offset(bh, j, N, heads);
        float dot = 0.0f;
        for (int c = 0; c < HEAD_DIM; c++) dot += q[c] * k[c];
        s = dot * scale;
    }
    S[((size_t)bh * N + i) * N + j] = s;
}

// O[bh][i][:] = sum_j P[bh][i][j] V[bh][j][:]. Block PAIR_TILE x PAIR_TILE: x along the HEAD_DIM outputs of
// a row, y along i; grid (ceil(HEAD_DIM / PAIR_TILE), ceil(N / PAIR_TILE), batch * heads). Versions 1 and 2.
extern "C" __global__ void attention_pv(float* O, const float* P, const float* V, int N, int heads) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int bh = blockIdx.z;
    if (i >= N || c >= HEAD_DIM) return;
    const float* p = P + ((size_t)bh * N + i) * N;
    float acc = 0.0f;
    for (int j = 0; j < N; j++) acc += p[j] * V[row_offset(bh, j, N, heads) + c];
    O[row_offset(bh, i, N, heads) + c] = acc;
}

// ---- version 2 ---------------------------------------------------------------------------------------
// Merge an online-softmax state (m2, d2) into (m, d): d counts sum exp(s - m). An empty state is (-inf, 0).
__device__ inline void merge_state(float& m, float& d, float m2, float d2) {
    float m_new = fmaxf(m, m2);
    if (m_new == -INFINITY) return;  // both empty: exp(-inf - -inf) would be NaN
    d = d * expf(m - m_new) + d2 * expf(m2 - m_new);
    m = m_new;
}

// P[bh][i][:] = softmax(mask(scale q_i K^T)), one warp a query row, ROW_WARPS warps a block;
// grid ceil(problems * N / ROW_WARPS), problems = batch * heads. Lane l takes keys l, l+32, ...: each lane
// reads its own row of K (32 rows a request: uncoalesced, which version 3's shared tiles fix); q_i, read by
// every lane, is staged once in shared memory.
extern "C" __global__ void attention_scores_softmax(float* P, const float* Q, const float* K, int problems, int N,
                                                    int heads, float scale, int causal) {
    __shared__ float qs[ROW_WARPS][HEAD_DIM];
    int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    long row = (long)blockIdx.x * ROW_WARPS + warp;     // bh * N + i
    // The whole warp leaves together (row is the same for its lanes): the shuffles below see all 32.
    if (row >= (long)problems * N) return;
    int bh = (int)(row / N), i = (int)(row % N);
    const float* q = Q + row_offset(bh, i, N, heads);
    for (int c = lane; c < HEAD_DIM; c += WARP_SIZE) qs[warp][c] = q[c] * scale;   // the scale folded into q
    __syncwarp();
    int keys = causal ? i + 1 : N;                        // causal: keys past i are masked, weight 0
    // Pass 1: each lane's online (max, sum) over its keys, then the 32 states merged.
    float m = -INFINITY, d = 0.0f;
    for (int j = lane; j < keys; j += WARP_SIZE) {
        const float* k = K + row_offset(bh, j, N, heads);
        float s = 0.0f;
        for (int c = 0; c < HEAD_DIM; c++) s += qs[warp][c] * k[c];
        merge_state(m, d, s, 1.0f);
    }
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2) {
        float m_other = __shfl_xor_sync(FULL_MASK, m, offset);
        float d_other = __shfl_xor_sync(FULL_MASK, d, offset);
        merge_state(m, d, m_other, d_other);
    }
    // Pass 2: every score again (Q K^T twice, but S is never written), normalised as it is written.
    float* p = P + row * N;
    float inv = 1.0f / d;                                 // d >= 1: key 0 is never masked
    for (int j = lane; j < N; j += WARP_SIZE) {
        float weight = 0.0f;
        if (j < keys) {
            const float* k = K + row_offset(bh, j, N, heads);
            float s = 0.0f;
            for (int c = 0; c < HEAD_DIM; c++) s += qs[warp][c] * k[c];
            weight = expf(s - m) * inv;
        }
        p[j] = weight;
    }
}

// ---- version 3: the tiled forward ---------------------------------------------------------------------
// O = softmax(mask(scale Q K^T)) V and L[bh][i] = the log-sum-exp of row i's scores (skipped when L is NULL).
// Block FLASH_ROWS threads, one query row each; grid (ceil(N / FLASH_ROWS), batch * heads).
// T is the element type of Q, K, V and O in global memory (float or __half); the arithmetic is float.
// The shared tiles, declared by the two kernels below:
//   Qs [FLASH_ROWS][HEAD_DIM + 1]  the Q tile, later the O tile; +1: a thread's own row, read down a column by
//                                  the warp, lands on 32 banks
//   Ks, Vs [FLASH_KEYS][HEAD_DIM]  every thread reads the same K, V element at once: a broadcast, no padding
template <class T>
__device__ inline void flash_forward(float (*Qs)[HEAD_DIM + 1], float (*Ks)[HEAD_DIM], float (*Vs)[HEAD_DIM],
                                     T* O, float* L, const T* Q, const T* K, const T* V, int N, int heads,
                                     float scale, int causal) {
    int bh = blockIdx.y, q0 = blockIdx.x * FLASH_ROWS, t = threadIdx.x;
    int i = q0 + t;                                  // this thread's query row (past N: computes, never writes)
    load_rows<FLASH_ROWS>(Qs, Q, bh, q0, N, heads);
    __syncthreads();
    float q[HEAD_DIM], o[HEAD_DIM];
    for (int c = 0; c < HEAD_DIM; c++) { q[c] = Qs[t][c] * scale; o[c] = 0.0f; }
    float m = -INFINITY, l = 0.0f;                   // the running maximum and sum of exp(s - m)
    // Causal: no row of this block sees a key past its last row, so those tiles are not even loaded.
    int key_end = causal ? min(N, q0 + FLASH_ROWS) : N;
    for (int k0 = 0; k0 < key_end; k0 += FLASH_KEYS) {   // the same trip count in every thread: the
        __syncthreads();                                   // barriers are reached by all
        load_rows<FLASH_KEYS>(Ks, K, bh, k0, N, heads);
        load_rows<FLASH_KEYS>(Vs, V, bh, k0, N, heads);
        __syncthreads();
        float s[FLASH_KEYS];
        float tile_max = -INFINITY;
        for (int r = 0; r < FLASH_KEYS; r++) {
            int j = k0 + r;
            float dot = 0.0f;
            for (int c = 0; c < HEAD_DIM; c++) dot += q[c] * Ks[r][c];
            s[r] = (j >= N || (causal && j > i)) ? -INFINITY : dot;
            tile_max = fmaxf(tile_max, s[r]);
        }
        float m_new = fmaxf(m, tile_max);
        if (m_new == -INFINITY) continue;            // nothing visible yet: o and l stay 0
        // What was summed relative to m is rescaled to m_new (on the first tile m = -inf: the factor is
        // 0, and so are o and l).
        float correction = expf(m - m_new);
        l *= correction;
        for (int c = 0; c < HEAD_DIM; c++) o[c] *= correction;
        for (int r = 0; r < FLASH_KEYS; r++) {
            float p = expf(s[r] - m_new);            // a masked key: exp(-inf) = 0
            l += p;
            for (int c = 0; c < HEAD_DIM; c++) o[c] += p * Vs[r][c];
        }
        m = m_new;
    }
    __syncthreads();                                 // Qs becomes the output tile
    float inv = l > 0.0f ? 1.0f / l : 0.0f;          // l = 0 only for rows past N
    for (int c = 0; c < HEAD_DIM; c++) Qs[t][c] = o[c] * inv;
    if (L != NULL && i < N) L[(size_t)bh * N + i] = m + logf(l);
    __syncthreads();
    store_rows<FLASH_ROWS>(O, Qs, bh, q0, N, heads);
}

extern "C" __global__ void attention_flash_forward(float* O, float* L, const float* Q, const float* K,
                                                   const float* V, int N, int heads, float scale, int causal) {
    __shared__ float Qs[FLASH_ROWS][HEAD_DIM + 1];
    __shared__ float Ks[FLASH_KEYS][HEAD_DIM], Vs[FLASH_KEYS][HEAD_DIM];
    flash_forward(Qs, Ks, Vs, O, L, Q, K, V, N, heads, scale, causal);
}

extern "C" __global__ void attention_flash_forward_half(__half* O, float* L, const __half* Q, const __half* K,
                                                        const __half* V, int N, int heads, float scale,
                                                        int causal) {
    __shared__ float Qs[FLASH_ROWS][HEAD_DIM + 1];
    __shared__ float Ks[FLASH_KEYS][HEAD_DIM], Vs[FLASH_KEYS][HEAD_DIM];
    flash_forward(Qs, Ks, Vs, O, L, Q, K, V, N, heads, scale, causal);
}

// ---- version 4: the tiled forward on tensor cores ----------------------------------------------------
// (compiled where HEAD_DIM is a multiple of 16; ops.attention refuses version 4 for other head sizes)
#if HEAD_DIM % 16 == 0
#define MMA_THREADS (MMA_WARPS * WARP_SIZE)

// Issue the cp.async copies of rows first .. first+ROWS-1 of one head (HEAD_DIM 16-bit elements each, in
// 16-byte chunks, consecutive threads on consecutive chunks) into a shared tile; rows past N are zero-filled
// (no byte read: the address given is row 0's, which exists). Every row starts 16-byte aligned: rows are
// HEAD_DIM * 2 = a multiple of 32 bytes apart in global memory and MMA_PITCH * 2 in shared memory.
template <int ROWS>
__device__ inline void copy_rows_async(unsigned short (*tile)[MMA_PITCH], const unsigned short* src, int bh,
                                       int first, int N, int heads) {
    const int CHUNKS = HEAD_DIM / 8;                 // 16-byte chunks a row
    for (int e = threadIdx.x; e < ROWS * CHUNKS; e += MMA_THREADS) {
        int r = e / CHUNKS, c = e % CHUNKS * 8;
        bool inside = first + r < N;
        cp_async16(&tile[r][c], src + row_offset(bh, inside ? first + r : 0, N, heads) + c, inside ? 16 : 0);
    }
}

// O = softmax(mask(scale Q K^T)) V and L (skipped when NULL) for MMA_ROWS query rows of problem bh, Mma
// (MmaF16 or MmaBF16) giving the products and the rounding. Block MMA_THREADS threads; grid
// (ceil(N / MMA_ROWS), batch * heads). Shared tiles (declared by the kernels below, rows MMA_PITCH halves):
//   Qs [MMA_ROWS]           the block's Q rows; later each warp's 16 rows of it stage the warp's O rows
//   Ks, Vs [2][MMA_KEYS]    two buffers each: tile t is computed on while tile t + 1 lands
// Lane l of warp w holds, of each 16-row fragment, rows q0 + 16w + g and q0 + 16w + g + 8 (g = l / 4,
// the groupID), and of each n8 tile the columns 2t, 2t+1 (t = l % 4): ptx_sm80.cuh's picture.
template <class Mma>
__device__ inline void mma_forward(unsigned short (*Qs)[MMA_PITCH], unsigned short (*Ks)[MMA_KEYS][MMA_PITCH],
                                   unsigned short (*Vs)[MMA_KEYS][MMA_PITCH], unsigned short* O, float* L,
                                   const unsigned short* Q, const unsigned short* K, const unsigned short* V,
                                   int N, int heads, float scale, int causal) {
    int bh = blockIdx.y;
    // Causal: block x sees x + 1 key tiles. The grid's first blocks take the last rows, which see the most
    // tiles, so that the short blocks fill in behind the long ones rather than the other way round.
    int q0 = (causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * MMA_ROWS;
    int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    int g = lane / 4, t4 = lane % 4;
    int w0 = q0 + warp * 16;                         // the warp's first query row
    int row0 = w0 + g, row1 = row0 + 8;              // the lane's two rows (past N: computed, never written)
    int key_end = causal ? min(N, q0 + MMA_ROWS) : N;
    int tiles = ceil_div(key_end, MMA_KEYS);
    // Scores are kept in base 2: s2 = s * scale * log2(e), p = exp2(s2 - m2) = exp(s * scale - m), one
    // multiply folded into the scale.
    float scale2 = scale * 1.4426950408889634f;

    copy_rows_async<MMA_ROWS>(Qs, Q, bh, q0, N, heads);          // group 0: Q and the first K, V tile
    copy_rows_async<MMA_KEYS>(Ks[0], K, bh, 0, N, heads);
    copy_rows_async<MMA_KEYS>(Vs[0], V, bh, 0, N, heads);
    cp_async_commit();

    unsigned qa[HEAD_DIM / 16][4];                   // the warp's 16 Q rows as A fragments, a k16 step each
    float o[HEAD_DIM / 8][4];                        // the warp's 16 output rows: an accumulator a n8 tile
    for (int n = 0; n < HEAD_DIM / 8; n++)
        for (int c = 0; c < 4; c++) o[n][c] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY;            // running maxima of rows row0, row1 (base 2)
    float l0 = 0.0f, l1 = 0.0f;                      // this lane's share of their running sums

    for (int t = 0; t < tiles; t++) {
        int k0 = t * MMA_KEYS, buf = t % 2;
        if (t + 1 < tiles) {                         // tile t + 1 into the other buffer, then wait for t only
            copy_rows_async<MMA_KEYS>(Ks[1 - buf], K, bh, k0 + MMA_KEYS, N, heads);
            copy_rows_async<MMA_KEYS>(Vs[1 - buf], V, bh, k0 + MMA_KEYS, N, heads);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();                             // every thread's copies of tile t (and of Q) have landed
        if (t == 0) {
            // Q's A fragments: matrices 0-3 of ldmatrix.x4 are rows 0-7 / 8-15 by columns 0-7 / 8-15 of the
            // 16 x 16 step, lanes 0-15 pointing at rows 0-15, lanes 16-31 at the same rows 8 columns on.
            for (int kk = 0; kk < HEAD_DIM / 16; kk++)
                ldmatrix_x4(qa[kk], &Qs[warp * 16 + lane % 16][kk * 16 + lane / 16 * 8]);
        }

        // S = Q K^T: B[k][n] = K[key n][feature k], K's rows as stored are B's columns, as ldmatrix gives
        // them. One ldmatrix.x4 gives two n8 tiles (keys 8n..8n+15) of one k16 step: matrix 0 keys 8n..+7
        // features 16kk..+7, matrix 1 the next 8 features, matrices 2 and 3 the same for keys 8n+8..+15.
        float s[MMA_KEYS / 8][4];
        for (int n = 0; n < MMA_KEYS / 8; n++)
            for (int c = 0; c < 4; c++) s[n][c] = 0.0f;
        for (int kk = 0; kk < HEAD_DIM / 16; kk++)
            for (int n = 0; n < MMA_KEYS / 8; n += 2) {
                unsigned b[4];
                ldmatrix_x4(b, &Ks[buf][n * 8 + lane % 8 + lane / 16 * 8][kk * 16 + lane / 8 % 2 * 8]);
                Mma::fma(s[n], qa[kk], b[0], b[1]);
                Mma::fma(s[n + 1], qa[kk], b[2], b[3]);
            }

        // Scale, mask (only a tile that reaches past N or, causal, past the warp's first row has masked
        // keys), and each row's maximum: the lane's 16 values of a row, then its group's 4 lanes.
        bool edge = k0 + MMA_KEYS > N || (causal && k0 + MMA_KEYS - 1 > w0);
        float max0 = -INFINITY, max1 = -INFINITY;
        for (int n = 0; n < MMA_KEYS / 8; n++)
            for (int c = 0; c < 4; c++) {
                float v = s[n][c] * scale2;
                if (edge) {
                    int j = k0 + n * 8 + 2 * t4 + c % 2, i = c < 2 ? row0 : row1;
                    if (j >= N || (causal && j > i)) v = -INFINITY;
                }
                s[n][c] = v;
                if (c < 2) max0 = fmaxf(max0, v);
                else       max1 = fmaxf(max1, v);
            }
        for (int offset = 1; offset < 4; offset *= 2) {  // lanes 4g .. 4g+3 differ in their last two bits
            max0 = fmaxf(max0, __shfl_xor_sync(FULL_MASK, max0, offset));
            max1 = fmaxf(max1, __shfl_xor_sync(FULL_MASK, max1, offset));
        }
        // The online softmax, as in version 3. Key 0 is in tile 0 and visible to every row, so the maxima are
        // finite from tile 0 on; there m = -inf and the correction exp2(-inf) = 0 meets o = l = 0.
        float new0 = fmaxf(m0, max0), new1 = fmaxf(m1, max1);
        float corr0 = exp2f(m0 - new0), corr1 = exp2f(m1 - new1);
        m0 = new0;
        m1 = new1;
        l0 *= corr0;
        l1 *= corr1;
        for (int n = 0; n < HEAD_DIM / 8; n++) {
            o[n][0] *= corr0; o[n][1] *= corr0;
            o[n][2] *= corr1; o[n][3] *= corr1;
        }

        // P = exp2(s2 - m2), summed in FP32 and rounded to 16 bits straight into A fragments of O += P V.
        // The accumulator of n8 tile n holds P[g][8n + 2t, +1] (c0, c1) and P[g + 8][8n + 2t, +1] (c2, c3);
        // the A fragment of the k16 step j (keys 16j .. 16j+15) wants P[g][16j + 2t, +1] (reg 0),
        // P[g + 8][16j + 2t, +1] (reg 1), P[g][16j + 8 + 2t, +1] (reg 2), P[g + 8][16j + 8 + 2t, +1] (reg 3):
        // tiles 2j and 2j + 1, pair by pair, in the same lane. No shuffle, no shared memory.
        unsigned pa[MMA_KEYS / 16][4];
        for (int j = 0; j < MMA_KEYS / 16; j++)
            for (int half = 0; half < 2; half++) {
                float* c = s[2 * j + half];
                float p0 = exp2f(c[0] - m0), p1 = exp2f(c[1] - m0);   // a masked key: exp2(-inf) = 0
                float p2 = exp2f(c[2] - m1), p3 = exp2f(c[3] - m1);
                l0 += p0 + p1;
                l1 += p2 + p3;
                pa[j][2 * half] = Mma::pack(p0, p1);
                pa[j][2 * half + 1] = Mma::pack(p2, p3);
            }

        // O += P V: B[k][n] = V[key k][feature n], V's rows as stored are B's rows, so ldmatrix .trans. One
        // x4 gives two n8 tiles (features 8n..8n+15) of the k16 step j: matrix 0 keys 16j..+7 features 8n..+7,
        // matrix 1 keys 16j+8..+15, matrices 2 and 3 the same for features 8n+8..+15.
        for (int j = 0; j < MMA_KEYS / 16; j++)
            for (int n = 0; n < HEAD_DIM / 8; n += 2) {
                unsigned b[4];
                ldmatrix_x4_trans(b, &Vs[buf][j * 16 + lane % 8 + lane / 8 % 2 * 8][n * 8 + lane / 16 * 8]);
                Mma::fma(o[n], pa[j], b[0], b[1]);
                Mma::fma(o[n + 1], pa[j], b[2], b[3]);
            }
        __syncthreads();                             // buffer buf is refilled by the next iteration's copies
    }

    // The rows' sums: the lane's share, then its group's (in the same order in every run).
    for (int offset = 1; offset < 4; offset *= 2) {
        l0 += __shfl_xor_sync(FULL_MASK, l0, offset);
        l1 += __shfl_xor_sync(FULL_MASK, l1, offset);
    }
    float inv0 = 1.0f / l0, inv1 = 1.0f / l1;        // l >= 1: the row's maximum contributes exp2(0)
    if (L != NULL && t4 == 0) {                      // L = ln(sum exp(s)) = ln 2 (m2 + log2 l)
        if (row0 < N) L[(size_t)bh * N + row0] = (m0 + log2f(l0)) * 0.6931471805599453f;
        if (row1 < N) L[(size_t)bh * N + row1] = (m1 + log2f(l1)) * 0.6931471805599453f;
    }
    // O rounded once, into the warp's own 16 rows of Qs (no other warp reads them), then written in 16-byte
    // chunks, a row's chunks by consecutive lanes.
    unsigned short (*Os)[MMA_PITCH] = Qs + warp * 16;
    for (int n = 0; n < HEAD_DIM / 8; n++) {
        *reinterpret_cast<unsigned*>(&Os[g][n * 8 + 2 * t4]) = Mma::pack(o[n][0] * inv0, o[n][1] * inv0);
        *reinterpret_cast<unsigned*>(&Os[g + 8][n * 8 + 2 * t4]) = Mma::pack(o[n][2] * inv1, o[n][3] * inv1);
    }
    __syncwarp();
    const int CHUNKS = HEAD_DIM / 8;
    for (int e = lane; e < 16 * CHUNKS; e += WARP_SIZE) {
        int r = e / CHUNKS, c = e % CHUNKS * 8;
        if (w0 + r < N)
            *reinterpret_cast<uint4*>(&O[row_offset(bh, w0 + r, N, heads) + c]) =
                *reinterpret_cast<const uint4*>(&Os[r][c]);
    }
}

extern "C" __global__ void attention_mma_forward(__half* O, float* L, const __half* Q, const __half* K,
                                                 const __half* V, int N, int heads, float scale, int causal) {
    __shared__ __align__(16) unsigned short Qs[MMA_ROWS][MMA_PITCH];
    __shared__ __align__(16) unsigned short Ks[2][MMA_KEYS][MMA_PITCH], Vs[2][MMA_KEYS][MMA_PITCH];
    mma_forward<MmaF16>(Qs, Ks, Vs, reinterpret_cast<unsigned short*>(O), L,
                        reinterpret_cast<const unsigned short*>(Q), reinterpret_cast<const unsigned short*>(K),
                        reinterpret_cast<const unsigned short*>(V), N, heads, scale, causal);
}

// BF16: Q, K, V and O hold bfloat16 bit patterns (the upper halves of float32s).
extern "C" __global__ void attention_mma_forward_bf16(unsigned short* O, float* L, const unsigned short* Q,
                                                      const unsigned short* K, const unsigned short* V, int N,
                                                      int heads, float scale, int causal) {
    __shared__ __align__(16) unsigned short Qs[MMA_ROWS][MMA_PITCH];
    __shared__ __align__(16) unsigned short Ks[2][MMA_KEYS][MMA_PITCH], Vs[2][MMA_KEYS][MMA_PITCH];
    mma_forward<MmaBF16>(Qs, Ks, Vs, O, L, Q, K, V, N, heads, scale, causal);
}
#endif  // HEAD_DIM % 16 == 0

// ---- the backward of versions 3 and 4 --------------------------------------------------------------
// D[bh][i] = dO_i . O_i (= sum_j P_ij dP_ij), one warp a row, ROW_WARPS warps a block;
// grid ceil(problems * N / ROW_WARPS).
extern "C" __global__ void attention_backward_rowdot(float* D, const float* dO, const float* O, int problems,
                                                     int N, int heads) {
    int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    long row = (long)blockIdx.x * ROW_WARPS + warp;
    if (row >= (long)problems * N) return;             // the whole warp leaves together
    size_t at = row_offset((int)(row / N), (int)(row % N), N, heads);
    float v = 0.0f;
    for (int c = lane; c < HEAD_DIM; c += WARP_SIZE) v += dO[at + c] * O[at + c];
    v = warp_allreduce_sum(v);
    if (lane == 0) D[row] = v;
}

// dK and dV for FLASH_ROWS keys a block, one thread a key; grid (ceil(N / FLASH_ROWS), batch * heads).
// The queries stream past in tiles of BWD_TILE rows: for each visible pair (i, j) the thread recomputes
// P_ij = exp(scale q_i . k_j - L_i) and adds P_ij dO_i to dv, and dS_ij q_i to dk with
// dS_ij = P_ij (dO_i . v_j - D_i).
extern "C" __global__ void attention_backward_dkdv(float* dK, float* dV, const float* Q, const float* K,
                                                   const float* V, const float* dO, const float* L,
                                                   const float* D, int N, int heads, float scale, int causal) {
    __shared__ float Ks[FLASH_ROWS][HEAD_DIM + 1];   // this block's keys and values, a thread's own row
    __shared__ float Vs[FLASH_ROWS][HEAD_DIM + 1];   // each (padded: conflict-free down a column)
    __shared__ float Qs[BWD_TILE][HEAD_DIM];         // the streamed query rows, their output gradients,
    __shared__ float dOs[BWD_TILE][HEAD_DIM];        // log-sum-exps and row dot products: read by all
    __shared__ float Ls[BWD_TILE], Ds[BWD_TILE];     // threads at once (broadcasts)
    int bh = blockIdx.y, k0 = blockIdx.x * FLASH_ROWS, t = threadIdx.x;
    int j = k0 + t;
    load_rows<FLASH_ROWS>(Ks, K, bh, k0, N, heads);
    load_rows<FLASH_ROWS>(Vs, V, bh, k0, N, heads);
    float dk[HEAD_DIM], dv[HEAD_DIM];
    for (int c = 0; c < HEAD_DIM; c++) { dk[c] = 0.0f; dv[c] = 0.0f; }
    // Causal: queries before this block's first key see none of its keys.
    int q_start = causal ? k0 : 0;
    for (int i0 = q_start; i0 < N; i0 += BWD_TILE) {
        __syncthreads();                             // the previous tile is no longer read
        load_rows<BWD_TILE>(Qs, Q, bh, i0, N, heads);
        load_rows<BWD_TILE>(dOs, dO, bh, i0, N, heads);
        for (int r = t; r < BWD_TILE; r += blockDim.x) {
            bool inside = i0 + r < N;
            Ls[r] = inside ? L[(size_t)bh * N + i0 + r] : 0.0f;
            Ds[r] = inside ? D[(size_t)bh * N + i0 + r] : 0.0f;
        }
        __syncthreads();
        for (int r = 0; r < BWD_TILE; r++) {
            int i = i0 + r;
            if (i >= N || j >= N || (causal && j > i)) continue;   // P_ij = 0: nothing to add
            float s = 0.0f, dp = 0.0f;
            for (int c = 0; c < HEAD_DIM; c++) {
                s += Qs[r][c] * Ks[t][c];
                dp += dOs[r][c] * Vs[t][c];
            }
            float p = expf(s * scale - Ls[r]);
            float ds = p * (dp - Ds[r]);
            for (int c = 0; c < HEAD_DIM; c++) {
                dv[c] += p * dOs[r][c];
                dk[c] += ds * Qs[r][c];
            }
        }
    }
    __syncthreads();                                 // Ks and Vs become the dK and dV tiles
    for (int c = 0; c < HEAD_DIM; c++) { Ks[t][c] = dk[c] * scale; Vs[t][c] = dv[c]; }
    __syncthreads();
    store_rows<FLASH_ROWS>(dK, Ks, bh, k0, N, heads);
    store_rows<FLASH_ROWS>(dV, Vs, bh, k0, N, heads);
}

// dQ for FLASH_ROWS queries a block, one thread a query; grid (ceil(N / FLASH_ROWS), batch * heads).
// The keys and values stream past in tiles of BWD_TILE rows: dq += dS_ij k_j for each visible key.
extern "C" __global__ void attention_backward_dq(float* dQ, const float* Q, const float* K, const float* V,
                                                 const float* dO, const float* L, const float* D, int N,
                                                 int heads, float scale, int causal) {
    __shared__ float Qs[FLASH_ROWS][HEAD_DIM + 1];   // this block's queries and their output gradients,
    __shared__ float dOs[FLASH_ROWS][HEAD_DIM + 1];  // a thread's own row each
    __shared__ float Ks[BWD_TILE][HEAD_DIM];         // the streamed keys and values (broadcasts)
    __shared__ float Vs[BWD_TILE][HEAD_DIM];
    int bh = blockIdx.y, q0 = blockIdx.x * FLASH_ROWS, t = threadIdx.x;
    int i = q0 + t;
    load_rows<FLASH_ROWS>(Qs, Q, bh, q0, N, heads);
    load_rows<FLASH_ROWS>(dOs, dO, bh, q0, N, heads);
    float Li = i < N ? L[(size_t)bh * N + i] : 0.0f;
    float Di = i < N ? D[(size_t)bh * N + i] : 0.0f;
    float dq[HEAD_DIM];
    for (int c = 0; c < HEAD_DIM; c++) dq[c] = 0.0f;
    int key_end = causal ? min(N, q0 + FLASH_ROWS) : N;
    for (int k0 = 0; k0 < key_end; k0 += BWD_TILE) {
        __syncthreads();
        load_rows<BWD_TILE>(Ks, K, bh, k0, N, heads);
        load_rows<BWD_TILE>(Vs, V, bh, k0, N, heads);
        __syncthreads();
        for (int r = 0; r < BWD_TILE; r++) {
            int j = k0 + r;
            if (i >= N || j >= N || (causal && j > i)) continue;
            float s = 0.0f, dp = 0.0f;
            for (int c = 0; c < HEAD_DIM; c++) {
                s += Qs[t][c] * Ks[r][c];
                dp += dOs[t][c] * Vs[r][c];
            }
            float ds = expf(s * scale - Li) * (dp - Di);
            for (int c = 0; c < HEAD_DIM; c++) dq[c] += ds * Ks[r][c];
        }
    }
    __syncthreads();                                 // Qs becomes the dQ tile
    for (int c = 0; c < HEAD_DIM; c++) Qs[t][c] = dq[c] * scale;
    __syncthreads();
    store_rows<FLASH_ROWS>(dQ, Qs, bh, q0, N, heads);
}
