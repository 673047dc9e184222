#include "jobspec/optimizer_spec.h"

#include "absl/strings/str_cat.h"

namespace zerofit::jobspec {

const char* OptimizerName(OptimizerKind kind) {
  return kind == OptimizerKind::kAdamW8bit ? "adamw_8bit" : "adamw_torch";
}

absl::StatusOr<OptimizerKind> ParseOptimizerName(const std::string& name) {
  if (name == "adamw_torch" || name == "adamw_torch_fused" || name == "adamw_hf") {
    return OptimizerKind::kAdamWTorch;
  }
  if (name == "adamw_8bit" || name == "adamw_bnb_8bit") return OptimizerKind::kAdamW8bit;
  if (name.rfind("paged_", 0) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", name,
        "' pages optimizer state to host memory when the GPU runs short; zerofit plans the memory instead: "
        "adamw_8bit keeps 8-bit moments (on the GPU, or in host memory with training.offload: true), "
        "training.offload: true keeps the optimizer state on the host"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'", name,
      "' is not an optimizer zerofit runs: adamw_torch (alias adamw_torch_fused, adamw_hf) or adamw_8bit "
      "(alias adamw_bnb_8bit)"));
}

}  // namespace zerofit::jobspec
