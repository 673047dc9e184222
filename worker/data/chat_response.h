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
#include "worker/data/tokenizer.h"

namespace zerofit::data {

// `messages_json`: the prompt (a JSON list of messages), rendered with `extras`. InvalidArgument when the
// template's rendering of prompt + reply does not start with its rendering of the prompt, or the reply
// renders to nothing.
absl::StatusOr<std::vector<int32_t>> ChatReplyIds(const Tokenizer& tok, const std::string& messages_json,
                                                  const ChatExtras& extras, const std::string& reply);

}  // namespace zerofit::data
