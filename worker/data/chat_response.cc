#include "worker/data/chat_response.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "worker/data/line_chat_tokenizer.h"

namespace zerofit::data {
namespace {

using Json = nlohmann::ordered_json;

absl::StatusOr<std::string> Render(const Tokenizer& tok, const Json& messages, bool add_generation_prompt) {
  absl::StatusOr<std::string> text = tok.RenderChat(messages.dump(), add_generation_prompt);
  // InvalidArgument whatever the template's code: FailedPrecondition is ChatResponseText's "cannot be cut".
  if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat("chat template: ", text.status().message()));
  return text;
}

}  // namespace

absl::StatusOr<std::string> ChatResponseText(const Tokenizer& tok, const Json& prompt,
                                             const std::string& prompt_text, const Json& response) {
  Json all = prompt;
  all.insert(all.end(), response.begin(), response.end());
  ZF_ASSIGN_OR_RETURN(const std::string full, Render(tok, all, /*add_generation_prompt=*/false));
  if (full.compare(0, prompt_text.size(), prompt_text) != 0) {
    return absl::FailedPreconditionError(
        "the chat template's rendering of prompt + response does not start with its rendering of the prompt "
        "with add_generation_prompt=true, so the response cannot be cut out");
  }
  if (full.size() == prompt_text.size())
    return absl::InvalidArgumentError("empty response (nothing to score)");
  return full.substr(prompt_text.size());
}

absl::StatusOr<std::vector<int32_t>> ChatReplyIds(const Tokenizer& tok, const std::string& messages_json,
                                                  const ChatExtras& extras, const std::string& reply) {
  const Json prompt = Json::parse(messages_json, nullptr, /*allow_exceptions=*/false);
  if (!prompt.is_array()) return absl::InvalidArgumentError("chat prompt: not a list of messages");
  const LineChatTokenizer line_tok(tok, extras);
  ZF_ASSIGN_OR_RETURN(const std::string prompt_text,
                      Render(line_tok, prompt, /*add_generation_prompt=*/true));
  const Json response = Json::array({{{"role", "assistant"}, {"content", reply}}});
  ZF_ASSIGN_OR_RETURN(const std::string text, ChatResponseText(line_tok, prompt, prompt_text, response));
  return tok.Encode(text);
}

}  // namespace zerofit::data
