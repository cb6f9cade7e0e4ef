// cuda_pipeline.h for the CPU emulator: CUDA's pipeline primitives, the C
// interface to cp.async (asynchronous global -> shared copies, sm_80+).
//
//   __pipeline_memcpy_async(dst_shared, src_global, size_and_align, zfill = 0)
//       copy size_and_align - zfill bytes from src_global to dst_shared and
//       write zfill zero bytes after them; size_and_align is 4, 8 or 16 and
//       both pointers must be aligned to it.
//   __pipeline_commit()        close the batch of copies issued since the last commit
//   __pipeline_wait_prior(N)   wait until at most the N most recent batches are pending
//
// These are cp.async, cp.async.commit_group and cp.async.wait_group (gpuedu_ptx.h runs all three): a copy
// lands no earlier than the wait that covers its batch. Its source is read when it is issued; its bytes are
// written to shared memory at that wait, so a kernel that reads a stage it has not waited for reads what was
// there before, here as it may on a GPU. The missing __syncthreads after the wait, which lets other threads
// see the copies, shows up with the emulator's reverse and random schedules.
//
// The checks fail like a GPU would (a misaligned cp.async is a launch error,
// "misaligned address"): sizes other than 4, 8, 16, zfill larger than the
// size, pointers not aligned to the size, and a destination outside shared
// memory (cp.async writes shared memory only).
//
// A profiled build counts each __pipeline_memcpy_async as the LDGSTS it is on a GPU (its global read and its
// shared write, at the call's own site: gpuedu_profile.h's hooks), and racecheck sees the copy land at the wait
// that covers its batch; the checks and the queue are the runtime's, not counted.
//
// A C++ header, like NVIDIA's (whose helpers are templates, so nvcc refuses it
// inside extern "C" { }): include it with no_extern_c=True.
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#include "gpuedu_prelude.h"

#ifndef GPUEDU_SCAN
namespace __gpuedu {
// Does [p, p + n) lie inside the block's shared memory: a static __shared__
// variable registered so far, or the dynamic (extern __shared__) buffer?
GPUEDU_PROF_QUIET inline bool in_shared_memory(const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  const Runtime& r = rt();
  if (b >= r.dyn && b + n <= r.dyn + r.dynamic_shared_bytes) return true;
  for (int i = 0, k = shared_count(); i < k; ++i) {
    const unsigned char* s = shared_address(S.at[i]);
    if (b >= s && b + n <= s + S.at[i].n) return true;
  }
  return false;
}

template <typename Byte>  // a template, as NVIDIA's helpers are: refused in extern "C" as there
GPUEDU_PROF_QUIET_PART inline void pipeline_copy(Byte* dst, const Byte* src, size_t size, size_t zfill) {
  GPUEDU_PROF_SUSPEND;
  if (size != 4 && size != 8 && size != 16)
    fail(ASSERT,
         "__pipeline_memcpy_async(size_and_align=%zu): cp.async copies 4, 8 or 16 bytes; split larger copies",
         size);
  if (zfill > size)
    fail(ASSERT, "__pipeline_memcpy_async(size_and_align=%zu, zfill=%zu): zfill may not exceed the size", size,
         zfill);
  if (((uintptr_t)dst | (uintptr_t)src) % size != 0)
    fail(ASSERT,
         "misaligned address: __pipeline_memcpy_async of %zu bytes needs both pointers aligned to %zu bytes, got "
         "dst_shared=%p src_global=%p (a 16-byte copy of halves needs a row stride that is a multiple of 8 "
         "elements and a column that is a multiple of 8)",
         size, size, dst, src);
  if (!in_shared_memory(dst, size))
    fail(ASSERT,
         "__pipeline_memcpy_async: dst_shared=%p is not in the block's shared memory (cp.async writes shared "
         "memory only; copy to a __shared__ array)",
         dst);
  // The bytes past size - zfill are zeros and src is not read there: zfill == size reads nothing.
  ptx::issue_copy(dst, src, (unsigned)size, size - zfill, 0);
}
}  // namespace __gpuedu

GPUEDU_INSTRUCTION_FN void __pipeline_memcpy_async(void* __restrict__ dst_shared, const void* __restrict__ src_global,
                                                   size_t size_and_align, size_t zfill = 0) {
  __gpuedu::pipeline_copy((unsigned char*)dst_shared, (const unsigned char*)src_global, size_and_align, zfill);
#ifdef GPUEDU_PROFILE
  __gpuedu_prof_ldgsts_read(src_global, (unsigned)(size_and_align - zfill));
  __gpuedu_prof_ldgsts_write(dst_shared, (unsigned)size_and_align);
#endif
}
static inline void __pipeline_commit() { __gpuedu::ptx::cp_commit(); }
static inline void __pipeline_wait_prior(size_t n) { __gpuedu::ptx::cp_wait((long long)n, false, 0); }
#endif  // GPUEDU_SCAN
