// The AdamW moments of a shard kept in 8 bits (optim/adamw_8bit.h, bitsandbytes' AdamW8bit), for the
// on-device updater (device_shard_updater.h): one byte of m and one of v per shard element, one fp32 scale of
// each per kQuantBlock elements, and fp32 moments for the parameters of fewer than `min_8bit_size` elements
// (bitsandbytes' rule: norms and biases), packed in their own buffers.
//
// Blocks are a parameter's own: the bucket plan must start every parameter and every rank's block of a
// bucket on a kQuantBlock-element boundary (Zero2Optimizer sets its alignment so), so block k of a segment is
// elements [k * kQuantBlock, ...) of its parameter whatever the world size, and a checkpoint's scales
// (one per parameter block) restore on any number of ranks.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "device/device.h"
#include "optim/adamw_8bit.h"
#include "sharding/bucket_plan.h"

namespace zerofit::sharding {

class QuantizedMoments {
 public:
  // The plan's segments must start on block boundaries (InvalidArgument otherwise).
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
  // The reverse: each block is quantised against max(its given scale, its own absmax), so the scales a
  // checkpoint saved give back the codes they came from (the signed map has no -1: a block whose largest
  // moment is negative dequantises below its scale), and a block saved without one (0: fp32 moments then)
  // gets its own. m_absmax/v_absmax may be null: every block its own absmax.
  absl::Status CopyFromHost(const float* m, const float* v, const float* m_absmax, const float* v_absmax);

  size_t scales() const { return plan_->shard_numel() / optim::kQuantBlock; }
  // Device bytes: codes, scales, the packed fp32 moments and the two maps.
  size_t bytes() const;
  // Shard elements whose moments are 8-bit.
  size_t quantized_numel() const { return quantized_numel_; }

 private:
  // Where segment k's moments live: 8-bit at its shard offset, or fp32 at `packed` in the packed buffers.
  struct Slot {
    bool quantized = false;
    size_t packed = 0;
  };
  QuantizedMoments(const BucketPlan* plan, device::Device* device, device::Stream* stream,
                   absl::Duration timeout)
      : plan_(plan), device_(device), stream_(stream), timeout_(timeout) {}
  absl::Status Allocate(size_t min_8bit_size);
  const float* m_map() const { return maps_.as<float>(); }
  const float* v_map() const { return maps_.as<float>() + optim::kMapCodes; }

  const BucketPlan* plan_;
  device::Device* device_;
  device::Stream* stream_;
  absl::Duration timeout_;
  optim::HostAdamW8bitMaps host_maps_;
  std::vector<Slot> slots_;  // by segment
  size_t quantized_numel_ = 0, packed_numel_ = 0;
  device::Buffer m_codes_, v_codes_;    // shard_numel bytes each
  device::Buffer m_scales_, v_scales_;  // scales() fp32 each
  device::Buffer m_packed_, v_packed_;  // packed_numel_ fp32 each (none when every segment is 8-bit)
  device::Buffer maps_;                 // the signed then the unsigned map, 256 fp32 each
};

}  // namespace zerofit::sharding
