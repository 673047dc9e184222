// Where the time of one optimizer step goes, stage by stage, from every thread that works on it: forward,
// backward, reduce-scatter, device-to-host copies, the offload pipeline's host accumulation, CPU AdamW,
// host-to-device copies, all-gather, and the engine thread's waits for host work (offload). Host clocks: on a
// GPU, forward and backward are the host's launch time until a sync, which shows up as the stage that syncs.
// Stages overlap; `idle` is the part of the step's wall time when no stage was busy, and `overlap` is how
// much busy time ran concurrently with other busy time (sum of stage times minus their union). Thread-safe.
#pragma once

#include <array>
#include <mutex>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

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
  double idle_ms = 0;            // wall time with no stage busy
  double overlap_ms = 0;         // sum(busy) - |union of busy intervals|
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

 private:
  struct Interval {
    Stage stage;
    absl::Time begin, end;
  };
  mutable std::mutex mu_;
  absl::Time start_ = absl::InfinitePast();  // guarded by mu_
  std::vector<Interval> intervals_;          // guarded by mu_
  StepBreakdown last_;                       // guarded by mu_
};

// Records [construction, destruction) as one interval of `stage`.
class ScopedStage {
 public:
  ScopedStage(StepProfile* profile, Stage stage) : profile_(profile), stage_(stage), begin_(absl::Now()) {}
  ~ScopedStage() {
    if (profile_ != nullptr) profile_->Record(stage_, begin_, absl::Now());
  }
  ScopedStage(const ScopedStage&) = delete;
  ScopedStage& operator=(const ScopedStage&) = delete;

 private:
  StepProfile* profile_;
  Stage stage_;
  absl::Time begin_;
};

}  // namespace zerofit::sharding
