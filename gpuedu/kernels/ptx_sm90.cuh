// ptx_sm90.cuh: the Hopper (sm_90a) instructions the course's Hopper GEMMs write as inline PTX, one wrapper each,
// so that a kernel reads as the instructions it issues (wgmma_gemm.cu, matmul's versions 11-13, uses them).
// Semantics and layouts are the PTX ISA's (sections "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
// Instructions: wgmma", "Matrix Descriptor Format", "Parallel Synchronization and Communication Instructions:
// mbarrier", "Data Movement and Conversion Instructions: cp.async.bulk.tensor", "setmaxnreg"); the emulator runs
// the same statements with the same layouts.
//
// The asynchronous proxy. TMA copies and wgmma's shared-memory reads run beside the threads, in the "async proxy":
//   - a TMA load (tma_load_2d) lands a tile in shared memory and reports its bytes to an mbarrier; the threads
//     that read the tile wait on that barrier's phase (mbarrier_wait) first;
//   - wgmma.mma_async (Wgmma<N>::mma) is issued by a warpgroup (128 threads, four consecutive warps) between a
//     wgmma_fence and a wgmma_commit; its accumulators are not to be read, nor its tiles overwritten, before a
//     wgmma_wait_all covers it;
//   - threads that write shared memory which the async proxy then reads (a C tile a TMA store sends out) order
//     their writes first with fence_proxy_async.
//
// An mbarrier (a 64-bit word in shared memory) counts arrivals and transaction bytes for its current phase; the
// phase completes when both reach what was expected, and the barrier moves on to the next phase, whose parity is
// the other bit. A wait names the parity of the phase it waits for: mbarrier_wait(bar, phase & 1) returns once that
// phase has completed. Producer and consumer each count their passes over a ring of stages and flip the parity
// they wait on at each wrap.
//
// Matrix descriptors (make_descriptor) name a tile in shared memory for wgmma: its start address, the leading and
// stride byte offsets between its 8 x 16-byte core matrices, and its swizzle. The tiles here are all as TMA writes
// them with the 128-byte swizzle: rows of 128 bytes (64 halves), 16-byte chunk c of row r stored at chunk c ^ (r % 8),
// the pattern repeating every 8 rows (1024 bytes), each tile 1024-byte aligned so that the descriptor's base offset
// is 0:
//   - A, (rows m, 64 k) K-major: core matrices of 8 rows; the next 8 rows are SBO = 1024 bytes on; LBO is not read
//     for a swizzled K-major layout (1 by convention). A step of 16 in k is +32 bytes on the start address: the
//     swizzle XORs the absolute address's bits, as TMA did when it wrote the tile.
//   - B, (k, 64 n) N-major ("MN-major", imm-trans-b 1): a row is 64 consecutive n of one k; the next 8 k are
//     SBO = 1024 bytes on; the next 64 n (the next TMA box) LBO = (rows of k) x 128 bytes on. A step of 16 in k is
//     +2048 bytes (16 rows).
//
// These instructions need the architecture-specific target sm_90a (ptxas refuses wgmma and setmaxnreg for plain
// sm_90): this header is compiled only in modules built with arch="sm_90a", and the launchers refuse the Hopper
// versions on any other GPU before loading it (ops.fp16._require_sm90a).
#pragma once
#include <cuda.h>   // CUtensorMap

// The 32-bit shared-memory address PTX's .shared instructions take, of a pointer into shared memory.
__device__ inline unsigned smem_u32(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

// ---- mbarrier ------------------------------------------------------------------------------------------------
// Set up the barrier at `bar` for `count` arrivals a phase (one thread, before any other uses it; then a
// __syncthreads and fence_mbarrier_init publish it).
__device__ inline void mbarrier_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
// Make the barriers' initialisation visible to the async proxy (the TMA unit that will complete their bytes).
__device__ inline void fence_mbarrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival on the current phase.
__device__ inline void mbarrier_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
// One arrival, and `bytes` more transaction bytes expected this phase (the bytes of the TMA copies to come).
__device__ inline void mbarrier_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
// Return once the phase of parity `parity` has completed (try_wait may give up after a while: loop).
__device__ inline void mbarrier_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n\t.reg .pred P;\n\tWAIT:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n\t"
                 "@P bra DONE;\n\tbra WAIT;\n\tDONE:\n}\n" :: "r"(bar), "r"(parity) : "memory");
}

// ---- TMA (cp.async.bulk.tensor) --------------------------------------------------------------------------------
// The tensor map (a __grid_constant__ kernel parameter) as the 64-bit generic address the instructions take.
__device__ inline unsigned long long tensor_map_address(const CUtensorMap& map) {
    return reinterpret_cast<unsigned long long>(&map);
}
// Copy the box whose first element is at column x, row y (innermost coordinate first; past the tensor's edges the
// box gets zeros) into shared memory at `dst`, completing its bytes (zero-filled ones too) on mbarrier `bar`.
__device__ inline void tma_load_2d(unsigned dst, const CUtensorMap& map, int x, int y, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(dst), "l"(tensor_map_address(map)), "r"(x), "r"(y), "r"(bar) : "memory");
}
// Copy a box from shared memory at `src` (laid out as a load would leave it) to the tensor at column x, row y;
// elements past the tensor's edges are not written. The copy joins this thread's current bulk group.
__device__ inline void tma_store_2d(const CUtensorMap& map, int x, int y, unsigned src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];\n"
                 :: "l"(tensor_map_address(map)), "r"(x), "r"(y), "r"(src) : "memory");
}
// Close this thread's bulk group of TMA stores.
__device__ inline void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Wait until every committed store of this thread has read its shared memory (which may then be reused).
__device__ inline void tma_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
// Wait until every committed store of this thread has completed (its writes visible in global memory).
__device__ inline void tma_store_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Order this thread's writes to shared memory before the async proxy's reads of it (a TMA store, a wgmma).
__device__ inline void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Fetch the tensor map into the TMA unit's cache ahead of the first copy (a hint).
__device__ inline void prefetch_tensor_map(const CUtensorMap& map) {
    asm volatile("prefetch.tensormap [%0];\n" :: "l"(tensor_map_address(map)) : "memory");
}

// ---- setmaxnreg --------------------------------------------------------------------------------------------------
// Give back registers (a producer warpgroup, which needs few) or take them (the consumers, whose accumulators need
// many): the whole warpgroup runs it, with the same N (24 to 256, a multiple of 8).
// (The count is written as a literal: the emulator, like ptxas, reads it before compiling, and reads no template
// parameter; one wrapper for each count the kernels use.)
__device__ inline void setmaxnreg_dec_40() { asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory"); }
__device__ inline void setmaxnreg_inc_232() { asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory"); }

// ---- wgmma -------------------------------------------------------------------------------------------------------
// A matrix descriptor (PTX ISA "Matrix Descriptor Format"): bits 0-13 the start address, 16-29 the leading
// dimension byte offset, 32-45 the stride dimension byte offset, each (x & 0x3FFFF) >> 4; bits 49-51 the base
// offset (0: tiles 1024-byte aligned); bits 62-63 the swizzle, 1 = 128 bytes.
__device__ inline unsigned long long make_descriptor(unsigned start, unsigned leading, unsigned stride) {
    return (unsigned long long)((start & 0x3FFFF) >> 4) | (unsigned long long)((leading & 0x3FFFF) >> 4) << 16 |
           (unsigned long long)((stride & 0x3FFFF) >> 4) << 32 | 1ull << 62;
}

// Registers written before the next wgmma may read them (the accumulators set to zero), and this warpgroup's
// earlier wgmma: ordered. Once before the first mma of a batch.
__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// Close this warpgroup's batch of mma_async: one wgmma-group.
__device__ inline void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Wait until none of this warpgroup's wgmma-groups is in flight: their accumulators may be read and their shared
// tiles overwritten. (N written as a literal, as for setmaxnreg.)
__device__ inline void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

// wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16 with A (64 x 16, K-major) and B (16 x N, N-major: imm-trans-b 1)
// in shared memory, named by descriptors: D += A B (scale-d 1; the caller zeroes D first), D 64 x N f32 in N / 2
// registers a thread. Warp w of the warpgroup holds rows 16w .. 16w + 15; its lane l holds, for i = 0 .. N/8 - 1,
// d[4i + j] = D[16w + l/4 + 8 (j / 2)][8i + 2 (l % 4) + j % 2] (mma.m16n8k16's C layout for each 8 columns).
// The statement is written out operand by operand, as ptxas and the emulator read it (no macro inside an asm).
template <int N> struct Wgmma;
template <> struct Wgmma<128> {
    static __device__ inline void mma(float (&d)[64], unsigned long long a, unsigned long long b) {
        asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                     "%64, %65, 1, 1, 1, 0, 1;\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                       "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                       "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                       "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                       "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                       "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                       "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
                       "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                       "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                     : "l"(a), "l"(b));
    }
};
template <> struct Wgmma<256> {
    static __device__ inline void mma(float (&d)[128], unsigned long long a, unsigned long long b) {
        asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                     "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                     "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                     "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
                     "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
                     "%128, %129, 1, 1, 1, 0, 1;\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                       "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                       "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                       "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                       "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                       "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                       "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
                       "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                       "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]),
                       "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                       "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),
                       "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
                       "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]),
                       "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                       "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]),
                       "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),
                       "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]),
                       "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                       "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),
                       "+f"(d[126]), "+f"(d[127])
                     : "l"(a), "l"(b));
    }
};
