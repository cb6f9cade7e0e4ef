// cooperative_groups/scan.h for the CPU emulator: cg::inclusive_scan and cg::exclusive_scan over a
// tile or a coalesced group (op defaults to cg::plus), by shfl_up steps of 1, 2, 4, ...
// exclusive_scan gives the thread of rank 0 a value-initialized T (0 for plus).
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#include "reduce.h"

#ifndef GPUEDU_SCAN
namespace cooperative_groups {
template <typename T, unsigned int Size, typename P, typename Op>
inline T inclusive_scan(const thread_block_tile<Size, P>& group, T value, Op op) {
  unsigned rank = group.thread_rank();
  for (unsigned d = 1; d < Size; d <<= 1) {
    T other = group.shfl_up(value, d);
    if (rank >= d) value = op(other, value);
  }
  return value;
}
template <typename T, typename Op> inline T inclusive_scan(const coalesced_group& group, T value, Op op) {
  return __gpuedu_cg::coalesced_inclusive_scan(group, value, op);
}
template <typename Group, typename T> inline T inclusive_scan(const Group& group, T value) {
  return inclusive_scan(group, value, plus<T>());
}
template <typename Group, typename T, typename Op> inline T exclusive_scan(const Group& group, T value, Op op) {
  T inclusive = inclusive_scan(group, value, op);
  T before = group.shfl_up(inclusive, 1);
  return group.thread_rank() == 0 ? T() : before;
}
template <typename Group, typename T> inline T exclusive_scan(const Group& group, T value) {
  return exclusive_scan(group, value, plus<T>());
}
}  // namespace cooperative_groups
#endif  // GPUEDU_SCAN
