// Where the time of one optimizer step goes, stage by stage, from every thread that works on it: forward,
// backward, reduce-scatter, device-to-host copies, the offload pipeline's host accumulation, CPU AdamW,
// host-to-device copies, all-gather, and the engine thread's waits for host work (offload). Host clocks: on a
// GPU, forward and backward are the host's launch time until a sync, which shows up as the stage that syncs.
// Stages overlap; `idle` is the part of the step's wall time when no stage was busy, and `overlap` is how
// much busy time ran concurrently with other busy time (sum of stage times minus their union). Thread-safe.
//
// With a DeviceTimeline attached (device_timeline.h), the kForward and kBackward scopes also mark the compute
// stream, and EndStep returns, beside the host clocks, the device's own times of the latest step whose
// markings have run (on a GPU, where the step's device time went).
#pragma once

#include <array>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "sharding/device_timeline.h"

namespace zerofit::sharding {

enum class Stage {
  kForward = 0,
  kBackward,
  kReduceScatter,
  kD2H,
  kHostAccumulate,
  kCpuAdamW,
  kH2D,
  kAllGather,
  kWait,
  kNumStages
};
const char* StageName(Stage s);

struct StepBreakdown {
  std::array<double, static_cast<size_t>(Stage::kNumStages)> busy_ms{};
  double wall_ms = 0;
  double idle_ms = 0;     // wall time with no stage busy
  double overlap_ms = 0;  // sum(busy) - |union of busy intervals|
  // The device's clock, of the latest step whose markings had run by this EndStep (device.step says which;
  // in training the previous one). None without a DeviceTimeline, or when no step was ready.
  std::optional<DeviceStepTimes> device;
  std::string ToString() const;  // "wall 812.3 ms | forward 200.4 | backward 300.1 | ..."
};

class StepProfile {
 public:
  // Starts a new step window at `now` (the previous window's intervals are dropped).
  void BeginStep(absl::Time now = absl::Now());
  void Record(Stage stage, absl::Time begin, absl::Time end);
  // Closes the window at `now` and returns its breakdown (intervals are clipped to the window).
  StepBreakdown EndStep(absl::Time now = absl::Now());
  StepBreakdown last() const;
  // Attaches the device clock (not owned; outlives this), before the profile is shared between threads.
  void set_device_timeline(DeviceTimeline* timeline) { device_timeline_ = timeline; }
  DeviceTimeline* device_timeline() const { return device_timeline_; }

 private:
  struct Interval {
    Stage stage;
    absl::Time begin, end;
  };
  DeviceTimeline* device_timeline_ = nullptr;  // used by the engine's thread only (its contract)
  mutable std::mutex mu_;
  absl::Time start_ = absl::InfinitePast();  // guarded by mu_
  std::vector<Interval> intervals_;          // guarded by mu_
  StepBreakdown last_;                       // guarded by mu_
};

// The compute stream's stage that host `stage` marks on the device clock, if any (forward, backward).
std::optional<DeviceStage> ComputeStreamStage(Stage stage);

// Records [construction, destruction) as one interval of `stage`; forward and backward also as an interval
// of the profile's device clock (then the scope must be on the engine's thread).
class ScopedStage {
 public:
  ScopedStage(StepProfile* profile, Stage stage);
  ~ScopedStage();
  ScopedStage(const ScopedStage&) = delete;
  ScopedStage& operator=(const ScopedStage&) = delete;

 private:
  StepProfile* profile_;
  Stage stage_;
  absl::Time begin_;
  std::optional<ScopedDeviceStage> device_;
};

}  // namespace zerofit::sharding
