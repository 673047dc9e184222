#include "jobspec/objective_spec.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/excerpt.h"

namespace zerofit::jobspec {

absl::Status ValidateDpoSpec(const DpoSpec& dpo, const FieldError& bad) {
  if (!std::isfinite(dpo.beta) || !(dpo.beta > 0))
    return bad("dpo.beta", absl::StrCat("must be a positive finite number, got ", dpo.beta));
  const std::string& t = dpo.loss_type;
  if (t != "sigmoid" && t != "ipo" && t != "hinge" && t != "robust") {
    return bad("dpo.loss_type",
               absl::StrCat("expected sigmoid, ipo, hinge or robust, got ", core::QuotedExcerpt(t)));
  }
  if (!(dpo.label_smoothing >= 0 && dpo.label_smoothing < 0.5)) {
    return bad("dpo.label_smoothing", absl::StrCat("must be in [0, 0.5), got ", dpo.label_smoothing));
  }
  if (dpo.label_smoothing > 0 && t != "sigmoid" && t != "robust") {
    return bad("dpo.label_smoothing", absl::StrCat("applies to loss_type sigmoid and robust only, not ", t));
  }
  return absl::OkStatus();
}

absl::Status ValidateRewardLossSpec(const RewardLossSpec& reward, const FieldError& bad) {
  const double c = reward.center_rewards_coefficient;
  if (!std::isfinite(c) || c < 0) {
    return bad("reward.center_rewards_coefficient", absl::StrCat("must be a finite number >= 0, got ", c));
  }
  return absl::OkStatus();
}

}  // namespace zerofit::jobspec
