#include "worker/data/chat_turns.h"

#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zerofit::data {
namespace {

using json_line::FieldError;
using json_line::Json;
using json_line::Where;

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

Json FirstMessages(const Json& messages, size_t n) {
  return Json(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(n));
}

void Append(std::vector<ChatSpan>* spans, const std::string& full, size_t from, size_t to, bool assistant) {
  if (to > from) spans->push_back(ChatSpan{full.substr(from, to - from), assistant});
}

absl::Status NotAPrefix(const Where& w, const char* field, size_t i, const char* what) {
  return FieldError(
      w, field,
      absl::StrCat("message ", i, " (assistant): the chat template's rendering of messages 0..", what,
                   " is not a prefix of its rendering of the whole conversation, so the "
                   "assistant's tokens cannot be told apart (assistant_only_loss needs a "
                   "template that writes each turn the same whatever follows)"));
}

}  // namespace

absl::StatusOr<std::vector<ChatSpan>> ChatSpans(const Json& messages, const char* field, const Tokenizer* tok,
                                                const Where& w) {
  ZF_ASSIGN_OR_RETURN(const std::string full,
                      json_line::Render(messages, /*add_generation_prompt=*/false, field, tok, w));
  std::vector<ChatSpan> spans;
  size_t done = 0;  // rendering already in `spans`
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i]["role"] != "assistant") continue;
    if (i == 0) {
      return FieldError(w, field,
                        "message 0 is the assistant's: there is no prompt before it to score it on");
    }
    ZF_ASSIGN_OR_RETURN(const std::string before,
                        json_line::Render(FirstMessages(messages, i),
                                          /*add_generation_prompt=*/true, field, tok, w));
    ZF_ASSIGN_OR_RETURN(const std::string through,
                        json_line::Render(FirstMessages(messages, i + 1),
                                          /*add_generation_prompt=*/false, field, tok, w));
    if (!StartsWith(full, before) || before.size() < done) {
      return NotAPrefix(w, field, i, absl::StrCat(i - 1, " with the generation prompt").c_str());
    }
    if (!StartsWith(full, through) || !StartsWith(through, before)) {
      return NotAPrefix(w, field, i, absl::StrCat(i).c_str());
    }
    if (through.size() == before.size()) {
      return FieldError(w, field, absl::StrCat("message ", i, " (assistant) renders to nothing"));
    }
    Append(&spans, full, done, before.size(), false);
    Append(&spans, full, before.size(), through.size(), true);
    done = through.size();
  }
  Append(&spans, full, done, full.size(), false);
  return spans;
}

}  // namespace zerofit::data
