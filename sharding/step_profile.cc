#include "sharding/step_profile.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace zerofit::sharding {

const char* StageName(Stage s) {
  switch (s) {
    case Stage::kForward:
      return "forward";
    case Stage::kBackward:
      return "backward";
    case Stage::kReduceScatter:
      return "reduce-scatter";
    case Stage::kD2H:
      return "D2H";
    case Stage::kHostAccumulate:
      return "host accumulate";
    case Stage::kWait:
      return "wait";
    case Stage::kCpuAdamW:
      return "CPU AdamW";
    case Stage::kH2D:
      return "H2D";
    case Stage::kAllGather:
      return "all-gather";
    case Stage::kNumStages:
      break;
  }
  return "?";
}

std::string StepBreakdown::ToString() const {
  std::string out = absl::StrFormat("wall %.1f ms |", wall_ms);
  for (size_t i = 0; i < busy_ms.size(); ++i) {
    absl::StrAppendFormat(&out, " %s %.1f |", StageName(static_cast<Stage>(i)), busy_ms[i]);
  }
  absl::StrAppendFormat(&out, " idle %.1f | overlap %.1f", idle_ms, overlap_ms);
  return out;
}

void StepProfile::BeginStep(absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  start_ = now;
  intervals_.clear();
}

void StepProfile::Record(Stage stage, absl::Time begin, absl::Time end) {
  if (end <= begin) return;
  std::lock_guard<std::mutex> lock(mu_);
  intervals_.push_back(Interval{stage, begin, end});
}

StepBreakdown StepProfile::EndStep(absl::Time now) {
  std::optional<DeviceStepTimes> device;
  if (device_timeline_ != nullptr) device = device_timeline_->EndStep();
  std::lock_guard<std::mutex> lock(mu_);
  StepBreakdown b;
  b.device = device;
  const absl::Time start = start_ == absl::InfinitePast() ? now : start_;
  b.wall_ms = absl::ToDoubleMilliseconds(now - start);
  std::vector<std::pair<absl::Time, absl::Time>> spans;
  double busy_total = 0;
  for (const Interval& iv : intervals_) {
    const absl::Time lo = std::max(iv.begin, start), hi = std::min(iv.end, now);
    if (hi <= lo) continue;
    const double ms = absl::ToDoubleMilliseconds(hi - lo);
    b.busy_ms[static_cast<size_t>(iv.stage)] += ms;
    busy_total += ms;
    spans.push_back({lo, hi});
  }
  std::sort(spans.begin(), spans.end());
  double covered = 0;
  absl::Time cur_lo, cur_hi;
  bool open = false;
  for (const auto& [lo, hi] : spans) {
    if (open && lo <= cur_hi) {
      cur_hi = std::max(cur_hi, hi);
      continue;
    }
    if (open) covered += absl::ToDoubleMilliseconds(cur_hi - cur_lo);
    cur_lo = lo;
    cur_hi = hi;
    open = true;
  }
  if (open) covered += absl::ToDoubleMilliseconds(cur_hi - cur_lo);
  b.idle_ms = std::max(0.0, b.wall_ms - covered);
  b.overlap_ms = std::max(0.0, busy_total - covered);
  last_ = b;
  start_ = now;
  intervals_.clear();
  return b;
}

std::optional<DeviceStage> ComputeStreamStage(Stage stage) {
  if (stage == Stage::kForward) return DeviceStage::kForward;
  if (stage == Stage::kBackward) return DeviceStage::kBackward;
  return std::nullopt;
}

ScopedStage::ScopedStage(StepProfile* profile, Stage stage)
    : profile_(profile), stage_(stage), begin_(absl::Now()) {
  const std::optional<DeviceStage> on_device = ComputeStreamStage(stage);
  if (profile != nullptr && profile->device_timeline() != nullptr && on_device) {
    device_.emplace(profile->device_timeline(), *on_device);
  }
}

ScopedStage::~ScopedStage() {
  device_.reset();  // the device interval closes before the host's, as its work was enqueued by then
  if (profile_ != nullptr) profile_->Record(stage_, begin_, absl::Now());
}

StepBreakdown StepProfile::last() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

}  // namespace zerofit::sharding
