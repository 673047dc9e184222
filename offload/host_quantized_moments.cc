#include "offload/host_quantized_moments.h"

#include <algorithm>

#include "core/status_macros.h"

namespace zerofit::offload {

using optim::kQuantBlock;

absl::StatusOr<std::unique_ptr<HostQuantizedMoments>> HostQuantizedMoments::Create(
    const sharding::BucketPlan* plan, size_t min_8bit_size) {
  ZF_ASSIGN_OR_RETURN(sharding::MomentLayout layout, sharding::MomentLayout::Make(plan, min_8bit_size));
  std::unique_ptr<HostQuantizedMoments> q(new HostQuantizedMoments(std::move(layout)));
  // Zeroed memory is code 0 of the signed map (-0.993), not 0: the moments start as quantised zeros.
  const std::vector<float> zeros(q->layout_.shard_numel(), 0.0f);
  q->CopyFromHost(zeros.data(), zeros.data(), nullptr, nullptr);
  return q;
}

HostQuantizedMoments::HostQuantizedMoments(sharding::MomentLayout layout)
    : layout_(std::move(layout)),
      m_codes_(layout_.shard_numel(), 0),
      v_codes_(layout_.shard_numel(), 0),
      m_scales_(layout_.scales(), 0.0f),
      v_scales_(layout_.scales(), 0.0f),
      m_packed_(layout_.packed_numel(), 0.0f),
      v_packed_(layout_.packed_numel(), 0.0f) {}

void HostQuantizedMoments::Place(size_t segment, OffloadPipeline::Span* span) {
  const sharding::ShardSegment& s = layout_.plan().segments()[segment];
  const sharding::MomentLayout::Slot& slot = layout_.slots()[segment];
  if (!slot.quantized) {
    span->m = m_packed_.data() + slot.packed;
    span->v = v_packed_.data() + slot.packed;
    return;
  }
  const size_t b = s.shard_offset / kQuantBlock;
  span->q8 = optim::Moments8bit{m_codes_.data() + s.shard_offset, v_codes_.data() + s.shard_offset,
                                m_scales_.data() + b, v_scales_.data() + b};
}

void HostQuantizedMoments::CopyToHost(float* m, float* v, float* m_absmax, float* v_absmax) {
  layout_.ToFp32(maps_.m.data(), this->m(), m);
  layout_.ToFp32(maps_.v.data(), this->v(), v);
  if (m_absmax != nullptr) CopyScalesToHost(m_absmax, v_absmax);
}

void HostQuantizedMoments::CopyScalesToHost(float* m_absmax, float* v_absmax) const {
  std::copy(m_scales_.begin(), m_scales_.end(), m_absmax);
  std::copy(v_scales_.begin(), v_scales_.end(), v_absmax);
}

void HostQuantizedMoments::CopyFromHost(const float* m, const float* v, const float* m_absmax,
                                        const float* v_absmax) {
  std::fill(m_scales_.begin(), m_scales_.end(), 0.0f);
  std::fill(v_scales_.begin(), v_scales_.end(), 0.0f);
  layout_.FromFp32(maps_.m.data(), m, m_absmax, this->m());
  layout_.FromFp32(maps_.v.data(), v, v_absmax, this->v());
}

}  // namespace zerofit::offload
