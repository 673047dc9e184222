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
//     EndMicroBatch(units)          units = samples or tokens the summed loss covers on this rank
//   Step()                          norm, clip, AdamW on the shard, all-gather
// A bucket is reduce-scattered as soon as all its gradients are in and every earlier bucket has been
// launched (the same launch order on every rank, as MPI/NCCL require), while backward goes on. Gradients are
// divided by the global number of units at the step, so micro-batches of different sizes weigh every sample
// (token) equally, exactly like one big batch with a mean loss.
//
// Offload (ZeRO-Offload): with Zero2Options::offload.enabled the fp32 master weights, AdamW moments and the
// fp32 gradient shard live in pinned host memory and the update runs on the CPU (SIMD AdamW, N threads). Per
// bucket, as its reduce-scatter finishes, the shard gradient crosses to the host in the parameter dtype (bf16
// over the bus, not fp32) and is accumulated in fp32 there; at the step, buckets flow through CPU AdamW
// (fused with writing the bf16 parameters) -> host-to-device copy -> parameter all-gather, each stage working
// on a different bucket at the same time. In CPU-only builds the copies are memcpy; the structure is the
// same. With offload.delayed_update (DeepSpeed's DPU) the CPU update of step t runs in the background during
// step t+1's forward/backward, which therefore sees the parameters from before update t (one step stale).
//
// Not thread-safe: one thread at a time (the torch adapter serialises its hooks).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "core/aligned_buffer.h"
#include "offload/cpu_adamw.h"
#include "sharding/bucket_plan.h"
#include "sharding/loss_scaler.h"
#include "sharding/state_buffer.h"
#include "sharding/step_profile.h"

namespace zerofit::core {
class SerialExecutor;
}

namespace zerofit::sharding {

enum class AccumulationMode {
  kReduceScatterEveryMicroBatch,  // reduce-scatter each micro-batch into the owned fp32 shard (ZeRO-2)
  kReduceOncePerStep,             // accumulate in a full local gradient buffer, reduce-scatter once per step
};

struct OffloadOptions {
  bool enabled = false;
  int threads = 1;  // CPU AdamW threads, counting the caller
  // AdamW kernel; default: the best this CPU supports.
  offload::SimdLevel simd = offload::DetectSimdLevel();
  // One-step delayed parameter update (DPU, ZeRO-Offload paper section 5): off by default. It hides the CPU
  // step behind the next forward/backward at the price of gradients computed on one-step-stale parameters;
  // the paper enables it only after the first few dozen steps, when the model changes fast (see
  // docs/offload.md for its measured effect on convergence).
  bool delayed_update = false;
  // Updates before this step number are applied synchronously (the paper's warm-up; it used 40).
  int64_t delayed_update_start_step = 40;
};

struct Zero2Options {
  core::DType param_dtype = core::DType::kFloat32;  // model parameters and their gradients
  size_t bucket_bytes = 25u << 20;
  size_t alignment_bytes = 64;
  AccumulationMode accumulation = AccumulationMode::kReduceScatterEveryMicroBatch;
  offload::AdamWHyper adamw;
  float max_grad_norm = 0.0f;  // <= 0: no clipping
  // kReduceScatterEveryMicroBatch: how many bucket staging buffers may exist before a new bucket waits for
  // the oldest reduce-scatter to finish (2 = double buffering). More buffers = more overlap, more memory.
  int max_staging_buffers = 3;
  LossScalerOptions loss_scaling;
  OffloadOptions offload;
};

struct StepResult {
  bool applied = false;     // false when the step was skipped for inf/nan gradients
  float grad_norm = 0.0f;   // global L2 norm of the normalised, unscaled gradient, before clipping
  float clip_coef = 1.0f;   // factor applied to the gradient (1 when not clipped)
  double units = 0.0;       // samples/tokens this step covered on all ranks
  float loss_scale = 1.0f;  // scale used for this step's backward
  int64_t step = 0;         // optimizer steps applied so far (with delayed_update: scheduled)
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
  size_t recv_bytes = 0;  // reduce-scatter landing buffer (one shard in param dtype); fp32 reduce-once
                          // mode reduce-scatters straight into the shard accumulator and needs none
};

struct Zero2Stats {
  uint64_t buckets_launched = 0;
  uint64_t buckets_launched_before_end = 0;  // launched from OnGradientReady, i.e. while backward still ran
};

class Zero2Optimizer {
 public:
  // `comm` must outlive the optimizer. Parameters are zero until the caller writes them (param_data) and
  // calls InitializeFromParameters.
  static absl::StatusOr<std::unique_ptr<Zero2Optimizer>> Create(std::vector<ParamSpec> params,
                                                                const Zero2Options& options,
                                                                comm::Communicator* comm);

  const BucketPlan& plan() const { return plan_; }
  comm::Communicator* communicator() const { return comm_; }
  const Zero2Options& options() const { return options_; }
  // Storage of parameter i (numel elements of param_dtype) inside the flat parameter buffer.
  void* param_data(size_t i);
  // kReduceOncePerStep: storage where parameter i's gradient accumulates (param_dtype); nullptr otherwise.
  void* grad_data(size_t i);

  // Makes every rank hold rank 0's parameters (if `broadcast`) and fills this rank's fp32 master shard.
  absl::Status InitializeFromParameters(bool broadcast = true);

  absl::Status BeginMicroBatch(bool last_of_step);
  // `grad`: parameter i's gradient for this micro-batch, numel contiguous elements of param_dtype. In
  // kReduceOncePerStep it may be nullptr (or grad_data(i)) when the gradient already accumulated in place.
  absl::Status OnGradientReady(size_t i, const void* grad);
  // Launches buckets whose parameters got no gradient (unused parameters count as zero) and waits for this
  // micro-batch's reduce-scatters. `units` is what this rank's summed loss covered (samples or tokens).
  absl::Status EndMicroBatch(double units);
  absl::StatusOr<StepResult> Step();
  // With delayed_update: waits for the pending background update and publishes its parameters (all-gather).
  // Call before reading or saving parameters; a no-op otherwise.
  absl::Status Flush();

  float loss_scale() const { return scaler_.scale(); }
  void set_learning_rate(float lr) { options_.adamw.lr = lr; }
  int64_t step() const { return step_; }
  Zero2MemoryStats memory() const;
  const Zero2Stats& stats() const { return stats_; }
  // Stage timings. The caller records its own forward (and the torch adapter its backward) as
  // Stage::kCompute.
  StepProfile* profile() { return &profile_; }
  // Why host memory is not pinned, if it is not (OK otherwise).
  absl::Status pin_status() const;

  ~Zero2Optimizer();

  // This rank's shard buffers (shard_numel fp32 elements each), for tests and checkpoints.
  const float* master_shard() const { return master_.as<float>(); }
  const float* exp_avg_shard() const { return exp_avg_.as<float>(); }
  const float* exp_avg_sq_shard() const { return exp_avg_sq_.as<float>(); }
  LossScalerState loss_scaler_state() const { return scaler_.state(); }

  // Checkpoint restore (sharding/checkpoint.h): writable shard buffers, then RestoreFromShards, which sets
  // the counters and rebuilds every rank's parameters from the master shards (cast to param_dtype,
  // all-gather). Collective. Call Flush() before touching the shards.
  float* mutable_master_shard() { return master_.as<float>(); }
  float* mutable_exp_avg_shard() { return exp_avg_.as<float>(); }
  float* mutable_exp_avg_sq_shard() { return exp_avg_sq_.as<float>(); }
  absl::Status RestoreFromShards(int64_t step, const LossScalerState& scaler);

 private:
  struct InFlight {
    size_t bucket;
    std::unique_ptr<comm::Work> work;
    int staging;  // index into staging_, or -1
    absl::Time launched;
  };

  Zero2Optimizer(BucketPlan plan, const Zero2Options& options, comm::Communicator* comm);
  absl::Status Allocate();
  size_t elem_bytes() const { return core::DTypeSize(options_.param_dtype); }
  char* flat_param_at(size_t elem) { return flat_params_.as<char>() + elem * elem_bytes(); }
  absl::StatusOr<int> AcquireStaging();
  absl::Status LaunchReadyBuckets(bool from_backward);
  absl::Status CompleteOldest();
  absl::Status Drain();
  absl::Status CompleteFinished();  // completes in-flight reduce-scatters that already finished, in order
  float* shard_grads() { return shard_grads_[cur_grads_].as<float>(); }
  // AdamW on this rank's part of bucket b, reading `grads`, writing master/m/v and the param-dtype copy to
  // `out`. With `copy_tiles` (offload), every finished tile is queued for its host-to-device copy at once, so
  // copies start while other tiles are still updating.
  void UpdateBucket(size_t b, const float* grads, char* out, int64_t step, float grad_scale, bool copy_tiles);
  // Applies AdamW to every bucket and all-gathers the result, stages overlapping across buckets.
  absl::Status UpdateAndGather(float grad_scale);
  // Offload: queues bucket b's all-gather on the copy engine, after its host-to-device copy (of the whole
  // bucket shard when `copy` is set; otherwise the tiles were already queued by UpdateBucket).
  void PublishBucket(size_t b, bool copy);
  absl::Status WaitPublished();
  char* owned_params(size_t b) {
    return flat_param_at(plan_.buckets()[b].flat_offset + plan_.buckets()[b].layout.shard_offset);
  }
  bool reducing_this_micro_batch() const;
  // True when reduce-scatter output goes straight into shard_grads_ (fp32, one reduction per step).
  bool reduce_into_shard() const {
    return options_.accumulation == AccumulationMode::kReduceOncePerStep &&
           options_.param_dtype == core::DType::kFloat32 && !options_.offload.enabled;
  }

  BucketPlan plan_;
  Zero2Options options_;
  comm::Communicator* comm_;
  DynamicLossScaler scaler_;

  core::AlignedBuffer flat_params_;            // flat_numel * param dtype
  core::AlignedBuffer flat_grads_;             // kReduceOncePerStep only
  StateBuffer master_, exp_avg_, exp_avg_sq_;  // shard_numel fp32 each; pinned host memory when offloaded
  StateBuffer shard_grads_[2];                 // fp32 shard accumulators; [1] only with delayed_update
  int cur_grads_ = 0;                          // accumulator the current step reduces into
  StateBuffer host_grad_lowp_;                 // offload: shard gradients after D2H (param dtype)
  StateBuffer host_param_lowp_;                // offload: updated parameters before H2D (param dtype)
  core::AlignedBuffer recv_;  // shard_numel * param dtype; empty when reduce-scatter lands in shard_grads_
  std::vector<std::pair<size_t, size_t>> bucket_segments_;  // [first, last) segment indices per bucket
  std::unique_ptr<offload::CpuAdamW> adamw_;
  std::unique_ptr<core::SerialExecutor> copy_engine_;    // offload: H2D copies and the all-gathers after them
  std::unique_ptr<core::SerialExecutor> update_thread_;  // delayed_update: the background CPU step
  std::mutex publish_mu_;
  std::vector<std::unique_ptr<comm::Work>> gathers_;  // guarded by publish_mu_
  absl::Status publish_status_;                       // guarded by publish_mu_
  bool update_pending_ = false;
  StepProfile profile_;
  std::vector<core::AlignedBuffer> staging_;  // max_bucket_numel * param dtype each
  std::vector<int> free_staging_;

  // Per micro-batch state.
  bool in_micro_batch_ = false;
  bool last_of_step_ = false;
  std::vector<uint32_t> arrived_;    // gradients received per bucket
  std::vector<int> bucket_staging_;  // staging buffer assigned to each bucket, or -1
  std::vector<bool> param_seen_;     // got a gradient this micro-batch
  size_t next_launch_ = 0;           // buckets launch strictly in index order
  std::deque<InFlight> in_flight_;
  double local_units_ = 0.0;
  // {sum of squares, units} of the step's one all-reduce. A member, not a local: after a timeout the
  // abandoned collective may still complete (a late peer) and must not write into a dead stack frame.
  double norm_sums_[2] = {0.0, 0.0};

  int64_t step_ = 0;
  Zero2Stats stats_;
};

const char* AccumulationModeName(AccumulationMode mode);

}  // namespace zerofit::sharding
