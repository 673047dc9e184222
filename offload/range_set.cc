#include "offload/range_set.h"

#include <algorithm>
#include <cassert>
#include <iterator>

namespace zerofit::offload {

void RangeSet::MarkAll() {
  ranges_.clear();
  if (size_ > 0) ranges_.emplace(0, size_);
}

void RangeSet::Add(size_t begin, size_t end) {
  assert(begin <= end && end <= size_ && Overlapping(begin, end).empty());
  if (begin >= end) return;
  auto next = ranges_.lower_bound(begin);
  if (next != ranges_.end() && next->first == end) {  // merge with the range that starts at `end`
    end = next->second;
    next = ranges_.erase(next);
  }
  if (next != ranges_.begin() && std::prev(next)->second == begin) {  // and with the one ending at `begin`
    std::prev(next)->second = end;
    return;
  }
  ranges_.emplace_hint(next, begin, end);
}

bool RangeSet::Take(size_t begin, size_t end) {
  if (begin >= end) return true;
  auto it = ranges_.upper_bound(begin);
  if (it == ranges_.begin()) return false;
  --it;
  const size_t lo = it->first, hi = it->second;
  if (begin < lo || end > hi) return false;
  ranges_.erase(it);
  if (lo < begin) ranges_.emplace(lo, begin);
  if (end < hi) ranges_.emplace(end, hi);
  return true;
}

std::vector<RangeSet::Range> RangeSet::TakeOverlapping(size_t begin, size_t end) {
  std::vector<Range> taken;
  if (begin >= end) return taken;
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin() && std::prev(it)->second > begin) --it;
  while (it != ranges_.end() && it->first < end) {
    const size_t lo = it->first, hi = it->second;
    it = ranges_.erase(it);
    taken.emplace_back(std::max(lo, begin), std::min(hi, end));
    if (lo < begin) ranges_.emplace(lo, begin);
    if (end < hi) it = ranges_.emplace(end, hi).first;
  }
  return taken;
}

std::vector<RangeSet::Range> RangeSet::TakeAll() {
  std::vector<Range> taken(ranges_.begin(), ranges_.end());
  ranges_.clear();
  return taken;
}

std::vector<RangeSet::Range> RangeSet::Overlapping(size_t begin, size_t end) const {
  std::vector<Range> parts;
  if (begin >= end) return parts;
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin() && std::prev(it)->second > begin) --it;
  for (; it != ranges_.end() && it->first < end; ++it) {
    parts.emplace_back(std::max(it->first, begin), std::min(it->second, end));
  }
  return parts;
}

}  // namespace zerofit::offload
