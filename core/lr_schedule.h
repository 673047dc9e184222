// Learning-rate schedules: linear warmup, then constant, linear decay or cosine decay to a floor (the
// schedules of Hugging Face's get_{constant,linear,cosine}_schedule_with_warmup and DeepSpeed's WarmupLR /
// WarmupDecayLR / WarmupCosineLR). Pure: the rate of optimizer step s is a function of s alone, so every
// rank computes the same value and a job resumed from a checkpoint at step s continues the same curve.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace zerofit::core {

enum class LrDecay { kConstant, kLinear, kCosine };

struct LrScheduleOptions {
  LrDecay decay = LrDecay::kConstant;
  float peak_lr = 1e-3f;
  int64_t warmup_steps = 0;  // the rate rises linearly to peak_lr over these steps
  int64_t total_steps = 0;   // decay ends here (at min_lr); later steps keep min_lr
  float min_lr = 0.0f;       // the floor the decay reaches at total_steps
};

// "constant" | "linear" | "cosine".
absl::StatusOr<LrDecay> ParseLrDecay(const std::string& name);
const char* LrDecayName(LrDecay decay);

// Checks the options: peak_lr > 0, 0 <= min_lr <= peak_lr, warmup_steps >= 0, and for a decaying schedule
// total_steps > warmup_steps.
absl::Status ValidateLrSchedule(const LrScheduleOptions& options);

// The rate of optimizer step `step` (1-based: the first update is step 1). Warmup: peak * step / warmup
// for step <= warmup (the first update already moves, unlike Hugging Face's 0-based lambda whose first rate
// is 0). Then with progress p = (step - warmup) / (total - warmup) clamped to [0, 1]:
//   constant: peak;  linear: peak - (peak - min) * p;  cosine: min + (peak - min) * (1 + cos(pi p)) / 2.
float LearningRateAt(const LrScheduleOptions& options, int64_t step);

}  // namespace zerofit::core
