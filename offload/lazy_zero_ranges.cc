#include "offload/lazy_zero_ranges.h"

#include <algorithm>
#include <iterator>

namespace zerofit::offload {

LazyZeroRanges::LazyZeroRanges(size_t size) : size_(size) { MarkAll(); }

void LazyZeroRanges::MarkAll() {
  pending_.clear();
  if (size_ > 0) pending_.emplace(0, size_);
}

bool LazyZeroRanges::Take(size_t begin, size_t end) {
  if (begin >= end) return true;
  auto it = pending_.upper_bound(begin);
  if (it == pending_.begin()) return false;
  --it;
  const size_t lo = it->first, hi = it->second;
  if (begin < lo || end > hi) return false;
  pending_.erase(it);
  if (lo < begin) pending_.emplace(lo, begin);
  if (end < hi) pending_.emplace(end, hi);
  return true;
}

std::vector<LazyZeroRanges::Range> LazyZeroRanges::TakeOverlapping(size_t begin, size_t end) {
  std::vector<Range> taken;
  if (begin >= end) return taken;
  auto it = pending_.upper_bound(begin);
  if (it != pending_.begin() && std::prev(it)->second > begin) --it;
  while (it != pending_.end() && it->first < end) {
    const size_t lo = it->first, hi = it->second;
    it = pending_.erase(it);
    taken.emplace_back(std::max(lo, begin), std::min(hi, end));
    if (lo < begin) pending_.emplace(lo, begin);
    if (end < hi) it = pending_.emplace(end, hi).first;
  }
  return taken;
}

std::vector<LazyZeroRanges::Range> LazyZeroRanges::TakeAll() {
  std::vector<Range> taken(pending_.begin(), pending_.end());
  pending_.clear();
  return taken;
}

}  // namespace zerofit::offload
