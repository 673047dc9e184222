#include "core/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/excerpt.h"

namespace zerofit::core {

absl::StatusOr<LrDecay> ParseLrDecay(const std::string& name) {
  if (name == "constant") return LrDecay::kConstant;
  if (name == "linear") return LrDecay::kLinear;
  if (name == "cosine") return LrDecay::kCosine;
  return absl::InvalidArgumentError(absl::StrCat("unknown learning-rate schedule '", Excerpt(name),
                                                 "' (expected constant, linear or cosine)"));
}

const char* LrDecayName(LrDecay decay) {
  switch (decay) {
    case LrDecay::kConstant:
      return "constant";
    case LrDecay::kLinear:
      return "linear";
    case LrDecay::kCosine:
      return "cosine";
  }
  return "?";
}

absl::Status ValidateLrSchedule(const LrScheduleOptions& o) {
  if (!(o.peak_lr > 0) || !std::isfinite(o.peak_lr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("learning rate ", o.peak_lr, " must be a positive number"));
  }
  if (!(o.min_lr >= 0) || o.min_lr > o.peak_lr) {
    return absl::InvalidArgumentError(
        absl::StrCat("minimum learning rate ", o.min_lr, " must lie in [0, ", o.peak_lr, "]"));
  }
  if (o.warmup_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("warmup steps ", o.warmup_steps, " must be >= 0"));
  }
  if (o.decay != LrDecay::kConstant && o.total_steps <= o.warmup_steps) {
    return absl::InvalidArgumentError(absl::StrCat("a ", LrDecayName(o.decay), " decay needs total steps (",
                                                   o.total_steps, ") > warmup steps (", o.warmup_steps, ")"));
  }
  return absl::OkStatus();
}

float LearningRateAt(const LrScheduleOptions& o, int64_t step) {
  const double peak = o.peak_lr;
  const int64_t n = std::max<int64_t>(step, -1) + 1;  // updates applied once this step is (0-based steps)
  if (o.warmup_steps > 0 && n <= o.warmup_steps) {
    return static_cast<float>(peak * static_cast<double>(n) / static_cast<double>(o.warmup_steps));
  }
  if (o.decay == LrDecay::kConstant) return o.peak_lr;
  const double span = static_cast<double>(std::max<int64_t>(o.total_steps - o.warmup_steps, 1));
  const double p = std::clamp(static_cast<double>(n - o.warmup_steps) / span, 0.0, 1.0);
  const double floor = o.min_lr;
  if (o.decay == LrDecay::kLinear) return static_cast<float>(peak - (peak - floor) * p);
  return static_cast<float>(floor + (peak - floor) * 0.5 * (1.0 + std::cos(M_PI * p)));
}

}  // namespace zerofit::core
