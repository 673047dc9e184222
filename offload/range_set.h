// A set of element ranges of one buffer: the offload pipeline's record of what a buffer holds in meaning but
// not in memory.
//
// The pipeline's fp32 gradient shard is zeroed after every step and then receives each bucket's reduced
// gradient once per micro-batch. Two sets per gradient buffer spare it passes over the shard:
//   - zero in meaning (lazy zeroing): the zeroing marks the whole buffer, the first receive into a marked
//     range takes it, and only what no receive covered is written with zeros, before the buffer is read;
//   - held in the low-precision staging only: the step's first receive leaves its gradient where the copy
//     landed (bf16), unconverted; the norm and AdamW read it from there, and a second receive (gradient
//     accumulation) converts it into the fp32 accumulator first.
// The same sums bit for bit, but for one case: a sum of negative zeros only stays -0 where 0 + -0 gave +0.
// Nothing the gradient feeds sees a zero's sign (its square for the norm; AdamW's moments, where m + -0 and
// m + +0 are equal, and the update).
//
// Ranges are element indices [begin, end) within [0, size). Not thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <utility>
#include <vector>

namespace zerofit::offload {

class RangeSet {
 public:
  using Range = std::pair<size_t, size_t>;  // [first, second)

  // An empty set over a buffer of `size` elements.
  explicit RangeSet(size_t size) : size_(size) {}

  // Every element in the set.
  void MarkAll();
  // No element in the set.
  void Clear() { ranges_.clear(); }
  // [begin, end) joins the set (it must not overlap it; adjacent ranges merge).
  void Add(size_t begin, size_t end);
  // Whether [begin, end) lay within one range of the set; it leaves the set. False, and nothing changes,
  // when any part of it was not in the set.
  bool Take(size_t begin, size_t end);
  // The parts of [begin, end) in the set, in order; they leave it.
  std::vector<Range> TakeOverlapping(size_t begin, size_t end);
  // Every range, in order; the set is empty after.
  std::vector<Range> TakeAll();
  // The parts of [begin, end) in the set, in order; the set is unchanged.
  std::vector<Range> Overlapping(size_t begin, size_t end) const;
  bool empty() const { return ranges_.empty(); }

 private:
  size_t size_;
  std::map<size_t, size_t> ranges_;  // begin -> end; disjoint, non-empty
};

}  // namespace zerofit::offload
