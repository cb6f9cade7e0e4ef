// gpuedu_tma.h: the Tensor Memory Accelerator's copies (cp.async.bulk.tensor, sm_90), with the PTX ISA's semantics,
// and the tensor maps that describe them (CUtensorMap).
//
// A tensor map is the 128 bytes the driver's cuTensorMapEncodeTiled writes and a kernel takes by value (a
// `const __grid_constant__ CUtensorMap` parameter); the ISA keeps its contents opaque. The emulator's equivalent of
// that call (gpuedu/emulator/_tensormap.py, which gpuedu.tma calls when there is no GPU) writes the fields below in
// those bytes, after a magic word that tells a map it made from anything else: the tensor's address, rank (1 to 5),
// element size and dimensions (innermost first), the byte strides of dimensions 1 and up, the box, and the swizzle.
//
// - A load (cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [map, {c0, ...}],
//   [mbar]) copies the box whose first element is at coordinates c0 (innermost), c1, ... : elements outside the
//   tensor (a coordinate below 0 or past its dimension) are zeros. The box is written to shared memory dense, the
//   innermost side contiguous, its 16-byte chunks placed by the swizzle (gpuedu_mbarrier.h's tensor_swizzle: the
//   chunk's address bits 4.. XORed with bits 7..), and its bytes, zero-filled ones included, are completed on the
//   mbarrier. The box is read from global memory when the copy is issued and written when a thread waits on the
//   mbarrier, or when no thread of the block can run (gpuedu_mbarrier.h's TensorCopy): a GPU lands it at a time of
//   its own, so a kernel that reads the tile without waiting reads what was there before, here as it may there.
// - A store (cp.async.bulk.tensor.Nd.global.shared::cta.bulk_group [map, {c0, ...}], [src]) writes the box from
//   shared memory (the same layout) to the tensor, leaving out the elements outside it. It is done when issued, so
//   cp.async.bulk.commit_group and wait_group have nothing left to do (and a kernel that writes its tile again
//   before wait_group.read gets what it first wrote here, where a GPU may store the second).
// A copy's shared address must be 128-byte aligned, as the ISA asks (and aligned to the swizzle's repeat, 256, 512
// or 1024 bytes, for a wgmma descriptor's base offset of 0); its box must lie in the block's shared memory.
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif

#ifndef GPUEDU_SCAN
// CUDA's type (cuda.h): opaque, 128 bytes, 64-byte aligned.
typedef struct alignas(64) CUtensorMap_st {
  unsigned long long opaque[16];
} CUtensorMap;

namespace __gpuedu {
namespace ptx {
// The emulator's tensor map (keep in step with gpuedu/emulator/_tensormap.py): bytes 0-7 the magic word
// "GPUEDUTM", 8-15 the tensor's address, 16 the rank, 17 the data type (CUtensorMapDataType), 18 the element's
// bytes, 19 the swizzle (CUtensorMapSwizzle), 20 the interleave, 21 the L2 promotion, 22 the out-of-bounds fill,
// 24-63 the dimensions (5 x 8 bytes, innermost first), 64-95 the byte strides of dimensions 1 to 4, 96-105 the box
// (5 x 2 bytes), 106-110 the element strides (5 x 1 byte).
constexpr u64 TENSOR_MAP_MAGIC = 0x4D54554445555047ull;   // "GPUEDUTM", little-endian
struct TensorMapFields {
  const unsigned char* address;
  unsigned rank, elem, swizzle;
  u64 dims[5], strides[5];   // strides[0] is the element's size
  unsigned box[5];
};

GPUEDU_PROF_QUIET inline TensorMapFields read_tensor_map(u64 p, const char* what, int line) {
  const unsigned char* b = (const unsigned char*)(uintptr_t)p;
  u64 magic;
  memcpy(&magic, b, 8);
  if (magic != TENSOR_MAP_MAGIC)
    fail(DEVICE_MISUSE,
         "ran %s (line %d): the tensor map at %p was not made by cuTensorMapEncodeTiled (gpuedu.tma.tensor_map): pass "
         "the address of the kernel's `const __grid_constant__ CUtensorMap` parameter, given the map "
         "gpuedu.tma.tensor_map(array, box) returned",
         what, line, (const void*)b);
  TensorMapFields f{};
  u64 address;
  memcpy(&address, b + 8, 8);
  f.address = (const unsigned char*)(uintptr_t)address;
  f.rank = b[16];
  f.elem = b[18];
  f.swizzle = b[19];
  for (unsigned d = 0; d < 5; ++d) {
    memcpy(&f.dims[d], b + 24 + 8 * d, 8);
    unsigned short box;
    memcpy(&box, b + 96 + 2 * d, 2);
    f.box[d] = d < f.rank ? box : 1;
    if (d >= f.rank) f.dims[d] = 1;
  }
  f.strides[0] = f.elem;
  for (unsigned d = 1; d < 5; ++d) memcpy(&f.strides[d], b + 64 + 8 * (d - 1), 8);
  return f;
}

// The box's bytes, and its rows (each of box[0] elements) counted over the outer dimensions.
inline u64 box_bytes(const TensorMapFields& f) {
  u64 n = f.elem;
  for (unsigned d = 0; d < f.rank; ++d) n *= f.box[d];
  return n;
}

// Row `row` of the box (0 to the product of box[1..] - 1): its first element's global coordinates, whether its outer
// coordinates lie inside the tensor, and where its element 0 would be.
struct BoxRow {
  long long x0;                 // the innermost coordinate of its first element
  bool inside;                  // its outer coordinates lie inside the tensor
  const unsigned char* start;   // the tensor's element (0, outer coordinates): a row's elements follow it
};
inline BoxRow box_row(const TensorMapFields& f, const long long* c, u64 row) {
  BoxRow r{c[0], true, f.address};
  for (unsigned d = 1; d < f.rank; ++d) {
    long long g = c[d] + (long long)(row % f.box[d]);
    row /= f.box[d];
    if (g < 0 || (u64)g >= f.dims[d]) r.inside = false;
    else r.start += (u64)g * f.strides[d];
  }
  return r;
}

// Checks a copy's shared address and tensor map make sense together.
GPUEDU_PROF_QUIET inline void check_tensor_copy(const TensorMapFields& f, unsigned rank, u64 smem, const char* what,
                                                int line) {
  if (f.rank != rank)
    fail(DEVICE_MISUSE,
         "ran %s (line %d): the tensor map has rank %u, and this is a .%ud copy with %u coordinates: use "
         "cp.async.bulk.tensor.%ud, or a map of rank %u",
         what, line, f.rank, rank, rank, f.rank, rank);
  if (smem % 128)
    fail(DEVICE_MISUSE,
         "ran %s (line %d): misaligned address: shared 0x%llx is not a multiple of 128 (a tensor copy's shared memory "
         "is 128-byte aligned): declare the tile __align__(128) (__align__(1024) for a tile a wgmma reads with the "
         "128-byte swizzle), or round its offset in the dynamic shared memory up",
         what, line, smem);
  from_shared(smem, box_bytes(f), line, what);
}

// cp.async.bulk.tensor (a load): in = {dst, map, c0 .. c(rank-1), mbar}, in the running block's shared memory.
// (`counted`: the counters see its global reads; a multicast's copies after the first read nothing more.)
GPUEDU_PROF_QUIET inline void tensor_load(const u64* in, unsigned rank, int line, [[maybe_unused]] bool counted = true) {
  const char* what = "cp.async.bulk.tensor";
  const TensorMapFields f = read_tensor_map(in[1], what, line);
  const u64 dst = in[0], bar = mbarrier_address(in[2 + rank], 0, line, what);
  check_tensor_copy(f, rank, dst, what, line);
  MBarriers& m = mbarriers();
  mbarrier_at(m, bar, line, what);
  long long c[5] = {0, 0, 0, 0, 0};
  for (unsigned d = 0; d < rank; ++d) c[d] = (long long)(int)(unsigned)in[2 + d];   // (coordinates are .s32)
  const u64 bytes = box_bytes(f), row_bytes = (u64)f.box[0] * f.elem;
  unsigned char* data = (unsigned char*)calloc(1, bytes);
  if (!data) fail(DEVICE_MISUSE, "ran %s (line %d): no memory for a box of %llu bytes", what, line, bytes);
  for (u64 row = 0, rows = bytes / row_bytes; row < rows; ++row) {
    const BoxRow r = box_row(f, c, row);
    if (!r.inside) continue;
    long long lo = r.x0 < 0 ? -r.x0 : 0, hi = (long long)f.box[0];   // the row's elements inside the tensor
    if (r.x0 + hi > (long long)f.dims[0]) hi = (long long)f.dims[0] - r.x0;
    if (lo >= hi) continue;
    memcpy(data + row * row_bytes + lo * f.elem, r.start + (r.x0 + lo) * f.elem, (hi - lo) * f.elem);
    if (counted) GPUEDU_PROF(tensor_row(r.start + (r.x0 + lo) * f.elem, (hi - lo) * f.elem, false));
  }
  if (m.n_copies == m.copies_room) {
    unsigned room = m.copies_room ? 2 * m.copies_room : 16;
    TensorCopy* more = (TensorCopy*)realloc(m.copies, room * sizeof(TensorCopy));
    if (!more) fail(DEVICE_MISUSE, "ran %s (line %d): no memory for the copies in flight", what, line);
    m.copies = more;
    m.copies_room = room;
  }
  m.copies[m.n_copies++] = TensorCopy{bar, dst, data, (unsigned)bytes, f.swizzle, line};
  if (counted) GPUEDU_PROF(tensor_copied(false, bytes));
}

// A load into shared::cluster memory: the destination (and its mbarrier, which lies in the same block) may be
// another block's of the cluster (an address from mapa); .multicast::cluster (mods bit 3) lands the same box at
// the same offsets in each block of the 16-bit mask in[3 + rank], completing bytes on each one's mbarrier, as TMA
// multicast does. Each copy lands in its block as a load of its own would (gpuedu_mbarrier.h's TensorCopy).
GPUEDU_PROF_QUIET inline void tensor_load_cluster(const u64* in, int mods, int line) {
  const char* what = "cp.async.bulk.tensor";
  unsigned rank = (unsigned)mods & 7, me = cluster_rank();
  u64 local[8];
  for (unsigned i = 0; i < 3 + rank; ++i) local[i] = in[i];
  local[0] &= CLUSTER_OFFSET_MASK;
  local[2 + rank] &= CLUSTER_OFFSET_MASK;
  unsigned mask = 1u << cluster_rank_of(in[0], line, what);
  if (mods & 8) {
    mask = (unsigned)(in[3 + rank] & 0xffff);
    if (mask >> cluster_size())
      fail(DEVICE_MISUSE,
           "ran %s.multicast::cluster (line %d): the mask 0x%04x names blocks beyond the cluster's %u (ranks 0 to %u)",
           what, line, mask, cluster_size(), cluster_size() - 1);
  }
  bool first = true;
  for (unsigned k = 0; k < cluster_size(); ++k) {
    if (!((mask >> k) & 1)) continue;
    peer(k, line, what);
    if (k != me) switch_rank(k);   // (for the copy only: the block's shared memory and mbarriers are its state's)
    tensor_load(local, rank, line, first);
    if (k != me) switch_rank(me);
    first = false;
  }
}

// cp.async.bulk.tensor (a store): in = {map, c0 .. c(rank-1), src}.
GPUEDU_PROF_QUIET inline void tensor_store(const u64* in, unsigned rank, int line) {
  const char* what = "cp.async.bulk.tensor (a store)";
  const TensorMapFields f = read_tensor_map(in[0], what, line);
  const u64 src = in[1 + rank];
  check_tensor_copy(f, rank, src, what, line);
  long long c[5] = {0, 0, 0, 0, 0};
  for (unsigned d = 0; d < rank; ++d) c[d] = (long long)(int)(unsigned)in[1 + d];
  const u64 bytes = box_bytes(f), row_bytes = (u64)f.box[0] * f.elem;
  GPUEDU_PROF(tensor_copied(true, bytes));
  for (u64 row = 0, rows = bytes / row_bytes; row < rows; ++row) {
    const BoxRow r = box_row(f, c, row);
    if (!r.inside) continue;
    long long lo = r.x0 < 0 ? -r.x0 : 0, hi = (long long)f.box[0];   // the row's elements inside the tensor
    if (r.x0 + hi > (long long)f.dims[0]) hi = (long long)f.dims[0] - r.x0;
    if (lo < hi) GPUEDU_PROF(tensor_row(r.start + (r.x0 + lo) * f.elem, (hi - lo) * f.elem, true));
    for (u64 e = 0; e < f.box[0]; ++e) {
      const long long x = r.x0 + (long long)e;
      if (x < 0 || (u64)x >= f.dims[0]) continue;
      const u64 o = row * row_bytes + e * f.elem;   // its byte in the dense box: its chunk placed by the swizzle
      const unsigned char* from = from_shared(tensor_swizzle(src + (o & ~15ull), f.swizzle) + (o & 15), f.elem, line,
                                              what);
      memcpy((unsigned char*)r.start + x * f.elem, from, f.elem);
    }
  }
}
}  // namespace ptx
}  // namespace __gpuedu
#endif  // GPUEDU_SCAN
