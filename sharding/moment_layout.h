// MomentLayout: where a shard's AdamW moments live when they are 8-bit (optim/adamw_8bit.h, bitsandbytes'
// AdamW8bit), and the host conversions between that form and plain fp32 moments. Shared by the on-device
// store (quantized_moments.h) and the offload updater's host store (offload/host_quantized_moments.h).
//
// A moment is kept as one byte per shard element (codes, at the element's shard offset), one fp32 scale per
// kQuantBlock shard elements, and fp32 values packed in their own array for the parameters of fewer than
// `min_8bit_size` elements (bitsandbytes' rule: norms and biases). Blocks are a parameter's own: the bucket
// plan must start every segment on a kQuantBlock-element boundary of both the shard and its parameter
// (Zero2Optimizer's alignment does), so block k of a segment is elements [k * kQuantBlock, ...) of its
// parameter whatever the world size, and a checkpoint's scales (one per parameter block) restore on any
// number of ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "sharding/bucket_plan.h"

namespace zerofit::sharding {

// One moment in its stored form: codes (shard_numel), scales (scales()), packed fp32 (packed_numel()).
struct StoredMoment {
  uint8_t* codes = nullptr;
  float* scales = nullptr;
  float* packed = nullptr;
};

class MomentLayout {
 public:
  // Where segment k's moments live: 8-bit at its shard offset, or fp32 at `packed` in the packed array.
  struct Slot {
    bool quantized = false;
    size_t packed = 0;
  };

  // InvalidArgument, naming the parameter, when a segment does not start on a block boundary.
  static absl::StatusOr<MomentLayout> Make(const BucketPlan* plan, size_t min_8bit_size);

  const BucketPlan& plan() const { return *plan_; }
  const std::vector<Slot>& slots() const { return slots_; }  // by segment
  size_t shard_numel() const { return plan_->shard_numel(); }
  size_t scales() const;  // per moment: one per block of the shard
  size_t quantized_numel() const { return quantized_numel_; }
  size_t packed_numel() const { return packed_numel_; }
  // Bytes of both moments in the stored form (codes, scales, packed fp32).
  size_t bytes() const;

  // out (shard_numel, padding 0) = the moment `map` (its 256 codes) and `in` hold.
  void ToFp32(const float* map, const StoredMoment& in, float* out) const;
  // The reverse: each block is quantised against max(its given scale, its own absmax), so the scales a
  // checkpoint saved give back the codes they came from (the signed map has no -1: a block whose largest
  // moment is negative dequantises below its scale), and a block saved without one (0: fp32 moments then)
  // gets its own. `given` may be null: every block its own absmax. Codes and scales outside the quantised
  // segments are left as they are.
  void FromFp32(const float* map, const float* in, const float* given, const StoredMoment& out) const;

 private:
  explicit MomentLayout(const BucketPlan* plan) : plan_(plan) {}

  const BucketPlan* plan_;
  std::vector<Slot> slots_;
  size_t quantized_numel_ = 0, packed_numel_ = 0;
};

}  // namespace zerofit::sharding
