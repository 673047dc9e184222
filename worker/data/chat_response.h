// An assistant's reply to a chat prompt as the chat template writes it: the ids of render(prompt +
// [{"role": "assistant", "content": reply}]) minus render(prompt, add_generation_prompt=true), the same cut
// the data readers make for a conversational pair's response. A GRPO reward model scores a completion of a
// chat prompt this way: TRL's GRPOTrainer decodes the completion and renders prompt + completion with the
// reward model's template, so the reward model reads the token it was trained to score (for Qwen2.5 the
// "\n" after <|im_end|>), not the policy's raw tokens, which stop at the end-of-turn token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "worker/data/tokenizer.h"

namespace zerofit::data {

// The text of `response` (messages) after `prompt` (messages) as the chat template writes it:
// render(prompt + response) minus `prompt_text`, which is render(prompt, add_generation_prompt=true). Errors:
// the template's own as InvalidArgument ("chat template: ..."), FailedPrecondition when the whole's
// rendering does not start with `prompt_text` (the response cannot be cut out), InvalidArgument when
// nothing is left.
absl::StatusOr<std::string> ChatResponseText(const Tokenizer& tok, const nlohmann::ordered_json& prompt,
                                             const std::string& prompt_text,
                                             const nlohmann::ordered_json& response);

// The ids of `reply` as the assistant's message after the prompt `messages_json` (a JSON list of messages),
// rendered with `extras`; errors as ChatResponseText's.
absl::StatusOr<std::vector<int32_t>> ChatReplyIds(const Tokenizer& tok, const std::string& messages_json,
                                                  const ChatExtras& extras, const std::string& reply);

}  // namespace zerofit::data
