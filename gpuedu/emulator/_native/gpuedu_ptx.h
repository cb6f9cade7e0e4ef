// gpuedu_ptx.h: the inline PTX the emulator runs, with the PTX ISA's semantics.
//
// The compiler (gpuedu/emulator/_ptx.py, which holds the one table of supported instructions) rewrites each
// asm() statement of a kernel into a call here: the operands' bits in (`in`, the instruction's source operands
// in order, vectors flattened), the results' bits out (`out`), the instruction named by an op and its
// modifiers. Warp-wide instructions (mma.sync, ldmatrix) are meetings of the warp's lanes, as the warp
// intrinsics are (__gpuedu_ptx_sync): each lane leaves where its registers are, and the last lane to arrive
// computes the instruction for the whole warp, from each lane's own registers in the layout the PTX ISA's
// fragment figures give, so a kernel that gets a layout wrong gets wrong numbers here as on a GPU. Hopper's
// wgmma.mma_async is a meeting of a warpgroup's 128 threads in the same way (gpuedu_wgmma.h), its
// shared-memory operands read through their matrix descriptors as the ISA defines them.
//
// Shared memory has 32-bit addresses of its own, as on a GPU (cvta.to.shared, __cvta_generic_to_shared): a
// block's static __shared__ variables from 0 (their offsets in the worker's arena), its dynamic shared memory
// from DYNAMIC_WINDOW. An address outside both stops the launch, naming the instruction's line. A wgmma matrix
// descriptor keeps address bits 4-17 only (the PTX ISA's (x & 0x3FFFF) >> 4, enough for a GPU's 228 KiB), so the
// window is placed where those bits still tell the two apart: static addresses below 128 KiB, the dynamic shared
// memory's from 128 KiB (0xE0000 & 0x3FFFF = 0x20000; 96 KiB at most); its bits 18 and 19 land in unused bits
// of a descriptor (14, 15) when a kernel shifts an address without masking it.
//
// cp.async copies land no earlier than the wait that covers them: each thread's copies are queued (the source
// read when the copy is issued, a schedule a GPU may follow) and written to shared memory at the
// cp.async.wait_group / wait_all that covers their group. A kernel that reads a stage before waiting for it
// reads what was there before, here as it may on a GPU.
//
// mbarrier objects (gpuedu_mbarrier.h): arrive, the transaction counts, and the waits, which suspend a thread
// until the phase it waits for completes and stop the launch with a deadlock report when it never can.
// fence.proxy.async and fence.mbarrier_init are no-ops (see NOP below); setmaxnreg meets as the warp's lanes and
// records the register count it asks for (registers_requested).
//
// In a profiled build (GPUEDU_PROFILE) the counters see each instruction as Nsight Compute does: the rewrite puts,
// at the asm statement's own site, a call of the counters' hook for each memory access the instruction makes
// (ldmatrix_row and cp_async_parts below say where: a row of an LDSM; the global read and the shared write of an
// LDGSTS), so that the statement is an instruction of its own with each lane's address, which racecheck and
// memcheck see too; mma.sync tells them once per warp (hmma_synced), and a copy that lands tells racecheck
// (async_landed).
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#include "gpuedu_bits.h"

#ifndef GPUEDU_SCAN
namespace __gpuedu {
namespace ptx {
using u64 = unsigned long long;

// The runtime's ops (gpuedu/emulator/_ptx.py's table names them; keep both in step).
enum : int {
  MMA = 1, LDMATRIX = 2, CP_ASYNC = 3, CP_COMMIT = 4, CP_WAIT = 5, CP_WAIT_ALL = 6, CVTA_TO_SHARED = 7,
  CVTA_TO_GENERIC = 8, MOV_PACK = 9, MOV_UNPACK = 10, CVT_F16X2 = 11, CVT_BF16X2 = 12, CVT_TF32 = 13, CVT_U32_U64 = 14,
  MBAR_INIT = 15, MBAR_INVAL = 16, MBAR_ARRIVE = 17, MBAR_EXPECT_TX = 18, MBAR_COMPLETE_TX = 19, MBAR_WAIT = 20,
  NOP = 21, SETMAXNREG = 22, TMA_LOAD = 23, TMA_STORE = 24, CLUSTER_SREG = 25, MAPA = 26, LD_CLUSTER = 27,
  ST_CLUSTER = 28,
};
// The special registers of a cluster (CLUSTER_SREG's modifier: which one, then .x/.y/.z added).
enum : int {
  SR_CLUSTER_CTARANK = 0, SR_CLUSTER_NCTARANK = 1, SR_CLUSTERID = 4, SR_NCLUSTERID = 8,
  SR_CLUSTER_CTAID = 12, SR_CLUSTER_NCTAID = 16,
};
// mma's modifiers, as _ptx.py packs them: shape | A/B type << 2 | C type << 4 | D type << 5.
enum : int { SHAPE_M16N8K16 = 0, SHAPE_M16N8K8 = 1, IN_F16 = 0, IN_BF16 = 1, IN_TF32 = 2, ACC_F32 = 0, ACC_F16 = 1 };
// ldmatrix's: matrices (1, 2 or 4) | .trans << 3.  cp.async's: bytes (4, 8, 16) | .cg << 5 | source size given << 6.
// setmaxnreg's: the register count | .inc << 9 | the count is the operand's, known when it runs << 10.  The mbarrier ops': gpuedu_mbarrier.h's MB_ bits.  The tensor
// copies' (TMA_LOAD, TMA_STORE): the rank.

constexpr u64 DYNAMIC_WINDOW = 0xE0000;   // where the dynamic shared memory starts among shared addresses

// An operand's bits, by its constraint's size: an integer or pointer by value, anything else (float, __half)
// as its bits.
template <int Bytes, class T> inline u64 in(const T& x) {
  if constexpr (std::is_pointer_v<T>) {
    return (u64)(uintptr_t)x;
  } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
    if constexpr (Bytes == 2) return (u64)(uint16_t)x;
    else if constexpr (Bytes == 4) return (u64)(uint32_t)x;
    else return (u64)x;
  } else {
    u64 r = 0;
    memcpy(&r, &x, sizeof(T) < (size_t)Bytes ? sizeof(T) : (size_t)Bytes);
    return r;
  }
}
template <int Bytes, class T> inline void out(T& x, u64 v) {
  if constexpr (std::is_pointer_v<T>) {
    x = (T)(uintptr_t)v;
  } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
    x = (T)v;
  } else {
    memcpy(&x, &v, sizeof(T) < (size_t)Bytes ? sizeof(T) : (size_t)Bytes);
  }
}

inline unsigned linear_thread() {
  return rt().fiber_mode ? rt().cur : (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
}

// ---- shared-memory addresses ----------------------------------------------------------------
// (In a profiled build the runtime's work for an instruction counts nothing: each function here that the
// kernel's code calls is GPUEDU_PROF_QUIET, uninstrumented, and stops counting while it runs
// (GPUEDU_PROF_SUSPEND), since a helper it calls that the host compiler leaves out of line (rt(), a format's
// conversion) is instrumented; the functions only those call are GPUEDU_PROF_QUIET too. Otherwise the warp's
// last lane, which computes the instruction for all, would show the runtime's loads and branches as its own.)
GPUEDU_PROF_QUIET inline u64 to_shared(const void* p, int line, const char* what) {
  GPUEDU_PROF_SUSPEND;
  const unsigned char* b = (const unsigned char*)p;
  if (b >= rt().arena && b < rt().arena + S.arena_used) {
    if ((u64)(b - rt().arena) >= DYNAMIC_WINDOW)
      fail(DEVICE_MISUSE,
           "ran %s (line %d): %p lies 0x%llx bytes into the emulator's arena of static __shared__ variables, which "
           "the module's kernels share; shared addresses reach 0x%llx there (the dynamic shared memory starts "
           "after). Put this kernel in a module of its own, or its array in dynamic shared memory (extern "
           "__shared__)",
           what, line, p, (u64)(b - rt().arena), DYNAMIC_WINDOW);
    return (u64)(b - rt().arena);
  }
  if (b >= rt().dyn && b <= rt().dyn + rt().dynamic_shared_bytes) return DYNAMIC_WINDOW + (u64)(b - rt().dyn);
  for (int i = 0, k = shared_count(); i < k; ++i)
    if (S.at[i].absolute && b >= S.at[i].absolute && b < S.at[i].absolute + S.at[i].n)
      fail(DEVICE_MISUSE,
           "ran %s (line %d): %p is the __shared__ variable '%s' declared at file scope, which has no shared-memory "
           "address in the emulator; declare it inside the kernel",
           what, line, p, S.at[i].name ? S.at[i].name : "?");
  fail(DEVICE_MISUSE,
       "ran %s (line %d): %p is not in the block's shared memory (cvta.to.shared and __cvta_generic_to_shared take "
       "a pointer to a __shared__ variable or into the extern __shared__ buffer)",
       what, line, p);
}

// (`r`: the block's worker state, or another block's of its cluster: from_cluster_shared.)
GPUEDU_PROF_QUIET inline unsigned char* shared_in(Runtime& r, u64 a, size_t n, int line, const char* what) {
  GPUEDU_PROF_SUSPEND;
  if (a >= DYNAMIC_WINDOW) {
    if (a - DYNAMIC_WINDOW + n <= r.dynamic_shared_bytes) return r.dyn + (a - DYNAMIC_WINDOW);
  } else if (a + n <= S.arena_used) {
    return r.arena + a;
  }
  fail(DEVICE_MISUSE,
       "ran %s (line %d): shared address 0x%llx (%zu bytes) is outside the block's shared memory: its static "
       "__shared__ variables lie at 0x0 to 0x%zx and its dynamic shared memory at 0x%llx to 0x%llx. Compute "
       "addresses from __cvta_generic_to_shared(pointer) of a __shared__ array",
       what, line, a, n, S.arena_used, DYNAMIC_WINDOW, DYNAMIC_WINDOW + (u64)r.dynamic_shared_bytes);
}

GPUEDU_PROF_QUIET inline unsigned char* from_shared(u64 a, size_t n, int line, const char* what) {
  return shared_in(rt(), a, n, line, what);
}

// ---- the cluster's shared memory (.shared::cluster) -------------------------------------------------------
// A shared::cluster address names a block of the cluster and an address in its shared memory: the block's own
// shared addresses (shared::cta) are shared::cluster addresses of the block itself, as the PTX ISA has it, and mapa
// gives another block's: (its rank + 1) << CLUSTER_RANK_SHIFT, above the block's 20 bits of shared addresses.
constexpr unsigned CLUSTER_RANK_SHIFT = 24;
constexpr u64 CLUSTER_OFFSET_MASK = (1ull << CLUSTER_RANK_SHIFT) - 1;

// The rank a shared::cluster address names (the running block's own for a shared::cta address).
GPUEDU_PROF_QUIET inline unsigned cluster_rank_of(u64 a, int line, const char* what) {
  u64 tag = a >> CLUSTER_RANK_SHIFT;
  if (!tag) return cluster_rank();
  if (tag > G.cluster_size || (a >> 32))
    fail(DEVICE_MISUSE,
         "ran %s (line %d): 0x%llx is no shared::cluster address of this cluster of %u block%s: take a block's "
         "address from mapa.shared::cluster (or cluster.map_shared_rank) with a rank below %u", what, line, a,
         G.cluster_size, G.cluster_size == 1 ? "" : "s", G.cluster_size);
  return (unsigned)tag - 1;
}

// The bytes a shared::cluster address names, in whichever block of the cluster holds them.
GPUEDU_PROF_QUIET inline unsigned char* from_cluster_shared(u64 a, size_t n, int line, const char* what) {
  unsigned k = cluster_rank_of(a, line, what);
  return shared_in(peer(k, line, what), a & CLUSTER_OFFSET_MASK, n, line, what);
}

// mapa.shared::cluster: block `k`'s shared::cluster address of shared address `a` (of this block, or of any).
GPUEDU_PROF_QUIET inline u64 mapa_shared(u64 a, u64 k, int line) {
  u64 offset = a & CLUSTER_OFFSET_MASK;
  if (a >> 32) fail(DEVICE_MISUSE, "ran mapa.shared::cluster (line %d): 0x%llx is not a shared address", line, a);
  peer((unsigned)k, line, "mapa.shared::cluster");
  shared_in(rt(), offset, 0, line, "mapa.shared::cluster");   // (an address of the block's shared memory)
  return (k + 1) << CLUSTER_RANK_SHIFT | offset;
}

GPUEDU_PROF_QUIET inline u64 cluster_register(int which) {
  int axis = which >= SR_CLUSTERID ? which % 4 : 0;
  auto pick = [axis](uint3 v) { return (u64)(axis == 0 ? v.x : axis == 1 ? v.y : v.z); };
  switch (which >= SR_CLUSTERID ? which - axis : which) {
    case SR_CLUSTER_CTARANK: return cluster_rank();
    case SR_CLUSTER_NCTARANK: return cluster_size();
    case SR_CLUSTERID: return pick(cluster_id());
    case SR_NCLUSTERID: return pick(cluster_count());
    case SR_CLUSTER_CTAID: return pick(cluster_block_index());
    case SR_CLUSTER_NCTAID: return pick(cluster_dims());
    default: return 0;
  }
}

// ---- the formats' bits ----------------------------------------------------------------------------
inline float half_lo(u64 reg, int which, int type) {   // element `which` (0 low, 1 high) of a 32-bit register
  unsigned short h = (unsigned short)(reg >> (16 * which));
  return type == IN_BF16 ? __gpuedu_bf2f_bits(h) : __gpuedu_h2f_bits(h);
}
inline float tf32_value(u64 reg) {   // the tensor cores read a .tf32 operand's top 19 bits
  uint32_t x = (uint32_t)reg & 0xffffe000u;
  float f;
  memcpy(&f, &x, 4);
  return f;
}
inline float f32_value(u64 reg) {
  uint32_t x = (uint32_t)reg;
  float f;
  memcpy(&f, &x, 4);
  return f;
}
inline u64 f32_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  return x;
}

// ---- mma.sync ------------------------------------------------------------------------------------
// Registers of each operand a lane holds.
struct MmaShape { int a_regs, b_regs, c_regs, d_regs, k; };
inline MmaShape mma_shape(int mods) {
  int shape = mods & 3, in_type = (mods >> 2) & 3, c16 = (mods >> 4) & 1, d16 = (mods >> 5) & 1;
  MmaShape s;
  s.k = shape == SHAPE_M16N8K16 ? 16 : 8;
  if (in_type == IN_TF32) { s.a_regs = 4; s.b_regs = 2; }
  else if (shape == SHAPE_M16N8K16) { s.a_regs = 4; s.b_regs = 2; }
  else { s.a_regs = 2; s.b_regs = 1; }
  s.c_regs = c16 ? 2 : 4;
  s.d_regs = d16 ? 2 : 4;
  return s;
}

struct LaneOperands {   // what a lane brings to a warp-wide instruction (on its fiber's stack)
  int op, mods, line;
  const u64* in;
  u64* out;
};

// D = A B + C for the whole warp, each lane's registers read and written in the PTX ISA's fragment layouts
// ("Matrix Fragments for mma.m16n8k16 / mma.m16n8k8"): groupID = lane / 4, t = lane % 4.
// Products are exact in float (11 x 11 or 8 x 8 significant bits); each sum is a float addition, in k order
// from C (the order and rounding inside one instruction are the hardware's; small integers come out exact).
GPUEDU_PROF_QUIET inline void mma_warp(LaneOperands* const* lanes, int mods) {
  MmaShape s = mma_shape(mods);
  int shape = mods & 3, in_type = (mods >> 2) & 3, c16 = (mods >> 4) & 1, d16 = (mods >> 5) & 1;
  float A[16][16], B[16][8], C[16][8];
  for (int l = 0; l < 32; ++l) {
    const u64* in = lanes[l]->in;
    const u64 *a = in, *b = in + s.a_regs, *c = in + s.a_regs + s.b_regs;
    int g = l >> 2, t = l & 3;
    if (in_type == IN_TF32) {   // m16n8k8 .tf32: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4); b0 (t, g), b1 (t+4, g)
      for (int i = 0; i < 4; ++i) A[g + 8 * (i & 1)][t + 4 * (i >> 1)] = tf32_value(a[i]);
      for (int i = 0; i < 2; ++i) B[t + 4 * i][g] = tf32_value(b[i]);
    } else if (shape == SHAPE_M16N8K16) {
      // a_i, i = 0..7 (two a register): row g (+8 for i = 2, 3, 6, 7), column 2t + i % 2 (+8 for i >= 4)
      for (int i = 0; i < 8; ++i) A[g + 8 * ((i >> 1) & 1)][2 * t + (i & 1) + 8 * (i >> 2)] = half_lo(a[i >> 1], i & 1, in_type);
      // b_i, i = 0..3: row (k) 2t + i % 2 (+8 for i >= 2), column g
      for (int i = 0; i < 4; ++i) B[2 * t + (i & 1) + 8 * (i >> 1)][g] = half_lo(b[i >> 1], i & 1, in_type);
    } else {
      // m16n8k8 .f16/.bf16: a_i, i = 0..3: row g (+8 for i >= 2), column 2t + i % 2; b_i: row 2t + i, column g
      for (int i = 0; i < 4; ++i) A[g + 8 * (i >> 1)][2 * t + (i & 1)] = half_lo(a[i >> 1], i & 1, in_type);
      for (int i = 0; i < 2; ++i) B[2 * t + i][g] = half_lo(b[0], i, in_type);
    }
    // c_i, i = 0..3: row g (+8 for i >= 2), column 2t + i % 2; f32: a register each, f16: two a register
    for (int i = 0; i < 4; ++i)
      C[g + 8 * (i >> 1)][2 * t + (i & 1)] = c16 ? half_lo(c[i >> 1], i & 1, IN_F16) : f32_value(c[i]);
  }
  float D[16][8];
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) {
      float acc = C[r][n];
      for (int k = 0; k < s.k; ++k) acc += A[r][k] * B[k][n];
      D[r][n] = acc;
    }
  for (int l = 0; l < 32; ++l) {
    u64* d = lanes[l]->out;
    int g = l >> 2, t = l & 3;
    if (d16) {
      for (int j = 0; j < 2; ++j)
        d[j] = (u64)__gpuedu_f2h_bits(D[g + 8 * j][2 * t]) | (u64)__gpuedu_f2h_bits(D[g + 8 * j][2 * t + 1]) << 16;
    } else {
      for (int i = 0; i < 4; ++i) d[i] = f32_bits(D[g + 8 * (i >> 1)][2 * t + (i & 1)]);
    }
  }
}

// ---- ldmatrix ------------------------------------------------------------------------------------
// Matrix j (of 1, 2 or 4) is 8 rows of 8 16-bit elements, row r at the address lane 8j + r gives; it lands in
// each lane's register j: lane l gets row l / 4, elements 2 (l % 4) and the next (.trans: the transpose's row,
// i.e. column l / 4, rows 2 (l % 4) and the next), the first in the low half.
GPUEDU_PROF_QUIET inline void ldmatrix_warp(LaneOperands* const* lanes, int mods) {
  int count = mods & 7;
  bool trans = (mods >> 3) & 1;
  unsigned short rows[4][8][8];
  for (int j = 0; j < count; ++j)
    for (int r = 0; r < 8; ++r) {
      const LaneOperands* L = lanes[8 * j + r];
      u64 a = L->in[0];
      if (a % 16)
        fail(DEVICE_MISUSE,
             "ran ldmatrix (line %d): misaligned address: lane %d gives row %d of matrix %d at shared address 0x%llx, "
             "which is not a multiple of 16 (each row is 16 bytes, aligned to 16)",
             L->line, 8 * j + r, r, j, a);
      memcpy(rows[j][r], from_shared(a, 16, L->line, "ldmatrix"), 16);
    }
  for (int l = 0; l < 32; ++l) {
    u64* d = lanes[l]->out;
    int q = l >> 2, p = 2 * (l & 3);
    for (int j = 0; j < count; ++j) {
      unsigned short lo = trans ? rows[j][p][q] : rows[j][q][p], hi = trans ? rows[j][p + 1][q] : rows[j][q][p + 1];
      d[j] = (u64)lo | (u64)hi << 16;
    }
  }
}

inline const char* op_name(int op) {
  switch (op) {
    case MMA: return "mma.sync";
    case LDMATRIX: return "ldmatrix";
    case SETMAXNREG: return "setmaxnreg";
    default: return "inline PTX";
  }
}

// ---- cp.async -------------------------------------------------------------------------------------
GPUEDU_PROF_QUIET inline AsyncQueue& queue_of(unsigned t) {
  if (!rt().async) {
    rt().async = (AsyncQueue*)calloc(MAX_THREADS, sizeof(AsyncQueue));
    if (!rt().async) fail(DEVICE_MISUSE, "ran cp.async: no memory for the copies in flight (%zu bytes)", MAX_THREADS * sizeof(AsyncQueue));
  }
  rt().async_used = true;
  return rt().async[t];
}

// Write the copies of groups < up_to_group.
GPUEDU_PROF_QUIET inline void land(AsyncQueue& q, unsigned up_to_group) {
  unsigned kept = 0;
  for (unsigned i = 0; i < q.n; ++i) {
    AsyncCopy& c = q.copies[i];
    if (c.group < up_to_group) {   // in the order they were issued
      memcpy(c.dst, c.data, c.bytes);
      GPUEDU_PROF(async_landed(c.dst, c.bytes));
    } else {
      q.copies[kept++] = c;
    }
  }
  q.n = kept;
}

// A copy of `bytes` into shared memory at `to`, `src_size` of them read from `src` now (it may fault there,
// naming the line), written when a wait covers its group.
GPUEDU_PROF_QUIET inline void issue_copy(unsigned char* to, const void* src, unsigned bytes, u64 src_size,
                                         int line) {
  AsyncQueue& q = queue_of(linear_thread());
  if (q.n == ASYNC_IN_FLIGHT)
    fail(DEVICE_MISUSE,
         "ran cp.async (line %d): this thread has %u copies in flight, the emulator's most; wait for earlier groups "
         "(cp.async.wait_group) before issuing more",
         line, ASYNC_IN_FLIGHT);
  AsyncCopy& c = q.copies[q.n];
  memset(c.data, 0, sizeof c.data);
  if (src_size) memcpy(c.data, src, src_size);
  c.dst = to;
  c.bytes = bytes;
  c.group = q.committed;
  q.n++;
}

// cp.async of `bytes` (4, 8, 16) from `src` to shared address `dst`, `src_size` of them read (the rest zeros).
GPUEDU_PROF_QUIET inline void cp_async(u64 dst, u64 src, unsigned bytes, u64 src_size, int line) {
  if (src_size > bytes)
    fail(DEVICE_MISUSE,
         "ran cp.async (line %d): the source size %llu is larger than the copy's %u bytes (the source size says how "
         "many of them to read; the rest are zeros)",
         line, src_size, bytes);
  if (dst % bytes || src % bytes)
    fail(DEVICE_MISUSE,
         "ran cp.async (line %d): misaligned address: a copy of %u bytes needs both addresses aligned to %u bytes, "
         "got shared 0x%llx and global 0x%llx (a 16-byte copy of halves needs rows whose length is a multiple of 8)",
         line, bytes, bytes, dst, src);
  issue_copy(from_shared(dst, bytes, line, "cp.async"), (const void*)(uintptr_t)src, bytes, src_size, line);
}

// (The runtime's part of cuda_pipeline.h's __pipeline_commit and __pipeline_wait_prior too: not the kernel's own
// instructions, which a profiled build does not count.)
GPUEDU_PROF_QUIET_PART inline void cp_commit() {
  GPUEDU_PROF_SUSPEND;
  AsyncQueue& q = queue_of(linear_thread());
  q.committed++;
}

// cp.async.wait_group n: the groups committed before the n most recent have landed; wait_all: every copy.
GPUEDU_PROF_QUIET_PART inline void cp_wait(long long n, bool all, int line) {
  GPUEDU_PROF_SUSPEND;
  if (n < 0) fail(DEVICE_MISUSE, "ran cp.async.wait_group (line %d): the count %lld is negative", line, n);
  AsyncQueue& q = queue_of(linear_thread());
  if (all) {
    q.committed++;
    land(q, q.committed);
  } else if ((unsigned long long)n < q.committed) {
    land(q, q.committed - (unsigned)n);
  }
}

// ---- what a profiled build's counters are told (the rewrite calls these at the asm statement's site) --------
// The 16-byte row this lane gives an ldmatrix, where it lies in the worker's shared memory; null where the lane
// gives none (.x1 reads the addresses of lanes 0-7, .x2 of lanes 0-15, .x4 of all 32).
GPUEDU_PROF_QUIET inline const void* ldmatrix_row(u64 a, int mods, int line) {
  GPUEDU_PROF_SUSPEND;
  if (linear_thread() % 32 >= 8u * (unsigned)(mods & 7)) return nullptr;
  return from_shared(a, 16, line, "ldmatrix");
}

// A cp.async's two accesses: the bytes it reads at its global source (its source size: none for a copy that
// only zero-fills), and the bytes it writes to shared memory (all of them, zeros included).
struct CopyParts {
  const void* src;
  unsigned src_bytes;
  const void* dst;
  unsigned bytes;
};
GPUEDU_PROF_QUIET inline CopyParts cp_async_parts(const u64* in, int mods, int line) {
  GPUEDU_PROF_SUSPEND;
  unsigned bytes = (unsigned)(mods & 31);
  u64 src_size = (mods >> 6) & 1 ? in[3] : (u64)bytes;
  return CopyParts{(const void*)(uintptr_t)in[1], (unsigned)(src_size < bytes ? src_size : bytes),
                   from_shared(in[0], bytes, line, "cp.async"), bytes};
}

}  // namespace ptx
}  // namespace __gpuedu
#include "gpuedu_mbarrier.h"
#include "gpuedu_tma.h"
namespace __gpuedu {
namespace ptx {

// ---- setmaxnreg -------------------------------------------------------------------------------------
// The register count each kernel's setmaxnreg asked for, the largest of its .inc and .dec (the emulator's threads
// have no registers to move): for the profiler's occupancy, which a GPU's warpgroups change with it. One entry a
// kernel of the module, added when its first setmaxnreg runs (a launch's workers may add at once).
struct RegisterRequest {
  const void* kernel;         // its KernelInfo
  unsigned registers;
  unsigned group[MAX_THREADS / 128];   // the largest count each warpgroup of a block asked for (0: none)
  RegisterRequest* next;
};
GPUEDU_HIDDEN RegisterRequest* register_requests;

GPUEDU_PROF_QUIET inline void raise_to(unsigned* at, unsigned value) {
  unsigned had = __atomic_load_n(at, __ATOMIC_RELAXED);
  while (had < value && !__atomic_compare_exchange_n(at, &had, value, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}

GPUEDU_PROF_QUIET inline void record_setmaxnreg(unsigned registers, unsigned group) {
  const void* kernel = rt().kernel;
  RegisterRequest* e = __atomic_load_n(&register_requests, __ATOMIC_ACQUIRE);
  while (e && e->kernel != kernel) e = e->next;
  if (!e) {
    RegisterRequest* fresh = (RegisterRequest*)calloc(1, sizeof(RegisterRequest));
    if (!fresh) fail(DEVICE_MISUSE, "ran setmaxnreg: no memory to record its register count");
    fresh->kernel = kernel;
    fresh->next = __atomic_load_n(&register_requests, __ATOMIC_ACQUIRE);
    while (!__atomic_compare_exchange_n(&register_requests, &fresh->next, fresh, true, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {}
    e = fresh;
    // (another worker may have added one for the same kernel meanwhile: registers_requested takes the largest)
  }
  raise_to(&e->registers, registers);
  raise_to(&e->group[group], registers);
}

// setmaxnreg.{inc,dec}.sync.aligned: the warp's lanes have met (warp_meet); a warpgroup is 4 whole warps.
GPUEDU_PROF_QUIET inline void setmaxnreg_warp(LaneOperands* const* lanes, int mods) {
  if (rt().nthreads % 128)
    fail(WARP_MISMATCH,
         "setmaxnreg (line %d) is run by every warp of a warpgroup (4 consecutive warps, 128 threads), and this "
         "block has %u threads: make the block's size a multiple of 128",
         lanes[0]->line, rt().nthreads);
  unsigned long long count = mods & 511;
  if (mods & (1 << 10)) {   // a count known only when it runs (a template parameter): checked as ptxas would
    count = lanes[0]->in[0];
    if (count < 24 || count > 256 || count % 8)
      fail(DEVICE_MISUSE, "ran setmaxnreg (line %d): the register count %llu must be from 24 to 256 and a multiple of 8",
           lanes[0]->line, count);
  }
  record_setmaxnreg((unsigned)count, rt().cur / 128);
}

// ---- one instruction --------------------------------------------------------------------------------
GPUEDU_PROF_QUIET inline void run(int op, int mods, u64* out, const u64* in, int line) {
  GPUEDU_PROF_SUSPEND;
  switch (op) {
    case MBAR_INIT: mbarrier_init(mbarrier_address(in[0], mods, line, "mbarrier.init"), in[1], line); return;
    case MBAR_INVAL: mbarrier_inval(mbarrier_address(in[0], mods, line, "mbarrier.inval"), line); return;
    case MBAR_ARRIVE: {
      bool tx = mods & MB_EXPECT_TX;
      const char* what = tx ? "mbarrier.arrive.expect_tx" : "mbarrier.arrive";
      if (mods & MB_CLUSTER) {   // .shared::cluster: an mbarrier of this block or of another of the cluster
        unsigned k = cluster_rank_of(in[0], line, what), me = cluster_rank();
        peer(k, line, what);
        if (k != me) switch_rank(k);   // (for the arrival only: its block's mbarriers are its worker state's)
        mbarrier_arrive(mbarrier_address(in[0] & CLUSTER_OFFSET_MASK, mods & ~MB_CLUSTER, line, what),
                        mods & MB_COUNT ? in[1] : 1, tx ? (long long)in[1] : 0, tx, line);
        if (k != me) switch_rank(me);
        return;
      }
      u64 state = mbarrier_arrive(mbarrier_address(in[0], mods, line, what), mods & MB_COUNT ? in[1] : 1,
                                  tx ? (long long)in[1] : 0, tx, line);
      if (out) out[0] = state;
      return;
    }
    case MBAR_EXPECT_TX:
      mbarrier_transactions(mbarrier_address(in[0], mods, line, "mbarrier.expect_tx"), (long long)in[1], 1, line,
                            "mbarrier.expect_tx");
      return;
    case MBAR_COMPLETE_TX:
      mbarrier_transactions(mbarrier_address(in[0], mods, line, "mbarrier.complete_tx"), (long long)in[1], -1, line,
                            "mbarrier.complete_tx");
      return;
    // fence.proxy.async and fence.mbarrier_init order memory between the GPU's proxies (the generic one of loads
    // and stores, the async one of TMA and wgmma) and make an mbarrier's init visible to the cluster's other
    // blocks; the emulator's memory is one proxy, written in program order by one fiber at a time, so there is
    // nothing to order.
    case NOP: return;
    case CLUSTER_SREG: out[0] = cluster_register(mods); return;
    case MAPA:   // mods 1: generic addresses (mapa.u64); else shared::cluster ones
      out[0] = mods == 1 ? (u64)(uintptr_t)map_shared_rank((const void*)(uintptr_t)in[0], (unsigned)in[1], line, "mapa")
                         : mapa_shared(in[0], in[1], line);
      return;
    case LD_CLUSTER: {   // mods: the bytes
      u64 v = 0;
      memcpy(&v, from_cluster_shared(in[0], (size_t)mods, line, "ld.shared::cluster"), (size_t)mods);
      out[0] = v;
      return;
    }
    case ST_CLUSTER: memcpy(from_cluster_shared(in[0], (size_t)mods, line, "st.shared::cluster"), &in[1], (size_t)mods);
      return;
    case TMA_LOAD:
      if ((mods & 8) || (in[0] >> CLUSTER_RANK_SHIFT)) tensor_load_cluster(in, mods, line);
      else tensor_load(in, (unsigned)mods & 7, line);
      return;
    case TMA_STORE: tensor_store(in, (unsigned)mods & 7, line); return;
    case CP_ASYNC: cp_async(in[0], in[1], mods & 31, (mods >> 6) & 1 ? in[3] : (u64)(mods & 31), line); return;
    case CP_COMMIT: cp_commit(); return;
    case CP_WAIT: cp_wait((long long)in[0], false, line); return;
    case CP_WAIT_ALL: cp_wait(0, true, line); return;
    case CVTA_TO_SHARED: out[0] = to_shared((const void*)(uintptr_t)in[0], line, "cvta.to.shared"); return;
    case CVTA_TO_GENERIC: out[0] = (u64)(uintptr_t)from_shared(in[0], 0, line, "cvta.shared"); return;
    case MOV_PACK: {   // mov.b32 d, {a, b} (16-bit halves) or mov.b64 d, {a, b} (32-bit words): a in the low part
      int bits = mods;
      u64 mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
      out[0] = (in[0] & mask) | (in[1] & mask) << bits;
      return;
    }
    case MOV_UNPACK: {
      int bits = mods;
      u64 mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
      out[0] = in[0] & mask;
      out[1] = (in[0] >> bits) & mask;
      return;
    }
    case CVT_F16X2:   // cvt.rn.f16x2.f32 d, a, b: a to the upper half, b to the lower
      out[0] = (u64)__gpuedu_f2h_bits(f32_value(in[0])) << 16 | __gpuedu_f2h_bits(f32_value(in[1]));
      return;
    case CVT_BF16X2:
      out[0] = (u64)__gpuedu_f2bf_bits(f32_value(in[0]), __GPUEDU_BF16_RN) << 16 |
               __gpuedu_f2bf_bits(f32_value(in[1]), __GPUEDU_BF16_RN);
      return;
    case CVT_TF32: out[0] = __gpuedu_f2tf32_bits((uint32_t)in[0]); return;
    case CVT_U32_U64: out[0] = (uint32_t)in[0]; return;
    default: fail(DEVICE_MISUSE, "ran inline PTX (line %d): the emulator has no op %d (a mismatch of _ptx.py and gpuedu_ptx.h)", line, op);
  }
}

// A warp-wide instruction: every lane of the warp must reach it (the .aligned of mma.sync, ldmatrix, setmaxnreg).
GPUEDU_PROF_QUIET inline bool warp_meet(LaneOperands& me) {
  int op = me.op, mods = me.mods, line = me.line;
  unsigned t = rt().cur, lane = t % 32;
  const Warp& W = rt().warps[t / 32];
  if (W.existing != 0xffffffffu)
    fail(WARP_MISMATCH,
         "%s (line %d) needs the 32 lanes of a warp, and warp %u of this block has %d threads: make the block's "
         "size a multiple of 32",
         op_name(op), line, t / 32, __builtin_popcount(W.existing));
  LaneOperands* (&meeting)[32] = *reinterpret_cast<LaneOperands* (*)[32]>(rt().mma_meeting[t / 32]);
  meeting[lane] = &me;
  unsigned others = W.existing & ~(1u << lane);
  bool all_here = (W.arrived & others) == others;
  for (unsigned l = 0; all_here && l < 32; ++l)
    if (l != lane && W.op[l] != W_PTX) all_here = false;   // (the collective reports lanes elsewhere)
  if (all_here) {
    for (unsigned l = 0; l < 32; ++l)
      if (meeting[l]->op != op || meeting[l]->mods != mods)
        fail(WARP_MISMATCH,
             "lanes of warp %u meet at different warp-wide PTX instructions: lane %u at %s (line %d), lane %u at "
             "%s (line %d); every lane must run the same one",
             t / 32, lane, op_name(op), line, l, op_name(meeting[l]->op), meeting[l]->line);
    if (op == MMA) {
      mma_warp(meeting, mods);
      GPUEDU_PROF(hmma_synced((mods & 3) == SHAPE_M16N8K16));   // the counters' HMMA: one of the warp
    } else if (op == SETMAXNREG) {
      setmaxnreg_warp(meeting, mods);
    } else {
      ldmatrix_warp(meeting, mods);
    }
  }
  return all_here;
}
}  // namespace ptx
}  // namespace __gpuedu

// The calls the rewritten asm() statements make (names the compiler's scan knows: a kernel that reaches
// __gpuedu_ptx_sync runs its threads as fibers).
static inline void __gpuedu_ptx_run(int op, int mods, unsigned long long* out, const unsigned long long* in,
                                    int line) {
  ::__gpuedu::ptx::run(op, mods, out, in, line);
}
GPUEDU_PROF_QUIET static inline void __gpuedu_ptx_sync(int op, int mods, unsigned long long* out,
                                                       const unsigned long long* in, int line) {
  GPUEDU_PROF_SUSPEND;
  using namespace ::__gpuedu;
  if (!rt().fiber_mode) fail_loop_mode(ptx::op_name(op));
  ptx::LaneOperands me{op, mods, line, in, out};   // (read by the warp's last lane: it lives until all have met)
  ptx::warp_meet(me);
  warp_collective(W_PTX, 0xffffffffu, 0, 0, 32);
}
// An mbarrier wait (try_wait, test_wait, or the loop idiom around one): out[0], where the statement has one, is 1
// once the phase completed, else 0. (A name the compiler's scan knows: a kernel that reaches it runs as fibers.)
GPUEDU_PROF_QUIET static inline void __gpuedu_ptx_wait(int mods, unsigned long long* out, const unsigned long long* in,
                                                       int line) {
  GPUEDU_PROF_SUSPEND;
  using namespace ::__gpuedu;
  const char* what = mods & ptx::MB_TRY ? "mbarrier.try_wait" : "mbarrier.test_wait";
  unsigned long long a = ptx::mbarrier_address(in[0], mods, line, what);
  bool done = ptx::mbarrier_wait(a, in[1], mods, line);
  if (out) out[0] = done;
}

// barrier.cluster.arrive (mods 0) or .wait (1): every non-exited thread of the cluster arrives before a wait returns
// (gpuedu_cluster.h). (A name the compiler's scan knows: a kernel that reaches it runs as fibers.)
GPUEDU_PROF_QUIET static inline void __gpuedu_ptx_cluster(int mods, int line) {
  GPUEDU_PROF_SUSPEND;
  if (mods) ::__gpuedu::cluster_wait(line);
  else ::__gpuedu::cluster_arrive(line);
}

// The largest register count each warpgroup of kernel `k`'s blocks asked for with setmaxnreg, in out[0 .. n - 1] (0:
// none), for the profiler's check that the block's registers hold them all.
extern "C" __attribute__((visibility("default"))) void gpuedu_registers_by_warpgroup(const void* k, unsigned* out,
                                                                                    int n) {
  using ::__gpuedu::ptx::RegisterRequest;
  for (int g = 0; g < n; ++g) out[g] = 0;
  for (const RegisterRequest* e = __atomic_load_n(&::__gpuedu::ptx::register_requests, __ATOMIC_ACQUIRE); e;
       e = e->next)
    if (e->kernel == k)
      for (int g = 0; g < n && g < (int)(::__gpuedu::MAX_THREADS / 128); ++g)
        if (e->group[g] > out[g]) out[g] = e->group[g];
}

// The largest register count a setmaxnreg of kernel `k` asked for (0: none ran yet), for the profiler's occupancy.
extern "C" __attribute__((visibility("default"))) unsigned gpuedu_registers_requested(const void* k) {
  unsigned most = 0;
  using ::__gpuedu::ptx::RegisterRequest;
  for (const RegisterRequest* e = __atomic_load_n(&::__gpuedu::ptx::register_requests, __ATOMIC_ACQUIRE); e;
       e = e->next)
    if (e->kernel == k && e->registers > most) most = e->registers;
  return most;
}

// CUDA's conversions between generic and shared addresses (the shared ones 32-bit values, as on a GPU).
static inline size_t __cvta_generic_to_shared(const void* p) {
  return (size_t)::__gpuedu::ptx::to_shared(p, 0, "__cvta_generic_to_shared");
}
static inline void* __cvta_shared_to_generic(size_t a) {
  return ::__gpuedu::ptx::from_shared(a, 0, 0, "__cvta_shared_to_generic");
}
static inline unsigned __isShared(const void* p) {
  const unsigned char* b = (const unsigned char*)p;
  const ::__gpuedu::Runtime& r = ::__gpuedu::rt();
  return (b >= r.arena && b < r.arena + ::__gpuedu::S.arena_used) ||
         (b >= r.dyn && b < r.dyn + r.dynamic_shared_bytes);
}
#endif  // GPUEDU_SCAN
