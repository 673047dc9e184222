// A GRPO job's own sections (issue 32), as the job spec writes them and the plan carries them to the
// workers unchanged:
//   rollout: {samples_per_prompt, max_new_tokens, temperature, top_p, top_k, min_p, batch, decode}
//   grpo:    {iterations, beta, epsilon, epsilon_high, loss_type, scale_rewards, importance_sampling_level,
//             delta, mask_truncated_completions, top_entropy_quantile, sapo_temperature_pos,
//             sapo_temperature_neg, use_bias_correction_kl, normalize_advantages, reward_clip_range}
//   rewards: [{type: answer, rule: exact | last_number | regex, pattern, group, weight, correct, wrong,
//   name},
//             {type: format, pattern, weight, correct, wrong, name},
//             {type: model, path: DIR, weight, name}]
// TRL's GRPOConfig names where they exist (num_generations = samples_per_prompt, max_completion_length =
// max_new_tokens, num_iterations = iterations, loss_type, scale_rewards, epsilon, epsilon_high, beta,
// importance_sampling_level, delta, mask_truncated_completions, top_entropy_quantile, sapo_temperature_pos,
// sapo_temperature_neg, use_bias_correction_kl; RLOOConfig's normalize_advantages and reward_clip_range with
// loss_type rloo).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace zerofit::jobspec {

struct RolloutSpec {
  int64_t samples_per_prompt = 8;  // G, >= 2
  int64_t max_new_tokens = 256;
  double temperature = 1.0;  // > 0
  double top_p = 1.0;        // (0, 1]
  int64_t top_k = 0;         // > 0: the top_k most likely tokens only (TRL's top_k); 0: all
  double min_p = 0.0;        // [0, 1]: tokens at least min_p x the most likely's probability (TRL's min_p)
  int64_t batch = 0;         // sequences in flight per generation pass; 0: a rank's whole step at once
  // How the decode steps after the prompt run (worker/torch/model/static_decode.h): auto | eager | static |
  // cuda_graph (the step recorded once a pass as a CUDA graph and replayed; a CUDA device only). auto:
  // cuda_graph where it can run, else eager.
  std::string decode = "auto";
};

struct GrpoObjectiveSpec {
  int iterations = 1;  // optimizer steps per rollout batch
  double beta = 0.0;   // KL coefficient (0: no reference model is kept)
  double epsilon = 0.2;
  std::optional<double> epsilon_high;  // unset: epsilon; cispo: the importance weight's cap, required
  // grpo | dapo | dr_grpo (the clipped term, three normalisations) | cispo (CISPO's capped weight, as
  // dapo) | sapo (SAPO's soft gate, as grpo) | rloo (TRL's RLOOTrainer: leave-one-out advantages, the KL
  // to the reference as a reward penalty, one clipped ratio per completion): grpo_objective.h
  std::string loss_type = "grpo";
  double sapo_temperature_pos = 1.0;   // sapo only, > 0: the gate's temperature where the advantage is > 0
  double sapo_temperature_neg = 1.05;  // sapo only, > 0: and where it is <= 0 (TRL's defaults)
  // TRL's scale_rewards: group (true) divides advantages by the group's standard deviation, batch by the
  // whole step's, none (false) not at all; normalised to group, batch or none by validation.
  std::string scale_rewards = "group";
  // token: a ratio per token (GRPO); sequence: one per completion, exp of its mean token log-ratio (GSPO).
  std::string importance_sampling_level = "token";
  std::optional<double> delta;              // two-sided clipping: the unclipped ratio capped at delta (> 1)
  bool mask_truncated_completions = false;  // completions that end without an EOS are left out of the loss
  // (0, 1]: the policy-gradient term keeps the tokens whose sampling entropy is in the step's top share
  // (Wang et al.'s forking tokens; 0.2 in their paper); 1: every token.
  double top_entropy_quantile = 1.0;
  bool use_bias_correction_kl = false;  // the KL term times the importance ratio (TRL's name)
  // rloo only (TRL's RLOOConfig): the advantages less their mean over the whole step, divided by its std.
  bool normalize_advantages = false;
  // rloo only (TRL's RLOOConfig): each completion's weighted reward clamped to [min, max] before the KL
  // penalty and the advantages; unset: none.
  std::optional<std::pair<double, double>> reward_clip_range;
};

struct RewardSpec {
  std::string type = "answer";  // answer | format | model
  std::string name;             // metric suffix (grpo/reward/<name>); default: the type, numbered if repeated
  double weight = 1.0;
  std::string rule = "exact";  // answer: exact | last_number | regex (worker/rewards/verifiable_reward.h)
  std::string pattern;  // regex: its last match's `group` is compared with the answer; format: the whole
                        // completion must match it (worker/rewards/format_reward.h)
  std::string group;    // regex: a group number or name; empty: 1
  double correct = 1.0, wrong = 0.0;
  std::string path;  // model: a reward model directory zerofit exported
};

struct GrpoJobSpec {
  RolloutSpec rollout;
  GrpoObjectiveSpec grpo;
  std::vector<RewardSpec> rewards;
};

// rollout.decode (and `zerofit plan --decode`): whether `mode` is one of auto, eager, static, cuda_graph;
// and whether its decode steps replay a CUDA graph on a GPU (cuda_graph, and auto, which is cuda_graph
// there), which is what the planner's generation time follows.
bool IsDecodeMode(const std::string& mode);
bool DecodesAsGraphOnGpu(const std::string& mode);

// Ranges and names; each error is made by `bad(field, why)` (field as the spec writes it:
// "rollout.samples_per_prompt", "rewards[1].rule"), so a YAML reader can point at the line. Fills in the
// rewards' default names. `max_length` is training.max_length (the prompt gets what max_new_tokens leaves).
using FieldError = std::function<absl::Status(const std::string& field, const std::string& why)>;
absl::Status ValidateGrpoJobSpec(GrpoJobSpec* spec, int64_t max_length, const FieldError& bad);

// The same with plain "field: why" errors.
absl::Status ValidateGrpoJobSpec(GrpoJobSpec* spec, int64_t max_length);

}  // namespace zerofit::jobspec
