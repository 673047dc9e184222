// Preference objectives on per-pair tensors: the Bradley-Terry reward-model loss and DPO (sigmoid with label
// smoothing, and IPO). Every loss is returned as a SUM over pairs, as the ZeRO-2 protocol expects (the
// optimizer divides by the global number of pairs at the step), together with detached metrics.
#pragma once

#include <torch/torch.h>

#include <string>

#include "absl/status/statusor.h"

namespace zerofit::worker {

// Sums of per-pair metrics over a micro-batch; divide by `pairs` (after summing across ranks) for means.
struct PairMetrics {
  double loss_sum = 0;
  double correct = 0;     // pairs where chosen beats rejected (reward: score; DPO: implicit reward)
  double margin_sum = 0;  // reward: score_c - score_r; DPO: beta * (policy - reference log-ratio difference)
  double pairs = 0;
  // Per-response sums (named metrics, worker/metrics/step_metrics.h): reward: the scores of the chosen and
  // rejected responses; DPO: their implicit rewards beta * (log pi - log ref); SFT: their log-likelihoods.
  double chosen_sum = 0;
  double rejected_sum = 0;
  double response_tokens = 0;  // SFT: tokens of the chosen responses (the denominator of loss per token)
  double sequence_tokens = 0;  // every token forwarded (prompt + response, chosen and rejected rows)
  PairMetrics& operator+=(const PairMetrics& o) {
    loss_sum += o.loss_sum;
    correct += o.correct;
    margin_sum += o.margin_sum;
    pairs += o.pairs;
    chosen_sum += o.chosen_sum;
    rejected_sum += o.rejected_sum;
    response_tokens += o.response_tokens;
    sequence_tokens += o.sequence_tokens;
    return *this;
  }
};

struct LossOutput {
  torch::Tensor loss_sum;  // scalar with autograd graph
  PairMetrics metrics;
};

// Bradley-Terry: sum over pairs of -log sigmoid(score_chosen - score_rejected). Inputs [B].
LossOutput BradleyTerryLoss(const torch::Tensor& chosen_scores, const torch::Tensor& rejected_scores);

struct DpoOptions {
  enum class Loss { kSigmoid, kIpo };
  Loss loss = Loss::kSigmoid;
  double beta = 0.1;
  double label_smoothing = 0.0;  // sigmoid only: conservative DPO (cDPO), in [0, 0.5)
};
absl::StatusOr<DpoOptions::Loss> ParseDpoLoss(const std::string& name);  // "sigmoid" | "ipo"

// DPO on sequence log-probabilities [B] (sums over response tokens) of policy and reference:
//   h = (pi_c - pi_r) - (ref_c - ref_r)
//   sigmoid: -(1 - ls) log sigmoid(beta h) - ls log sigmoid(-beta h)        (Rafailov et al.; cDPO)
//   ipo:     (h - 1 / (2 beta))^2                                           (Azar et al.)
// Implicit reward accuracy counts pairs with h > 0.
LossOutput DpoLoss(const torch::Tensor& policy_chosen, const torch::Tensor& policy_rejected,
                   const torch::Tensor& reference_chosen, const torch::Tensor& reference_rejected,
                   const DpoOptions& options);

// Sum of log p(token) over the response tokens of each sequence. token_logprobs [B, T-1] holds
// log p(x[t+1] | x[<=t]); the response occupies sequence positions [response_start[b], length[b]).
torch::Tensor ResponseLogProbs(const torch::Tensor& token_logprobs, const torch::Tensor& response_start,
                               const torch::Tensor& lengths);

}  // namespace zerofit::worker
