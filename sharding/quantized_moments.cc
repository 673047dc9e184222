#include "sharding/quantized_moments.h"

#include <algorithm>
#include <cstring>

#include "core/status_macros.h"

namespace zerofit::sharding {

using device::MemoryKind;
using optim::kQuantBlock;

absl::StatusOr<std::unique_ptr<QuantizedMoments>> QuantizedMoments::Create(const BucketPlan* plan,
                                                                           device::Device* device,
                                                                           device::Stream* stream,
                                                                           size_t min_8bit_size,
                                                                           absl::Duration timeout) {
  ZF_ASSIGN_OR_RETURN(MomentLayout layout, MomentLayout::Make(plan, min_8bit_size));
  std::unique_ptr<QuantizedMoments> q(new QuantizedMoments(std::move(layout), device, stream, timeout));
  ZF_RETURN_IF_ERROR(q->Allocate());
  return q;
}

QuantizedMoments::HostCopy::HostCopy(const MomentLayout& l)
    : m_codes(l.shard_numel(), 0),
      v_codes(l.shard_numel(), 0),
      m_scales(l.scales(), 0.0f),
      v_scales(l.scales(), 0.0f),
      m_packed(l.packed_numel()),
      v_packed(l.packed_numel()) {}

absl::Status QuantizedMoments::Allocate() {
  const size_t n = layout_.shard_numel();
  for (device::Buffer* b : {&m_codes_, &v_codes_}) {
    ZF_ASSIGN_OR_RETURN(*b, device_->Allocate(n, MemoryKind::kDevice));
  }
  for (device::Buffer* b : {&m_scales_, &v_scales_}) {
    ZF_ASSIGN_OR_RETURN(*b, device_->Allocate(scales() * sizeof(float), MemoryKind::kDevice));
  }
  for (device::Buffer* b : {&m_packed_, &v_packed_}) {
    ZF_ASSIGN_OR_RETURN(*b, device_->Allocate(layout_.packed_numel() * sizeof(float), MemoryKind::kDevice));
  }
  ZF_ASSIGN_OR_RETURN(maps_, device_->Allocate(2 * optim::kMapCodes * sizeof(float), MemoryKind::kDevice));
  const std::vector<float> maps = host_maps_.Concatenated();
  ZF_RETURN_IF_ERROR(stream_->Copy(maps_.data(), maps.data(), maps_.bytes()));  // CopyFromHost synchronises
  // Zeroed memory is code 0 of the signed map (-0.993), not 0: the moments start as quantised zeros.
  return CopyFromHost(std::vector<float>(n, 0.0f).data(), std::vector<float>(n, 0.0f).data(), nullptr,
                      nullptr);
}

size_t QuantizedMoments::bytes() const {
  return m_codes_.bytes() + v_codes_.bytes() + m_scales_.bytes() + v_scales_.bytes() + m_packed_.bytes() +
         v_packed_.bytes() + maps_.bytes();
}

absl::Status QuantizedMoments::Update(size_t segment, const device::AdamWArgs& a) {
  const ShardSegment& s = layout_.plan().segments()[segment];
  const MomentLayout::Slot& slot = layout_.slots()[segment];
  if (!slot.quantized) {
    device::AdamWArgs f = a;
    f.spans.m = m_packed_.as<float>() + slot.packed;
    f.spans.v = v_packed_.as<float>() + slot.packed;
    return stream_->AdamW(f);
  }
  device::AdamW8bitArgs q;
  q.spans.param = a.spans.param;
  q.spans.grad = a.spans.grad;
  q.spans.grad_dtype = a.spans.grad_dtype;
  q.spans.m = m_codes_.as<uint8_t>() + s.shard_offset;
  q.spans.v = v_codes_.as<uint8_t>() + s.shard_offset;
  q.spans.m_absmax = m_scales_.as<float>() + s.shard_offset / kQuantBlock;
  q.spans.v_absmax = v_scales_.as<float>() + s.shard_offset / kQuantBlock;
  q.spans.n = a.spans.n;
  q.spans.param_out = a.spans.param_out;
  q.spans.out_dtype = a.spans.out_dtype;
  q.maps = optim::AdamW8bitMaps{m_map(), v_map()};
  q.hyper = a.hyper;
  q.step = a.step;
  q.grad_scale = a.grad_scale;
  return stream_->AdamW8bit(q);
}

absl::Status QuantizedMoments::CopyToHost(float* m, float* v, float* m_absmax, float* v_absmax) {
  HostCopy h(layout_);
  ZF_RETURN_IF_ERROR(stream_->Copy(h.m_codes.data(), m_codes_.data(), m_codes_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(h.v_codes.data(), v_codes_.data(), v_codes_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(h.m_packed.data(), m_packed_.data(), m_packed_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(h.v_packed.data(), v_packed_.data(), v_packed_.bytes()));
  ZF_RETURN_IF_ERROR(CopyScalesToHost(m_absmax, v_absmax));  // synchronises; the caller's copies serve
  layout_.ToFp32(host_maps_.m.data(), StoredMoment{h.m_codes.data(), m_absmax, h.m_packed.data()}, m);
  layout_.ToFp32(host_maps_.v.data(), StoredMoment{h.v_codes.data(), v_absmax, h.v_packed.data()}, v);
  return absl::OkStatus();
}

absl::Status QuantizedMoments::CopyScalesToHost(float* m_absmax, float* v_absmax) {
  ZF_RETURN_IF_ERROR(stream_->Copy(m_absmax, m_scales_.data(), m_scales_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(v_absmax, v_scales_.data(), v_scales_.bytes()));
  return stream_->Synchronize(timeout_);
}

absl::Status QuantizedMoments::CopyFromHost(const float* m, const float* v, const float* m_absmax,
                                            const float* v_absmax) {
  HostCopy h(layout_);
  layout_.FromFp32(host_maps_.m.data(), m, m_absmax, h.m());
  layout_.FromFp32(host_maps_.v.data(), v, v_absmax, h.v());
  ZF_RETURN_IF_ERROR(stream_->Copy(m_codes_.data(), h.m_codes.data(), m_codes_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(v_codes_.data(), h.v_codes.data(), v_codes_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(m_scales_.data(), h.m_scales.data(), m_scales_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(v_scales_.data(), h.v_scales.data(), v_scales_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(m_packed_.data(), h.m_packed.data(), m_packed_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(v_packed_.data(), h.v_packed.data(), v_packed_.bytes()));
  // The host vectors must outlive the copies.
  return stream_->Synchronize(timeout_);
}

}  // namespace zerofit::sharding
