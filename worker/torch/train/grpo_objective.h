// GRPO's objective (issue 32): group-relative advantages and the token-level clipped policy-gradient loss
// with a k3 KL penalty to a frozen reference, under the three loss normalisations users pick between (TRL's
// `loss_type`: grpo, dapo, dr_grpo).
//
// As every zerofit objective (objectives.h), the loss is returned as a SUM with the units it is to be divided
// by; the ZeRO-2 engine divides by the units summed over every rank and micro-batch of the step. That makes
// the normalisation global, as the user asked for, whatever the micro-batching:
//   kSequenceMean (grpo):  sum over sequences of (sum over its tokens / its token count); units: sequences
//   kTokenMean (dapo):     sum over every completion token;                                units: tokens
//   kConstantLength (dr_grpo): sum over every completion token;          units: sequences x max_new_tokens
// Per token t of completion i (ratio = exp(logp - old_logp), A_i the sequence's advantage):
//   l = -min(min(ratio, delta) A_i, clamp(ratio, 1 - eps_low, 1 + eps_high) A_i)
//       + beta (exp(ref - logp) - (ref - logp) - 1)  [times ratio with bias_correction_kl]
// (delta: no cap unless set). With sequence_ratio (GSPO) every token of completion i takes the ratio
// exp(mean over its tokens of (logp - old_logp)).
//
// RLOO (TRL's RLOOTrainer, loss_type rloo; Ahmadian et al. 2024): the KL to the reference is a penalty on the
// reward, beta x sum over the completion's tokens of (old_logp - ref_logp) (first order, as TRL's), not a
// loss term; advantages are leave-one-out, A_i = R_i - mean of the group's other rewards (optionally
// normalised over the whole step: normalize_advantages); and the loss is per completion, -min(r A, clamp(r)
// A) with r = exp(sum over its tokens of (logp - old_logp)), averaged over completions (kSequenceMean of a
// term constant over the completion's tokens).
//
// Tensors: [B, T] per-token log-probs of the completions (fp32 or fp64), a 0/1 mask of the same shape (1 on
// completion tokens, 0 on padding), [B] advantages. Everything created lives on the inputs' device.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace zerofit::worker {

enum class GrpoLossNorm { kSequenceMean, kTokenMean, kConstantLength };

// The policy-gradient term per token, the rest of what TRL's loss_type chooses (A the advantage, r the
// ratio, sg no gradient):
//   kClipped (grpo, dapo, dr_grpo): -min(min(r, delta) A, clamp(r, 1 - eps_low, 1 + eps_high) A)
//   kCispo (cispo; MiniMax-M1's CISPO): -sg(min(r, eps_high)) A logp: the importance weight is capped at
//     epsilon_high (TRL's recommendation 5.0), never a token's gradient dropped; normalised as dapo
//   kSapo (sapo; Soft Adaptive Policy Optimization): -(4 / tau) s(tau (r - 1)) A, tau the positive
//     temperature where A > 0, else the negative one: a soft gate in place of the clip; normalised as grpo
enum class GrpoPolicyTerm { kClipped, kCispo, kSapo };

// "grpo" | "dapo" | "dr_grpo" | "cispo" | "sapo" (TRL's names): the normalisation (cispo's is dapo's, sapo's
// grpo's) and the policy term.
absl::StatusOr<GrpoLossNorm> ParseGrpoLossNorm(const std::string& name);
absl::StatusOr<GrpoPolicyTerm> ParseGrpoPolicyTerm(const std::string& name);
const char* GrpoLossNormName(GrpoLossNorm norm);

// TRL's scale_rewards: advantages divided by the group's standard deviation (group, TRL's True), by the
// whole batch's over every rank (batch: group-mean centring, batch scale), or not at all (none, Dr. GRPO's).
enum class RewardScale { kGroup, kBatch, kNone };

// "group" | "batch" | "none", and "true" (group) / "false" (none), TRL's older booleans.
absl::StatusOr<RewardScale> ParseRewardScale(const std::string& name);
const char* RewardScaleName(RewardScale scale);

struct GrpoOptions {
  double epsilon_low = 0.2;   // the clip range below 1
  double epsilon_high = 0.2;  // and above (DAPO's clip-higher uses 0.28)
  double beta = 0.0;          // KL coefficient; 0: no reference is needed (ref_logp may be undefined)
  GrpoLossNorm norm = GrpoLossNorm::kSequenceMean;
  int64_t max_new_tokens = 0;  // kConstantLength's constant; required > 0 there
  // Advantages: rewards minus the group's mean, divided by a standard deviation (Bessel-corrected, as
  // torch.std) + std_eps: the group's, the batch's, or none (RewardScale).
  RewardScale scale = RewardScale::kGroup;
  double std_eps = 1e-4;
  // TRL's importance_sampling_level "sequence" (GSPO): one ratio per completion, the exp of its tokens' mean
  // log-ratio, clipped as a whole and applied to each of its tokens; false: a ratio per token.
  bool sequence_ratio = false;
  // TRL's delta (two-sided clipping): the unclipped ratio term's ratio is capped at delta (> 1), which bounds
  // the loss of a negative advantage whose ratio ran away; unset: no cap. kClipped only.
  std::optional<double> delta;
  GrpoPolicyTerm term = GrpoPolicyTerm::kClipped;
  // TRL's use_bias_correction_kl: the k3 term times the importance ratio (with its gradient), an unbiased
  // estimate of the KL of the current policy when the tokens were sampled from the old one.
  bool bias_correction_kl = false;
  double sapo_temperature_pos = 1.0;   // kSapo: tau where the advantage is > 0 (TRL's default)
  double sapo_temperature_neg = 1.05;  // and where it is <= 0
  // RLOO (loss_type rloo): the ratio of summed log-ratios and the KL in the reward here; the session makes
  // the advantages leave-one-out (LeaveOneOutAdvantages), normalised over the step when asked.
  bool rloo = false;
  bool normalize_advantages = false;  // RLOO: (A - the step's mean) / (the step's std + std_eps)
  // RLOO: each completion's weighted reward clamped to [first, second] before the KL penalty (TRL's
  // reward_clip_range); the rewards' metrics stay the scored ones.
  std::optional<std::pair<double, double>> reward_clip_range;
};

// Whether `name` is TRL's RLOO objective ("rloo"), and the options it sets: leave-one-out advantages, the
// KL as a reward penalty, one ratio per completion from its summed log-ratios.
bool IsRloo(const std::string& name);

// Advantages of `rewards` [P x G] laid out group by group (G consecutive samples per prompt): [P x G].
// A group whose rewards are all equal gets zeros. RewardScale::kBatch divides by `batch_std`, the standard
// deviation of the whole step's rewards on every rank (BatchStd), required then.
absl::StatusOr<torch::Tensor> GroupAdvantages(const torch::Tensor& rewards, int64_t group_size,
                                              const GrpoOptions& options,
                                              std::optional<double> batch_std = std::nullopt);

// RLOO's advantages of `rewards` [P x G] laid out group by group: R_i minus the mean of its group's other
// rewards (G >= 2; G = 1: zeros).
absl::StatusOr<torch::Tensor> LeaveOneOutAdvantages(const torch::Tensor& rewards, int64_t group_size);

// RLOO's reward with its KL penalty: rewards [N] - beta x kl [N], kl the sum over each completion's tokens of
// (old_logp - ref_logp) ([N, T] log-probs and their 0/1 mask).
torch::Tensor KlPenalizedRewards(const torch::Tensor& rewards, double beta, const torch::Tensor& old_logp,
                                 const torch::Tensor& ref_logp, const torch::Tensor& mask);

// The Bessel-corrected standard deviation of n values from their global sum of squared deviations from
// their global mean (two reductions, no cancellation); 0 for fewer than two values.
double BatchStd(double squared_deviations, double n);

struct GrpoLoss {
  torch::Tensor loss_sum;  // scalar with autograd graph through `logp`
  double units = 0;        // what loss_sum is divided by (see the normalisations above); known on the host
  // Detached sums over the micro-batch's completion tokens (divide by `tokens` for means): the k3 KL to the
  // reference (0 with beta 0), tokens whose ratio term gives no gradient (clipped to the range, or capped at
  // delta; CISPO: whose weight was capped, TRL's cispo clip ratio; SAPO: none), and the count of tokens.
  torch::Tensor kl_sum, clipped_tokens, tokens;
};

// `old_logp`: the log-probs the rollout was sampled with (several optimisation steps per rollout batch keep
// them); `ref_logp`: the frozen reference's (needed when beta > 0). `policy_mask` (top_entropy_quantile,
// entropy_quantile.h), when defined, is a 0/1 tensor of logp's shape that multiplies the clipped
// policy-gradient term alone: the KL term, the normalisation and the metrics count every token of `mask`.
// Shapes and the masks are checked; the error names the argument.
absl::StatusOr<GrpoLoss> GrpoPolicyLoss(const torch::Tensor& logp, const torch::Tensor& old_logp,
                                        const torch::Tensor& ref_logp, const torch::Tensor& mask,
                                        const torch::Tensor& advantages, const GrpoOptions& options,
                                        const torch::Tensor& policy_mask = torch::Tensor());

}  // namespace zerofit::worker
