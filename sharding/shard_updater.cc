#include "sharding/shard_updater.h"

namespace zerofit::sharding {

std::vector<std::pair<size_t, size_t>> BucketSegmentRanges(const BucketPlan& plan) {
  const auto& buckets = plan.buckets();
  const auto& segs = plan.segments();
  std::vector<std::pair<size_t, size_t>> ranges(buckets.size(), {0, 0});
  for (size_t b = 0, k = 0; b < buckets.size(); ++b) {
    const Bucket& bucket = buckets[b];
    ranges[b].first = k;
    while (k < segs.size() && segs[k].shard_offset < bucket.shard_offset + bucket.layout.shard_numel) ++k;
    ranges[b].second = k;
  }
  return ranges;
}

}  // namespace zerofit::sharding
