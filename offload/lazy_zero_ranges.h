// The parts of an accumulation buffer that are zero in meaning but not yet in memory.
//
// The offload pipeline's fp32 gradient shard is zeroed after every step and then receives each bucket's
// reduced gradient once per micro-batch. Zeroing it lazily saves two passes over the shard per step: the
// zeroing marks the whole buffer pending, the first receive into a pending range overwrites it (a conversion)
// instead of adding to it, and only what no receive covered is written with zeros, before the buffer is read.
// The same sums bit for bit, but for one case: a sum of negative zeros only stays -0 where 0 + -0 gave +0.
// Nothing the gradient feeds sees a zero's sign (its square for the norm; AdamW's moments, where m + -0 and
// m + +0 are equal, and the update).
//
// Ranges are element indices [begin, end). Not thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <utility>
#include <vector>

namespace zerofit::offload {

class LazyZeroRanges {
 public:
  using Range = std::pair<size_t, size_t>;  // [first, second)

  // A buffer of `size` elements, all of them pending.
  explicit LazyZeroRanges(size_t size);

  // Every element pending again (the buffer is zero in meaning).
  void MarkAll();
  // Whether [begin, end) lay within one pending range; it is no longer pending (the caller overwrites it).
  // False, and nothing changes, when any part of it was not pending.
  bool Take(size_t begin, size_t end);
  // The pending parts of [begin, end), no longer pending: the caller writes zeros there now.
  std::vector<Range> TakeOverlapping(size_t begin, size_t end);
  // Every pending range, none pending after.
  std::vector<Range> TakeAll();
  bool empty() const { return pending_.empty(); }

 private:
  size_t size_;
  std::map<size_t, size_t> pending_;  // begin -> end; disjoint, non-empty
};

}  // namespace zerofit::offload
