// A conversation's chat-template rendering cut into the assistant turns and the text between them, for SFT's
// assistant_only_loss (TRL's SFTConfig name: only the assistant's tokens are scored).
//
// TRL finds the assistant's tokens with `{% generation %}` markers, which few templates carry (Qwen2.5,
// Mistral, Llama's and SmolLM2's do not). The turns are found from the template itself instead, as the
// pair readers cut a response out of a conversation (json_line::RenderResponse): assistant message i's text
// is render(messages[..i+1]) minus render(messages[..i], add_generation_prompt=true). So a turn holds the
// content and what the template writes after it (Qwen2.5: "4<|im_end|>\n"), and the role header before it
// ("<|im_start|>assistant\n") stays with the prompt, as the generation prompt does for a DPO pair.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/json_line_fields.h"
#include "worker/data/tokenizer.h"

namespace zerofit::data {

// A piece of the rendering: an assistant message's text, or the text between two of them.
struct ChatSpan {
  std::string text;  // non-empty
  bool assistant = false;
};

// The spans of render(messages) in order; their texts joined are the rendering. An error names `field`
// and the message when the template writes a turn differently once later messages follow (its rendering of
// messages[..i+1] is not a prefix of the whole), when an assistant message renders to nothing, or when the
// first message is the assistant's (no prompt before it to condition on).
absl::StatusOr<std::vector<ChatSpan>> ChatSpans(const json_line::Json& messages, const char* field,
                                                const Tokenizer* tok, const json_line::Where& w);

}  // namespace zerofit::data
