#include "worker/torch/train/grpo_objective.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zerofit::worker {
namespace {

absl::Status CheckInputs(const torch::Tensor& logp, const torch::Tensor& old_logp,
                         const torch::Tensor& ref_logp, const torch::Tensor& mask,
                         const torch::Tensor& advantages, const GrpoOptions& o) {
  if (!logp.defined() || logp.dim() != 2)
    return absl::InvalidArgumentError("GrpoPolicyLoss: logp must be [B, T]");
  auto same = [&](const torch::Tensor& t, const char* name) -> absl::Status {
    if (!t.defined() || !t.sizes().equals(logp.sizes())) {
      return absl::InvalidArgumentError(absl::StrCat("GrpoPolicyLoss: ", name, " must have logp's shape [",
                                                     logp.size(0), ", ", logp.size(1), "]"));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = same(old_logp, "old_logp"); !s.ok()) return s;
  if (absl::Status s = same(mask, "mask"); !s.ok()) return s;
  if (o.beta > 0) {
    if (absl::Status s = same(ref_logp, "ref_logp (beta > 0)"); !s.ok()) return s;
  }
  if (!advantages.defined() || advantages.dim() != 1 || advantages.size(0) != logp.size(0)) {
    return absl::InvalidArgumentError("GrpoPolicyLoss: advantages must be [B]");
  }
  if (o.beta < 0 || !(o.epsilon_low >= 0 && o.epsilon_low < 1) || !(o.epsilon_high >= 0)) {
    return absl::InvalidArgumentError("GrpoOptions: beta >= 0, epsilon_low in [0, 1), epsilon_high >= 0");
  }
  if (o.delta && !(*o.delta > 1)) return absl::InvalidArgumentError("GrpoOptions: delta must be > 1");
  if (o.delta && o.term != GrpoPolicyTerm::kClipped) {
    return absl::InvalidArgumentError("GrpoOptions: delta caps the clipped term's ratio (not cispo or sapo)");
  }
  if (!(o.sapo_temperature_pos > 0) || !(o.sapo_temperature_neg > 0)) {
    return absl::InvalidArgumentError("GrpoOptions: the SAPO temperatures must be > 0");
  }
  if (o.rloo && (o.sequence_ratio || o.delta || o.bias_correction_kl || o.term != GrpoPolicyTerm::kClipped ||
                 o.norm != GrpoLossNorm::kSequenceMean)) {
    return absl::InvalidArgumentError(
        "GrpoOptions: rloo has its own ratio, KL and normalisation (no sequence_ratio, delta, "
        "bias_correction_kl, other term or norm)");
  }
  if (o.norm == GrpoLossNorm::kConstantLength && o.max_new_tokens < 1) {
    return absl::InvalidArgumentError("GrpoOptions: dr_grpo needs max_new_tokens >= 1");
  }
  return absl::OkStatus();
}

// The per-token loss, masked: -min(r A, clamp(r) A) + beta k3.
struct TokenTerms {
  torch::Tensor loss, kl, clipped;
};

// The importance ratio: [B, T] per token, or [B, 1] per completion (GSPO), which broadcasts over its tokens.
torch::Tensor Ratio(const torch::Tensor& logp, const torch::Tensor& old_logp, const torch::Tensor& m,
                    const GrpoOptions& o) {
  const torch::Tensor log_ratio = logp - old_logp;
  if (o.rloo) return torch::exp((log_ratio * m).sum(1, /*keepdim=*/true));  // RLOO: the completion's sum
  if (!o.sequence_ratio) return torch::exp(log_ratio);
  const torch::Tensor tokens = m.sum(1, /*keepdim=*/true).clamp_min(1.0);
  return torch::exp((log_ratio * m).sum(1, /*keepdim=*/true) / tokens);
}

// The per-token loss from its policy term [B, T] and clipped-token flags: the policy mask (top-entropy
// tokens) on the policy term alone, plus beta k3 (times the ratio with bias_correction_kl), all masked to
// the completion tokens.
TokenTerms Finish(torch::Tensor policy, const torch::Tensor& clipped, const torch::Tensor& logp,
                  const torch::Tensor& ref_logp, const torch::Tensor& ratio, const torch::Tensor& m,
                  const GrpoOptions& o, const torch::Tensor& policy_mask) {
  TokenTerms t;
  t.loss = policy_mask.defined() ? policy * policy_mask.to(logp.dtype()) : std::move(policy);
  t.kl = torch::zeros_like(logp);
  if (o.beta > 0 && !o.rloo) {  // RLOO's KL is in the reward (KlPenalizedRewards)
    const torch::Tensor d = ref_logp - logp;
    t.kl = torch::exp(d) - d - 1.0;
    if (o.bias_correction_kl) t.kl = t.kl * ratio;  // broadcasts a GSPO [B, 1] ratio
    t.loss = t.loss + o.beta * t.kl;
  }
  t.clipped = clipped.to(m.dtype()) * m;
  t.loss = t.loss * m;
  t.kl = t.kl.detach() * m;
  return t;
}

// CISPO's and SAPO's policy terms (grpo_objective.h) and their clipped-token flags, [B, T].
std::pair<torch::Tensor, torch::Tensor> SoftPolicyTerm(const torch::Tensor& logp, const torch::Tensor& ratio,
                                                       const torch::Tensor& a, const GrpoOptions& o) {
  if (o.term == GrpoPolicyTerm::kCispo) {
    const torch::Tensor weight = torch::clamp_max(ratio, o.epsilon_high).detach();
    return {-(weight * a).expand_as(logp) * logp, (ratio > o.epsilon_high).expand_as(logp)};
  }
  const torch::Tensor tau = torch::where(a > 0, torch::full_like(a, o.sapo_temperature_pos),
                                         torch::full_like(a, o.sapo_temperature_neg));
  const torch::Tensor gate = torch::sigmoid(tau * (ratio - 1.0)) * 4.0 / tau;
  return {-(gate * a).expand_as(logp), torch::zeros_like(logp, torch::kBool)};
}

TokenTerms PerToken(const torch::Tensor& logp, const torch::Tensor& old_logp, const torch::Tensor& ref_logp,
                    const torch::Tensor& m, const torch::Tensor& advantages, const GrpoOptions& o,
                    const torch::Tensor& policy_mask) {
  const torch::Tensor a = advantages.to(logp.dtype()).unsqueeze(1);
  const torch::Tensor ratio = Ratio(logp, old_logp, m, o);
  if (o.term != GrpoPolicyTerm::kClipped) {
    auto [policy, capped] = SoftPolicyTerm(logp, ratio, a, o);
    return Finish(std::move(policy), capped, logp, ref_logp, ratio, m, o, policy_mask);
  }
  const torch::Tensor capped = o.delta ? torch::clamp_max(ratio, *o.delta) : ratio;
  const torch::Tensor unclipped = (capped * a).expand_as(logp);
  const torch::Tensor clipped =
      (torch::clamp(ratio, 1.0 - o.epsilon_low, 1.0 + o.epsilon_high) * a).expand_as(logp);
  // Clipped: the term the min picked is constant in the ratio, so no gradient flows through it: the clamped
  // term with the ratio outside the range (the min picks it over the other only then, unless delta is below
  // 1 + epsilon_high), or the term capped at delta with the cap holding.
  const torch::Tensor picked_clamped = clipped < unclipped;
  const torch::Tensor outside = torch::logical_or(ratio<1.0 - o.epsilon_low, ratio> 1.0 + o.epsilon_high);
  torch::Tensor no_gradient = picked_clamped.logical_and(outside.expand_as(logp));
  if (o.delta) {
    const torch::Tensor capped_holds = (ratio > *o.delta).expand_as(logp);
    no_gradient = no_gradient.logical_or(picked_clamped.logical_not().logical_and(capped_holds));
  }
  return Finish(-torch::min(unclipped, clipped), no_gradient, logp, ref_logp, ratio, m, o, policy_mask);
}

}  // namespace

bool IsRloo(const std::string& name) { return name == "rloo"; }

absl::StatusOr<GrpoLossNorm> ParseGrpoLossNorm(const std::string& name) {
  if (name == "grpo" || name == "sapo" || IsRloo(name)) return GrpoLossNorm::kSequenceMean;
  if (name == "dapo" || name == "cispo") return GrpoLossNorm::kTokenMean;
  if (name == "dr_grpo") return GrpoLossNorm::kConstantLength;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown GRPO loss type '", name, "'; expected grpo, dapo, dr_grpo, cispo, sapo or rloo"));
}

absl::StatusOr<GrpoPolicyTerm> ParseGrpoPolicyTerm(const std::string& name) {
  if (name == "cispo") return GrpoPolicyTerm::kCispo;
  if (name == "sapo") return GrpoPolicyTerm::kSapo;
  ZF_RETURN_IF_ERROR(ParseGrpoLossNorm(name).status());
  return GrpoPolicyTerm::kClipped;
}

const char* GrpoLossNormName(GrpoLossNorm norm) {
  switch (norm) {
    case GrpoLossNorm::kSequenceMean:
      return "grpo";
    case GrpoLossNorm::kTokenMean:
      return "dapo";
    case GrpoLossNorm::kConstantLength:
      return "dr_grpo";
  }
  return "?";
}

absl::StatusOr<RewardScale> ParseRewardScale(const std::string& name) {
  if (name == "group" || name == "true") return RewardScale::kGroup;
  if (name == "batch") return RewardScale::kBatch;
  if (name == "none" || name == "false") return RewardScale::kNone;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown reward scale '", name, "'; expected group, batch or none (true, false)"));
}

const char* RewardScaleName(RewardScale scale) {
  switch (scale) {
    case RewardScale::kGroup:
      return "group";
    case RewardScale::kBatch:
      return "batch";
    case RewardScale::kNone:
      return "none";
  }
  return "?";
}

double BatchStd(double squared_deviations, double n) {
  return n > 1 ? std::sqrt(std::max(squared_deviations, 0.0) / (n - 1)) : 0.0;
}

absl::StatusOr<torch::Tensor> GroupAdvantages(const torch::Tensor& rewards, int64_t group_size,
                                              const GrpoOptions& o, std::optional<double> batch_std) {
  if (!rewards.defined() || rewards.dim() != 1 || group_size < 1 || rewards.size(0) % group_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GroupAdvantages: rewards must be [P x G] with G = ", group_size, " >= 1 dividing it"));
  }
  if (o.scale == RewardScale::kBatch && !batch_std) {
    return absl::InvalidArgumentError(
        "GroupAdvantages: scale_rewards batch needs the batch's standard deviation");
  }
  const torch::Tensor r = rewards.view({-1, group_size});
  torch::Tensor a = r - r.mean(1, /*keepdim=*/true);
  if (o.scale == RewardScale::kBatch) a = a / (*batch_std + o.std_eps);
  if (o.scale == RewardScale::kGroup) {
    // Bessel-corrected as torch.std (TRL), written out (LibTorch 1.13 and 2.x name std's overloads
    // differently); one sample per group has no spread: its advantage is 0 anyway.
    const torch::Tensor var = group_size > 1 ? a.pow(2).sum(1, /*keepdim=*/true) / (group_size - 1.0)
                                             : torch::zeros_like(a.narrow(1, 0, 1));
    a = a / (var.sqrt() + o.std_eps);
  }
  return a.reshape({-1});
}

absl::StatusOr<torch::Tensor> LeaveOneOutAdvantages(const torch::Tensor& rewards, int64_t group_size) {
  if (!rewards.defined() || rewards.dim() != 1 || group_size < 1 || rewards.size(0) % group_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LeaveOneOutAdvantages: rewards must be [P x G] with G = ", group_size, " >= 1 dividing it"));
  }
  if (group_size == 1) return torch::zeros_like(rewards);
  const torch::Tensor r = rewards.view({-1, group_size});
  const torch::Tensor others = (r.sum(1, /*keepdim=*/true) - r) / (group_size - 1.0);
  return (r - others).reshape({-1});
}

torch::Tensor KlPenalizedRewards(const torch::Tensor& rewards, double beta, const torch::Tensor& old_logp,
                                 const torch::Tensor& ref_logp, const torch::Tensor& mask) {
  const torch::Tensor kl = ((old_logp - ref_logp) * mask.to(old_logp.dtype())).sum(1);
  return rewards - beta * kl.to(rewards.dtype());
}

absl::StatusOr<GrpoLoss> GrpoPolicyLoss(const torch::Tensor& logp, const torch::Tensor& old_logp,
                                        const torch::Tensor& ref_logp, const torch::Tensor& mask,
                                        const torch::Tensor& advantages, const GrpoOptions& o,
                                        const torch::Tensor& policy_mask) {
  if (absl::Status s = CheckInputs(logp, old_logp, ref_logp, mask, advantages, o); !s.ok()) return s;
  if (policy_mask.defined() && !policy_mask.sizes().equals(logp.sizes())) {
    return absl::InvalidArgumentError(absl::StrCat("GrpoPolicyLoss: policy_mask must have logp's shape [",
                                                   logp.size(0), ", ", logp.size(1), "]"));
  }
  const torch::Tensor m = mask.to(logp.dtype());
  const TokenTerms t = PerToken(logp, old_logp, ref_logp, m, advantages, o, policy_mask);
  GrpoLoss out;
  out.tokens = m.sum().detach();
  out.kl_sum = t.kl.sum();
  // RLOO's KL metric: its reward penalty's first-order estimate, per token (TRL's RLOO logs the same).
  if (o.rloo && o.beta > 0) out.kl_sum = ((old_logp - ref_logp) * m).sum().detach();
  out.clipped_tokens = t.clipped.sum().detach();
  const int64_t sequences = logp.size(0);
  switch (o.norm) {
    case GrpoLossNorm::kSequenceMean:
      out.loss_sum = (t.loss.sum(1) / m.sum(1).clamp_min(1.0)).sum();
      out.units = static_cast<double>(sequences);
      break;
    case GrpoLossNorm::kTokenMean:
      out.loss_sum = t.loss.sum();
      out.units =
          out.tokens.item<double>();  // the mask's sum: a host read (a sync where the mask is on a GPU)
      break;
    case GrpoLossNorm::kConstantLength:
      out.loss_sum = t.loss.sum();
      out.units = static_cast<double>(sequences * o.max_new_tokens);
      break;
  }
  return out;
}

}  // namespace zerofit::worker
