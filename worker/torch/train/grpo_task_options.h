// What a GRPO job adds to a training run's options (issue 32): the rollout (samples per prompt, generation
// length, sampling), the objective, optimisation steps per rollout batch, and the reward sources.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "worker/rewards/format_reward.h"
#include "worker/rewards/verifiable_reward.h"
#include "worker/torch/model/static_decode.h"
#include "worker/torch/train/grpo_objective.h"

namespace zerofit::worker {

struct RolloutOptions {
  int64_t samples_per_prompt = 4;  // G: completions per prompt (a group)
  int64_t max_new_tokens = 16;
  double temperature = 1.0;  // > 0 (GRPO needs diverse samples); evaluation is greedy
  double top_p = 1.0;
  int64_t top_k = 0;   // GenerationOptions::top_k
  double min_p = 0.0;  // GenerationOptions::min_p
  // Sequences in flight per generation pass; 0: all of a rank's sequences of the step in one pass. The
  // KV cache is sized for one pass (kv_cache.h).
  int64_t rollout_batch = 0;
  DecodeMode decode = DecodeMode::kAuto;  // GenerationOptions.decode of the rollouts
};

// One reward source; the rewards of a completion are summed with the sources' weights.
struct RewardSourceOptions {
  enum class Kind { kAnswer, kModel, kFormat };
  Kind kind = Kind::kAnswer;
  std::string name = "answer";  // metrics: grpo/reward/<name>
  double weight = 1.0;
  rewards::VerifiableRewardOptions answer;  // kAnswer: the rule and the scores
  std::string model_dir;                    // kModel: a reward model zerofit exported
  rewards::FormatRewardOptions format;      // kFormat: the pattern the whole completion must match
};

struct GrpoTaskOptions {
  RolloutOptions rollout;
  GrpoOptions objective;  // max_new_tokens is taken from the rollout
  int iterations = 1;     // optimizer steps per rollout batch (TRL's num_iterations), old log-probs kept
  // TRL's mask_truncated_completions (DAPO's overlong filtering): a completion that reached max_new_tokens
  // without an EOS keeps its reward in its group's advantages but has no tokens in the loss.
  bool mask_truncated_completions = false;
  // TRL's top_entropy_quantile, in (0, 1]: the policy-gradient term keeps the tokens whose sampling entropy
  // is in the step's top share (entropy_quantile.h); 1: every token.
  double top_entropy_quantile = 1.0;
  std::vector<RewardSourceOptions> rewards;  // at least one
};

}  // namespace zerofit::worker
