#include "sharding/bucket_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zerofit::sharding {

absl::StatusOr<BucketPlan> BucketPlan::Make(const std::vector<ParamSpec>& params,
                                            const BucketPlanOptions& options) {
  if (params.empty()) return absl::InvalidArgumentError("BucketPlan: the model has no trainable parameters");
  if (options.element_bytes == 0) return absl::InvalidArgumentError("BucketPlan: element_bytes must be > 0");
  if (options.alignment == 0) return absl::InvalidArgumentError("BucketPlan: alignment must be > 0");
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].numel == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("BucketPlan: parameter ", i, " ('", params[i].name, "') has no elements"));
    }
  }
  BucketPlan plan;
  plan.options_ = options;
  plan.params_ = params;
  plan.placements_.resize(params.size());

  // Group whole parameters in backward order.
  const size_t bucket_elems = std::max<size_t>(1, options.bucket_bytes / options.element_bytes);
  Bucket current;
  auto close = [&]() {
    if (!current.params.empty()) plan.buckets_.push_back(std::move(current));
    current = Bucket{};
  };
  for (size_t k = params.size(); k-- > 0;) {
    const size_t start = RoundUp(current.used_numel, options.alignment);
    if (!current.params.empty() && start + params[k].numel > bucket_elems) close();
    const size_t offset = RoundUp(current.used_numel, options.alignment);
    plan.placements_[k].bucket = plan.buckets_.size();
    plan.placements_[k].offset_in_bucket = offset;
    current.params.push_back(k);
    current.used_numel = offset + params[k].numel;
    plan.numel_ += params[k].numel;
  }
  close();

  // Lay buckets out one after another and shard each.
  size_t flat = 0, shard = 0;
  for (Bucket& b : plan.buckets_) {
    ZF_ASSIGN_OR_RETURN(b.layout,
                        ShardLayout::Make(b.used_numel, options.world, options.rank, options.alignment));
    b.flat_offset = flat;
    b.shard_offset = shard;
    flat += b.layout.padded_numel;
    shard += b.layout.shard_numel;
    plan.max_bucket_numel_ = std::max(plan.max_bucket_numel_, b.layout.padded_numel);
  }
  plan.flat_numel_ = flat;
  plan.shard_numel_ = shard;
  for (size_t k = 0; k < params.size(); ++k) {
    ParamPlacement& p = plan.placements_[k];
    p.flat_offset = plan.buckets_[p.bucket].flat_offset + p.offset_in_bucket;
  }

  // Intersect this rank's block of every bucket with the parameters it holds.
  for (const Bucket& b : plan.buckets_) {
    const size_t lo = b.layout.shard_offset, hi = b.layout.shard_offset + b.layout.shard_numel;
    for (size_t k : b.params) {  // placement order is ascending offset order
      const size_t p_lo = plan.placements_[k].offset_in_bucket, p_hi = p_lo + params[k].numel;
      const size_t s = std::max(lo, p_lo), e = std::min(hi, p_hi);
      if (s >= e) continue;
      plan.segments_.push_back(ShardSegment{k, b.shard_offset + (s - lo), b.flat_offset + s, s - p_lo, e - s,
                                            params[k].weight_decay});
    }
  }
  return plan;
}

}  // namespace zerofit::sharding
