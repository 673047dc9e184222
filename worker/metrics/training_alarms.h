// Watches a job's step metrics for training that is going wrong. Pure (no clock, no I/O): a worker feeds it
// every step's metrics (metric_names: loss, accuracy, lr, grad_norm) and logs what it returns.
//  - A loss that is NaN or Inf: an error naming the step and the rank; the job must stop (every later update
//    would be garbage).
//  - A reward model stuck at chance: loss within `chance_loss_tolerance` of ln 2 and accuracy within
//    `chance_accuracy_tolerance` of 0.5 for `stuck_steps` steps in a row while lr > 0. One warning per run of
//    stuck steps, naming the usual causes.
//  - GRPO without a learning signal: every group's rewards equal (grpo/frac_reward_zero_std 1) for
//    `no_signal_steps` steps in a row. No advantage, so the policy learns nothing; one warning per run.
//  - A gradient-norm spike: grad_norm above `spike_factor` times the running mean of the norms before it
//    (after `spike_warmup_steps` steps). A warning; the spike does not enter the running mean.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/metrics/step_metrics.h"

namespace zerofit::worker::metrics {

struct AlarmOptions {
  bool reward_model = false;  // only a reward model's loss sits at ln 2 when it learns nothing
  int rank = 0;               // named in the messages
  int64_t stuck_steps = 50;
  double chance_loss_tolerance = 0.01;
  double chance_accuracy_tolerance = 0.05;
  int64_t no_signal_steps = 20;
  double spike_factor = 10.0;
  int64_t spike_warmup_steps = 10;
  double spike_mean_decay = 0.9;  // exponential moving average of grad_norm
};

class TrainingAlarms {
 public:
  explicit TrainingAlarms(const AlarmOptions& options) : options_(options) {}

  // The warnings this step raises (each one log line), or an error when training cannot be right.
  absl::StatusOr<std::vector<std::string>> Observe(const StepMetrics& metrics);

 private:
  void CheckChance(const StepMetrics& m, std::vector<std::string>* warnings);
  void CheckSpike(const StepMetrics& m, std::vector<std::string>* warnings);
  void CheckNoSignal(const StepMetrics& m, std::vector<std::string>* warnings);

  AlarmOptions options_;
  int64_t stuck_run_ = 0;      // consecutive steps at chance
  bool stuck_warned_ = false;  // for the current run
  int64_t flat_run_ = 0;       // consecutive GRPO steps without a group that had an advantage
  int64_t norms_seen_ = 0;
  double mean_norm_ = 0.0;
};

}  // namespace zerofit::worker::metrics
