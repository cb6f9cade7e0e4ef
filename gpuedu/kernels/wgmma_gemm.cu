// wgmma_gemm.cu: C = alpha * A @ B on Hopper's tensor cores (sm_90a): matmul's versions 11-13.
//
// mma_gemm.cu's top rung (version 10) keeps a warp busy moving its operands: every 16-wide step of K it
// issues ldmatrix for its fragments, and every slice of K its threads issue cp.async for the tiles. Hopper
// moves both jobs out of the warps (the instructions are wrapped once each in ptx_sm90.cuh, which says more):
//   - TMA (cp.async.bulk.tensor): one thread asks for a whole tile (a "box" of a tensor map the host made,
//     gpuedu.tma); the copy engine lands it in shared memory, swizzled, zero-filled past the matrix's edges,
//     and reports its bytes to an mbarrier that the readers wait on;
//   - wgmma.mma_async: a warpgroup (4 warps, 128 threads) multiplies a 64 x 16 tile of A by a 16 x N tile of
//     B (N up to 256) straight from shared memory, named by matrix descriptors: no fragments in registers but
//     the accumulators, and the instruction runs while the warps go on (a fence, a commit and a wait order it).
//
// The tiles in shared memory are exactly as TMA writes them with the 128-byte swizzle and as wgmma's descriptors
// read them (ptx_sm90.cuh: make_descriptor). K is staged 64 at a time (BK: one 128-byte row of halves):
//   - A's tile, BM x 64, K-major (A is row-major M x K): one box of BM rows;
//   - B's tile, 64 x BN, N-major (B is row-major K x N, and wgmma reads it with imm-trans-b 1, so B is used as
//     stored, without a transposing copy): BN / 64 boxes of 64 k-rows x 64 columns, one after the other.
// Edges: a box that reaches past M, N or K is zero-filled by TMA, so any M, N, K works without guards in the
// main loop, and the zeros add nothing; C's edges are guarded (11, 12) or clipped by the TMA store (13). A tensor
// map needs rows a multiple of 16 bytes apart: K and N multiples of 8 (the launcher refuses other shapes).
//
// The accumulators: wgmma's D fragment (64 x N, f32, N/2 registers a thread): warp w of the warpgroup holds rows
// 16w .. 16w + 15, lane l of it d[4i + j] = D[16w + l/4 + 8 (j / 2)][8i + 2 (l % 4) + j % 2], i = 0 .. N/8 - 1
// (mma.m16n8k16's C layout, once for each 8 columns). They start at zero and every mma adds (scale-d 1).
//
// version 11 (wgmma_gemm_kernel11): TMA + wgmma, one warpgroup.
//   A 128 x 128 tile of C per block of 128 threads: per 16-wide step of K, two m64n128k16 (rows 0-63 and 64-127
//   of the tile), 2 x 64 accumulators a thread. A ring of WG11_STAGES slices: thread 0 asks TMA for slice kt +
//   STAGES as soon as the warpgroup has finished with the stage slice kt used; everyone waits on the stage's
//   "full" mbarrier before reading it. The same warps issue the copies and the MMAs, so a wait for a late copy
//   stalls the tensor core.
//
// version 12 (wgmma_gemm_kernel12): warp specialisation, a producer and two consumers.
//   A 128 x 256 tile of C per block of 3 warpgroups (384 threads). Warpgroup 0, the producer, gives back most of
//   its registers (setmaxnreg.dec 40) and one of its threads only issues TMA copies into the ring; warpgroups 1
//   and 2, the consumers, take them (setmaxnreg.inc 232): each multiplies 64 rows of the tile by all 256 columns
//   (m64n256k16, 128 accumulators a thread). Two rings of mbarriers: "full" (the producer's expect_tx + TMA's
//   bytes: the stage holds slice kt) and "empty" (the 256 consumer threads' arrivals: the stage may be refilled).
//   Each side counts its passes over the ring and waits on the parity of the pass: the consumers on full's phase
//   kt / STAGES, the producer, from its second pass on, on empty's phase kt / STAGES - 1. Copies and MMAs now
//   overlap, and the wider tile reads each element of A and B from shared memory half as often per flop.
//
// version 13 (wgmma_gemm_kernel13): 12, persistent, with a TMA store.
//   About one block per SM (the launcher's grid), each walking the tiles t = blockIdx.x, + gridDim.x, ...: no
//   block launches or tail of idle SMs between tiles, and the producer fills the ring with the next tile's slices
//   while the consumers write the last tile out. The tiles are walked in groups of WG13_GROUP_M tile rows, column
//   by column inside a group (tile_coordinates), so that the blocks running at once share rows of A and columns
//   of B in the L2. C goes out through shared memory: each consumer writes its 64 x 256 piece 64 columns at a time
//   into a staging tile, and one of its threads sends it with a TMA store, which clips what lies past M and N.
#include <cuda.h>
#include <cuda_fp16.h>
#include "ptx_sm90.cuh"

#define WG_BK 64                 // K per stage: one 128-byte swizzled row of halves
#define WG_BOX_N 64              // columns of B per TMA box (128 bytes: the swizzle's span)
#define WG_ROW_BYTES 128         // a swizzled row: 64 halves
#define WG_ALIGN 1024            // the 128-byte swizzle's pattern: tiles start on it (descriptor base offset 0)
#define WG_BM 128                // rows of C per block (every version)

#define WG11_BN 128
#define WG11_THREADS 128
#define WG12_BN 256
#define WG12_THREADS 384         // a producer warpgroup and two consumers
#define WG12_CONSUMERS 2
#define WG13_GROUP_M 8           // tile rows per group of the persistent walk
#define WG13_CHUNK_N 64          // columns of C per TMA store

// The stages of each ring: as many as the device's shared memory holds, up to 4; the launcher passes them
// (ops.fp16.hopper_stages: an H200 holds 4 of each, the emulator's 96 KB two of version 11's and one of 12's).
#ifndef WG11_STAGES
#define WG11_STAGES 4
#endif
#ifndef WG12_STAGES
#define WG12_STAGES 4
#endif
#ifndef WG13_STAGES
#define WG13_STAGES 4
#endif

// Bytes of one stage: A's BM x 64 halves and B's 64 x BN halves.
#define WG_A_BYTES (WG_BM * WG_ROW_BYTES)
#define WG_STAGE_BYTES(BN) (WG_A_BYTES + WG_BK * (BN) * 2)
// Dynamic shared memory of each version: the alignment slack, the stages, the mbarriers (full and empty, 8 bytes
// each), and for 13 the consumers' staging tiles of C (64 x 64 floats each, the larger output type).
#define WG13_STAGING_BYTES (64 * WG13_CHUNK_N * 4)
#define WG11_SHARED_BYTES (WG_ALIGN + WG11_STAGES * WG_STAGE_BYTES(WG11_BN) + WG11_STAGES * 8)
#define WG12_SHARED_BYTES (WG_ALIGN + WG12_STAGES * WG_STAGE_BYTES(WG12_BN) + WG12_STAGES * 16)
#define WG13_SHARED_BYTES (WG_ALIGN + WG13_STAGES * WG_STAGE_BYTES(WG12_BN) + WG12_CONSUMERS * WG13_STAGING_BYTES + \
                           WG13_STAGES * 16 + WG12_CONSUMERS * 8)

// The block's dynamic shared memory, from its first 1024-byte boundary, as a 32-bit shared address.
__device__ __forceinline__ unsigned aligned_shared_base(const unsigned char* raw) {
    return (smem_u32(raw) + WG_ALIGN - 1) & ~(unsigned)(WG_ALIGN - 1);
}

// Descriptor of the 64 x 16 slice of A's stage tile at `a` (K-major, 128-byte swizzle): rows `row0` .. + 63, k
// 16 kk .. 16 kk + 15. Core matrices of 8 rows, the next 8 rows 1024 bytes on (SBO); 16 k = 32 bytes on.
__device__ __forceinline__ unsigned long long a_descriptor(unsigned a, int row0, int kk) {
    return make_descriptor(a + row0 * WG_ROW_BYTES + kk * 32, 16, 8 * WG_ROW_BYTES);
}
// Descriptor of the 16 x BN slice of B's stage tile at `b` (N-major, 128-byte swizzle): k 16 kk .. + 15. A row is
// 64 n of one k; the next 8 k are 1024 bytes on (SBO), the next 64 n the next box, 64 rows on (LBO).
__device__ __forceinline__ unsigned long long b_descriptor(unsigned b, int kk) {
    return make_descriptor(b + kk * 16 * WG_ROW_BYTES, WG_BK * WG_ROW_BYTES, 8 * WG_ROW_BYTES);
}

// Ask TMA for slice kt of the block's tiles (A rows m0.., B columns n0.., k from kt * 64) into the stage at `a`
// (B's tile follows A's), its bytes reported to mbarrier `full`. One thread.
template <int BN>
__device__ __forceinline__ void load_slice(const CUtensorMap& a_map, const CUtensorMap& b_map, unsigned a,
                                           unsigned full, int m0, int n0, int kt) {
    mbarrier_arrive_expect_tx(full, WG_STAGE_BYTES(BN));   // every box's bytes, the zero-filled ones too
    tma_load_2d(a, a_map, kt * WG_BK, m0, full);
    const unsigned b = a + WG_A_BYTES;
#pragma unroll
    for (int j = 0; j < BN / WG_BOX_N; ++j)
        tma_load_2d(b + j * WG_BK * WG_ROW_BYTES, b_map, n0 + j * WG_BOX_N, kt * WG_BK, full);
}

// One slice (64 of K) of a warpgroup's 64 x BN product: four k16 steps, rows `row0` of the stage's A tile.
template <int BN>
__device__ __forceinline__ void mma_slice(float (&d)[BN / 2], unsigned a, int row0) {
    const unsigned b = a + WG_A_BYTES;
#pragma unroll
    for (int kk = 0; kk < WG_BK / 16; ++kk) Wgmma<BN>::mma(d, a_descriptor(a, row0, kk), b_descriptor(b, kk));
}

// C[row][col], C[row][col + 1] = alpha * (v0, v1), each inside M x N only; one half2 / float2 store when both are
// inside (N is a multiple of 8 and col even: the pair is aligned).
__device__ __forceinline__ void store_pair(void* C, int c_half, int M, int N, int row, int col, float v0, float v1) {
    if (row >= M || col >= N) return;
    const size_t at = (size_t)row * N + col;
    if (c_half) {
        __half* p = reinterpret_cast<__half*>(C) + at;
        if (col + 1 < N) *reinterpret_cast<__half2*>(p) = __floats2half2_rn(v0, v1);
        else p[0] = __float2half_rn(v0);
    } else {
        float* p = reinterpret_cast<float*>(C) + at;
        if (col + 1 < N) *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
        else p[0] = v0;
    }
}

// A warpgroup's 64 x BN accumulators (rows row0.., columns col0.. of C) from registers to C, thread by thread.
template <int BN>
__device__ __forceinline__ void store_accumulators(void* C, const float (&d)[BN / 2], int M, int N, int row0,
                                                   int col0, int thread, float alpha, int c_half) {
    const int warp = thread / 32, lane = thread % 32;
    const int row = row0 + 16 * warp + lane / 4, col = col0 + 2 * (lane % 4);
#pragma unroll
    for (int i = 0; i < BN / 8; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)      // rows l/4 and l/4 + 8
            store_pair(C, c_half, M, N, row + 8 * h, col + 8 * i, alpha * d[4 * i + 2 * h],
                       alpha * d[4 * i + 2 * h + 1]);
}


// ---- version 11: TMA + wgmma, one warpgroup ---------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(WG11_THREADS, 1)
wgmma_gemm_kernel11(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                    void* C, int M, int N, int K, float alpha, int c_half)
{
    extern __shared__ __align__(1024) unsigned char smem[];
    const unsigned base = aligned_shared_base(smem);
    const unsigned full0 = base + WG11_STAGES * WG_STAGE_BYTES(WG11_BN);   // mbarrier s at full0 + 8 s
    const int m0 = blockIdx.y * WG_BM, n0 = blockIdx.x * WG11_BN;
    const int k_tiles = (K + WG_BK - 1) / WG_BK;
    const int t = threadIdx.x;

    if (t == 0) {
        for (int s = 0; s < WG11_STAGES; ++s) mbarrier_init(full0 + 8 * s, 1);   // the one expect_tx arrival
        fence_mbarrier_init();
        prefetch_tensor_map(a_map);
        prefetch_tensor_map(b_map);
    }
    __syncthreads();
    if (t == 0)   // fill the ring
        for (int kt = 0; kt < WG11_STAGES && kt < k_tiles; ++kt)
            load_slice<WG11_BN>(a_map, b_map, base + kt * WG_STAGE_BYTES(WG11_BN), full0 + 8 * kt, m0, n0, kt);

    float d[2][WG11_BN / 2];            // rows 0-63 and 64-127 of the tile
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < WG11_BN / 2; ++i) d[h][i] = 0.0f;

    for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % WG11_STAGES;
        const unsigned a = base + s * WG_STAGE_BYTES(WG11_BN);
        mbarrier_wait(full0 + 8 * s, (kt / WG11_STAGES) & 1);   // pass kt / STAGES over the ring: its parity
        wgmma_fence();
        mma_slice<WG11_BN>(d[0], a, 0);
        mma_slice<WG11_BN>(d[1], a, 64);
        wgmma_commit();
        wgmma_wait_all();
        __syncthreads();                // every warp of the warpgroup is done with stage s: refill it
        if (t == 0 && kt + WG11_STAGES < k_tiles)
            load_slice<WG11_BN>(a_map, b_map, a, full0 + 8 * s, m0, n0, kt + WG11_STAGES);
    }
    store_accumulators<WG11_BN>(C, d[0], M, N, m0, n0, t, alpha, c_half);
    store_accumulators<WG11_BN>(C, d[1], M, N, m0 + 64, n0, t, alpha, c_half);
}


// ---- versions 12 and 13: a producer warpgroup, two consumers -----------------------------------------------------
// The producer's thread: slices of the block's tiles into the ring, for every tile the block walks; `it` counts
// slices over all of them, so the ring's stages and parities carry on from tile to tile.
template <int STAGES>
__device__ __forceinline__ void produce(const CUtensorMap& a_map, const CUtensorMap& b_map, unsigned base,
                                        unsigned full0, unsigned empty0, int m0, int n0, int k_tiles, int& it) {
    for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % STAGES;
        if (it >= STAGES) mbarrier_wait(empty0 + 8 * s, (it / STAGES - 1) & 1);   // the consumers' previous pass
        load_slice<WG12_BN>(a_map, b_map, base + s * WG_STAGE_BYTES(WG12_BN), full0 + 8 * s, m0, n0, kt);
    }
}

// A consumer warpgroup's product over K: rows row0 .. row0 + 63 of the block's tile, all 256 columns.
template <int STAGES>
__device__ __forceinline__ void consume(float (&d)[WG12_BN / 2], unsigned base, unsigned full0, unsigned empty0,
                                        int row0, int k_tiles, int& it) {
#pragma unroll
    for (int i = 0; i < WG12_BN / 2; ++i) d[i] = 0.0f;
    for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % STAGES;
        mbarrier_wait(full0 + 8 * s, (it / STAGES) & 1);
        wgmma_fence();
        mma_slice<WG12_BN>(d, base + s * WG_STAGE_BYTES(WG12_BN), row0);
        wgmma_commit();
        wgmma_wait_all();
        mbarrier_arrive(empty0 + 8 * s);   // this thread's reads of stage s are done
    }
}

extern "C" __global__ void __launch_bounds__(WG12_THREADS, 1)
wgmma_gemm_kernel12(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                    void* C, int M, int N, int K, float alpha, int c_half)
{
    extern __shared__ __align__(1024) unsigned char smem[];
    const unsigned base = aligned_shared_base(smem);
    const unsigned full0 = base + WG12_STAGES * WG_STAGE_BYTES(WG12_BN), empty0 = full0 + 8 * WG12_STAGES;
    const int m0 = blockIdx.y * WG_BM, n0 = blockIdx.x * WG12_BN;
    const int k_tiles = (K + WG_BK - 1) / WG_BK;
    const int group = threadIdx.x / 128, t = threadIdx.x % 128;

    if (threadIdx.x == 0) {
        for (int s = 0; s < WG12_STAGES; ++s) {
            mbarrier_init(full0 + 8 * s, 1);                      // the producer's expect_tx
            mbarrier_init(empty0 + 8 * s, 128 * WG12_CONSUMERS);  // every consumer thread
        }
        fence_mbarrier_init();
    }
    __syncthreads();
    int it = 0;
    if (group == 0) {                   // the producer
        setmaxnreg_dec_40();
        if (t == 0) produce<WG12_STAGES>(a_map, b_map, base, full0, empty0, m0, n0, k_tiles, it);
    } else {                            // consumer 1: rows 0-63 of the tile, consumer 2: rows 64-127
        setmaxnreg_inc_232();
        float d[WG12_BN / 2];
        consume<WG12_STAGES>(d, base, full0, empty0, 64 * (group - 1), k_tiles, it);
        store_accumulators<WG12_BN>(C, d, M, N, m0 + 64 * (group - 1), n0, t, alpha, c_half);
    }
}


// ---- version 13: persistent, grouped tile order, C through a TMA store -------------------------------------------
// Tile t of the walk: groups of WG13_GROUP_M tile rows (fewer in the last group), and in a group, column by column,
// each column's rows one after the other. Blocks that run at once work on neighbouring tiles of a few rows and
// columns: the slices of A and B they read are shared in the L2.
__device__ __forceinline__ void tile_coordinates(int tile, int tiles_m, int tiles_n, int& tm, int& tn) {
    const int per_group = WG13_GROUP_M * tiles_n;
    const int first = tile / per_group * WG13_GROUP_M;
    const int rows = min(tiles_m - first, WG13_GROUP_M);
    tm = first + tile % per_group % rows;
    tn = tile % per_group / rows;
}

// The consumer warpgroup's barrier (its 128 threads, no other warpgroup): an mbarrier of 128 arrivals, its phases
// counted in `phase`.
__device__ __forceinline__ void warpgroup_sync(unsigned bar, unsigned& phase) {
    mbarrier_arrive(bar);
    mbarrier_wait(bar, phase & 1);
    ++phase;
}

// A consumer's 64 x 256 accumulators (rows row0.., columns col0.. of C) out through its staging tile, 64 columns
// at a time: every thread writes its values (alpha * d, as C's type) into the dense 64 x 64 tile, fences them for
// the async proxy, the warpgroup meets, and its thread 0 sends the tile with a TMA store (which writes nothing past
// M and N) and waits until the store has read the tile before the warpgroup meets again and refills it.
__device__ __forceinline__ void store_through_shared(const CUtensorMap& c_map, const float (&d)[WG12_BN / 2],
                                                     unsigned char* staging, unsigned bar, unsigned& phase,
                                                     int row0, int col0, int t, float alpha, int c_half) {
    const int warp = t / 32, lane = t % 32;
    const int row = 16 * warp + lane / 4, col = 2 * (lane % 4);
#pragma unroll
    for (int chunk = 0; chunk < WG12_BN / WG13_CHUNK_N; ++chunk) {
#pragma unroll
        for (int i = 0; i < WG13_CHUNK_N / 8; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int at = (row + 8 * h) * WG13_CHUNK_N + col + 8 * i;
                const float* v = &d[4 * (chunk * WG13_CHUNK_N / 8 + i) + 2 * h];
                if (c_half)
                    *reinterpret_cast<__half2*>(staging + 2 * at) = __floats2half2_rn(alpha * v[0], alpha * v[1]);
                else
                    *reinterpret_cast<float2*>(staging + 4 * at) = make_float2(alpha * v[0], alpha * v[1]);
            }
        fence_proxy_async();            // this thread's writes, before the TMA store reads them
        warpgroup_sync(bar, phase);
        if (t == 0) {
            tma_store_2d(c_map, col0 + chunk * WG13_CHUNK_N, row0, smem_u32(staging));
            tma_store_commit();
            tma_store_wait_read();
        }
        warpgroup_sync(bar, phase);     // the staging tile is free again
    }
}

extern "C" __global__ void __launch_bounds__(WG12_THREADS, 1)
wgmma_gemm_kernel13(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                    const __grid_constant__ CUtensorMap c_map, int M, int N, int K, float alpha, int c_half)
{
    extern __shared__ __align__(1024) unsigned char smem[];
    const unsigned base = aligned_shared_base(smem);
    const unsigned staging0 = base + WG13_STAGES * WG_STAGE_BYTES(WG12_BN);
    const unsigned full0 = staging0 + WG12_CONSUMERS * WG13_STAGING_BYTES, empty0 = full0 + 8 * WG13_STAGES;
    const unsigned sync0 = empty0 + 8 * WG13_STAGES;   // each consumer's warpgroup barrier
    const int tiles_m = (M + WG_BM - 1) / WG_BM, tiles_n = (N + WG12_BN - 1) / WG12_BN;
    const int k_tiles = (K + WG_BK - 1) / WG_BK;
    const int group = threadIdx.x / 128, t = threadIdx.x % 128;

    if (threadIdx.x == 0) {
        for (int s = 0; s < WG13_STAGES; ++s) {
            mbarrier_init(full0 + 8 * s, 1);
            mbarrier_init(empty0 + 8 * s, 128 * WG12_CONSUMERS);
        }
        for (int c = 0; c < WG12_CONSUMERS; ++c) mbarrier_init(sync0 + 8 * c, 128);
        fence_mbarrier_init();
    }
    __syncthreads();
    int it = 0;
    if (group == 0) {
        setmaxnreg_dec_40();
        if (t == 0)
            for (int tile = blockIdx.x; tile < tiles_m * tiles_n; tile += gridDim.x) {
                int tm, tn;
                tile_coordinates(tile, tiles_m, tiles_n, tm, tn);
                produce<WG13_STAGES>(a_map, b_map, base, full0, empty0, tm * WG_BM, tn * WG12_BN, k_tiles, it);
            }
    } else {
        setmaxnreg_inc_232();
        const int c = group - 1;
        unsigned char* staging = smem + (staging0 + c * WG13_STAGING_BYTES - smem_u32(smem));
        unsigned phase = 0;
        float d[WG12_BN / 2];
        for (int tile = blockIdx.x; tile < tiles_m * tiles_n; tile += gridDim.x) {
            int tm, tn;
            tile_coordinates(tile, tiles_m, tiles_n, tm, tn);
            consume<WG13_STAGES>(d, base, full0, empty0, 64 * c, k_tiles, it);
            store_through_shared(c_map, d, staging, sync0 + 8 * c, phase, tm * WG_BM + 64 * c, tn * WG12_BN, t,
                                 alpha, c_half);
        }
        if (t == 0) tma_store_wait();   // the last stores' writes complete before the block ends
    }
}
