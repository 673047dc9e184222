#include "worker/loop/smoothed_step_time.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace zerofit::worker {

void SmoothedStepTime::StepEnded(absl::Time at) {
  const absl::Duration interval = std::max(at - last_, absl::ZeroDuration());
  last_ = at;
  ++intervals_;
  // The first interval (start to first step) only until the second replaces it outright.
  if (intervals_ <= 2) {
    per_step_ = interval;
  } else {
    per_step_ = *per_step_ * (1 - kWeight) + interval * kWeight;
  }
}

std::optional<absl::Duration> SmoothedStepTime::Remaining(int64_t steps) const {
  if (!per_step_) return std::nullopt;
  return *per_step_ * static_cast<double>(std::max<int64_t>(steps, 0));
}

std::string FormatEta(absl::Duration d) {
  const int64_t s = absl::ToInt64Seconds(std::max(d, absl::ZeroDuration()));
  if (s < 60) return absl::StrFormat("%ds", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, s % 86400 / 3600);
}

}  // namespace zerofit::worker
