#include "jobspec/dpo_spec.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/excerpt.h"

namespace zerofit::jobspec {

absl::Status ValidateDpoSpec(const DpoSpec& dpo, const FieldError& bad) {
  if (!std::isfinite(dpo.beta) || !(dpo.beta > 0))
    return bad("dpo.beta", absl::StrCat("must be a positive finite number, got ", dpo.beta));
  if (dpo.loss_type != "sigmoid" && dpo.loss_type != "ipo") {
    return bad("dpo.loss_type",
               absl::StrCat("expected sigmoid or ipo, got ", core::QuotedExcerpt(dpo.loss_type)));
  }
  if (!(dpo.label_smoothing >= 0 && dpo.label_smoothing < 0.5)) {
    return bad("dpo.label_smoothing", absl::StrCat("must be in [0, 0.5), got ", dpo.label_smoothing));
  }
  if (dpo.label_smoothing > 0 && dpo.loss_type != "sigmoid") {
    return bad("dpo.label_smoothing", absl::StrCat("applies to loss_type sigmoid only, not ", dpo.loss_type));
  }
  return absl::OkStatus();
}

}  // namespace zerofit::jobspec
