#include "worker/torch/train/objectives.h"

#include "absl/strings/str_cat.h"

namespace zerofit::worker {
namespace {

PairMetrics Metrics(const torch::Tensor& loss_per_pair, const torch::Tensor& margin) {
  torch::NoGradGuard no_grad;
  PairMetrics m;
  m.loss_sum = loss_per_pair.sum().item<double>();
  m.correct = (margin > 0).sum().item<double>();
  m.margin_sum = margin.sum().item<double>();
  m.pairs = static_cast<double>(margin.size(0));
  return m;
}

// Adds the sums of `chosen` and `rejected` (per-pair values [B]) to m's chosen_sum and rejected_sum.
void AddResponseSums(const torch::Tensor& chosen, const torch::Tensor& rejected, PairMetrics* m) {
  torch::NoGradGuard no_grad;
  m->chosen_sum += chosen.detach().to(torch::kFloat64).sum().item<double>();
  m->rejected_sum += rejected.detach().to(torch::kFloat64).sum().item<double>();
}

}  // namespace

LossOutput BradleyTerryLoss(const torch::Tensor& chosen_scores, const torch::Tensor& rejected_scores) {
  const torch::Tensor margin = (chosen_scores - rejected_scores).to(torch::kFloat32);
  const torch::Tensor per_pair = -torch::log_sigmoid(margin);
  LossOutput out{per_pair.sum(), Metrics(per_pair, margin.detach())};
  AddResponseSums(chosen_scores, rejected_scores, &out.metrics);
  return out;
}

absl::StatusOr<DpoOptions::Loss> ParseDpoLoss(const std::string& name) {
  if (name == "sigmoid") return DpoOptions::Loss::kSigmoid;
  if (name == "ipo") return DpoOptions::Loss::kIpo;
  return absl::InvalidArgumentError(absl::StrCat("unknown DPO loss '", name, "'; expected sigmoid or ipo"));
}

LossOutput DpoLoss(const torch::Tensor& policy_chosen, const torch::Tensor& policy_rejected,
                   const torch::Tensor& reference_chosen, const torch::Tensor& reference_rejected,
                   const DpoOptions& o) {
  const torch::Tensor h =
      ((policy_chosen - policy_rejected) - (reference_chosen - reference_rejected).detach())
          .to(torch::kFloat32);
  torch::Tensor per_pair;
  if (o.loss == DpoOptions::Loss::kIpo) {
    per_pair = (h - 1.0 / (2.0 * o.beta)).pow(2);
  } else {
    per_pair = -(1.0 - o.label_smoothing) * torch::log_sigmoid(o.beta * h) -
               o.label_smoothing * torch::log_sigmoid(-o.beta * h);
  }
  LossOutput out{per_pair.sum(), Metrics(per_pair, (o.beta * h).detach())};
  AddResponseSums(o.beta * (policy_chosen - reference_chosen),
                  o.beta * (policy_rejected - reference_rejected), &out.metrics);
  return out;
}

torch::Tensor ResponseLogProbs(const torch::Tensor& token_logprobs, const torch::Tensor& response_start,
                               const torch::Tensor& lengths) {
  // token_logprobs[:, t] scores sequence position t+1, so the response positions [s, len) map to [s-1,
  // len-1).
  const int64_t steps = token_logprobs.size(1);
  const torch::Tensor t = torch::arange(steps, torch::TensorOptions().dtype(torch::kLong)).unsqueeze(0);
  const torch::Tensor mask = (t >= (response_start - 1).unsqueeze(1)) & (t < (lengths - 1).unsqueeze(1));
  return (token_logprobs * mask.to(token_logprobs.dtype())).sum(1);
}

}  // namespace zerofit::worker
