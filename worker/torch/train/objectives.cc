#include "worker/torch/train/objectives.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace zerofit::worker {
namespace {

// A metrics tensor from its fields, each a 0-dim tensor on one device in any dtype (an undefined tensor
// counts as zero), taken to float64 as .item<double>() would: sums keep the dtype they were computed in, so
// the values equal the host reads this replaces, bit for bit.
torch::Tensor MetricsTensor(const torch::Tensor& loss_sum, const torch::Tensor& correct,
                            const torch::Tensor& margin_sum, int64_t pairs, const torch::Tensor& chosen_sum,
                            const torch::Tensor& rejected_sum, const torch::Tensor& response_tokens) {
  torch::NoGradGuard no_grad;
  const torch::TensorOptions f64 = loss_sum.options().dtype(torch::kFloat64);
  auto field = [&](const torch::Tensor& t) {
    return t.defined() ? t.detach().to(torch::kFloat64) : torch::zeros({}, f64);
  };
  return torch::stack({field(loss_sum), field(correct), field(margin_sum),
                       torch::full({}, static_cast<double>(pairs), f64), field(chosen_sum),
                       field(rejected_sum), field(response_tokens), torch::zeros({}, f64),
                       torch::zeros({}, f64), torch::zeros({}, f64)});
}

// The fields every objective reports: loss, accuracy (margin > 0) and margin from per-pair values [B].
torch::Tensor PairMetricsTensor(const torch::Tensor& loss_per_pair, const torch::Tensor& margin,
                                const torch::Tensor& chosen_sum, const torch::Tensor& rejected_sum) {
  torch::NoGradGuard no_grad;
  return MetricsTensor(loss_per_pair.sum(), (margin > 0).sum(), margin.sum(), margin.size(0), chosen_sum,
                       rejected_sum, torch::Tensor());
}

// A loss of `pairs` pairs with its metrics (units, nll_sum and nll_tokens left for the caller).
LossOutput Loss(torch::Tensor loss_sum, torch::Tensor metrics, int64_t pairs) {
  LossOutput out;
  out.loss_sum = std::move(loss_sum);
  out.metrics = std::move(metrics);
  out.pairs = pairs;
  return out;
}

// Sum of per-pair values [B] in float64.
torch::Tensor Sum64(const torch::Tensor& v) { return v.detach().to(torch::kFloat64).sum(); }

}  // namespace

torch::Tensor ZeroPairMetrics(const torch::Device& device) {
  return torch::zeros({pair_metric::kCount}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
}

PairMetrics ReadPairMetrics(const torch::Tensor& metrics) {
  TORCH_CHECK(metrics.dim() == 1 && metrics.size(0) == pair_metric::kCount,
              "ReadPairMetrics: expected a metrics tensor of ", pair_metric::kCount, " values, got ",
              metrics.sizes());
  const torch::Tensor host = metrics.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  std::array<double, pair_metric::kCount> values;
  std::copy_n(host.data_ptr<double>(), values.size(), values.begin());
  return PairMetricsOf(values);
}

std::array<double, pair_metric::kCount> PairMetricValues(const PairMetrics& m) {
  namespace f = pair_metric;
  std::array<double, f::kCount> v{};
  v[f::kLossSum] = m.loss_sum;
  v[f::kCorrect] = m.correct;
  v[f::kMarginSum] = m.margin_sum;
  v[f::kPairs] = m.pairs;
  v[f::kChosenSum] = m.chosen_sum;
  v[f::kRejectedSum] = m.rejected_sum;
  v[f::kResponseTokens] = m.response_tokens;
  v[f::kSequenceTokens] = m.sequence_tokens;
  v[f::kNllSum] = m.nll_sum;
  v[f::kNllTermSum] = m.nll_term_sum;
  return v;
}

PairMetrics PairMetricsOf(const std::array<double, pair_metric::kCount>& v) {
  namespace f = pair_metric;
  return PairMetrics{v[f::kLossSum],   v[f::kCorrect],     v[f::kMarginSum],      v[f::kPairs],
                     v[f::kChosenSum], v[f::kRejectedSum], v[f::kResponseTokens], v[f::kSequenceTokens],
                     v[f::kNllSum],    v[f::kNllTermSum]};
}

LossOutput BradleyTerryLoss(const torch::Tensor& chosen_scores, const torch::Tensor& rejected_scores,
                            const torch::Tensor& margins, double center_coefficient) {
  const torch::Tensor margin = (chosen_scores - rejected_scores).to(torch::kFloat32);
  torch::Tensor per_pair = -torch::log_sigmoid(margins.defined() ? margin - margins : margin);
  if (center_coefficient > 0) {
    per_pair = per_pair + center_coefficient * (chosen_scores + rejected_scores).to(torch::kFloat32).pow(2);
  }
  return Loss(per_pair.sum(),
              PairMetricsTensor(per_pair, margin.detach(), Sum64(chosen_scores), Sum64(rejected_scores)),
              margin.size(0));
}

absl::StatusOr<DpoOptions::Loss> ParseDpoLoss(const std::string& name) {
  using Loss = DpoOptions::Loss;
  for (const auto& [n, loss] : {std::pair{"sigmoid", Loss::kSigmoid},
                                {"ipo", Loss::kIpo},
                                {"hinge", Loss::kHinge},
                                {"robust", Loss::kRobust},
                                {"exo_pair", Loss::kExoPair},
                                {"nca_pair", Loss::kNcaPair},
                                {"sppo_hard", Loss::kSppoHard},
                                {"apo_zero", Loss::kApoZero},
                                {"apo_down", Loss::kApoDown},
                                {"discopop", Loss::kDiscopop},
                                {"simpo", Loss::kSimpo},
                                {"orpo", Loss::kOrpo}}) {
    if (name == n) return loss;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown DPO loss '", name,
                   "'; expected sigmoid, ipo, hinge, robust, exo_pair, nca_pair, "
                   "sppo_hard, apo_zero, apo_down, discopop, simpo or orpo"));
}

bool DpoLossIsPerToken(DpoOptions::Loss loss) {
  using Loss = DpoOptions::Loss;
  return loss == Loss::kIpo || loss == Loss::kSimpo || loss == Loss::kOrpo;
}

bool DpoNeedsReference(const DpoOptions& o) {
  return !o.reference_free && o.loss != DpoOptions::Loss::kSimpo && o.loss != DpoOptions::Loss::kOrpo;
}

double DpoNllWeight(const DpoOptions& o) { return o.loss == DpoOptions::Loss::kOrpo ? 1.0 : o.rpo_alpha; }

LossOutput DpoLoss(const torch::Tensor& policy_chosen, const torch::Tensor& policy_rejected,
                   const torch::Tensor& reference_chosen, const torch::Tensor& reference_rejected,
                   const DpoOptions& o) {
  // A reference-free loss (SimPO, ORPO, reference_free) may pass undefined reference tensors: 0.
  auto minus = [](const torch::Tensor& policy, const torch::Tensor& reference) {
    return (reference.defined() ? policy - reference.detach() : policy).to(torch::kFloat32);
  };
  const torch::Tensor c = minus(policy_chosen, reference_chosen);
  const torch::Tensor r = minus(policy_rejected, reference_rejected);
  const torch::Tensor h = c - r;
  const double ls = o.label_smoothing;
  torch::Tensor per_pair;
  switch (o.loss) {
    case DpoOptions::Loss::kExoPair: {
      const double e = ls > 0 ? ls : 1e-3;  // TRL's default for exo_pair without label smoothing
      per_pair = torch::sigmoid(o.beta * h) * (torch::log_sigmoid(o.beta * h) - std::log(1.0 - e)) +
                 torch::sigmoid(-o.beta * h) * (torch::log_sigmoid(-o.beta * h) - std::log(e));
      break;
    }
    case DpoOptions::Loss::kNcaPair:
      per_pair = -torch::log_sigmoid(o.beta * c) - 0.5 * torch::log_sigmoid(-o.beta * c) -
                 0.5 * torch::log_sigmoid(-o.beta * r);
      break;
    case DpoOptions::Loss::kSppoHard:
      per_pair = (c - 0.5 / o.beta).pow(2) + (r + 0.5 / o.beta).pow(2);
      break;
    case DpoOptions::Loss::kApoZero:
      per_pair = 1.0 - torch::sigmoid(o.beta * c) + torch::sigmoid(o.beta * r);
      break;
    case DpoOptions::Loss::kApoDown:
      per_pair = torch::sigmoid(o.beta * c) + 1.0 - torch::sigmoid(o.beta * h);
      break;
    case DpoOptions::Loss::kDiscopop: {
      const torch::Tensor z = o.beta * h;
      per_pair = -torch::log_sigmoid(z) * torch::sigmoid(-z / o.discopop_tau) +
                 torch::exp(-z + torch::log_sigmoid(z / o.discopop_tau));
      break;
    }
    case DpoOptions::Loss::kSimpo: {
      const torch::Tensor z = o.beta * h - o.simpo_gamma;
      per_pair = -(1.0 - ls) * torch::log_sigmoid(z) - ls * torch::log_sigmoid(-z);
      break;
    }
    case DpoOptions::Loss::kOrpo: {
      // log(1 - p) of a mean probability per token p = e^x: log(-expm1(x)), exact near 0 and near -inf.
      auto log1m_exp = [](const torch::Tensor& x) { return torch::log(-torch::expm1(x.clamp_max(-1e-6))); };
      per_pair = -o.beta * torch::log_sigmoid(h - (log1m_exp(c) - log1m_exp(r)));
      break;
    }
    case DpoOptions::Loss::kIpo:
      per_pair = (h - 1.0 / (2.0 * o.beta)).pow(2);
      break;
    case DpoOptions::Loss::kHinge:
      per_pair = torch::relu(1.0 - o.beta * h);
      break;
    case DpoOptions::Loss::kRobust:  // an unbiased estimate under labels flipped with probability ls
      per_pair = (-(1.0 - ls) * torch::log_sigmoid(o.beta * h) + ls * torch::log_sigmoid(-o.beta * h)) /
                 (1.0 - 2.0 * ls);
      break;
    case DpoOptions::Loss::kSigmoid:
      per_pair = -(1.0 - ls) * torch::log_sigmoid(o.beta * h) - ls * torch::log_sigmoid(-o.beta * h);
      break;
  }
  torch::Tensor metrics;
  {
    torch::NoGradGuard no_grad;
    metrics = PairMetricsTensor(per_pair, (o.beta * h).detach(), Sum64(o.beta * c), Sum64(o.beta * r));
  }
  return Loss(per_pair.sum(), metrics, h.size(0));
}

void AddChosenNll(const torch::Tensor& chosen_logps, int64_t chosen_tokens, double weight, LossOutput* out) {
  out->nll_sum = -chosen_logps.to(torch::kFloat32).sum();
  out->nll_tokens = static_cast<double>(chosen_tokens);
  torch::NoGradGuard no_grad;
  const torch::Tensor nll = out->nll_sum.detach().to(torch::kFloat64);
  out->metrics.select(0, pair_metric::kNllSum).add_(nll);
  out->metrics.select(0, pair_metric::kNllTermSum).add_(nll * weight);
  out->metrics.select(0, pair_metric::kResponseTokens).add_(out->nll_tokens);
}

torch::Tensor BackwardLoss(const LossOutput& out, double nll_weight, double step_pairs,
                           double step_chosen_tokens) {
  if (!(nll_weight > 0) || !out.nll_sum.defined()) return out.loss_sum;
  const double per_token = step_pairs / std::max(step_chosen_tokens, 1.0);
  return out.loss_sum + (nll_weight * per_token) * out.nll_sum;
}

LossOutput SftLoss(const torch::Tensor& completion_logps, const torch::Tensor& completion_tokens,
                   const torch::Tensor& correct_tokens) {
  const torch::Tensor nll = -completion_logps;
  torch::Tensor metrics;
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor correct = correct_tokens.defined() ? correct_tokens.sum() : torch::Tensor();
    metrics = MetricsTensor(nll.sum(), correct, torch::Tensor(), completion_logps.size(0),
                            completion_logps.sum(), torch::Tensor(), completion_tokens.sum());
  }
  return Loss(nll.sum(), metrics, completion_logps.size(0));
}

torch::Tensor LengthDesensitizedLogProbs(const torch::Tensor& token_logprobs,
                                         const torch::Tensor& response_start, const torch::Tensor& lengths,
                                         int64_t from, double alpha) {
  const int64_t pairs = lengths.size(0) / 2;
  const torch::Tensor length = lengths - response_start;
  const torch::Tensor shared = torch::min(length.slice(0, 0, pairs), length.slice(0, pairs)).repeat({2});
  // Column t scores sequence position t + 1; its offset into the response is t + 1 - start.
  const torch::Tensor t =
      torch::arange(from, from + token_logprobs.size(1),
                    torch::TensorOptions().dtype(torch::kLong).device(token_logprobs.device()))
          .unsqueeze(0);
  const torch::Tensor offset = t + 1 - response_start.unsqueeze(1);
  const torch::Tensor in_response = (offset >= 0) & (t + 1 < lengths.unsqueeze(1));
  const torch::Tensor front = (offset < shared.unsqueeze(1)).to(token_logprobs.dtype());
  const torch::Tensor weight = (front + alpha * (1.0 - front)) * in_response.to(token_logprobs.dtype());
  return (token_logprobs * weight).sum(1);
}

torch::Tensor ResponseLogProbs(const torch::Tensor& token_logprobs, const torch::Tensor& response_start,
                               const torch::Tensor& lengths, int64_t from, const torch::Tensor& scored) {
  // token_logprobs[:, t] scores sequence position t+1, so the response positions [s, len) map to [s-1,
  // len-1). The positions are made on token_logprobs' device: a host arange compared with device starts
  // and lengths is what broke DPO and SFT on a GPU (issue 28).
  const int64_t steps = token_logprobs.size(1);
  if (scored.defined()) {
    const torch::Tensor mask = scored.slice(1, from + 1, from + 1 + steps);
    return (token_logprobs * mask.to(token_logprobs.dtype())).sum(1);
  }
  const torch::Tensor t =
      torch::arange(from, from + steps,
                    torch::TensorOptions().dtype(torch::kLong).device(token_logprobs.device()))
          .unsqueeze(0);
  const torch::Tensor mask = (t >= (response_start - 1).unsqueeze(1)) & (t < (lengths - 1).unsqueeze(1));
  return (token_logprobs * mask.to(token_logprobs.dtype())).sum(1);
}

}  // namespace zerofit::worker
