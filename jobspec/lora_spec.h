// LoRA in a job spec: adapters on the model's linear layers, as PEFT's LoraConfig (r, lora_alpha,
// lora_dropout, target_modules), for every task:
//   lora: {rank: 16, alpha: 32, dropout: 0.05, target_modules: [q_proj, k_proj, v_proj, o_proj]}
// Only the adapters train (and a reward model's score head); the export merges them into the base weights.
// A DPO or GRPO job with LoRA scores its reference with the policy's own base, adapters disabled
// (reference "lora-base": no second copy of the weights), as TRL does with a PEFT model. The plan carries
// the section to the workers unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "jobspec/grpo_spec.h"

namespace zerofit::jobspec {

struct LoraSpec {
  int64_t rank = 0;  // 0: no LoRA (full fine-tune); the section requires >= 1
  double alpha = 16;
  double dropout = 0.0;  // on the adapters' input, [0, 1)
  std::vector<std::string> target_modules = {"q_proj", "k_proj", "v_proj", "o_proj"};

  bool enabled() const { return rank > 0; }
};

// The linear layers LoRA can adapt (the decoder's; worker/torch/model/lora.h).
const std::vector<std::string>& LoraTargetModules();

// Ranges and names of an enabled section; errors through `bad("lora.rank", why)` (grpo_spec.h's FieldError).
absl::Status ValidateLoraSpec(const LoraSpec& lora, const FieldError& bad);

}  // namespace zerofit::jobspec
