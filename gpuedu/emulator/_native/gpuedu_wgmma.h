// gpuedu_wgmma.h: Hopper's warpgroup MMA (wgmma, sm_90a), with the PTX ISA's semantics.
// wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}: D (64 x N, f32) = A (64 x 16) B (16 x N), plus D when
// scale-d is 1, issued by a warpgroup: the 128 threads of four consecutive warps, the first a multiple of 4. The
// threads meet (warpgroup_meet), each leaving its operands where the last to come finds them, and the last computes
// for all 128, from each thread's registers in the layouts of the PTX ISA's "Register Fragments" for .m64nNk16:
// - D, N/2 registers a thread: warp w of the group holds rows 16w to 16w + 15, its lane l rows 16w + l/4 and
//   16w + l/4 + 8, columns 8i + 2 (l % 4) and the next: register 4i + j holds row 16w + l/4 + 8 (j / 2), column
//   8i + 2 (l % 4) + j % 2, for i = 0 .. N/8 - 1 (mma.m16n8k16's C, once for each 8 columns);
// - A in registers, four a thread: each warp's 16 rows as mma.m16n8k16's A, register j holding a_2j (low half) and
//   a_2j+1, a_e at row 16w + l/4 + 8 ((e / 2) % 2), column 2 (l % 4) + e % 2 + 8 (e / 4);
// - A or B in shared memory, named by a 64-bit matrix descriptor (decode_descriptor, wgmma_element_address), the
//   same in every thread of the warpgroup (the ISA's rule: checked).
//
// imm-scale-a / imm-scale-b -1 negate A / B; imm-trans-a / imm-trans-b 1 read A / B from shared memory M- / N-major
// instead of K-major. Products are exact in float; each sum is a float addition in k order, from D (scale-d 1) or
// from 0 (scale-d 0) (the order and rounding inside the instruction are the hardware's; small integers come out
// exact).
//
// The asynchrony is not modelled: the product is computed when mma_async is issued, from shared memory as it is
// then (what a correct kernel's fences and waits guarantee), and written to the accumulator registers there and
// then, since the registers are the kernel's C++ variables. So the values do not show a missing wgmma.wait_group: a
// kernel that reads its accumulators before the wait that covers them, or overwrites a tile an mma_async in flight
// still reads, gets the finished product here, where a GPU may give another (ptxas itself inserts a wait before
// some such reads: nvcc 13 for sm_90a reports "warpgroup.wait is injected ... to allow use of registers defined by
// GMMA", info C7517). Nor is a missing wgmma.fence or fence.proxy.async seen. wgmma.fence, wgmma.commit_group and
// wgmma.wait_group are checked when the source is rewritten (_ptx.py) and have nothing left to do when they run.
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#include "gpuedu_ptx.h"

#ifndef GPUEDU_SCAN
namespace __gpuedu {
namespace ptx {
enum : int { WGMMA_MMA = 40 };   // (numbered apart from gpuedu_ptx.h's ops)
// wgmma.mma_async's modifiers, as _ptx.py packs them: N / 8 | .bf16 << 6 | A in registers << 7 | scale-d << 8 |
// imm-scale-a -1 << 9 | imm-scale-b -1 << 10 | imm-trans-a << 11 | imm-trans-b << 12 | D's values passed in << 13
// (when scale-d is 1, or known only when it runs: a template parameter, or the predicate idiom's register).
struct WgmmaForm {
  unsigned n;
  int type;                  // IN_F16 or IN_BF16
  bool a_regs, accumulate, negate_a, negate_b, mn_major_a, mn_major_b, d_given;
};
inline WgmmaForm wgmma_form(int mods) {
  return WgmmaForm{8u * (unsigned)(mods & 63), (mods >> 6) & 1 ? IN_BF16 : IN_F16, ((mods >> 7) & 1) != 0,
                   ((mods >> 8) & 1) != 0, ((mods >> 9) & 1) != 0, ((mods >> 10) & 1) != 0, ((mods >> 11) & 1) != 0,
                   ((mods >> 12) & 1) != 0, ((mods >> 13) & 1) != 0};
}

// An immediate of wgmma.mma_async known only when it runs (an "n" operand of a template parameter), checked as
// ptxas checks it when it compiles the instance: its bit of the modifiers (1 for 1, or for -1 when `plus_minus_one`).
GPUEDU_PROF_QUIET inline int wgmma_bit(long long v, bool plus_minus_one, const char* what, int line) {
  if (plus_minus_one ? v != 1 && v != -1 : v != 0 && v != 1)
    fail(DEVICE_MISUSE, "ran wgmma.mma_async (line %d): %s is %lld; ptxas takes %s there", line, what, v,
         plus_minus_one ? "1 or -1" : "0 or 1");
  return plus_minus_one ? v == -1 : v == 1;
}
// wgmma.wait_group's N known only when it runs: checked (nothing is left to wait for: see above).
GPUEDU_PROF_QUIET inline void wgmma_wait_count(long long n, int line) {
  if (n < 0) fail(DEVICE_MISUSE, "ran wgmma.wait_group (line %d): N is %lld; ptxas takes a non-negative integer", line, n);
}

// The PTX ISA's "Matrix Descriptor Format": bits 0-13 the start address, 16-29 the leading dimension byte offset,
// 32-45 the stride dimension byte offset, each (x & 0x3FFFF) >> 4; 49-51 the matrix base offset; 62-63 the swizzle
// mode (0 none, 1 128-byte, 2 64-byte, 3 32-byte). The other bits are not read.
struct MatrixDescriptor {
  u64 start, leading, stride;   // bytes: the start among the 18-bit shared addresses a descriptor names
  unsigned base;                // the swizzle pattern's phase at the start: (pattern start >> 7) & 7
  unsigned swizzle;
};
inline MatrixDescriptor decode_descriptor(u64 d) {
  return MatrixDescriptor{(d & 0x3FFF) << 4, ((d >> 16) & 0x3FFF) << 4, ((d >> 32) & 0x3FFF) << 4,
                          (unsigned)(d >> 49) & 7, (unsigned)(d >> 62) & 3};
}
// The 16-byte chunks of one swizzled row: 8 (128-byte swizzle), 4 (64), 2 (32), 1 (none: the interleaved layout).
inline u64 swizzle_chunks(unsigned mode) { return mode == 1 ? 8 : mode == 2 ? 4 : mode == 3 ? 2 : 1; }

// Where element (mn, k) of a 16-bit operand lies: mn its row of A (0-63) or its column of B (0 to N - 1), k its
// column of A or row of B (0-15). The ISA's canonical layouts ("Shared Memory Matrix Layout"), in bytes, with W a
// swizzled row's 16-byte chunks, LBO and SBO the descriptor's offsets:
// - K-major (imm-trans 0: A row-major, B column-major): core matrices of 8 rows (mn) of 16 bytes (8 k), rows 16 W
//   bytes apart; the next 8 mn SBO further, the next 8 k LBO further without swizzling, else the next chunk (16);
// - M- or N-major (imm-trans 1): core matrices of 8 rows (k) of 16 bytes (8 mn), rows 16 W bytes apart, W chunks
//   of mn side by side; the next 8 W mn LBO further and the next 8 k SBO further when swizzled, and without
//   swizzling the next 8 mn SBO further, the next 8 k LBO.
// Then the swizzle XORs address bits 4 to 4 + log2 W - 1 (the 16-byte chunk in the row) with the bits as many
// above bit 7 (the row, counted from the pattern's start: less the base offset), as CUTLASS's Swizzle<3,4,3>,
// <2,4,3>, <1,4,3> that the ISA names; the pattern repeats every 1024, 512 or 256 bytes. (The base offset's use is
// read from its definition, (pattern start >> 7) & 7, for a pattern that does not start on such a boundary; no GPU
// run here has checked it, and kernels that align their tiles leave it 0.)
inline u64 wgmma_element_address(const MatrixDescriptor& m, unsigned mn, unsigned k, bool mn_major) {
  const u64 w = swizzle_chunks(m.swizzle);
  u64 offset;
  if (!mn_major)
    offset = (mn % 8) * 16 * w + (mn / 8) * m.stride + (k % 8) * 2 + (k / 8) * (w == 1 ? m.leading : 16);
  else
    offset = (mn % 8) * 2 + (mn / 8 % w) * 16 + (mn / (8 * w)) * (w == 1 ? m.stride : m.leading) +
             (k % 8) * 16 * w + (k / 8) * (w == 1 ? m.leading : m.stride);
  u64 a = m.start + offset;
  if (w > 1) a ^= (((a >> 7) - m.base) & (w - 1)) << 4;
  return a;
}

// Where a descriptor's 18-bit shared address lies in this block's shared memory: the static __shared__ variables
// below DESCRIPTOR_DYNAMIC (their first 128 KiB of the arena), the dynamic shared memory from there.
constexpr u64 DESCRIPTOR_DYNAMIC = DYNAMIC_WINDOW & 0x3FFFF;
GPUEDU_PROF_QUIET inline float wgmma_element(const MatrixDescriptor& m, u64 desc, char which, unsigned mn,
                                             unsigned k, bool mn_major, int type, int line) {
  u64 a = wgmma_element_address(m, mn, k, mn_major);
  const unsigned char* p = nullptr;
  if (a >= DESCRIPTOR_DYNAMIC) {
    if (a - DESCRIPTOR_DYNAMIC + 2 <= rt().dynamic_shared_bytes) p = rt().dyn + (a - DESCRIPTOR_DYNAMIC);
  } else if (a + 2 <= S.arena_used) {
    p = rt().arena + a;
  }
  if (!p) {
    u64 statics = S.arena_used < DESCRIPTOR_DYNAMIC ? S.arena_used : DESCRIPTOR_DYNAMIC;
    fail(DEVICE_MISUSE,
         "ran wgmma.mma_async (line %d): the descriptor of %c (0x%016llx: start 0x%llx, leading byte offset %llu, "
         "stride byte offset %llu, %s) puts its element (%u, %u) at shared address 0x%llx, outside the block's "
         "shared memory (its static __shared__ variables at 0x0 to 0x%llx, its dynamic shared memory at 0x%llx to "
         "0x%llx, as a descriptor's 18 address bits name them). Check the descriptor's fields against the PTX ISA's "
         "Matrix Descriptor Format",
         line, which, desc, m.start, m.leading, m.stride,
         m.swizzle == 1   ? "128-byte swizzle"
         : m.swizzle == 2 ? "64-byte swizzle"
         : m.swizzle == 3 ? "32-byte swizzle"
                          : "no swizzle",
         which == 'A' ? mn : k, which == 'A' ? k : mn, a, statics, DESCRIPTOR_DYNAMIC,
         DESCRIPTOR_DYNAMIC + (u64)rt().dynamic_shared_bytes);
  }
  unsigned short h;
  memcpy(&h, p, 2);
  return type == IN_BF16 ? __gpuedu_bf2f_bits(h) : __gpuedu_h2f_bits(h);
}

// wgmma.mma_async for the warpgroup whose 128 threads' operands are t[0..127] (thread 32 w + l: lane l of its w-th
// warp), all at the same instruction.
GPUEDU_PROF_QUIET inline void wgmma_group(LaneOperands* const* t, unsigned group) {
  const WgmmaForm f = wgmma_form(t[0]->mods);
  const int line = t[0]->line;
  const unsigned a_at = f.d_given ? f.n / 2 : 0, b_at = a_at + (f.a_regs ? 4 : 1);
  for (unsigned i = 1; i < 128; ++i)
    for (unsigned at : {f.a_regs ? b_at : a_at, b_at})
      if (t[i]->in[at] != t[0]->in[at])
        fail(WARP_MISMATCH,
             "ran wgmma.mma_async (line %d): the threads of warpgroup %u give different descriptors of %c: thread %u "
             "0x%016llx, thread %u 0x%016llx; a matrix descriptor must be the same in every warp of the warpgroup "
             "(PTX ISA)",
             line, group, at == b_at ? 'B' : 'A', 128 * group, t[0]->in[at], 128 * group + i, t[i]->in[at]);
  float A[64][16];
  if (f.a_regs) {
    for (unsigned i = 0; i < 128; ++i) {
      unsigned w = i / 32, g = i % 32 / 4, q = i % 4;
      for (unsigned e = 0; e < 8; ++e)
        A[16 * w + g + 8 * ((e >> 1) & 1)][2 * q + (e & 1) + 8 * (e >> 2)] =
            half_lo(t[i]->in[a_at + e / 2], e & 1, f.type);
    }
  } else {
    const MatrixDescriptor da = decode_descriptor(t[0]->in[a_at]);
    for (unsigned m = 0; m < 64; ++m)
      for (unsigned k = 0; k < 16; ++k)
        A[m][k] = wgmma_element(da, t[0]->in[a_at], 'A', m, k, f.mn_major_a, f.type, line);
  }
  if (f.negate_a)
    for (auto& row : A)
      for (float& x : row) x = -x;
  const MatrixDescriptor db = decode_descriptor(t[0]->in[b_at]);
  for (unsigned c = 0; c < f.n; ++c) {
    float B[16];
    for (unsigned k = 0; k < 16; ++k) {
      B[k] = wgmma_element(db, t[0]->in[b_at], 'B', c, k, f.mn_major_b, f.type, line);
      if (f.negate_b) B[k] = -B[k];
    }
    for (unsigned r = 0; r < 64; ++r) {
      LaneOperands* o = t[32 * (r / 16) + 4 * (r % 8) + (c % 8) / 2];
      unsigned reg = 4 * (c / 8) + 2 * (r % 16 / 8) + c % 2;
      float acc = f.accumulate ? f32_value(o->in[reg]) : 0.0f;
      for (unsigned k = 0; k < 16; ++k) acc += A[r][k] * B[k];
      o->out[reg] = f32_bits(acc);
    }
  }
}

// A thread of a warpgroup waits at its meeting, and no thread of the block that is not waiting at one can run: the
// meeting cannot be completed. Says which thread of the group is missing and where it is.
[[noreturn]] GPUEDU_PROF_QUIET inline void fail_warpgroup(const LaneOperands& me, unsigned group) {
  Runtime& r = rt();
  unsigned came = 0, missing = ~0u;
  for (unsigned i = 0; i < 128; ++i) {
    unsigned t = 128 * group + i;
    if (r.warps[t / 32].grouped >> (t % 32) & 1u) came++;
    else if (missing == ~0u) missing = t;
  }
  const uint3 who = r.fibers[missing].tid;
  const char* where = r.state[missing] == DONE ? "has exited"
                      : r.state[missing] == AT_BLOCK ? "waits at __syncthreads"
                      : r.state[missing] == AT_WARP ? "waits at a warp intrinsic"
                                                    : "waits at another warpgroup's instruction";
  fail(r.state[missing] == DONE ? WARP_EXITED : DEADLOCK,
       "wgmma.mma_async (line %d) needs the 128 threads of warpgroup %u (threads %u to %u) and %u came: thread "
       "(%u,%u,%u) %s. Every thread of a warpgroup must reach the same wgmma.mma_async (.sync.aligned): look for a "
       "return, a __syncthreads, or an if around it that not every thread of the warpgroup takes",
       me.line, group, 128 * group, 128 * group + 127, came, who.x, who.y, who.z, where);
}

// A warpgroup instruction: this thread leaves its operands and waits, ready to run, while the others of its
// warpgroup come (the block's other threads run meanwhile); the last to come computes for all 128 and frees them.
GPUEDU_PROF_QUIET inline void warpgroup_meet(LaneOperands& me) {
  Runtime& r = rt();
  const unsigned t = r.cur, warp = t / 32, lane = t % 32, group = warp / 4, first = 4 * group;
  if (128 * (group + 1) > r.nthreads)
    fail(WARP_MISMATCH,
         "wgmma.mma_async (line %d) needs the 128 threads of a warpgroup (four consecutive warps, the first a "
         "multiple of 4), and warpgroup %u of this block has %u threads: make the block's size a multiple of 128",
         me.line, group, r.nthreads - 128 * group);
  GPUEDU_PROF(leave());
  r.mma_meeting[warp][lane] = &me;
  r.warps[warp].grouped |= 1u << lane;
  bool all = true;
  for (unsigned w = first; w < first + 4; ++w) all = all && r.warps[w].grouped == 0xffffffffu;
  if (all) {
    LaneOperands* ops[128];
    for (unsigned i = 0; i < 128; ++i) {
      ops[i] = (LaneOperands*)r.mma_meeting[first + i / 32][i % 32];
      if (ops[i]->op != me.op || ops[i]->mods != me.mods || ops[i]->line != me.line) {
        WgmmaForm a = wgmma_form(me.mods), b = wgmma_form(ops[i]->mods);
        fail(WARP_MISMATCH,
             "the threads of warpgroup %u meet at different wgmma.mma_async instructions: thread %u at line %d "
             "(m64n%uk16, A %s, scale-d %d), thread %u at line %d (m64n%uk16, A %s, scale-d %d); every thread of "
             "the warpgroup must run the same one (.aligned)",
             group, t, me.line, a.n, a.a_regs ? "in registers" : "in shared memory", (int)a.accumulate,
             128 * group + i, ops[i]->line, b.n, b.a_regs ? "in registers" : "in shared memory", (int)b.accumulate);
      }
    }
    wgmma_group(ops, group);
    GPUEDU_PROF(gmma_synced(wgmma_form(ops[0]->mods).n));   // the counters' wgmma: one of the warpgroup
    for (unsigned w = first; w < first + 4; ++w) {
      r.warps[w].grouped = 0;
      GPUEDU_PROF(warp_synced(w));
    }
  } else {
    while (r.warps[warp].grouped >> lane & 1u) {
      // Every ready thread of the block waiting at a warpgroup meeting: none can bring the missing threads.
      unsigned waiting = 0;
      for (unsigned w = 0; w < (r.nthreads + 31) / 32; ++w)
        waiting += (unsigned)__builtin_popcount(r.warps[w].grouped);
      if (r.n_ready <= waiting) fail_warpgroup(me, group);
      run_next();
    }
  }
  GPUEDU_PROF(enter(t));
}
}  // namespace ptx
}  // namespace __gpuedu

// The call a rewritten wgmma.mma_async makes (a name the compiler's scan knows: its kernel runs its threads as
// fibers): the thread meets the others of its warpgroup (warpgroup_meet).
GPUEDU_PROF_QUIET static inline void __gpuedu_ptx_group(int op, int mods, unsigned long long* out,
                                                        const unsigned long long* in, int line) {
  GPUEDU_PROF_SUSPEND;
  using namespace ::__gpuedu;
  if (!rt().fiber_mode) fail_loop_mode("wgmma.mma_async");
  ptx::LaneOperands me{op, mods, line, in, out};   // (read by the group's last thread: it lives until all have met)
  ptx::warpgroup_meet(me);
}
#endif  // GPUEDU_SCAN
