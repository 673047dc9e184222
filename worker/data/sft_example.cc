#include "worker/data/sft_example.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "worker/data/chat_turns.h"

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

// The ids of `spans`, each tokenized on its own (so a token never straddles an assistant turn's edge, as
// a pair's prompt and response are tokenized apart), split where the first scored token is: the prompt is
// what comes before it. A span's text before `completion_from` (characters of the rendering) is the prompt's
// part, scored when an assistant's and !completion_only_loss; the rest is scored when an assistant's.
absl::StatusOr<SftIds> FromSpans(const std::vector<ChatSpan>& spans, size_t completion_from,
                                 const SftScoring& scoring, const char* field, const Tokenizer* tok,
                                 const Where& w) {
  std::vector<int32_t> ids;
  std::vector<uint8_t> scored;
  size_t at = 0;  // characters of the rendering before the span
  auto add = [&](const std::string& text, bool score) -> absl::Status {
    if (text.empty()) return absl::OkStatus();
    ZF_ASSIGN_OR_RETURN(std::vector<int32_t> piece, Encode(text, field, tok, w));
    ids.insert(ids.end(), piece.begin(), piece.end());
    scored.insert(scored.end(), piece.size(), score ? 1 : 0);
    return absl::OkStatus();
  };
  for (const ChatSpan& span : spans) {
    const size_t in_prompt = std::min(span.text.size(), completion_from - std::min(completion_from, at));
    ZF_RETURN_IF_ERROR(add(span.text.substr(0, in_prompt), span.assistant && !scoring.completion_only_loss));
    ZF_RETURN_IF_ERROR(add(span.text.substr(in_prompt), span.assistant));
    at += span.text.size();
  }
  const auto first = std::find(scored.begin(), scored.end(), uint8_t{1});
  if (first == scored.end())
    return FieldError(w, field, "no assistant message to score (assistant_only_loss)");
  const auto f = first - scored.begin();
  SftIds out;
  out.prompt.assign(ids.begin(), ids.begin() + f);
  out.completion.assign(ids.begin() + f, ids.end());
  if (std::find(first, scored.end(), uint8_t{0}) != scored.end()) out.scored.assign(first, scored.end());
  return out;
}

// {"messages": [...]}: the whole conversation is the completion (assistant_only_loss: its assistant turns).
absl::StatusOr<SftIds> Conversation(const Json& obj, const Tokenizer* tok, const SftScoring& scoring,
                                    const Where& w) {
  ZF_RETURN_IF_ERROR(json_line::CheckMessages(obj["messages"], "messages", w));
  if (obj["messages"].empty()) return FieldError(w, "messages", "no messages (nothing to score)");
  ZF_RETURN_IF_ERROR(NeedsChatTemplate(tok, "messages", w));
  if (scoring.assistant_only_loss) {
    ZF_ASSIGN_OR_RETURN(const std::vector<ChatSpan> spans, ChatSpans(obj["messages"], "messages", tok, w));
    return FromSpans(spans, 0, scoring, "messages", tok, w);
  }
  auto text = json_line::Render(obj["messages"], /*add_generation_prompt=*/false, "messages", tok, w);
  if (!text.ok()) return text.status();
  SftIds out;
  ZF_ASSIGN_OR_RETURN(out.completion, Encode(*text, "messages", tok, w));
  return out;
}

// {"prompt": [messages], "completion": [messages]} with assistant_only_loss: the spans of the whole
// conversation, the completion from the end of the prompt's rendering with the generation prompt.
absl::StatusOr<SftIds> AssistantTurnsAfterPrompt(const Json& prompt, const std::string& prompt_text,
                                                 const Json& completion, const Tokenizer* tok,
                                                 const SftScoring& scoring, const Where& w) {
  Json all = prompt;
  all.insert(all.end(), completion.begin(), completion.end());
  ZF_ASSIGN_OR_RETURN(const std::vector<ChatSpan> spans, ChatSpans(all, "completion", tok, w));
  return FromSpans(spans, prompt_text.size(), scoring, "completion", tok, w);
}

// {"prompt": [messages], "completion": [messages]}: the prompt with the generation prompt, then the
// completion's part of the rendering of both.
absl::StatusOr<SftIds> ConversationalCompletion(const Json& obj, const Tokenizer* tok,
                                                const SftScoring& scoring, const Where& w) {
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
  if (scoring.assistant_only_loss) {
    return AssistantTurnsAfterPrompt(obj["prompt"], *prompt, obj["completion"], tok, scoring, w);
  }
  SftIds out;
  ZF_ASSIGN_OR_RETURN(out.prompt, Encode(*prompt, "prompt", tok, w));
  ZF_ASSIGN_OR_RETURN(out.completion, Encode(*completion, "completion", tok, w));
  return out;
}

// assistant_only_loss on a line without messages: TRL refuses such a dataset too.
absl::Status NotConversational(const Where& w, const char* field) {
  return FieldError(w, field,
                    "assistant_only_loss scores the assistant's messages, and this line has none: write the "
                    "example as {\"messages\": [...]} or {\"prompt\": [...], \"completion\": [...]}, or "
                    "set assistant_only_loss false");
}

absl::StatusOr<SftIds> Dispatch(const Json& obj, const Tokenizer* tok, const json_line::Specials& sp,
                                const SftScoring& scoring, const Where& w) {
  SftIds out;
  const bool assistant_only = scoring.assistant_only_loss;
  if (obj.contains("prompt_ids") || obj.contains("completion_ids")) {
    if (assistant_only) return NotConversational(w, "completion_ids");
    if (obj.contains("prompt_ids")) {
      ZF_ASSIGN_OR_RETURN(out.prompt, json_line::GetIds(obj, "prompt_ids", sp, w));
    }
    ZF_ASSIGN_OR_RETURN(out.completion, json_line::GetIds(obj, "completion_ids", sp, w));
    return out;
  }
  if (obj.contains("messages")) return Conversation(obj, tok, scoring, w);
  if (obj.contains("text")) {
    if (assistant_only) return NotConversational(w, "text");
    ZF_ASSIGN_OR_RETURN(out.completion, json_line::EncodeField(obj, "text", tok, w, kIdsHint));
    return out;
  }
  if (obj.contains("completion")) {
    if (obj["completion"].is_array()) return ConversationalCompletion(obj, tok, scoring, w);
    if (assistant_only) return NotConversational(w, "completion");
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
                                       const SftScoring& scoring, const Where& w) {
  auto out = Dispatch(obj, tok, sp, scoring, w);
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
