#include "worker/metrics/training_alarms.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace zerofit::worker::metrics {

absl::StatusOr<std::vector<std::string>> TrainingAlarms::Observe(const StepMetrics& m) {
  const std::optional<double> loss = m.Get(metric_names::kLoss);
  if (loss && !std::isfinite(*loss)) {
    // Every rank sees the global loss; the ranks whose own share is finite point at the others.
    const std::optional<double> own = m.Get(metric_names::kRankLoss);
    const std::string where =
        own && std::isfinite(*own)
            ? absl::StrFormat("on another rank (rank %d's own loss is %.6g)", options_.rank, *own)
            : absl::StrFormat("on rank %d", options_.rank);
    return absl::DataLossError(absl::StrFormat(
        "step %d: the loss is %s %s: stopping (check the learning rate, the data at this step, and for "
        "bf16/fp16 the loss scale)",
        m.step, std::isnan(*loss) ? "NaN" : "Inf", where));
  }
  std::vector<std::string> warnings;
  CheckChance(m, &warnings);
  CheckSpike(m, &warnings);
  CheckNoSignal(m, &warnings);
  return warnings;
}

void TrainingAlarms::CheckChance(const StepMetrics& m, std::vector<std::string>* warnings) {
  if (!options_.reward_model) return;
  const std::optional<double> loss = m.Get(metric_names::kLoss);
  const std::optional<double> accuracy = m.Get(metric_names::kAccuracy);
  const std::optional<double> lr = m.Get(metric_names::kLearningRate);
  const bool at_chance = loss && accuracy &&
                         std::abs(*loss - std::log(2.0)) <= options_.chance_loss_tolerance &&
                         std::abs(*accuracy - 0.5) <= options_.chance_accuracy_tolerance;
  if (!at_chance) {
    stuck_run_ = 0;
    stuck_warned_ = false;
    return;
  }
  ++stuck_run_;
  if (stuck_run_ < options_.stuck_steps || stuck_warned_) return;
  stuck_warned_ = true;
  const bool no_lr = lr && !(*lr > 0);
  warnings->push_back(absl::StrFormat(
      "alarm: step %d: the reward model has stayed at chance (loss %.4f ~ ln 2, accuracy %.3f) for %d steps "
      "with learning rate %.3g. Usual causes: %sscores read at padding instead of the last real token; "
      "chosen "
      "and rejected identical (or truncated to the same tokens by max_length); a learning rate of 0",
      m.step, *loss, *accuracy, stuck_run_, lr.value_or(0.0), no_lr ? "THE LEARNING RATE IS 0; " : ""));
}

void TrainingAlarms::CheckSpike(const StepMetrics& m, std::vector<std::string>* warnings) {
  const std::optional<double> norm = m.Get(metric_names::kGradNorm);
  if (!norm || !std::isfinite(*norm)) return;
  if (norms_seen_ >= options_.spike_warmup_steps && mean_norm_ > 0 &&
      *norm > options_.spike_factor * mean_norm_) {
    warnings->push_back(
        absl::StrFormat("alarm: step %d: gradient norm %.4g is %.1fx the running mean %.4g (before clipping)",
                        m.step, *norm, *norm / mean_norm_, mean_norm_));
    return;  // a spike does not move the baseline
  }
  mean_norm_ = norms_seen_ == 0
                   ? *norm
                   : options_.spike_mean_decay * mean_norm_ + (1 - options_.spike_mean_decay) * *norm;
  ++norms_seen_;
}

void TrainingAlarms::CheckNoSignal(const StepMetrics& m, std::vector<std::string>* warnings) {
  const std::optional<double> flat = m.Get(metric_names::kGrpoZeroStdGroups);
  if (!flat) return;
  flat_run_ = *flat >= 1.0 ? flat_run_ + 1 : 0;
  if (flat_run_ != options_.no_signal_steps) return;  // once per run of flat steps
  warnings->push_back(absl::StrFormat(
      "alarm: step %d: for %d steps every group's rewards were equal (mean reward %.3g): no advantage, so "
      "GRPO learns nothing. Usual causes: prompts too hard or too easy for the policy (all wrong or all "
      "right), a reward that does not vary (check the rule against the data's answers), too few "
      "samples_per_prompt or too low a temperature",
      m.step, flat_run_, m.Get(metric_names::kGrpoReward).value_or(0.0)));
}

}  // namespace zerofit::worker::metrics
