// The AdamW moments of an offloaded shard kept in 8 bits (optim/adamw_8bit.h, bitsandbytes' AdamW8bit) in
// host memory: the offload updater's counterpart of sharding::QuantizedMoments, in the same layout
// (sharding/moment_layout.h). Where fp32 offload keeps 8 bytes of moments per shard element, this keeps 2
// bytes and 8 / 256 of scales, and 8 bytes only for the parameters under min_8bit_size. The pipeline's CPU
// AdamW reads and writes it in place (OffloadPipeline::Span's moments); the moments never cross the bus, so
// they are ordinary, not pinned, memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "offload/offload_pipeline.h"
#include "optim/adamw_8bit.h"
#include "sharding/moment_layout.h"

namespace zerofit::offload {

class HostQuantizedMoments {
 public:
  // The plan's segments must start on block boundaries (InvalidArgument otherwise). Moments start as
  // quantised zeros.
  static absl::StatusOr<std::unique_ptr<HostQuantizedMoments>> Create(const sharding::BucketPlan* plan,
                                                                      size_t min_8bit_size);

  // Points `span` (segment k of the plan) at its moments: 8-bit codes and scales, or the packed fp32 ones.
  void Place(size_t segment, OffloadPipeline::Span* span);

  // Host copies, shard_numel fp32 each (padding 0): the moments dequantised, and scales() floats each of the
  // block scales (blocks of fp32-moment parameters and of padding read 0), unless m_absmax is null.
  void CopyToHost(float* m, float* v, float* m_absmax, float* v_absmax);
  void CopyScalesToHost(float* m_absmax, float* v_absmax) const;
  // The reverse (sharding::MomentLayout::FromFp32: a checkpoint's scales give back its codes); the scales
  // may be null.
  void CopyFromHost(const float* m, const float* v, const float* m_absmax, const float* v_absmax);

  size_t scales() const { return layout_.scales(); }
  // Host bytes: codes, scales, the packed fp32 moments and the two maps (as the planner counts them).
  size_t bytes() const { return layout_.bytes() + 2 * optim::kMapCodes * sizeof(float); }
  size_t quantized_numel() const { return layout_.quantized_numel(); }

 private:
  explicit HostQuantizedMoments(sharding::MomentLayout layout);
  sharding::StoredMoment m() { return {m_codes_.data(), m_scales_.data(), m_packed_.data()}; }
  sharding::StoredMoment v() { return {v_codes_.data(), v_scales_.data(), v_packed_.data()}; }

  sharding::MomentLayout layout_;
  optim::HostAdamW8bitMaps maps_;
  std::vector<uint8_t> m_codes_, v_codes_;
  std::vector<float> m_scales_, v_scales_, m_packed_, v_packed_;
};

}  // namespace zerofit::offload
