// The token ids a rollout stops at. transformers' generate stops at every id of generation_config.json's
// eos_token_id (config.json's when that file is absent), and vLLM, TRL's GRPO generation backend, adds the
// tokenizer's EOS: a chat model's turn often ends in a token that is not config.json's first EOS (Llama 3.1
// Instruct: config.json [128001, 128008, 128009], the tokenizer's <|eot_id|> 128009; Qwen2.5 Instruct:
// config.json 151645, generation_config.json [151645, 151643]). A rollout that misses one runs past the end
// of its turn to max_new_tokens, and its reward reads text the model was never meant to write. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/hf_config.h"

namespace zerofit::data {

// config.json's eos_token_id (every entry of a list), generation_config.json's in `model_dir` (an integer or
// a list; the file may be absent) and `tokenizer_eos` (-1: none), each once, in that order. Errors name
// generation_config.json when it does not parse or its eos_token_id is not an id or a list of ids.
absl::StatusOr<std::vector<int64_t>> StopTokenIds(const std::string& model_dir,
                                                  const core::HfModelConfig& config, int64_t tokenizer_eos);

}  // namespace zerofit::data
