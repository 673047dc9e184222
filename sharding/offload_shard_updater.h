// The shard updater with ZeRO-Offload: state in pinned host memory and CPU AdamW, through
// offload::OffloadPipeline (D2H of each reduced shard on a copy stream after its reduce-scatter, fp32
// accumulation on the host, CPU AdamW by tile, H2D of finished tiles before the bucket's all-gather).
// With a delayed update (DeepSpeed's DPU) the CPU update of step t runs on a background thread during step
// t+1's forward/backward, which accumulates into the other gradient buffer meanwhile.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "offload/offload_pipeline.h"
#include "sharding/shard_updater.h"
#include "sharding/step_profile.h"

namespace zerofit::sharding {

class OffloadShardUpdater final : public ShardUpdater {
 public:
  static absl::StatusOr<std::unique_ptr<OffloadShardUpdater>> Create(const BucketPlan* plan,
                                                                     core::DType param_dtype,
                                                                     device::Device* device,
                                                                     const offload::OffloadPipelineOptions& o,
                                                                     absl::Duration timeout);

  absl::Status Receive(size_t bucket, const void* landing, comm::Work& work) override;
  float* direct_landing(size_t) override { return nullptr; }
  absl::Status OrderAfterReceives(device::Stream& stream) override;
  absl::StatusOr<double> SumOfSquares() override;
  absl::Status ZeroGradients() override;
  absl::Status InitializeMaster(const char* flat_params, device::Stream& after) override;
  absl::StatusOr<device::Stream*> PublishMaster(char* flat_params) override;
  absl::StatusOr<device::Stream*> Update(size_t bucket, const optim::AdamWHyper& hyper, int64_t step,
                                         float grad_scale, char* owned_params) override;
  absl::Status CopyStateToHost(float* master, float* m, float* v) override;
  absl::Status CopyStateFromHost(const float* master, const float* m, const float* v) override;
  float* master() override { return pipeline_->master(); }
  float* exp_avg() override { return pipeline_->exp_avg(); }
  float* exp_avg_sq() override { return pipeline_->exp_avg_sq(); }
  absl::Status Synchronize(absl::Duration timeout) override;
  ShardMemory memory() const override;
  absl::Status pin_status() const override { return pipeline_->pin_status(); }

  // Delayed update. Switches accumulation to the other gradient buffer and returns the one the finished
  // step accumulated into.
  int FlipGradients();
  // AdamW on every bucket with gradient buffer `grads` into the host parameter copy only, then zeroes that
  // buffer. Runs on the background thread; touches nothing the engine thread uses meanwhile.
  void UpdateOnHost(int grads, const optim::AdamWHyper& hyper, int64_t step, float grad_scale);
  // H2D of bucket b's updated parameters into `owned_params`; returns the stream to order the all-gather
  // after.
  absl::StatusOr<device::Stream*> CopyBucketToDevice(size_t bucket, char* owned_params);

  // Where the waits for the pipeline's host work are recorded (null: nowhere).
  void set_profile(StepProfile* profile) { profile_ = profile; }

 private:
  OffloadShardUpdater(const BucketPlan* plan, core::DType param_dtype, absl::Duration timeout)
      : plan_(plan), param_dtype_(param_dtype), timeout_(timeout) {}
  // The pipeline's host work so far, recorded as Stage::kWait.
  absl::Status WaitGradients();
  std::vector<offload::OffloadPipeline::Span> Spans(size_t bucket, const optim::AdamWHyper& hyper) const;
  size_t elem_bytes() const { return core::DTypeSize(param_dtype_); }

  const BucketPlan* plan_;
  core::DType param_dtype_;
  absl::Duration timeout_;
  StepProfile* profile_ = nullptr;  // the engine's waits for host work are Stage::kWait there
  std::vector<std::pair<size_t, size_t>> bucket_segments_;
  std::unique_ptr<offload::OffloadPipeline> pipeline_;
  std::unique_ptr<device::Event> received_;
  int cur_ = 0;  // gradient buffer the current step accumulates into
};

}  // namespace zerofit::sharding
