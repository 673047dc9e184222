#include "jobspec/objective_spec.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "core/excerpt.h"

namespace zerofit::jobspec {

absl::Status ValidateDpoSpec(const DpoSpec& dpo, const FieldError& bad) {
  if (!std::isfinite(dpo.beta) || !(dpo.beta > 0))
    return bad("dpo.beta", absl::StrCat("must be a positive finite number, got ", dpo.beta));
  const std::string& t = dpo.loss_type;
  const char* const kLosses[] = {"sigmoid",   "ipo",      "hinge",    "robust",   "exo_pair", "nca_pair",
                                 "sppo_hard", "apo_zero", "apo_down", "discopop", "simpo",    "orpo"};
  if (std::find(std::begin(kLosses), std::end(kLosses), t) == std::end(kLosses)) {
    return bad("dpo.loss_type",
               absl::StrCat("expected sigmoid, ipo, hinge, robust, exo_pair, nca_pair, sppo_hard, "
                            "apo_zero, apo_down, discopop, simpo or orpo, got ",
                            core::QuotedExcerpt(t)));
  }
  if (!(dpo.label_smoothing >= 0 && dpo.label_smoothing < 0.5)) {
    return bad("dpo.label_smoothing", absl::StrCat("must be in [0, 0.5), got ", dpo.label_smoothing));
  }
  if (dpo.label_smoothing > 0 && t != "sigmoid" && t != "robust" && t != "exo_pair" && t != "simpo") {
    return bad("dpo.label_smoothing",
               absl::StrCat("applies to loss_type sigmoid, robust, exo_pair and simpo only, not ", t));
  }
  if (!std::isfinite(dpo.simpo_gamma) || dpo.simpo_gamma < 0)
    return bad("dpo.simpo_gamma", absl::StrCat("must be a finite number >= 0, got ", dpo.simpo_gamma));
  if (dpo.simpo_gamma != DpoSpec{}.simpo_gamma && t != "simpo")
    return bad("dpo.simpo_gamma", absl::StrCat("applies to loss_type simpo only, not ", t));
  if (!std::isfinite(dpo.discopop_tau) || !(dpo.discopop_tau > 0))
    return bad("dpo.discopop_tau", absl::StrCat("must be a positive finite number, got ", dpo.discopop_tau));
  if (dpo.discopop_tau != DpoSpec{}.discopop_tau && t != "discopop")
    return bad("dpo.discopop_tau", absl::StrCat("applies to loss_type discopop only, not ", t));
  if (!(dpo.ld_alpha >= 0 && dpo.ld_alpha <= 1))
    return bad("dpo.ld_alpha", absl::StrCat("must be in [0, 1] (1: plain sums), got ", dpo.ld_alpha));
  if (dpo.ld_alpha != 1 && (t == "ipo" || t == "simpo" || t == "orpo")) {
    return bad("dpo.ld_alpha",
               absl::StrCat("weighs the tail of summed log-probs; loss_type ", t,
                            " compares means per token, which are length-normalised already"));
  }
  if (!std::isfinite(dpo.rpo_alpha) || dpo.rpo_alpha < 0)
    return bad("dpo.rpo_alpha", absl::StrCat("must be a finite number >= 0, got ", dpo.rpo_alpha));
  if (dpo.rpo_alpha > 0 && t == "orpo") {
    return bad("dpo.rpo_alpha",
               "does not apply to loss_type orpo, whose negative log-likelihood term has weight 1 (TRL's "
               "ORPOTrainer)");
  }
  return absl::OkStatus();
}

bool DpoIsReferenceFree(const DpoSpec& dpo) {
  return dpo.reference_free || dpo.loss_type == "simpo" || dpo.loss_type == "orpo";
}

absl::Status ValidateRewardLossSpec(const RewardLossSpec& reward, const FieldError& bad) {
  const double c = reward.center_rewards_coefficient;
  if (!std::isfinite(c) || c < 0) {
    return bad("reward.center_rewards_coefficient", absl::StrCat("must be a finite number >= 0, got ", c));
  }
  return absl::OkStatus();
}

}  // namespace zerofit::jobspec
