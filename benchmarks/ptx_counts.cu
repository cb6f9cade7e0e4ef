// ptx_counts.cu: one small kernel per inline PTX instruction the emulator runs (gpuedu/emulator/_ptx.py), each
// with what Nsight Compute counts for it worked out by hand beside it. benchmarks/ncu_compare.py runs them under
// Nsight Compute with the course's ladders; tests/profiler/test_ptx_counts.py holds the emulator's counts to the
// same numbers. Compile with no_extern_c=True (cuda_pipeline.h is C++): each kernel is extern "C" itself.
//
// All of them run with whole warps (the .aligned instructions need the warp's 32 lanes).
#include <cuda_pipeline.h>

// mma.sync: each warp runs `calls` m16n8k16 (f16 in, f32 sums) one after another on one accumulator, then one
// m16n8k8. Nsight Compute: smsp__inst_executed_pipe_tensor_op_hmma.sum = warps x (calls + 1) (HMMA.16816 and
// HMMA.1688 are one instruction each); no shared memory; a warp's 6 loads of its registers and one 16-byte store.
// a: 6 registers a lane (A's four, B's two), packed halves; out: 4 floats a lane.
extern "C" __global__ void ptx_mma(float* out, const unsigned* a, int calls) {
  unsigned lane = threadIdx.x % 32, warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const unsigned* r = a + lane * 6;
  unsigned a0 = r[0], a1 = r[1], a2 = r[2], a3 = r[3], b0 = r[4], b1 = r[5];
  float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
  for (int k = 0; k < calls; ++k)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
               : "r"(a0), "r"(a1), "r"(b0));
  reinterpret_cast<float4*>(out)[warp * 32 + lane] = make_float4(d0, d1, d2, d3);
}

// ldmatrix: 32 rows of 16 bytes in a 4 KB shared tile, row r (the one lane r names) at
//   layout 0: r * 16                     (packed: each matrix's 8 rows fill the 32 banks once)
//   layout 1: r * 128                    (128 bytes apart: all 8 rows of a matrix on the same 4 banks)
//   layout 2: r * 128 + (r % 8) * 16     (the same rows, each 16-byte chunk moved by the row number mod 8: a
//                                         swizzle, which puts the 8 rows of a matrix on 8 different groups of banks)
// Each warp runs ldmatrix .x4, .x2 and .x1 (.trans) on those addresses: 3 LDSM instructions, whose matrices are 4 +
// 2 + 1 = 7 wavefronts at best. Nsight Compute, a warp: smsp__inst_executed_op_ldsm.sum 3;
// l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum 7 (layouts 0 and 2) or 8 x 7 = 56 (layout 1: each matrix
// 8-way); ..._bank_conflicts_..._op_ldsm.sum 0 or 49.
// (The block fills the tile first, with 16-byte stores: 256 lanes' worth, 4 wavefronts a warp's STS.128.)
extern "C" __global__ void ptx_ldmatrix(unsigned* out, const uint4* fill, int layout) {
  __shared__ __align__(128) unsigned char tile[4096];
  unsigned t = threadIdx.x, lane = t % 32, warp = (blockIdx.x * blockDim.x + t) / 32;
  for (unsigned i = t; i < 256; i += blockDim.x) reinterpret_cast<uint4*>(tile)[i] = fill[i];
  __syncthreads();
  unsigned row = layout == 0 ? lane * 16 : layout == 1 ? lane * 128 : lane * 128 + (lane % 8) * 16;
  unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(tile + row));
  unsigned r0, r1, r2, r3, r4, r5, r6;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r4), "=r"(r5) : "r"(a));
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r6) : "r"(a));
  unsigned* o = out + (warp * 32 + lane) * 7;
  o[0] = r0;
  o[1] = r1;
  o[2] = r2;
  o[3] = r3;
  o[4] = r4;
  o[5] = r5;
  o[6] = r6;
}

// cp.async: each thread copies 16 bytes (.cg) and 4 bytes (.ca) of `in` into shared memory, waits for both, and
// after a barrier writes what its neighbour copied (a 16-byte and a 4-byte shared load, a 16-byte and a 4-byte
// store: `out` holds 5 floats a thread). A warp's 16-byte copies read 512 neighbouring bytes (16
// sectors) and write them as an STS.128 would (4 wavefronts); its 4-byte copies read 128 bytes (4 sectors), 1
// wavefront. Nsight Compute, a warp: smsp__inst_executed_op_ldgsts.sum 2;
// l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum 2, l1tex__t_sectors_..._op_ldgsts.sum 20;
// l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum 5, 0 bank conflicts. The last `zeros` threads of the
// grid copy with a source size of 0: they read nothing (the zero fill), and write their 16 bytes of zeros.
extern "C" __global__ void ptx_cp_async(float* out, const float* in, int zeros) {
  __shared__ __align__(16) float wide[4 * 128];
  __shared__ float narrow[128];
  unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  unsigned keep = i + zeros < gridDim.x * blockDim.x ? 16 : 0;
  unsigned w = static_cast<unsigned>(__cvta_generic_to_shared(&wide[4 * t]));
  unsigned n = static_cast<unsigned>(__cvta_generic_to_shared(&narrow[t]));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(w), "l"(in + 4 * i), "r"(keep));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(n), "l"(in + 4 * gridDim.x * blockDim.x + i));
  asm volatile("cp.async.commit_group;\n" ::);
  asm volatile("cp.async.wait_group 0;\n" ::);
  __syncthreads();
  unsigned next = (t + 1) % blockDim.x;
  reinterpret_cast<float4*>(out)[i] = reinterpret_cast<const float4*>(wide)[next];
  out[4 * gridDim.x * blockDim.x + i] = narrow[next];
}

// __pipeline_memcpy_async (cuda_pipeline.h: cp.async from C++): a double-buffered sum, as a pipelined GEMM stages
// its tiles. Each thread copies one float4 of stage s + 1 while the block sums stage s. Each round of a warp: one
// LDGSTS (16 sectors, 4 wavefronts). Nsight Compute: smsp__inst_executed_op_ldgsts.sum = warps x stages.
extern "C" __global__ void ptx_pipeline(float* out, const float4* in, int stages) {
  __shared__ float4 buf[2][128];
  unsigned t = threadIdx.x;
  const float4* mine = in + (size_t)blockIdx.x * stages * blockDim.x + t;
  __pipeline_memcpy_async(&buf[0][t], mine, sizeof(float4));
  __pipeline_commit();
  float sum = 0.0f;
  for (int s = 0; s < stages; ++s) {
    if (s + 1 < stages) __pipeline_memcpy_async(&buf[(s + 1) % 2][t], mine + (s + 1) * blockDim.x, sizeof(float4));
    __pipeline_commit();
    __pipeline_wait_prior(1);   // stage s has landed (stage s + 1 may still be in flight)
    __syncthreads();            // ... for every thread's copies
    float4 v = buf[s % 2][(t + 1) % blockDim.x];
    sum += v.x + v.y + v.z + v.w;
    __syncthreads();            // everyone has read stage s before it is overwritten by stage s + 2
  }
  out[blockIdx.x * blockDim.x + t] = sum;
}
