// GRPO's top_entropy_quantile (TRL's GRPOConfig; Wang et al., "Beyond the 80/20 Rule: High-Entropy Minority
// Tokens Drive Effective Reinforcement Learning for LLM Reasoning"): the policy-gradient term of the loss
// keeps only the tokens whose entropy is at least the step's (1 - rho) quantile, the "forking" tokens where
// the policy was unsure; the KL term and the loss's normalisation keep every token, as TRL's.
//
// The entropies are those of the distributions the rollout sampled each token from (Completion::entropies:
// softmax(logits / temperature), before top-k/top-p/min-p), and the quantile is taken once over the whole
// step, every rank's scored completion tokens together, so which tokens count does not depend on how the
// step is split into micro-batches. TRL recomputes the entropies in each training forward and takes the
// quantile per micro-batch over every process; the two agree for one micro-batch per process and one
// iteration per rollout, up to the rounding of the decode's logits against the training forward's.
#pragma once

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "worker/torch/model/generation.h"

namespace zerofit::worker {

// torch.quantile's default (interpolation "linear"): the sorted values at position q (n - 1), interpolated
// between the two nearest. Needs n >= 1 and q in [0, 1].
double LinearQuantile(std::vector<double> values, double q);

// The entropies of the scored completion tokens of `completions` (those of completions hitting
// max_new_tokens left out when mask_truncated, as their tokens are out of the loss).
std::vector<double> ScoredEntropies(const std::vector<Completion>& completions, bool mask_truncated);

// The step's threshold: LinearQuantile over every rank's `local` entropies at q = 1 - top_quantile.
// Collective: every rank calls it (the largest count over ranks, then an all-gather padded with -1, which no
// entropy is). nullopt when no rank has a token.
absl::StatusOr<std::optional<double>> StepEntropyThreshold(const std::vector<double>& local,
                                                           double top_quantile, comm::Communicator* comm);

}  // namespace zerofit::worker
