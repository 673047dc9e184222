// The optimizer a job trains with, named as Hugging Face's TrainingArguments.optim names it:
//   training:
//     optim: adamw_8bit        # adamw_torch (default) | adamw_8bit (alias adamw_bnb_8bit)
//     min_8bit_size: 4096      # bitsandbytes' min_8bit_size: smaller parameters keep fp32 moments
// adamw_torch keeps AdamW's moments in fp32 (8 bytes a parameter besides the fp32 master copy);
// adamw_8bit keeps them as bitsandbytes' AdamW8bit does (optim/adamw_8bit.h): one byte each and a scale per
// 256 elements, about 2 bytes a parameter: on the GPU, or with training.offload: true in host memory
// (saving host RAM there).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace zerofit::jobspec {

enum class OptimizerKind { kAdamWTorch, kAdamW8bit };

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::kAdamWTorch;
  int64_t min_8bit_size = 4096;
  bool eight_bit() const { return kind == OptimizerKind::kAdamW8bit; }
};

// "adamw_torch" or "adamw_8bit": the plan's names.
const char* OptimizerName(OptimizerKind kind);
// Also Hugging Face's aliases: adamw_torch_fused, adamw_hf (fp32 moments), adamw_bnb_8bit. The error lists
// the names.
absl::StatusOr<OptimizerKind> ParseOptimizerName(const std::string& name);

}  // namespace zerofit::jobspec
