// OffloadUpdater: the ShardUpdater with ZeRO-Offload as the engine sees it (state in pinned host memory,
// CPU AdamW), plus the delayed update (DeepSpeed's DPU) the engine schedules. The engine (sharding/) knows
// only this interface; the implementation, offload::OffloadShardUpdater (offload/offload_shard_updater.h),
// lives above it, and the code that builds a Zero2Optimizer with offload enabled composes the two by passing
// a factory in Zero2Devices::offload_updater (issue 31: sharding/ includes nothing from offload/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/dtype.h"
#include "device/device.h"
#include "optim/adamw_8bit.h"
#include "optim/cpu_adamw.h"
#include "sharding/bucket_plan.h"
#include "sharding/shard_updater.h"
#include "sharding/step_profile.h"

namespace zerofit::sharding {

struct OffloadOptions {
  bool enabled = false;
  int threads = 0;  // CPU AdamW threads, counting the caller; 0: the CPUs this process may run on
  // AdamW kernel; default: the best this CPU supports.
  optim::SimdLevel simd = optim::DetectSimdLevel();
  // One-step delayed parameter update (DPU, ZeRO-Offload paper section 5): off by default. It hides the CPU
  // step behind the next forward/backward at the price of gradients computed on one-step-stale parameters;
  // the paper enables it only after the first few dozen steps, when the model changes fast (see
  // docs/offload.md for its measured effect on convergence). From this optimizer step on; the updates
  // before it are synchronous (the paper's warm-up: it started at 40). -1: never. The same name as the job
  // spec's training.delayed_update_from.
  int64_t delayed_update_from = -1;

  bool delayed() const { return delayed_update_from >= 0; }
};

// What the engine hands the factory. The pointers are the engine's and outlive the updater.
struct OffloadUpdaterArgs {
  const BucketPlan* plan = nullptr;
  core::DType param_dtype = core::DType::kFloat32;
  device::Device* device = nullptr;
  OffloadOptions options;        // with a delayed update the updater keeps two gradient buffers
  optim::MomentOptions moments;  // 8-bit moments: the plan's segments start on block boundaries
  absl::Duration timeout;        // every wait for the updater's host work or copies
  // The engine's profile: the updater's host jobs are recorded there as Stage::kHostAccumulate (from its
  // worker threads), the engine thread's waits for them as Stage::kWait.
  StepProfile* profile = nullptr;
};

class OffloadUpdater : public ShardUpdater {
 public:
  // Delayed update. Switches accumulation to the other gradient buffer and returns the one the finished
  // step accumulated into.
  virtual int FlipGradients() = 0;
  // AdamW on every bucket with gradient buffer `grads` into the host parameter copy only, then zeroes that
  // buffer. Runs on the engine's background thread; touches nothing the engine thread uses meanwhile.
  virtual void UpdateOnHost(int grads, const optim::AdamWHyper& hyper, int64_t step, float grad_scale) = 0;
  // H2D of bucket b's updated parameters into `owned_params`; returns the stream to order the all-gather
  // after.
  virtual absl::StatusOr<device::Stream*> CopyBucketToDevice(size_t bucket, char* owned_params) = 0;
};

// Builds the offload updater for Zero2Optimizer (offload::OffloadShardUpdater::Create is one).
using OffloadUpdaterFactory =
    std::function<absl::StatusOr<std::unique_ptr<OffloadUpdater>>(const OffloadUpdaterArgs&)>;

}  // namespace zerofit::sharding
