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

// Step numbers, one convention for all of zerofit (the coordinator, the wire format zerofit.v1, the workers,
// the standalone trainers, metrics, checkpoints and this schedule): steps are 0-BASED. Step s is the
// (s + 1)-th optimizer update, s updates precede it, a job of `steps: N` runs steps 0 .. N-1, and a job
// resumed after the checkpoint of step s continues with step s + 1. (zerofit.v1 numbered steps this way from
// its first version, and its fields may not change meaning.) People read "step s+1/N".
//
// The rate of step `step` (0-based, above), with n = step + 1 the number of updates once it is applied.
// Warmup: peak * n / warmup for n <= warmup (the first update already moves, unlike Hugging Face's lambda
// whose first rate is 0). Then with progress p = (n - warmup) / (total - warmup) clamped to [0, 1]:
//   constant: peak;  linear: peak - (peak - min) * p;  cosine: min + (peak - min) * (1 + cos(pi p)) / 2.
// So the last step of a total-step run (step total - 1) reaches min.
float LearningRateAt(const LrScheduleOptions& options, int64_t step);

}  // namespace zerofit::core
