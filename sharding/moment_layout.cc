#include "sharding/moment_layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "optim/dynamic_map.h"

namespace zerofit::sharding {

using optim::kQuantBlock;

absl::StatusOr<MomentLayout> MomentLayout::Make(const BucketPlan* plan, size_t min_8bit_size) {
  MomentLayout layout(plan);
  for (const ShardSegment& s : plan->segments()) {
    if (s.shard_offset % kQuantBlock != 0 || s.offset_in_param % kQuantBlock != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "8-bit moments: parameter '", plan->params()[s.param].name, "' has a shard segment at element ",
          s.offset_in_param, " (shard offset ", s.shard_offset, "), not on a ", kQuantBlock,
          "-element block boundary: the bucket plan's alignment must be a multiple of ", kQuantBlock));
    }
    Slot slot;
    slot.quantized = plan->params()[s.param].numel >= min_8bit_size;
    if (slot.quantized) {
      layout.quantized_numel_ += s.numel;
    } else {
      slot.packed = layout.packed_numel_;
      layout.packed_numel_ += s.numel;
    }
    layout.slots_.push_back(slot);
  }
  return layout;
}

size_t MomentLayout::scales() const { return plan_->shard_numel() / kQuantBlock; }

size_t MomentLayout::bytes() const {
  return 2 * (shard_numel() + scales() * sizeof(float) + packed_numel_ * sizeof(float));
}

void MomentLayout::ToFp32(const float* map, const StoredMoment& in, float* out) const {
  std::fill_n(out, shard_numel(), 0.0f);
  for (size_t k = 0; k < slots_.size(); ++k) {
    const ShardSegment& s = plan_->segments()[k];
    if (!slots_[k].quantized) {
      std::copy_n(in.packed + slots_[k].packed, s.numel, out + s.shard_offset);
      continue;
    }
    optim::Dequantize(map, in.codes + s.shard_offset, s.numel, in.scales + s.shard_offset / kQuantBlock,
                      out + s.shard_offset);
  }
}

namespace {

// Quantises n elements (from a block boundary) against max(given scale, the block's own absmax).
void Restore(const optim::MapMidpoints& mids, const float* x, size_t n, const float* given, uint8_t* codes,
             float* scales) {
  for (size_t b = 0; b * kQuantBlock < n; ++b) {
    const size_t at = b * kQuantBlock, len = std::min(kQuantBlock, n - at);
    scales[b] = std::max(given != nullptr ? given[b] : 0.0f, optim::BlockAbsMax(x + at, len));
    optim::QuantizeBlock(mids, x + at, len, scales[b], codes + at);
  }
}

}  // namespace

void MomentLayout::FromFp32(const float* map, const float* in, const float* given,
                            const StoredMoment& out) const {
  const optim::MapMidpoints mids = optim::Midpoints(map);
  for (size_t k = 0; k < slots_.size(); ++k) {
    const ShardSegment& s = plan_->segments()[k];
    if (!slots_[k].quantized) {
      std::copy_n(in + s.shard_offset, s.numel, out.packed + slots_[k].packed);
      continue;
    }
    const size_t b = s.shard_offset / kQuantBlock;
    Restore(mids, in + s.shard_offset, s.numel, given != nullptr ? given + b : nullptr,
            out.codes + s.shard_offset, out.scales + b);
  }
}

}  // namespace zerofit::sharding
