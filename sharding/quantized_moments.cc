#include "sharding/quantized_moments.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zerofit::sharding {

using device::MemoryKind;
using optim::kQuantBlock;

absl::StatusOr<std::unique_ptr<QuantizedMoments>> QuantizedMoments::Create(const BucketPlan* plan,
                                                                           device::Device* device,
                                                                           device::Stream* stream,
                                                                           size_t min_8bit_size,
                                                                           absl::Duration timeout) {
  for (const ShardSegment& s : plan->segments()) {
    if (s.shard_offset % kQuantBlock != 0 || s.offset_in_param % kQuantBlock != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "QuantizedMoments: parameter '", plan->params()[s.param].name, "' has a shard segment at element ",
          s.offset_in_param, " (shard offset ", s.shard_offset, "), not on a ", kQuantBlock,
          "-element block boundary: the bucket plan's alignment must be a multiple of ", kQuantBlock));
    }
  }
  std::unique_ptr<QuantizedMoments> q(new QuantizedMoments(plan, device, stream, timeout));
  ZF_RETURN_IF_ERROR(q->Allocate(min_8bit_size));
  return q;
}

absl::Status QuantizedMoments::Allocate(size_t min_8bit_size) {
  for (const ShardSegment& s : plan_->segments()) {
    Slot slot;
    slot.quantized = plan_->params()[s.param].numel >= min_8bit_size;
    if (slot.quantized) {
      quantized_numel_ += s.numel;
    } else {
      slot.packed = packed_numel_;
      packed_numel_ += s.numel;
    }
    slots_.push_back(slot);
  }
  const size_t n = plan_->shard_numel();
  for (device::Buffer* b : {&m_codes_, &v_codes_}) {
    ZF_ASSIGN_OR_RETURN(*b, device_->Allocate(n, MemoryKind::kDevice));
  }
  for (device::Buffer* b : {&m_scales_, &v_scales_}) {
    ZF_ASSIGN_OR_RETURN(*b, device_->Allocate(scales() * sizeof(float), MemoryKind::kDevice));
  }
  for (device::Buffer* b : {&m_packed_, &v_packed_}) {
    ZF_ASSIGN_OR_RETURN(*b, device_->Allocate(packed_numel_ * sizeof(float), MemoryKind::kDevice));
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
  const ShardSegment& s = plan_->segments()[segment];
  const Slot& slot = slots_[segment];
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
  const size_t n = plan_->shard_numel();
  std::vector<uint8_t> mq(n), vq(n);
  std::vector<float> mp(packed_numel_), vp(packed_numel_);
  ZF_RETURN_IF_ERROR(stream_->Copy(mq.data(), m_codes_.data(), n));
  ZF_RETURN_IF_ERROR(stream_->Copy(vq.data(), v_codes_.data(), n));
  ZF_RETURN_IF_ERROR(stream_->Copy(m_absmax, m_scales_.data(), m_scales_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(v_absmax, v_scales_.data(), v_scales_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(mp.data(), m_packed_.data(), m_packed_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(vp.data(), v_packed_.data(), v_packed_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Synchronize(timeout_));
  std::fill_n(m, n, 0.0f);
  std::fill_n(v, n, 0.0f);
  for (size_t k = 0; k < slots_.size(); ++k) {
    const ShardSegment& s = plan_->segments()[k];
    if (!slots_[k].quantized) {
      std::copy_n(mp.data() + slots_[k].packed, s.numel, m + s.shard_offset);
      std::copy_n(vp.data() + slots_[k].packed, s.numel, v + s.shard_offset);
      continue;
    }
    const size_t b = s.shard_offset / kQuantBlock;
    optim::Dequantize(host_maps_.m.data(), mq.data() + s.shard_offset, s.numel, m_absmax + b,
                      m + s.shard_offset);
    optim::Dequantize(host_maps_.v.data(), vq.data() + s.shard_offset, s.numel, v_absmax + b,
                      v + s.shard_offset);
  }
  return absl::OkStatus();
}

namespace {

// Quantises n elements (from a block boundary) against max(given scale, the block's own absmax).
void Restore(const float* map, const float* x, size_t n, const float* given, uint8_t* codes, float* scales) {
  for (size_t b = 0; b * kQuantBlock < n; ++b) {
    const size_t at = b * kQuantBlock, len = std::min(kQuantBlock, n - at);
    scales[b] = std::max(given != nullptr ? given[b] : 0.0f, optim::BlockAbsMax(x + at, len));
    optim::QuantizeBlock(map, x + at, len, scales[b], codes + at);
  }
}

}  // namespace

absl::Status QuantizedMoments::CopyScalesToHost(float* m_absmax, float* v_absmax) {
  ZF_RETURN_IF_ERROR(stream_->Copy(m_absmax, m_scales_.data(), m_scales_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(v_absmax, v_scales_.data(), v_scales_.bytes()));
  return stream_->Synchronize(timeout_);
}

absl::Status QuantizedMoments::CopyFromHost(const float* m, const float* v, const float* m_absmax,
                                            const float* v_absmax) {
  const size_t n = plan_->shard_numel();
  std::vector<uint8_t> mq(n, 0), vq(n, 0);
  std::vector<float> ms(scales(), 0.0f), vs(scales(), 0.0f), mp(packed_numel_), vp(packed_numel_);
  for (size_t k = 0; k < slots_.size(); ++k) {
    const ShardSegment& s = plan_->segments()[k];
    if (!slots_[k].quantized) {
      std::copy_n(m + s.shard_offset, s.numel, mp.data() + slots_[k].packed);
      std::copy_n(v + s.shard_offset, s.numel, vp.data() + slots_[k].packed);
      continue;
    }
    const size_t b = s.shard_offset / kQuantBlock;
    Restore(host_maps_.m.data(), m + s.shard_offset, s.numel, m_absmax != nullptr ? m_absmax + b : nullptr,
            mq.data() + s.shard_offset, ms.data() + b);
    Restore(host_maps_.v.data(), v + s.shard_offset, s.numel, v_absmax != nullptr ? v_absmax + b : nullptr,
            vq.data() + s.shard_offset, vs.data() + b);
  }
  ZF_RETURN_IF_ERROR(stream_->Copy(m_codes_.data(), mq.data(), n));
  ZF_RETURN_IF_ERROR(stream_->Copy(v_codes_.data(), vq.data(), n));
  ZF_RETURN_IF_ERROR(stream_->Copy(m_scales_.data(), ms.data(), m_scales_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(v_scales_.data(), vs.data(), v_scales_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(m_packed_.data(), mp.data(), m_packed_.bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(v_packed_.data(), vp.data(), v_packed_.bytes()));
  // The host vectors must outlive the copies.
  return stream_->Synchronize(timeout_);
}

}  // namespace zerofit::sharding
