// ZeRO-2: sharded AdamW with bucketed gradient reduce-scatter and gradient accumulation.
//
// Memory per rank (elements; P = parameter dtype bytes, N = model numel, W = world size):
//   flat parameters      N*P (full copy, every rank; all-gathered after each step)
//   optimizer state      12 * N/W bytes: fp32 master weights, AdamW m and v, for this rank's shard only
//   shard gradients      4 * N/W bytes (fp32 accumulator of this rank's reduced gradients)
//   gradients in flight  kReduceScatterEveryMicroBatch: a few bucket-sized staging buffers (lowest memory)
//                        kReduceOncePerStep: a full flat gradient buffer N*P (K times fewer gradient bytes)
//
// Protocol of one optimizer step with K micro-batches:
//   for k in 0..K-1:
//     BeginMicroBatch(k == K-1)
//     backward on (sum of per-sample or per-token losses) * loss_scale(); for each parameter whose
//       gradient is complete: OnGradientReady(i, grad)        <- from autograd hooks, backward order
//       (or OfferGradient(i, grad), then TakeReleasedGradients(): a caller that can keep the gradient
//       until the engine has copied it, so that out-of-order gradients never grow the staging pool)
//     EndMicroBatch(units)          units = samples or tokens the summed loss covers on this rank
//   Step()                          norm, clip, AdamW on the shard, all-gather
// A bucket is reduce-scattered as soon as all its gradients are in and every earlier bucket has been
// launched (the same launch order on every rank, as MPI/NCCL require), while backward goes on. Gradients are
// divided by the global number of units at the step, so micro-batches of different sizes weigh every sample
// (token) equally, exactly like one big batch with a mean loss.
//
// The parts (each runs unchanged on the host, CUDA and test devices; see device/):
//   GradientReducer     buckets, staging, reduce-scatter from the autograd hook (gradient_reducer.h)
//   ShardUpdater        the shard's state and AdamW: on the device (device_shard_updater.h), or offloaded to
//                       the CPU (the OffloadUpdater interface, offload_updater.h; the implementation,
//                       offload/offload_shard_updater.h, comes from Zero2Devices::offload_updater)
//   ParameterPublisher  the all-gather of updated blocks (parameter_publisher.h)
// The flat parameter buffer, gradients, staging and (without offload) the optimizer state live in device
// memory; work is ordered by streams and events (compute -> reduce-scatter -> accumulate -> AdamW ->
// all-gather -> next forward), with one host synchronisation per step: the squared gradient norm, which
// travels with the unit count over the host communicator (MPI or local) next to NCCL.
//
// Offload (ZeRO-Offload): with Zero2Options::offload.enabled the fp32 master weights, AdamW moments and the
// fp32 gradient shard live in pinned host memory (8-bit moments: in ordinary host memory, 2 bytes and 8 / 256
// of scales an element instead of 8) and the update runs on the CPU (SIMD AdamW, N threads). Per
// bucket, as its reduce-scatter finishes, the shard gradient crosses to the host in the parameter dtype (bf16
// over the bus, not fp32) and is accumulated in fp32 there; at the step, buckets flow through CPU AdamW
// (fused with writing the bf16 parameters) -> host-to-device copy of each finished tile -> parameter
// all-gather, each stage working on a different bucket at the same time. With offload.delayed_update_from
// (DeepSpeed's DPU) the CPU update of step t runs in the background during step t+1's forward/backward,
// which therefore sees the parameters from before update t (one step stale).
//
// Not thread-safe: one thread at a time (the torch adapter serialises its hooks).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "device/device.h"
#include "optim/adamw_8bit.h"
#include "optim/cpu_adamw.h"
#include "sharding/bucket_plan.h"
#include "sharding/gradient_reducer.h"
#include "sharding/loss_scaler.h"
#include "sharding/offload_updater.h"
#include "sharding/parameter_publisher.h"
#include "sharding/shard_updater.h"
#include "sharding/step_profile.h"

namespace zerofit::core {
class SerialExecutor;
}

namespace zerofit::sharding {

struct Zero2Options {
  core::DType param_dtype = core::DType::kFloat32;  // model parameters and their gradients
  size_t bucket_bytes = 25u << 20;
  size_t alignment_bytes = 64;
  AccumulationMode accumulation_mode = AccumulationMode::kReduceScatterEveryMicroBatch;
  // Micro-batches in every optimizer step, where the caller knows it (0: not known, or it varies). 1: the
  // on-device updater keeps no fp32 gradient accumulator (DeviceShardUpdater) until a step brings more.
  int micro_batches_per_step = 0;
  optim::AdamWConfig adamw;    // the rate is Step()'s argument
  float max_grad_norm = 0.0f;  // <= 0: no clipping
  // kReduceScatterEveryMicroBatch: how many bucket staging buffers may exist before a new bucket waits for
  // the oldest reduce-scatter to finish (2 = double buffering). More buffers = more overlap, more memory.
  int max_staging_buffers = 3;
  LossScalerOptions loss_scaling;
  OffloadOptions offload;
  // AdamW's moments in fp32 or 8-bit blockwise (in device memory, or in host memory with offload).
  optim::MomentOptions moments;
};

// Where the optimizer runs. Both may be null: a host device owned by the optimizer, and `comm` itself for
// the per-step scalars (it must then accept host buffers: not NCCL).
struct Zero2Devices {
  device::Device* device = nullptr;         // must outlive the optimizer
  comm::Communicator* host_comm = nullptr;  // must outlive the optimizer; same ranks as `comm`
  // Builds the offload updater; needed with Zero2Options::offload.enabled only. The engine does not know the
  // implementation (it lives above sharding/): pass offload::OffloadShardUpdater::Create.
  OffloadUpdaterFactory offload_updater = nullptr;
};

struct StepResult {
  bool applied = false;        // false when the step was skipped for inf/nan gradients
  float grad_norm = 0.0f;      // global L2 norm of the normalised, unscaled gradient, before clipping
  float clip_coef = 1.0f;      // factor applied to the gradient (1 when not clipped)
  double units = 0.0;          // samples/tokens this step covered on all ranks
  float loss_scale = 1.0f;     // scale used for this step's backward
  float learning_rate = 0.0f;  // the rate this step's update used
  int64_t step = 0;            // optimizer steps applied so far (with a delayed update: scheduled)
  StepBreakdown breakdown;  // where this step's time went (window: end of previous Step() to end of this one)
};

struct Zero2MemoryStats {
  size_t master_bytes = 0;
  size_t exp_avg_bytes = 0;
  size_t exp_avg_sq_bytes = 0;
  size_t optimizer_state_bytes() const { return master_bytes + exp_avg_bytes + exp_avg_sq_bytes; }
  size_t shard_grad_bytes = 0;    // fp32 accumulator of the owned gradient shard
  size_t flat_param_bytes = 0;    // full model copy in param dtype
  size_t flat_grad_bytes = 0;     // kReduceOncePerStep only
  size_t staging_bytes_peak = 0;  // kReduceScatterEveryMicroBatch: bucket staging buffers allocated
  size_t pinned_bytes = 0;        // host bytes page-locked for offload (state + staging)
  size_t host_state_bytes = 0;    // offload: all host-side buffers (pinned or not)
  size_t recv_bytes = 0;  // reduce-scatter landing: one shard in param dtype where the updater reads it at
                          // the step (one micro-batch, on the device), else a pool of the largest buckets'
                          // shards (landing_pool.h); fp32 reduce-once
                          // mode reduce-scatters straight into the shard accumulator and needs none
};

class Zero2Optimizer {
 public:
  // `comm` must outlive the optimizer. Parameters are zero until the caller writes them (param_data) and
  // calls InitializeFromParameters.
  static absl::StatusOr<std::unique_ptr<Zero2Optimizer>> Create(std::vector<ParamSpec> params,
                                                                const Zero2Options& options,
                                                                comm::Communicator* comm,
                                                                Zero2Devices devices = {});

  const BucketPlan& plan() const { return plan_; }
  comm::Communicator* communicator() const { return comm_; }
  device::Device& device() { return *device_; }
  const Zero2Options& options() const { return options_; }
  // Storage of parameter i (numel elements of param_dtype) inside the flat parameter buffer (device memory).
  void* param_data(size_t i);
  // kReduceOncePerStep: storage where parameter i's gradient accumulates (param_dtype); nullptr otherwise.
  void* grad_data(size_t i) { return reducer_->grad_data(i); }

  // Makes every rank hold rank 0's parameters (if `broadcast`) and fills this rank's fp32 master shard.
  // The parameters must have been written on (or before) the device's compute stream.
  absl::Status InitializeFromParameters(bool broadcast = true);

  absl::Status BeginMicroBatch(bool last_of_step);
  // `grad`: parameter i's gradient for this micro-batch, numel contiguous elements of param_dtype in device
  // memory, produced on the device's compute stream and valid until the work enqueued there has run. In
  // kReduceOncePerStep it may be nullptr (or grad_data(i)) when the gradient already accumulated in place.
  absl::Status OnGradientReady(size_t i, const void* grad) { return reducer_->OnGradientReady(i, grad); }
  // The same, where the caller can keep `grad` until it is released: a gradient that arrives while its bucket
  // waits for an earlier one and no spare staging buffer is free is copied later instead of growing the
  // staging pool (GradientReducer::OfferGradient). TakeReleasedGradients lists the parameters whose
  // gradients have been copied (or taken) since its last call; after EndMicroBatch, all of them.
  absl::Status OfferGradient(size_t i, const void* grad) { return reducer_->OfferGradient(i, grad); }
  std::vector<size_t> TakeReleasedGradients() { return reducer_->TakeReleasedGradients(); }
  // Launches buckets whose parameters got no gradient (unused parameters count as zero) and waits for this
  // micro-batch's reduce-scatters. `units` is what this rank's summed loss covered (samples or tokens).
  absl::Status EndMicroBatch(double units);
  // Reduces the gradient norm, clips and applies AdamW at `learning_rate` (this step's rate of the schedule;
  // a delayed update applies the rate of the step it belongs to). The gradient is divided by the step's
  // units summed over the ranks, at least `min_units`: 0 makes a step without units an error (no rank
  // trained on anything: a caller's bug); an objective whose units may all be masked out (GRPO's token mean
  // with truncated completions left out, as TRL clamps its token counts at 1) passes 1, and such a step's
  // gradient is 0.
  absl::StatusOr<StepResult> Step(float learning_rate, double min_units = 0.0);
  // Publishes a pending delayed update and waits for every stream: call before reading or saving
  // parameters or state from the host.
  absl::Status Flush();

  float loss_scale() const { return scaler_.scale(); }
  int64_t step() const { return step_; }
  Zero2MemoryStats memory() const;
  const Zero2Stats& stats() const { return reducer_->stats(); }
  // Stage timings. The caller records its own forward as Stage::kForward (the torch adapter its backward as
  // Stage::kBackward), on the engine's thread: those scopes also mark the compute stream for the device
  // clock, whose update interval Step() marks itself (StepResult::breakdown.device).
  StepProfile* profile() { return &profile_; }
  // Why host memory is not pinned, if it is not (OK otherwise).
  absl::Status pin_status() const { return updater_->pin_status(); }

  ~Zero2Optimizer();

  // Host copies of this rank's shard state (shard_numel fp32 each), for checkpoints: Flush() first.
  absl::Status CopyStateToHost(float* master, float* exp_avg, float* exp_avg_sq) {
    return updater_->CopyStateToHost(master, exp_avg, exp_avg_sq);
  }
  // Checkpoint restore: the state from host copies, then RestoreFromShards.
  absl::Status CopyStateFromHost(const float* master, const float* exp_avg, const float* exp_avg_sq) {
    return updater_->CopyStateFromHost(master, exp_avg, exp_avg_sq);
  }
  // 8-bit moments (Zero2Options::moments): the block scales of each moment, shard_numel / optim::kQuantBlock
  // (0 with fp32 moments), their host copies, and a restore that quantises against saved scales
  // (ShardUpdater::CopyStateFromHostWithScales).
  size_t moment_scales() const { return updater_->moment_scales(); }
  absl::Status CopyMomentScalesToHost(float* m_absmax, float* v_absmax) {
    return updater_->CopyMomentScalesToHost(m_absmax, v_absmax);
  }
  absl::Status CopyStateFromHostWithScales(const float* master, const float* exp_avg, const float* exp_avg_sq,
                                           const float* m_absmax, const float* v_absmax) {
    return updater_->CopyStateFromHostWithScales(master, exp_avg, exp_avg_sq, m_absmax, v_absmax);
  }
  // Sets the counters and rebuilds every rank's parameters from the master shards (cast to param_dtype,
  // all-gather). Collective.
  absl::Status RestoreFromShards(int64_t step, const LossScalerState& scaler);
  LossScalerState loss_scaler_state() const { return scaler_.state(); }

  // This rank's shard buffers (shard_numel fp32 each), for tests on host-readable devices after Flush().
  const float* master_shard() const { return updater_->master(); }
  const float* exp_avg_shard() const { return updater_->exp_avg(); }
  const float* exp_avg_sq_shard() const { return updater_->exp_avg_sq(); }

 private:
  Zero2Optimizer(BucketPlan plan, const Zero2Options& options, comm::Communicator* comm);
  absl::Status Build(Zero2Devices devices);
  size_t elem_bytes() const { return core::DTypeSize(options_.param_dtype); }
  absl::StatusOr<double> GlobalSums(double* units);
  absl::Status ResetGradients();
  // Applies AdamW to every bucket and all-gathers the result, stages overlapping across buckets.
  absl::Status UpdateAndGather(const optim::AdamWHyper& hyper, float grad_scale);
  // With a delayed update: runs this step's CPU update in the background.
  void UpdateInBackground(const optim::AdamWHyper& hyper, float grad_scale);
  // Publishes the delayed update of the previous step (host -> device copies, all-gathers).
  absl::Status PublishDelayed();

  BucketPlan plan_;
  Zero2Options options_;
  comm::Communicator* comm_;
  comm::Communicator* host_comm_ = nullptr;
  std::unique_ptr<device::Device> owned_device_;
  device::Device* device_ = nullptr;
  DynamicLossScaler scaler_;
  std::unique_ptr<DeviceTimeline> device_timeline_;  // the compute stream's clock, attached to profile_
  StepProfile profile_;

  device::Buffer flat_params_;  // flat_numel * param dtype (device)
  std::unique_ptr<ShardUpdater> updater_;
  OffloadUpdater* offload_ = nullptr;  // updater_ when offloaded
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<ParameterPublisher> publisher_;
  std::unique_ptr<core::SerialExecutor> update_thread_;  // a delayed update's background CPU step
  bool update_pending_ = false;

  double local_units_ = 0.0;
  // {sum of squares, units} of the step's one all-reduce. A member, not a local: after a timeout the
  // abandoned collective may still complete (a late peer) and must not write into a dead stack frame.
  double norm_sums_[2] = {0.0, 0.0};
  int64_t step_ = 0;
};

}  // namespace zerofit::sharding
