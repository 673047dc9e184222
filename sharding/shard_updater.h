// ShardUpdater: owns this rank's optimizer shard (fp32 master weights, AdamW m and v, the fp32 gradient
// accumulator) and applies AdamW to it, bucket by bucket. Two implementations:
//   DeviceShardUpdater  (device_shard_updater.h): state in device memory, the AdamW kernel on an update
//                       stream (the host and test devices run the CPU kernels, CUDA its own);
//   offload::OffloadShardUpdater (offload/offload_shard_updater.h): state in pinned host memory, CPU AdamW
//                       by tile through offload::OffloadPipeline, with the device copies on its copy
//                       streams; the engine sees it as an OffloadUpdater (offload_updater.h).
// Both run unchanged on the host, CUDA and test devices. Not thread-safe: the engine's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "device/stream.h"
#include "optim/cpu_adamw.h"
#include "sharding/bucket_plan.h"

namespace zerofit::sharding {

struct ShardMemory {
  size_t state_bytes = 0;       // master + m + v
  size_t master_bytes = 0;      // of which the fp32 master weights
  size_t shard_grad_bytes = 0;  // fp32 gradient accumulator(s)
  size_t pinned_bytes = 0;      // host bytes page-locked
  size_t host_bytes = 0;        // host-side buffers (offload)
};

class ShardUpdater {
 public:
  virtual ~ShardUpdater() = default;

  // Bucket b's reduced shard is complete when `work` is: add it to the fp32 gradient accumulator. `landing`
  // holds it in the parameter dtype (device memory), or is nullptr when the reduce-scatter wrote the fp32
  // accumulator itself (at direct_landing(b)). `last_of_step`: no other Receive of bucket b follows before
  // the step's update (the offload pipeline then leaves a bucket received once in its bf16 staging).
  virtual absl::Status Receive(size_t bucket, const void* landing, comm::Work& work, bool last_of_step) = 0;
  // Where an fp32 reduce-scatter may land directly (fp32, reduce once per step, state on the device);
  // nullptr when the reduced shard must go through Receive with a landing buffer.
  virtual float* direct_landing(size_t bucket) = 0;
  // Work enqueued on `stream` from now on runs after every Receive so far has consumed its landing buffer.
  virtual absl::Status OrderAfterReceives(device::Stream& stream) = 0;
  // True while Update reads the landed shards at the step (the device updater with one micro-batch a step,
  // which keeps no accumulator): the reducer then keeps one landing buffer the size of the shard. False:
  // each Receive has consumed its landing on the device once MarkReceivesConsumed's event has run, and a
  // few slots serve every bucket (landing_pool.h).
  virtual bool KeepsLanding() const = 0;
  // Records `consumed` after the device work that reads the landings of the Receives so far.
  virtual absl::Status MarkReceivesConsumed(device::Event& consumed) = 0;
  // Sum of squares of the gradient accumulator once every Receive has landed (a host wait: the step needs
  // the number).
  virtual absl::StatusOr<double> SumOfSquares() = 0;
  virtual absl::Status ZeroGradients() = 0;

  // master = fp32(parameters) for every segment; `flat_params` is the flat parameter buffer (device), ready
  // on `after`.
  virtual absl::Status InitializeMaster(const char* flat_params, device::Stream& after) = 0;
  // master -> parameter dtype into the owned blocks of flat_params (checkpoint restore); returns the stream
  // the caller orders its all-gathers after.
  virtual absl::StatusOr<device::Stream*> PublishMaster(char* flat_params) = 0;
  // AdamW on bucket b's part of the shard, writing the updated parameters (parameter dtype) into
  // `owned_params` (device: the bucket's owned block of the flat buffer). Returns the stream the bucket's
  // all-gather must follow.
  virtual absl::StatusOr<device::Stream*> Update(size_t bucket, const optim::AdamWHyper& hyper, int64_t step,
                                                 float grad_scale, char* owned_params) = 0;

  // Host copies of the shard state (shard_numel fp32 each), for checkpoints. Synchronous.
  virtual absl::Status CopyStateToHost(float* master, float* m, float* v) = 0;
  virtual absl::Status CopyStateFromHost(const float* master, const float* m, const float* v) = 0;
  // 8-bit moments (quantized_moments.h): how many block scales each moment has (shard_numel /
  // optim::kQuantBlock); 0 with fp32 moments.
  virtual size_t moment_scales() const { return 0; }
  // Host copies of those scales (moment_scales() floats each). Synchronous.
  virtual absl::Status CopyMomentScalesToHost(float* m_absmax, float* v_absmax) {
    return absl::FailedPreconditionError("this shard updater keeps fp32 moments: no block scales");
  }
  // CopyStateFromHost whose 8-bit moments are quantised against these scales (a checkpoint's, which gives
  // back the codes it was saved from; see QuantizedMoments::CopyFromHost). Either may be null. fp32 moments
  // ignore them.
  virtual absl::Status CopyStateFromHostWithScales(const float* master, const float* m, const float* v,
                                                   const float* m_absmax, const float* v_absmax) {
    return CopyStateFromHost(master, m, v);
  }
  // Direct pointers to the state (host-readable only on the host and test devices, or when offloaded);
  // exp_avg()/exp_avg_sq() are null with 8-bit moments.
  virtual float* master() = 0;
  virtual float* exp_avg() = 0;
  virtual float* exp_avg_sq() = 0;
  virtual absl::Status Synchronize(absl::Duration timeout) = 0;
  virtual ShardMemory memory() const = 0;
  virtual absl::Status pin_status() const { return absl::OkStatus(); }
};

// The AdamW hyper-parameters of one segment (no weight decay where the parameter is exempt).
inline optim::AdamWHyper SegmentHyper(const optim::AdamWHyper& hyper, const ShardSegment& s) {
  optim::AdamWHyper h = hyper;
  if (!s.weight_decay) h.weight_decay = 0.0f;
  return h;
}

// [first, last) indices into plan.segments() of each bucket's segments.
std::vector<std::pair<size_t, size_t>> BucketSegmentRanges(const BucketPlan& plan);

}  // namespace zerofit::sharding
