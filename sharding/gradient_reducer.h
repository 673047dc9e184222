// GradientReducer: collects each micro-batch's parameter gradients into buckets and reduce-scatters a bucket
// as soon as it is complete (the same launch order on every rank, as MPI and NCCL require) while backward
// goes on; each reduced shard goes to the ShardUpdater's accumulator.
//
//   kReduceScatterEveryMicroBatch: a gradient is copied (on the compute stream that produced it) into its
//     bucket's staging buffer, from a small pool (no full gradient buffer exists); the reduce-scatter waits
//     for the compute stream, and a staging buffer is reused only after the compute stream has been ordered
//     after the collective that read it.
//   kReduceOncePerStep: gradients accumulate in place in a full flat gradient buffer; buckets are
//     reduce-scattered on the last micro-batch only.
//
// Each bucket's reduced shard lands in one buffer the size of the shard when the updater reads the landed
// shards at the step (ShardUpdater::KeepsLanding), else in a slot of a small pool (landing_pool.h) that is
// reused once the updater's copy or accumulation of it has run.
//
// Stream order, not host waits, carries the data: compute -> reduce-scatter (comm) -> updater's stream.
// Not thread-safe: one thread at a time (the torch adapter serialises its hooks).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "device/device.h"
#include "sharding/bucket_plan.h"
#include "sharding/landing_pool.h"
#include "sharding/shard_updater.h"
#include "sharding/step_profile.h"

namespace zerofit::sharding {

enum class AccumulationMode {
  kReduceScatterEveryMicroBatch,  // reduce-scatter each micro-batch into the owned fp32 shard (ZeRO-2)
  kReduceOncePerStep,             // accumulate in a full local gradient buffer, reduce-scatter once per step
};
const char* AccumulationModeName(AccumulationMode mode);

struct Zero2Stats {
  uint64_t buckets_launched = 0;
  uint64_t buckets_launched_before_end = 0;  // launched from OnGradientReady, i.e. while backward still ran
};

struct ReducerOptions {
  core::DType param_dtype = core::DType::kFloat32;
  AccumulationMode accumulation_mode = AccumulationMode::kReduceScatterEveryMicroBatch;
  int max_staging_buffers = 3;
};

class GradientReducer {
 public:
  // Everything passed must outlive the reducer.
  static absl::StatusOr<std::unique_ptr<GradientReducer>> Create(const BucketPlan* plan,
                                                                 const ReducerOptions& options,
                                                                 comm::Communicator* comm,
                                                                 device::Device* device, ShardUpdater* sink,
                                                                 StepProfile* profile);
  ~GradientReducer();

  // kReduceOncePerStep: device storage where parameter i's gradient accumulates; nullptr otherwise.
  void* grad_data(size_t i);
  absl::Status BeginMicroBatch(bool last_of_step);
  // `grad`: numel elements of param_dtype in device memory, produced on the device's compute stream; it
  // must stay valid until the work enqueued there so far has run. nullptr in kReduceOncePerStep when the
  // gradient already accumulated in place. A gradient that arrives before its bucket can have a staging
  // buffer is copied anyway: the pool grows by a buffer of the bucket's size (see AcquireStaging).
  absl::Status OnGradientReady(size_t i, const void* grad) { return Arrive(i, grad, /*may_defer=*/false); }
  // The same, except that in kReduceScatterEveryMicroBatch a gradient whose bucket waits for an earlier one
  // to launch and finds no spare staging buffer is kept by pointer and copied once its bucket can have a
  // buffer without growing the pool: `grad` must stay valid until TakeReleasedGradients() has listed i
  // (then, like any gradient passed here, until the compute stream's work enqueued so far has run). The
  // pool's largest buffer is kept for the bucket next in launch order, which always gets one (waiting for
  // the reduce-scatter that holds it at worst), so offered gradients never grow the pool. Gradients arrive
  // out of launch order where one autograd node gives many parameters theirs at once (a checkpointed
  // layer: LibTorch's engine then runs their accumulators in the order of its ready queue).
  absl::Status OfferGradient(size_t i, const void* grad) { return Arrive(i, grad, /*may_defer=*/true); }
  // The parameters whose gradients this micro-batch has copied or taken since the last call.
  std::vector<size_t> TakeReleasedGradients();
  // Launches what is left (parameters without a gradient count as zero) and waits for this micro-batch's
  // reduce-scatters to be handed to the updater.
  absl::Status EndMicroBatch();
  // Zeroes the flat gradient buffer (kReduceOncePerStep) on the compute stream, after the step.
  absl::Status ResetAfterStep();

  const Zero2Stats& stats() const { return stats_; }
  size_t flat_grad_bytes() const { return flat_grads_.bytes(); }
  size_t staging_bytes() const;
  // Where the reduce-scatters land: the shard-sized buffer or the pool's slots (0 when they land in the
  // updater's fp32 accumulator).
  size_t recv_bytes() const { return recv_.bytes() + (landing_pool_ ? landing_pool_->bytes() : 0); }
  bool in_micro_batch() const { return in_micro_batch_; }

 private:
  struct InFlight {
    size_t bucket;
    std::unique_ptr<comm::Work> work;
    int staging;  // index into staging_, or -1
    int landing;  // slot of landing_pool_, or -1
    absl::Time launched;
    bool last_of_step;  // launched in the step's last micro-batch
  };

  GradientReducer(const BucketPlan* plan, const ReducerOptions& options, comm::Communicator* comm,
                  device::Device* device, ShardUpdater* sink, StepProfile* profile);
  absl::Status Allocate();
  size_t elem_bytes() const { return core::DTypeSize(options_.param_dtype); }
  bool reducing_this_micro_batch() const;
  // Gives bucket `b` a staging buffer (bucket_staging_[b]), zeroed over its padded range (see the .cc).
  absl::Status AcquireStaging(size_t b);
  absl::Status AddStaging(size_t bytes);
  size_t bucket_bytes(size_t b) const { return plan_->buckets()[b].layout.padded_numel * elem_bytes(); }
  size_t shard_bytes(size_t b) const { return plan_->buckets()[b].layout.shard_numel * elem_bytes(); }
  // The up-front buffers: as many as the largest buckets (at most max_staging_buffers), each of one's size.
  std::vector<size_t> LargestFirst(size_t (GradientReducer::*bytes_of)(size_t) const) const;
  // Where bucket b's reduce-scatter lands, and the pool slot it holds (-1: none).
  absl::StatusOr<std::pair<void*, int>> Landing(size_t b);
  absl::Status Arrive(size_t i, const void* grad, bool may_defer);
  absl::Status StoreGradient(size_t i, const void* grad);
  // StoreGradient, then counts the arrival and lists i as released.
  absl::Status Store(size_t i, const void* grad);
  // The smallest free staging buffer that holds bucket b, or -1; `spare_reserved`: never the one kept for
  // the next bucket in launch order.
  int FreeStagingFor(size_t b, bool spare_reserved) const;
  // Gives bucket b the free buffer idx, zeroed over the bucket's range.
  absl::Status TakeStaging(size_t b, int idx);
  // Copies the deferred gradients of the buckets that can have a buffer now, in launch order, launching
  // what they complete; `ending`: all gradients are in, so every deferred bucket is served in turn.
  absl::Status ServeDeferred(bool ending);
  absl::Status LaunchReadyBuckets(bool from_backward);
  absl::Status CompleteOldest();
  absl::Status CompleteFinished();
  absl::Status Drain();

  const BucketPlan* plan_;
  ReducerOptions options_;
  comm::Communicator* comm_;
  device::Device* device_;
  device::Stream* compute_;
  ShardUpdater* sink_;
  StepProfile* profile_;

  device::Buffer flat_grads_;  // kReduceOncePerStep only (device)
  device::Buffer recv_;        // shard-sized landing buffer (device, param dtype), when the updater keeps it
  std::optional<LandingPool> landing_pool_;  // the landing slots otherwise (none with a direct landing)
  // The up-front pool's buffers hold the largest bucket; those added in backward hold the bucket that asked.
  // The first, the largest, is kept for the bucket next in launch order (OfferGradient).
  static constexpr int kReservedStaging = 0;
  std::vector<device::Buffer> staging_;  // device, param dtype
  std::vector<int> free_staging_;

  bool in_micro_batch_ = false;
  bool last_of_step_ = false;
  std::vector<uint32_t> arrived_;    // gradients received per bucket
  std::vector<int> bucket_staging_;  // staging buffer assigned to each bucket, or -1
  std::vector<bool> param_seen_;     // got a gradient this micro-batch
  // Offered gradients not copied yet, by bucket: (parameter, gradient) in arrival order.
  std::map<size_t, std::vector<std::pair<size_t, const void*>>> deferred_;
  std::vector<size_t> released_;  // stored this micro-batch, not yet taken by TakeReleasedGradients
  size_t next_launch_ = 0;        // buckets launch strictly in index order
  std::deque<InFlight> in_flight_;
  Zero2Stats stats_;
};

}  // namespace zerofit::sharding
