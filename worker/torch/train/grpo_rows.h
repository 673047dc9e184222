// A GRPO micro-batch's training rows (issue 32): the prompt + completion tokens of a slice of a rollout,
// right-padded, with the mask of the log-prob columns the loss scores and the completions' advantages.
// Column j of the log-probs (LlamaModel::TokenLogProbs(tokens, from)) predicts token from + j + 1.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "worker/data/prompt_dataset.h"
#include "worker/torch/model/generation.h"

namespace zerofit::worker {

struct GrpoRows {
  torch::Tensor tokens;      // [n, longest] int64: prompt + completion, right-padded
  torch::Tensor mask;        // [n, longest - 1 - from] fp32: 1 on the columns that predict completion tokens
  torch::Tensor advantages;  // [n] fp32
  // [n, longest - 1 - from] fp32, with top_entropy_quantile (GrpoRowFormat::entropy_threshold): 1 on the
  // scored columns whose token's entropy is at least the threshold, the tokens the policy-gradient term
  // keeps (entropy_quantile.h); undefined without.
  torch::Tensor policy_mask;
  torch::Tensor old_logp, ref_logp;  // filled by the session where the objective needs them
  int64_t from = 0;                  // the first column that predicts a completion token
  int64_t count = 0;                 // n; 0: an empty slice (the rank takes part with zero gradients)
};

struct GrpoRowFormat {
  int32_t pad = 0;  // the id rows are right-padded with
  // TRL's mask_truncated_completions: a completion that reached max_new_tokens without an EOS gets an
  // all-zero mask, so only its reward (in its group's advantages) counts.
  bool mask_truncated = false;
  // The step's entropy threshold (StepEntropyThreshold): rows get a policy_mask; nullopt: none.
  std::optional<double> entropy_threshold;
};

// Rows of completions [begin, end) (prompts[i] is completion i's prompt; advantages one per completion) on
// `device`.
GrpoRows MakeGrpoRows(const std::vector<const data::Prompt*>& prompts,
                      const std::vector<Completion>& completions, const std::vector<double>& advantages,
                      size_t begin, size_t end, const GrpoRowFormat& format, const torch::Device& device);

}  // namespace zerofit::worker
