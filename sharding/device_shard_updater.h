// The shard updater without offload: master weights, AdamW moments and the fp32 gradient accumulator in
// device memory; accumulation, the squared norm and AdamW run on the updater's own stream (device kernels),
// so nothing but the one squared-norm number crosses to the host per step.
//
// With one micro-batch a step (`single_micro_batch`) there is nothing to accumulate: no fp32 accumulator is
// allocated (4 B a shard element less), and the squared norm and AdamW read each bucket's reduced shard where
// the reduce-scatter landed it, in the parameter dtype (exactly the values the accumulator would have held:
// 0 + x is x, and widening to fp32 is exact). The landing buffer is the reducer's; its next reduce-scatters
// wait for this stream (OrderAfterReceives), so AdamW reads it before it is overwritten. A step of more
// micro-batches (the caller's count was wrong) makes the updater allocate the accumulator then and keep it.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "device/device.h"
#include "optim/adamw_8bit.h"
#include "sharding/quantized_moments.h"
#include "sharding/shard_updater.h"

namespace zerofit::sharding {

class DeviceShardUpdater final : public ShardUpdater {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceShardUpdater>> Create(
      const BucketPlan* plan, core::DType param_dtype, device::Device* device, absl::Duration timeout,
      bool single_micro_batch = false, optim::MomentOptions moments = {});
  ~DeviceShardUpdater() override;

  absl::Status Receive(size_t bucket, const void* landing, comm::Work& work, bool last_of_step) override;
  float* direct_landing(size_t bucket) override;
  absl::Status OrderAfterReceives(device::Stream& stream) override;
  bool KeepsLanding() const override { return single_micro_batch_; }
  absl::Status MarkReceivesConsumed(device::Event& consumed) override { return consumed.Record(*stream_); }
  absl::StatusOr<double> SumOfSquares() override;
  absl::Status ZeroGradients() override;
  absl::Status InitializeMaster(const char* flat_params, device::Stream& after) override;
  absl::StatusOr<device::Stream*> PublishMaster(char* flat_params) override;
  absl::StatusOr<device::Stream*> Update(size_t bucket, const optim::AdamWHyper& hyper, int64_t step,
                                         float grad_scale, char* owned_params) override;
  absl::Status CopyStateToHost(float* master, float* m, float* v) override;
  absl::Status CopyStateFromHost(const float* master, const float* m, const float* v) override;
  size_t moment_scales() const override { return quantized_ ? quantized_->scales() : 0; }
  absl::Status CopyMomentScalesToHost(float* m_absmax, float* v_absmax) override;
  absl::Status CopyStateFromHostWithScales(const float* master, const float* m, const float* v,
                                           const float* m_absmax, const float* v_absmax) override;
  float* master() override { return master_.as<float>(); }
  float* exp_avg() override { return quantized_ ? nullptr : exp_avg_.as<float>(); }
  float* exp_avg_sq() override { return quantized_ ? nullptr : exp_avg_sq_.as<float>(); }
  absl::Status Synchronize(absl::Duration timeout) override { return stream_->Synchronize(timeout); }
  ShardMemory memory() const override;

 private:
  DeviceShardUpdater(const BucketPlan* plan, core::DType param_dtype, device::Device* device,
                     absl::Duration timeout, bool single_micro_batch, optim::MomentOptions moments)
      : plan_(plan),
        param_dtype_(param_dtype),
        device_(device),
        timeout_(timeout),
        single_micro_batch_(single_micro_batch),
        moments_(moments) {}
  absl::Status Allocate();
  // Leaves the single-micro-batch mode for good: allocates and zeroes the fp32 accumulator.
  absl::Status StartAccumulating();
  // The gradient AdamW reads for shard element `offset`, and its dtype.
  const void* GradientAt(size_t offset) const;
  core::DType gradient_dtype() const { return single_micro_batch_ ? param_dtype_ : core::DType::kFloat32; }
  size_t elem_bytes() const { return core::DTypeSize(param_dtype_); }
  size_t state_bytes() const { return plan_->shard_numel() * sizeof(float); }

  const BucketPlan* plan_;
  core::DType param_dtype_;
  device::Device* device_;
  absl::Duration timeout_;
  bool single_micro_batch_;
  optim::MomentOptions moments_;
  const char* landing_ = nullptr;  // single_micro_batch_: shard element 0 of the reducer's landing buffer
  std::vector<std::pair<size_t, size_t>> bucket_segments_;
  std::unique_ptr<device::Stream> stream_;  // accumulation, norm, AdamW: in this order
  std::unique_ptr<device::Event> received_;
  device::Buffer master_, exp_avg_, exp_avg_sq_;  // shard_numel fp32 each (device); no moments when 8-bit
  std::unique_ptr<QuantizedMoments> quantized_;   // 8-bit moments; null for fp32
  device::Buffer grads_;                          // likewise; none with single_micro_batch_
  device::Buffer sum_;                            // one double (device)
  device::Buffer sum_host_;                       // one double (pinned host)
};

}  // namespace zerofit::sharding
