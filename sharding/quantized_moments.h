// The AdamW moments of a shard kept in 8 bits (optim/adamw_8bit.h, bitsandbytes' AdamW8bit), for the
// on-device updater (device_shard_updater.h), laid out as moment_layout.h says: one byte of m and one of v
// per shard element, one fp32 scale of each per kQuantBlock elements, and fp32 moments for the parameters
// of fewer than `min_8bit_size` elements, packed in their own buffers.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "device/device.h"
#include "optim/adamw_8bit.h"
#include "sharding/bucket_plan.h"
#include "sharding/moment_layout.h"

namespace zerofit::sharding {

class QuantizedMoments {
 public:
  // The plan's segments must start on block boundaries (InvalidArgument otherwise; MomentLayout::Make).
  // `stream` (the updater's) runs every update and copy; `timeout` bounds the copies' waits.
  static absl::StatusOr<std::unique_ptr<QuantizedMoments>> Create(const BucketPlan* plan,
                                                                  device::Device* device,
                                                                  device::Stream* stream,
                                                                  size_t min_8bit_size,
                                                                  absl::Duration timeout);

  // Enqueues segment k's AdamW on the stream: `a.spans`' param, grad, n and output are the segment's; its
  // moments are filled in here (8-bit codes and scales, or the packed fp32 moments).
  absl::Status Update(size_t segment, const device::AdamWArgs& a);

  // Host copies, shard_numel fp32 each (padding 0): the moments dequantised, and scales() floats each of
  // the block scales (blocks of fp32-moment parameters and of padding read 0). Synchronous.
  absl::Status CopyToHost(float* m, float* v, float* m_absmax, float* v_absmax);
  // The block scales alone (a checkpoint's, next to CopyToHost's moments). Synchronous.
  absl::Status CopyScalesToHost(float* m_absmax, float* v_absmax);
  // The reverse (MomentLayout::FromFp32: each block against max(its given scale, its own absmax), which
  // gives back the codes a checkpoint's scales came from). m_absmax/v_absmax may be null.
  absl::Status CopyFromHost(const float* m, const float* v, const float* m_absmax, const float* v_absmax);

  size_t scales() const { return layout_.scales(); }
  // Device bytes: codes, scales, the packed fp32 moments and the two maps.
  size_t bytes() const;
  // Shard elements whose moments are 8-bit.
  size_t quantized_numel() const { return layout_.quantized_numel(); }

 private:
  // Host copies of both moments in their stored form.
  struct HostCopy {
    std::vector<uint8_t> m_codes, v_codes;
    std::vector<float> m_scales, v_scales, m_packed, v_packed;
    explicit HostCopy(const MomentLayout& l);
    StoredMoment m() { return {m_codes.data(), m_scales.data(), m_packed.data()}; }
    StoredMoment v() { return {v_codes.data(), v_scales.data(), v_packed.data()}; }
  };
  QuantizedMoments(MomentLayout layout, device::Device* device, device::Stream* stream,
                   absl::Duration timeout)
      : layout_(std::move(layout)), device_(device), stream_(stream), timeout_(timeout) {}
  absl::Status Allocate();
  const float* m_map() const { return maps_.as<float>(); }
  const float* v_map() const { return maps_.as<float>() + optim::kMapCodes; }

  MomentLayout layout_;
  device::Device* device_;
  device::Stream* stream_;
  absl::Duration timeout_;
  optim::HostAdamW8bitMaps host_maps_;
  device::Buffer m_codes_, v_codes_;    // shard_numel bytes each
  device::Buffer m_scales_, v_scales_;  // scales() fp32 each
  device::Buffer m_packed_, v_packed_;  // packed_numel() fp32 each (none when every segment is 8-bit)
  device::Buffer maps_;                 // the signed then the unsigned map, 256 fp32 each
};

}  // namespace zerofit::sharding
