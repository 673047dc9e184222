#include "worker/data/chat_response.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace zerofit::data {

absl::StatusOr<std::vector<int32_t>> ChatReplyIds(const Tokenizer& tok, const std::string& messages_json,
                                                  const ChatExtras& extras, const std::string& reply) {
  nlohmann::ordered_json all =
      nlohmann::ordered_json::parse(messages_json, nullptr, /*allow_exceptions=*/false);
  if (!all.is_array()) return absl::InvalidArgumentError("chat prompt: not a list of messages");
  ZF_ASSIGN_OR_RETURN(const std::string prompt,
                      tok.RenderChat(all.dump(), /*add_generation_prompt=*/true, extras));
  all.push_back({{"role", "assistant"}, {"content", reply}});
  ZF_ASSIGN_OR_RETURN(const std::string full,
                      tok.RenderChat(all.dump(), /*add_generation_prompt=*/false, extras));
  if (full.compare(0, prompt.size(), prompt) != 0 || full.size() == prompt.size()) {
    return absl::InvalidArgumentError(
        "the chat template's rendering of prompt + reply does not extend its rendering of the prompt with "
        "add_generation_prompt=true, so the reply cannot be cut out");
  }
  return tok.Encode(full.substr(prompt.size()));
}

}  // namespace zerofit::data
