#include "text/hf/merge_queue.h"

#include <algorithm>
#include <functional>

namespace zerofit::text {

void MergeQueue::Push(uint32_t rank, int32_t pos) {
  Bucket& bucket = buckets_[rank];
  if (bucket.next == bucket.positions.size()) {
    // Empty: its rank may have left the heap already (duplicates in the heap are harmless).
    bucket.positions.clear();
    bucket.next = 0;
    bucket.sorted = true;
    ranks_.push_back(rank);
    std::push_heap(ranks_.begin(), ranks_.end(), std::greater<uint32_t>());
  } else if (pos < bucket.positions.back()) {
    bucket.sorted = false;
  }
  bucket.positions.push_back(pos);
}

bool MergeQueue::Pop(uint32_t* rank, int32_t* pos) {
  while (!ranks_.empty()) {
    Bucket& bucket = buckets_[ranks_.front()];
    if (bucket.next == bucket.positions.size()) {
      std::pop_heap(ranks_.begin(), ranks_.end(), std::greater<uint32_t>());
      ranks_.pop_back();
      continue;
    }
    if (!bucket.sorted) {
      std::sort(bucket.positions.begin() + static_cast<std::ptrdiff_t>(bucket.next), bucket.positions.end());
      bucket.sorted = true;
    }
    *rank = ranks_.front();
    *pos = bucket.positions[bucket.next++];
    return true;
  }
  return false;
}

}  // namespace zerofit::text
