// One optimizer step's metrics as named values, not fixed fields: what a worker reports to the coordinator
// and writes to its sinks (TensorBoard, JSONL). LibTorch-free. The names a training session reports are
// listed in `metric_names` below, so that sinks, alarms, the CLI and the docs agree on them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zerofit::worker::metrics {

// The names zerofit's training sessions report (docs/training.md describes each). Units are in the names:
// _ms milliseconds, _bytes bytes, _per_s per second of the step's wall time.
namespace metric_names {
inline constexpr char kLoss[] = "loss";             // mean over the step's pairs (or sequences)
inline constexpr char kRankLoss[] = "rank_loss";    // the reporting rank's own share of it (rank-local)
inline constexpr char kAccuracy[] = "accuracy";     // fraction of pairs ranked right (GRPO: answers right)
inline constexpr char kLearningRate[] = "lr";       // the rate this step's update used
inline constexpr char kGradNorm[] = "grad_norm";    // global L2 norm before clipping
inline constexpr char kClipped[] = "clipped";       // 1 when the gradient was clipped, else 0
inline constexpr char kClipCoef[] = "clip_coef";    // the factor applied to the gradient
inline constexpr char kLossScale[] = "loss_scale";  // the loss scale of this step's backward
inline constexpr char kSkipped[] = "skipped";       // 1 when the update was skipped (inf/nan gradients)
inline constexpr char kTokensPerS[] = "tokens_per_s";
inline constexpr char kSamplesPerS[] = "samples_per_s";  // pairs (reward, DPO) or sequences (SFT) per second
inline constexpr char kStepMs[] = "time/step_ms";        // the step's wall time
inline constexpr char kHostPeakRssBytes[] = "host_peak_rss_bytes";
// With a CUDA (or the test) device: this rank's device peak over the step (reset at its start): the CUDA
// caching allocator's peak allocated / reserved bytes on the rank's GPU, each plus the bytes zerofit's device
// seam holds there outside that allocator (ZeRO-2's flat buffers, optimizer state when not offloaded); the
// sum is what `zerofit plan` predicts as the device peak (worker/torch/train/training_backend.h).
inline constexpr char kDevicePeakAllocatedBytes[] = "device_peak_allocated_bytes";
inline constexpr char kDevicePeakReservedBytes[] = "device_peak_reserved_bytes";
// Time split of the step (sharding::StepBreakdown): "time/<stage>_ms" for compute, reduce_scatter, d2h,
// cpu_adamw, h2d, all_gather.
inline constexpr char kTimePrefix[] = "time/";
// The device's own clock (sharding::DeviceStepTimes; on a GPU, where the host's clocks show launch time):
// one optimizer update's compute stream, "device_time/step_ms" split into forward, backward, update and gap
// ("device_time/<part>_ms"), of the latest update the device had run when this step ended:
// "device_time/updates_ago" says which (0: this step's last update, 1: the one before; on a GPU usually 1).
inline constexpr char kDeviceTimePrefix[] = "device_time/";
inline constexpr char kDeviceTimeUpdatesAgo[] = "device_time/updates_ago";
// Reward model: mean scores of the chosen and rejected responses and their mean difference.
inline constexpr char kRewardChosen[] = "reward/chosen";
inline constexpr char kRewardRejected[] = "reward/rejected";
inline constexpr char kRewardMargin[] = "reward/margin";
// DPO: mean implicit rewards beta * (log pi - log ref) of chosen and rejected, their margin, and the fraction
// of pairs whose chosen implicit reward is the larger.
inline constexpr char kDpoChosen[] = "dpo/chosen_reward";
inline constexpr char kDpoRejected[] = "dpo/rejected_reward";
inline constexpr char kDpoMargin[] = "dpo/margin";
inline constexpr char kDpoAccuracy[] = "dpo/accuracy";
// The chosen responses' negative log-likelihood per token (TRL's nll_loss: the term rpo_alpha and ORPO add).
inline constexpr char kDpoNll[] = "dpo/nll_loss";
// SFT: negative log-likelihood per response token, its exponential, and the share of scored tokens the
// model ranks first (TRL's mean_token_accuracy).
inline constexpr char kSftLossPerToken[] = "sft/loss_per_token";
inline constexpr char kSftPerplexity[] = "sft/perplexity";
inline constexpr char kSftTokenAccuracy[] = "sft/mean_token_accuracy";
// GRPO (issue 32): the step's rollout and update.
inline constexpr char kGrpoReward[] = "grpo/reward";         // mean total reward of the step's completions
inline constexpr char kGrpoRewardStd[] = "grpo/reward_std";  // its standard deviation (population)
inline constexpr char kGrpoRewardPrefix[] = "grpo/reward/";  // + source name (+ "_std"): each source's
// Share of the step's groups whose rewards were all equal: they have no advantage and teach nothing (TRL's
// frac_reward_zero_std).
inline constexpr char kGrpoZeroStdGroups[] = "grpo/frac_reward_zero_std";
inline constexpr char kGrpoKl[] = "grpo/kl";  // mean k3 KL to the reference per token
inline constexpr char kGrpoClippedFraction[] = "grpo/clipped_fraction";  // tokens whose ratio was clipped
inline constexpr char kGrpoEntropy[] = "grpo/entropy";  // mean entropy (nats) of the sampling distribution
inline constexpr char kGrpoCompletionLength[] = "grpo/completion_length";
inline constexpr char kGrpoCompletionLengthMax[] = "grpo/completion_length_max";
inline constexpr char kGrpoHitMaxNewTokens[] = "grpo/hit_max_new_tokens";  // share that ended without EOS
inline constexpr char kGrpoGenerationTokensPerS[] = "grpo/generation_tokens_per_s";
inline constexpr char kGrpoKvCacheBytes[] = "grpo/kv_cache_bytes";  // the rank's largest cache in the step
// With a device peak (kDevicePeakAllocatedBytes, the larger of the two): the rollout pass's and the training
// pass's device peaks (allocated), each window reset at its start; `zerofit plan`'s GRPO passes predict them.
inline constexpr char kGrpoGenerationPeakBytes[] = "grpo/generation_peak_bytes";
inline constexpr char kGrpoTrainingPeakBytes[] = "grpo/training_peak_bytes";
inline constexpr char kGenerationMs[] = "time/generation_ms";  // the step's rollout
inline constexpr char kTrainingMs[] = "time/training_ms";      // and its updates
inline constexpr char kEvalPrompts[] = "prompts";              // GRPO's held-out count ("eval/prompts")
// Held-out evaluation after a step (eval.every): the task's values above under this prefix ("eval/loss",
// "eval/accuracy", "eval/reward/margin", ...) and the number of held-out pairs.
inline constexpr char kEvalPrefix[] = "eval/";
inline constexpr char kEvalPairs[] = "pairs";
}  // namespace metric_names

struct NamedValue {
  std::string name;
  double value = 0.0;
};

// Values keep the order they were first set in (the order tables and CSV columns show).
struct StepMetrics {
  int64_t step = 0;        // 0-based (core/lr_schedule.h)
  int rank = 0;            // the rank that measured the rank-local values (time split, host RSS)
  double wall_time = 0.0;  // seconds since the Unix epoch, when the step ended
  std::vector<NamedValue> values;

  // Replaces the value of `name`, or appends it.
  void Set(const std::string& name, double value);
  std::optional<double> Get(const std::string& name) const;
};

// True for the names a sink and the job store accept: 1..128 characters of [A-Za-z0-9_./-].
bool IsValidMetricName(const std::string& name);

}  // namespace zerofit::worker::metrics
