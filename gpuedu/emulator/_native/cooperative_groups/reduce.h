// cooperative_groups/reduce.h for the CPU emulator: cg::reduce(group, value, op) over a tile or a
// coalesced group, every thread of the group getting the result.
//
// The order of the operations is a GPU's, so that float sums give the same bits: on a tile of N
// threads, a butterfly of shfl_xor from N/2 down to 1; on a coalesced group of fewer than 32
// threads, an inclusive scan by rank (shfl_up by 1, 2, 4, ...) whose last value is shared.
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#include "../cooperative_groups.h"

#ifndef GPUEDU_SCAN
namespace cooperative_groups {
template <typename T, unsigned int Size, typename P, typename Op>
inline T reduce(const thread_block_tile<Size, P>& group, T value, Op op) {
  for (unsigned mask = Size >> 1; mask > 0; mask >>= 1) value = op(value, group.shfl_xor(value, mask));
  return value;
}

namespace __gpuedu_cg {
template <typename T, typename Op> inline T coalesced_inclusive_scan(const coalesced_group& group, T value, Op op) {
  unsigned rank = group.thread_rank();
  for (unsigned d = 1; d < group.size(); d <<= 1) {
    T other = group.shfl_up(value, d);
    if (rank >= d) value = op(other, value);
  }
  return value;
}
}  // namespace __gpuedu_cg

template <typename T, typename Op> inline T reduce(const coalesced_group& group, T value, Op op) {
  if (group.size() == 32) {
    for (unsigned mask = 16; mask > 0; mask >>= 1) value = op(value, group.shfl(value, (int)(group.thread_rank() ^ mask)));
    return value;
  }
  value = __gpuedu_cg::coalesced_inclusive_scan(group, value, op);
  return group.shfl(value, (int)group.size() - 1);
}

template <typename T> struct __reduce_needs_a_tile { static constexpr bool value = false; };
// cg::reduce works on tiles (tiled_partition) and coalesced groups, as with NVIDIA's headers.
template <typename T, typename Op> inline T reduce(const thread_block&, T value, Op) {
  static_assert(__reduce_needs_a_tile<T>::value,
                "cooperative_groups::reduce takes a tile (cg::tiled_partition<32>(block)) or a coalesced group, "
                "not the whole thread block: reduce each warp's tile, then combine the tiles' results");
  return value;
}
}  // namespace cooperative_groups
#endif  // GPUEDU_SCAN
