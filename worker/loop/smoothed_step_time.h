// The time a step takes, smoothed, for the progress line's ETA: an exponential moving average of the times
// between consecutive steps' ends (each new interval weighs 0.1, about the last 10 to 20 steps). An interval
// includes everything between two steps (an evaluation, a checkpoint, the report), so the ETA covers them on
// average. The time from the attempt's start to its first step's end (loading, warm-up, the first
// allocation) is the estimate only until a second step ends: it is not the pace of the steps that follow.
// Pure (times are given): the unit tests drive it with made-up times. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"

namespace zerofit::worker {

class SmoothedStepTime {
 public:
  static constexpr double kWeight = 0.1;  // of each new interval

  explicit SmoothedStepTime(absl::Time started) : last_(started) {}

  void StepEnded(absl::Time at);
  // The smoothed time of one step; nullopt before a step ended.
  std::optional<absl::Duration> PerStep() const { return per_step_; }
  // The time `steps` more steps take at that pace; nullopt before a step ended.
  std::optional<absl::Duration> Remaining(int64_t steps) const;

 private:
  absl::Time last_;
  int64_t intervals_ = 0;
  std::optional<absl::Duration> per_step_;
};

// A duration as a person reads an ETA: "42s", "3m05s", "2h07m", "3d04h" (rounded down to its last unit).
std::string FormatEta(absl::Duration d);

}  // namespace zerofit::worker
