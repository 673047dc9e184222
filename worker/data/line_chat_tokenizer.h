// One data line's chat context: the `tools` and `chat_template_kwargs` fields TRL's trainers pass to
// apply_chat_template (tools=example["tools"], **example["chat_template_kwargs"]), and a Tokenizer that
// renders every chat of that line with them. The line readers wrap their tokenizer in a LineChatTokenizer
// for a line that has either field, so that everything below them (prompt and response cuts, assistant
// turns) renders as TRL does without passing the fields along. A tool-calling dataset rendered without its
// tools would train on a prompt the model never sees at inference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "worker/data/tokenizer.h"

namespace zerofit::data {

// The line's `tools` (a list of function schemas, or a JSON string of one) and `chat_template_kwargs` (an
// object); absent or null: not given. Another type is an InvalidArgument "field 'tools': ..." (the caller
// adds the file and line).
absl::StatusOr<ChatExtras> ChatExtrasOf(const nlohmann::ordered_json& line);

inline bool HasChatExtras(const ChatExtras& e) { return !e.tools_json.empty() || !e.kwargs_json.empty(); }

// Forwards to `inner` (which must outlive it), rendering chats with `extras` whatever the caller passes.
class LineChatTokenizer final : public Tokenizer {
 public:
  LineChatTokenizer(const Tokenizer& inner, ChatExtras extras) : inner_(inner), extras_(std::move(extras)) {}

  absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text) const override {
    return inner_.Encode(text);
  }
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids) const override {
    return inner_.Decode(ids);
  }
  absl::StatusOr<std::string> RenderChat(const std::string& messages_json, bool add_generation_prompt,
                                         const ChatExtras&) const override {
    return inner_.RenderChat(messages_json, add_generation_prompt, extras_);
  }
  using Tokenizer::RenderChat;
  int32_t bos_id() const override { return inner_.bos_id(); }
  int32_t eos_id() const override { return inner_.eos_id(); }
  int32_t pad_id() const override { return inner_.pad_id(); }
  int32_t vocab_size() const override { return inner_.vocab_size(); }

 private:
  const Tokenizer& inner_;
  ChatExtras extras_;
};

}  // namespace zerofit::data
