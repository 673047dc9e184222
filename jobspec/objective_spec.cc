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
  const char* const kLosses[] = {"sigmoid",  "ipo",       "hinge",    "robust",  "exo_pair",
                                 "nca_pair", "sppo_hard", "apo_zero", "apo_down"};
  if (std::find(std::begin(kLosses), std::end(kLosses), t) == std::end(kLosses)) {
    return bad("dpo.loss_type",
               absl::StrCat("expected sigmoid, ipo, hinge, robust, exo_pair, nca_pair, sppo_hard, "
                            "apo_zero or apo_down, got ",
                            core::QuotedExcerpt(t)));
  }
  if (!(dpo.label_smoothing >= 0 && dpo.label_smoothing < 0.5)) {
    return bad("dpo.label_smoothing", absl::StrCat("must be in [0, 0.5), got ", dpo.label_smoothing));
  }
  if (dpo.label_smoothing > 0 && t != "sigmoid" && t != "robust" && t != "exo_pair") {
    return bad("dpo.label_smoothing",
               absl::StrCat("applies to loss_type sigmoid, robust and exo_pair only, not ", t));
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
