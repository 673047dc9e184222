// The rewards of a GRPO rollout (issue 32): every completion scored by each reward source of the job
// (grpo_task_options.h), summed with their weights (worker/rewards/reward_sum.h). A verifiable source
// compares the completion with the prompt's `answer`: as text when a tokenizer can decode completions, or,
// for pre-tokenized data without one, the exact rule token for token against `answer_ids`. A reward-model
// source scores prompt + completion in the same process without gradients; a chat prompt's completion as
// the chat template writes the assistant's reply, as TRL renders it for a reward model. A format source
// checks the completion's text against its pattern (format_reward.h), whatever the answer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/prompt_dataset.h"
#include "worker/data/tokenizer.h"
#include "worker/rewards/format_reward.h"
#include "worker/rewards/reward_sum.h"
#include "worker/rewards/verifiable_reward.h"
#include "worker/torch/model/generation.h"
#include "worker/torch/train/grpo_task_options.h"
#include "worker/torch/train/reward_model_scorer.h"

namespace zerofit::worker {

struct ScoredRollout {
  rewards::RewardSum sum;
  // Per completion: 1 when the first answer source matched, else 0; empty when the job has none.
  std::vector<double> correct;
};

class RolloutScorer {
 public:
  // Loads the reward models; each must read every id of the policy's vocabulary (`policy_vocab`). `tokenizer`
  // may be null (then every answer source must use the exact rule, there is no format source, and
  // every prompt must carry answer_ids, checked by CheckPrompts); `eos_ids` are stripped from a
  // completion's end before it is compared. Errors name `rewards[i]`.
  static absl::StatusOr<std::unique_ptr<RolloutScorer>> Create(
      const std::vector<RewardSourceOptions>& sources, std::shared_ptr<const data::Tokenizer> tokenizer,
      std::vector<int64_t> eos_ids, int64_t policy_vocab, torch::Device device);

  // Every prompt has what the answer sources need (an answer, or answer_ids); errors name file and line.
  absl::Status CheckPrompts(const std::vector<data::Prompt>& prompts, const std::string& path) const;

  bool has_answer_source() const;

  // `prompts[i]` is the prompt of `completions[i]`.
  absl::StatusOr<ScoredRollout> Score(const std::vector<const data::Prompt*>& prompts,
                                      const std::vector<Completion>& completions) const;

 private:
  RolloutScorer() = default;
  // Every completion decoded once (EOS stripped), for all answer and format sources; empty without a
  // tokenizer (the answers are compared token for token) or without such sources.
  absl::StatusOr<std::vector<std::string>> DecodedCompletions(
      const std::vector<Completion>& completions) const;
  // `text`: the completion decoded; null: compared with the prompt's answer_ids.
  double AnswerScore(size_t source, const data::Prompt& prompt, const Completion& completion,
                     const std::string* text) const;
  std::vector<int64_t> WithoutEos(const std::vector<int64_t>& tokens) const;
  // What a reward model scores: prompt + completion tokens, or for a chat prompt (with a tokenizer) the
  // prompt + the completion's text written as the assistant's reply by the chat template (chat_response.h).
  absl::StatusOr<std::vector<int32_t>> ModelInput(const data::Prompt& prompt,
                                                  const Completion& completion) const;

  std::vector<RewardSourceOptions> sources_;
  std::vector<std::unique_ptr<RewardModelScorer>> models_;         // one per source (null for answer sources)
  std::vector<std::optional<rewards::VerifiableReward>> answers_;  // one per source (set for answer sources)
  std::vector<std::optional<rewards::FormatReward>> formats_;      // one per source (set for format sources)
  std::shared_ptr<const data::Tokenizer> tokenizer_;
  std::vector<int64_t> eos_ids_;
};

}  // namespace zerofit::worker
