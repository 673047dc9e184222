// The shard updater with ZeRO-Offload (sharding::OffloadUpdater): state in host memory and CPU AdamW,
// through OffloadPipeline (D2H of each reduced shard on a copy stream after its reduce-scatter, fp32
// accumulation on the host, CPU AdamW by tile, H2D of finished tiles before the bucket's all-gather).
// With a delayed update (DeepSpeed's DPU) the CPU update of step t runs on a background thread during step
// t+1's forward/backward, which accumulates into the other gradient buffer meanwhile. With 8-bit moments
// (OffloadUpdaterArgs::moments) the moments are host_quantized_moments.h's, the rest as with fp32 ones. The
// engine knows it only through sharding::OffloadUpdater: pass OffloadShardUpdater::Create as
// Zero2Devices::offload_updater.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "offload/host_quantized_moments.h"
#include "offload/offload_pipeline.h"
#include "sharding/offload_updater.h"
#include "sharding/step_profile.h"

namespace zerofit::offload {

class OffloadShardUpdater final : public sharding::OffloadUpdater {
 public:
  // A sharding::OffloadUpdaterFactory.
  static absl::StatusOr<std::unique_ptr<sharding::OffloadUpdater>> Create(
      const sharding::OffloadUpdaterArgs& a);

  absl::Status Receive(size_t bucket, const void* landing, comm::Work& work, bool last_of_step) override;
  float* direct_landing(size_t) override { return nullptr; }
  absl::Status OrderAfterReceives(device::Stream& stream) override;
  // Each Receive's device-to-host copy is its landing's only reader.
  bool KeepsLanding() const override { return false; }
  absl::Status MarkReceivesConsumed(device::Event& consumed) override {
    return consumed.Record(pipeline_->d2h_stream());
  }
  absl::StatusOr<double> SumOfSquares() override;
  absl::Status ZeroGradients() override;
  absl::Status InitializeMaster(const char* flat_params, device::Stream& after) override;
  absl::StatusOr<device::Stream*> PublishMaster(char* flat_params) override;
  absl::StatusOr<device::Stream*> Update(size_t bucket, const optim::AdamWHyper& hyper, int64_t step,
                                         float grad_scale, char* owned_params) override;
  absl::Status CopyStateToHost(float* master, float* m, float* v) override;
  absl::Status CopyStateFromHost(const float* master, const float* m, const float* v) override;
  size_t moment_scales() const override { return q8_ != nullptr ? q8_->scales() : 0; }
  absl::Status CopyMomentScalesToHost(float* m_absmax, float* v_absmax) override;
  absl::Status CopyStateFromHostWithScales(const float* master, const float* m, const float* v,
                                           const float* m_absmax, const float* v_absmax) override;
  float* master() override { return pipeline_->master(); }
  float* exp_avg() override { return pipeline_->exp_avg(); }
  float* exp_avg_sq() override { return pipeline_->exp_avg_sq(); }
  absl::Status Synchronize(absl::Duration timeout) override;
  sharding::ShardMemory memory() const override;
  absl::Status pin_status() const override { return pipeline_->pin_status(); }

  int FlipGradients() override;
  void UpdateOnHost(int grads, const optim::AdamWHyper& hyper, int64_t step, float grad_scale) override;
  absl::StatusOr<device::Stream*> CopyBucketToDevice(size_t bucket, char* owned_params) override;

 private:
  OffloadShardUpdater(const sharding::BucketPlan* plan, core::DType param_dtype, absl::Duration timeout,
                      sharding::StepProfile* profile)
      : plan_(plan), param_dtype_(param_dtype), timeout_(timeout), profile_(profile) {}
  // The pipeline's host work so far, recorded as Stage::kWait.
  absl::Status WaitGradients();
  // Bucket b's segments, each with its moments (the pipeline's fp32 ones, or q8_'s).
  std::vector<OffloadPipeline::Span> Spans(size_t bucket, const optim::AdamWHyper& hyper) const;
  size_t elem_bytes() const { return core::DTypeSize(param_dtype_); }

  const sharding::BucketPlan* plan_;
  core::DType param_dtype_;
  absl::Duration timeout_;
  sharding::StepProfile* profile_;  // the engine's waits for host work are Stage::kWait there (null: nowhere)
  std::vector<std::pair<size_t, size_t>> bucket_segments_;
  std::unique_ptr<OffloadPipeline> pipeline_;
  std::unique_ptr<HostQuantizedMoments> q8_;  // 8-bit moments (null: the pipeline's fp32 ones)
  std::unique_ptr<device::Event> received_;
  int cur_ = 0;  // gradient buffer the current step accumulates into
};

}  // namespace zerofit::offload
