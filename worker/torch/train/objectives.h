// Preference objectives on per-pair tensors: the Bradley-Terry reward-model loss, DPO (sigmoid with label
// smoothing, and IPO) and SFT's negative log-likelihood. Every loss is returned as a SUM over pairs, as the
// ZeRO-2 protocol expects (the optimizer divides by the global number of pairs at the step), together with
// detached metrics.
//
// Devices: every tensor an objective creates lives on its inputs' device, and the metrics stay there (a
// metrics tensor, below) until the caller reads them: on a GPU a step sums its micro-batches' metrics on
// the device and reads them to the host once (ReadPairMetrics), instead of one synchronising .item() per
// value and micro-batch. tests/worker/torch/device_clean_test.cc checks both on the meta device.
#pragma once

#include <torch/torch.h>

#include <array>
#include <string>

#include "absl/status/statusor.h"

namespace zerofit::worker {

// Sums of per-pair metrics over a micro-batch; divide by `pairs` (after summing across ranks) for means.
struct PairMetrics {
  double loss_sum = 0;
  double correct = 0;  // pairs where chosen beats rejected (reward: score; DPO: implicit reward); SFT: scored
                       // tokens the model ranks first (its token accuracy's numerator)
  double margin_sum = 0;  // reward: score_c - score_r; DPO: beta * (policy - reference log-ratio difference)
  double pairs = 0;
  // Per-response sums (named metrics, worker/metrics/step_metrics.h): reward: the scores of the chosen and
  // rejected responses; DPO: their implicit rewards beta * (log pi - log ref); SFT: their log-likelihoods.
  double chosen_sum = 0;
  double rejected_sum = 0;
  double response_tokens = 0;  // SFT and DPO: tokens of the chosen responses (the denominator per token)
  double sequence_tokens = 0;  // every token forwarded (prompt + response, chosen and rejected rows)
  // DPO: the chosen responses' negative log-likelihood summed over their tokens (response_tokens counts
  // them: per token, TRL's nll_loss), and the same times the objective's weight of it (DpoNllWeight), the
  // term the loss adds per chosen token (MeanLoss).
  double nll_sum = 0;
  double nll_term_sum = 0;
  PairMetrics& operator+=(const PairMetrics& o) {
    loss_sum += o.loss_sum;
    correct += o.correct;
    margin_sum += o.margin_sum;
    pairs += o.pairs;
    chosen_sum += o.chosen_sum;
    rejected_sum += o.rejected_sum;
    response_tokens += o.response_tokens;
    sequence_tokens += o.sequence_tokens;
    nll_sum += o.nll_sum;
    nll_term_sum += o.nll_term_sum;
    return *this;
  }
};

// SFT's loss per completion token (its perplexity is the exp of it); 0 tokens count as 1.
inline double SftLossPerToken(const PairMetrics& m) {
  return m.loss_sum / (m.response_tokens > 1.0 ? m.response_tokens : 1.0);
}

// SFT's share of scored tokens the model ranks first (TRL's mean_token_accuracy); 0 tokens count as 1.
inline double SftTokenAccuracy(const PairMetrics& m) {
  return m.correct / (m.response_tokens > 1.0 ? m.response_tokens : 1.0);
}

// The loss a step's gradient is of, as TRL logs it: the mean per pair, or for SFT per scored token
// (LossOutput::units), plus a DPO objective's weighted negative log-likelihood per chosen token. What every
// "loss" figure shows.
inline double MeanLoss(const PairMetrics& m, bool sft) {
  if (sft) return SftLossPerToken(m);
  return m.loss_sum / (m.pairs > 1.0 ? m.pairs : 1.0) +
         m.nll_term_sum / (m.response_tokens > 1.0 ? m.response_tokens : 1.0);
}

// Positions of PairMetrics' fields in a metrics tensor: float64 [kCount], no autograd graph, on the device of
// the loss it describes.
namespace pair_metric {
constexpr int64_t kLossSum = 0, kCorrect = 1, kMarginSum = 2, kPairs = 3, kChosenSum = 4, kRejectedSum = 5,
                  kResponseTokens = 6, kSequenceTokens = 7, kNllSum = 8, kNllTermSum = 9, kCount = 10;
}  // namespace pair_metric

// A metrics tensor of zeros on `device` (what micro-batch metrics are summed into).
torch::Tensor ZeroPairMetrics(const torch::Device& device);
// The host copy of a metrics tensor: one device-to-host copy (a synchronisation on a GPU).
PairMetrics ReadPairMetrics(const torch::Tensor& metrics);
// PairMetrics' fields in pair_metric order, and back: what a metrics tensor or a host all-reduce carries.
std::array<double, pair_metric::kCount> PairMetricValues(const PairMetrics& m);
PairMetrics PairMetricsOf(const std::array<double, pair_metric::kCount>& values);

struct LossOutput {
  torch::Tensor loss_sum;  // scalar with autograd graph
  torch::Tensor metrics;   // a metrics tensor (pair_metric) on loss_sum's device
  int64_t pairs = 0;       // the pairs the loss sums over (known on the host, unlike `metrics`)
  // What the step's gradient is the mean over (Zero2Binding::Backward's units, summed over micro-batches
  // and ranks): the pairs, or for SFT the scored tokens, as TRL's per-token mean (MicroBatchLoss sets it).
  double units = 0;
  // DPO: the chosen responses' negative log-likelihood summed over their `nll_tokens` tokens, with autograd
  // graph (AddChosenNll); undefined otherwise. Not part of loss_sum: its weight per chosen token needs the
  // step's totals (BackwardLoss).
  torch::Tensor nll_sum;
  double nll_tokens = 0;
};

// Bradley-Terry: sum over pairs of -log sigmoid(score_chosen - score_rejected - margin)
// + center_coefficient (score_chosen + score_rejected)^2. Inputs [B]; `margins` [B] (TRL's margin column,
// Llama 2's margin loss) may be undefined: none; center_coefficient is TRL's center_rewards_coefficient (a
// sum over pairs here, as every loss: TRL's mean after the division by the step's pairs). The metrics'
// accuracy and margin compare the scores alone, as TRL's do.
LossOutput BradleyTerryLoss(const torch::Tensor& chosen_scores, const torch::Tensor& rejected_scores,
                            const torch::Tensor& margins = torch::Tensor(), double center_coefficient = 0);

struct DpoOptions {
  enum class Loss {
    kSigmoid,
    kIpo,
    kHinge,
    kRobust,
    kExoPair,
    kNcaPair,
    kSppoHard,
    kApoZero,
    kApoDown,
    kDiscopop,
    kSimpo,
    kOrpo
  };
  Loss loss = Loss::kSigmoid;
  double beta = 0.1;
  double label_smoothing = 0.0;  // sigmoid (conservative DPO, cDPO), robust, exo_pair and simpo, in [0, 0.5)
  double simpo_gamma = 0.5;      // simpo: the target reward margin (TRL's CPOConfig.simpo_gamma)
  double discopop_tau = 0.05;    // discopop: its blend's temperature (TRL's DPOConfig.discopop_tau)
  double ld_alpha = 1.0;         // LD-DPO's weight of the tokens past the shorter response (1: plain sums)
  // The weight of the chosen responses' negative log-likelihood per token in the loss (TRL's
  // DPOConfig.rpo_alpha, CPOConfig.cpo_alpha); 0: none. orpo's is 1 whatever this says (DpoNllWeight).
  double rpo_alpha = 0.0;
  bool reference_free = false;  // TRL's DPOConfig.reference_free: the reference log-probs are 0
};
// "sigmoid" | "ipo" | "hinge" | "robust" | "exo_pair" | "nca_pair" | "sppo_hard" | "apo_zero" | "apo_down"
// | "discopop" (TRL's DPOConfig.loss_type names) | "simpo" (TRL's CPOConfig.loss_type, with cpo_alpha 0:
// SimPO as its paper defines it) | "orpo" (TRL's ORPOTrainer).
absl::StatusOr<DpoOptions::Loss> ParseDpoLoss(const std::string& name);

// Whether `loss` compares each response's mean log-probability per token rather than its sum: TRL's IPO
// (DPOTrainer divides both models' sequence log-probs by the response's length for loss_type ipo), SimPO
// (CPOTrainer's average_log_prob) and ORPO (ORPOTrainer's).
bool DpoLossIsPerToken(DpoOptions::Loss loss);

// Whether the objective compares the policy with a reference model: not SimPO and ORPO, which are
// reference-free, nor any loss with reference_free (then no reference model is built, planned or kept).
bool DpoNeedsReference(const DpoOptions& options);

// The weight of the chosen responses' negative log-likelihood per token in the objective: 1 for ORPO (its
// loss is that NLL minus beta log sigmoid(log odds ratio)), else rpo_alpha.
double DpoNllWeight(const DpoOptions& options);

// DPO on sequence log-probabilities [B] (sums over response tokens; for ipo the means per token,
// DpoLossIsPerToken) of policy and reference, with c = pi_c - ref_c, r = pi_r - ref_r, h = c - r, s =
// sigmoid:
//   sigmoid:   -(1 - ls) log s(beta h) - ls log s(-beta h)                  (Rafailov et al.; cDPO)
//   ipo:       (h - 1 / (2 beta))^2                                         (Azar et al.)
//   hinge:     max(0, 1 - beta h)                                           (SLiC, Zhao et al.)
//   robust:    (-(1 - ls) log s(beta h) + ls log s(-beta h)) / (1 - 2 ls)   (rDPO, Chowdhury et al.)
//   exo_pair:  s(beta h) (log s(beta h) - log(1 - e)) + s(-beta h) (log s(-beta h) - log e), e = ls or, when
//              ls is 0, 1e-3 as TRL                                         (EXO, Ji et al.)
//   nca_pair:  -log s(beta c) - log s(-beta c) / 2 - log s(-beta r) / 2    (NCA, Chen et al.)
//   sppo_hard: (c - 1 / (2 beta))^2 + (r + 1 / (2 beta))^2                 (SPPO, hard labels; Wu et al.)
//   apo_zero:  1 - s(beta c) + s(beta r)                                    (APO-zero, D'Oosterlinck et al.)
//   apo_down:  s(beta c) + 1 - s(beta h)                                    (APO-down)
//   discopop:  -log s(z) (1 - s(z / tau)) + e^-z s(z / tau), z = beta h    (DiscoPOP, Chris Lu et al.; the
//              second term computed as e^(-z + log s(z / tau)), which stays finite where e^-z alone
//              overflows)
//   simpo:     -(1 - ls) log s(beta h - gamma) - ls log s(-(beta h - gamma)), the reference terms 0 (they
//              may be undefined tensors)                                    (SimPO, Meng et al.)
//   orpo:      -beta log s(h - log(1 - e^c) + log(1 - e^r)), the reference terms 0: beta times the log odds
//              ratio of the chosen response's mean probability per token over the rejected one's; c and r
//              are taken at most -1e-6 inside log(1 - e^x), which is -inf at 0   (ORPO, Hong et al.)
// With reference_free, undefined reference tensors are 0 for every loss. Implicit reward accuracy counts
// pairs with h > 0.
LossOutput DpoLoss(const torch::Tensor& policy_chosen, const torch::Tensor& policy_rejected,
                   const torch::Tensor& reference_chosen, const torch::Tensor& reference_rejected,
                   const DpoOptions& options);

// Adds to `out` (a DPO loss of its micro-batch) the chosen responses' negative log-likelihood: its nll_sum
// = -sum(chosen_logps) ([B], each the sum of log p over a chosen response's tokens, with graph) and
// nll_tokens, and their metrics (nll_sum, nll_term_sum = weight x nll_sum, response_tokens = chosen_tokens).
void AddChosenNll(const torch::Tensor& chosen_logps, int64_t chosen_tokens, double weight, LossOutput* out);

// What a micro-batch backpropagates: loss_sum plus, when the objective weighs an NLL (nll_weight > 0),
// nll_weight x (step_pairs / step_chosen_tokens) x nll_sum, the totals being the whole step's over every
// micro-batch and rank. The optimizer divides the gradient by the step's pairs (units), so the step follows
// mean_pairs(loss) + nll_weight x NLL per chosen token of the whole step, whatever the micro-batches and
// ranks (TRL takes the NLL's mean per micro-batch, which changes with the split unless it is one
// micro-batch on one process).
torch::Tensor BackwardLoss(const LossOutput& out, double nll_weight, double step_pairs,
                           double step_chosen_tokens);

// SFT: the negative log-likelihood of the completions, sum over examples. Inputs [B]: the sequence
// log-probabilities of the completions (an SFT batch holds them alone: PairRows::kChosenOnly), the number
// of tokens of each or their total (metrics' response_tokens, any integer or float dtype) and, optionally,
// how many of them the model ranks first (metrics' correct: the token accuracy's numerator; undefined: 0).
// There is no second response to compare a completion with, so the margin and rejected sums stay 0 (the
// loss per token, the perplexity and the token accuracy are SFT's figures, named_step_metrics.h).
LossOutput SftLoss(const torch::Tensor& completion_logps, const torch::Tensor& completion_tokens,
                   const torch::Tensor& correct_tokens = torch::Tensor());

// LD-DPO (TRL's ld_alpha): each row's response log-prob as its first m tokens' sum plus alpha times the
// rest's, m = min(chosen, rejected response length) of its pair; rows are [chosen of the B pairs, rejected of
// them]. token_logprobs, response_start, lengths and from as ResponseLogProbs's (no scored positions).
torch::Tensor LengthDesensitizedLogProbs(const torch::Tensor& token_logprobs,
                                         const torch::Tensor& response_start, const torch::Tensor& lengths,
                                         int64_t from, double alpha);

// Sum of log p(token) over the response tokens of each sequence. token_logprobs [B, T-1-from] holds
// log p(x[t+1] | x[<=t]) at column t - from (LlamaModel::TokenLogProbs(ids, from)); the response occupies
// sequence positions [response_start[b], length[b]), none before from + 1. response_start and lengths [B]
// int64 live on token_logprobs' device. `scored` ([B, T] bool, PairTensors::scored), when defined, says
// which of those positions count (an SFT example's assistant turns); it is false outside them.
torch::Tensor ResponseLogProbs(const torch::Tensor& token_logprobs, const torch::Tensor& response_start,
                               const torch::Tensor& lengths, int64_t from = 0,
                               const torch::Tensor& scored = torch::Tensor());

}  // namespace zerofit::worker
