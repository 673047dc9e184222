#include "worker/data/sft_example.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zerofit::data {
namespace {

using json_line::FieldError;
using json_line::Json;
using json_line::Where;

constexpr char kIdsHint[] = "prompt_ids/completion_ids";

absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text, const char* field, const Tokenizer* tok,
                                            const Where& w) {
  auto ids = tok->Encode(text);
  if (!ids.ok()) return FieldError(w, field, absl::StrCat("tokenizer: ", ids.status().message()));
  return ids;
}

absl::Status NeedsChatTemplate(const Tokenizer* tok, const char* field, const Where& w) {
  if (tok != nullptr) return absl::OkStatus();
  return FieldError(w, field, "messages need a tokenizer with a chat template (pass a model directory)");
}

// {"messages": [...]}: the whole conversation is the completion.
absl::StatusOr<SftIds> Conversation(const Json& obj, const Tokenizer* tok, const Where& w) {
  ZF_RETURN_IF_ERROR(json_line::CheckMessages(obj["messages"], "messages", w));
  if (obj["messages"].empty()) return FieldError(w, "messages", "no messages (nothing to score)");
  ZF_RETURN_IF_ERROR(NeedsChatTemplate(tok, "messages", w));
  auto text = json_line::Render(obj["messages"], /*add_generation_prompt=*/false, "messages", tok, w);
  if (!text.ok()) return text.status();
  SftIds out;
  ZF_ASSIGN_OR_RETURN(out.completion, Encode(*text, "messages", tok, w));
  return out;
}

// {"prompt": [messages], "completion": [messages]}: the prompt with the generation prompt, then the
// completion's part of the rendering of both.
absl::StatusOr<SftIds> ConversationalCompletion(const Json& obj, const Tokenizer* tok, const Where& w) {
  if (!obj.contains("prompt")) return FieldError(w, "prompt", "missing");
  ZF_RETURN_IF_ERROR(json_line::CheckMessages(obj["prompt"], "prompt", w));
  ZF_RETURN_IF_ERROR(json_line::CheckMessages(obj["completion"], "completion", w));
  if (obj["prompt"].empty()) return FieldError(w, "prompt", "no messages (the chat template needs a prompt)");
  ZF_RETURN_IF_ERROR(NeedsChatTemplate(tok, "prompt", w));
  auto prompt = json_line::Render(obj["prompt"], /*add_generation_prompt=*/true, "prompt", tok, w);
  if (!prompt.ok()) return prompt.status();
  auto completion =
      json_line::RenderResponse(obj["prompt"], *prompt, obj["completion"], "completion", tok, w);
  if (!completion.ok()) return completion.status();
  SftIds out;
  ZF_ASSIGN_OR_RETURN(out.prompt, Encode(*prompt, "prompt", tok, w));
  ZF_ASSIGN_OR_RETURN(out.completion, Encode(*completion, "completion", tok, w));
  return out;
}

absl::StatusOr<SftIds> Dispatch(const Json& obj, const Tokenizer* tok, const json_line::Specials& sp,
                                const Where& w) {
  SftIds out;
  if (obj.contains("prompt_ids") || obj.contains("completion_ids")) {
    if (obj.contains("prompt_ids")) {
      ZF_ASSIGN_OR_RETURN(out.prompt, json_line::GetIds(obj, "prompt_ids", sp, w));
    }
    ZF_ASSIGN_OR_RETURN(out.completion, json_line::GetIds(obj, "completion_ids", sp, w));
    return out;
  }
  if (obj.contains("messages")) return Conversation(obj, tok, w);
  if (obj.contains("text")) {
    ZF_ASSIGN_OR_RETURN(out.completion, json_line::EncodeField(obj, "text", tok, w, kIdsHint));
    return out;
  }
  if (obj.contains("completion")) {
    if (obj["completion"].is_array()) return ConversationalCompletion(obj, tok, w);
    ZF_ASSIGN_OR_RETURN(out.prompt, json_line::EncodeField(obj, "prompt", tok, w, kIdsHint));
    ZF_ASSIGN_OR_RETURN(out.completion, json_line::EncodeField(obj, "completion", tok, w, kIdsHint));
    return out;
  }
  return json_line::LineError(
      w,
      "not an SFT example: expected \"text\", \"prompt\" + \"completion\", \"messages\", \"prompt_ids\" + "
      "\"completion_ids\", or a preference pair (\"chosen\"/\"rejected\")");
}

}  // namespace

bool IsPreferencePairLine(const Json& obj) {
  for (const char* key : {"chosen", "rejected", "chosen_ids", "rejected_ids"}) {
    if (obj.contains(key)) return true;
  }
  return false;
}

bool IsSftExampleLine(const Json& obj) {
  for (const char* key : {"text", "completion", "messages", "completion_ids"}) {
    if (obj.contains(key)) return true;
  }
  return false;
}

absl::StatusOr<SftIds> ParseSftExample(const Json& obj, const Tokenizer* tok, const json_line::Specials& sp,
                                       const Where& w) {
  auto out = Dispatch(obj, tok, sp, w);
  if (out.ok() && out->completion.empty()) {
    const char* field = obj.contains("completion_ids") ? "completion_ids"
                        : obj.contains("messages")     ? "messages"
                        : obj.contains("text")         ? "text"
                                                       : "completion";
    return FieldError(w, field, "empty completion (nothing to score)");
  }
  return out;
}

}  // namespace zerofit::data
