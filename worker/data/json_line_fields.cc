#include "worker/data/json_line_fields.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "core/excerpt.h"
#include "worker/data/chat_response.h"

namespace zerofit::data::json_line {

absl::Status LineError(const Where& w, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(w.source, ":", w.line, ": ", message));
}

absl::Status FieldError(const Where& w, const char* field, const std::string& message) {
  return LineError(w, absl::StrCat("field '", field, "': ", message));
}

absl::StatusOr<std::string> GetString(const Json& obj, const char* field, const Where& w) {
  auto it = obj.find(field);
  if (it == obj.end()) return FieldError(w, field, "missing");
  if (!it->is_string()) return FieldError(w, field, absl::StrCat("expected a string, got ", it->type_name()));
  return it->get<std::string>();
}

absl::StatusOr<std::vector<int32_t>> GetIds(const Json& obj, const char* field, const Specials& sp,
                                            const Where& w) {
  auto it = obj.find(field);
  if (it == obj.end()) return FieldError(w, field, "missing");
  if (!it->is_array()) {
    return FieldError(w, field, absl::StrCat("expected an array of integers, got ", it->type_name()));
  }
  std::vector<int32_t> ids;
  ids.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& v = (*it)[i];
    if (!v.is_number_integer()) {
      return FieldError(
          w, field,
          absl::StrCat("element ", i, ": expected an integer token id, got ", v.type_name(),
                       v.is_number() ? absl::StrCat(" ", core::Excerpt(v.dump())) : std::string()));
    }
    const bool negative = !v.is_number_unsigned() && v.get<int64_t>() < 0;
    const bool too_big = v.is_number_unsigned() ? v.get<uint64_t>() > std::numeric_limits<int32_t>::max()
                                                : v.get<int64_t>() > std::numeric_limits<int32_t>::max();
    const bool outside_vocab =
        !negative && !too_big && sp.vocab_size > 0 && v.get<int64_t>() >= sp.vocab_size;
    if (negative || too_big || outside_vocab) {
      return FieldError(w, field,
                        absl::StrCat("element ", i, ": token id ", v.dump(), " is outside [0, ",
                                     sp.vocab_size > 0 ? absl::StrCat(sp.vocab_size) : std::string("2^31"),
                                     ")", sp.vocab_size > 0 ? " (the tokenizer's vocabulary)" : ""));
    }
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

absl::StatusOr<std::vector<int32_t>> EncodeField(const Json& obj, const char* field, const Tokenizer* tok,
                                                 const Where& w, const char* ids_hint) {
  auto text = GetString(obj, field, w);
  if (!text.ok()) return text.status();
  if (tok == nullptr) {
    return FieldError(w, field, absl::StrCat("text needs a tokenizer (pass one, or write ", ids_hint, ")"));
  }
  auto ids = tok->Encode(*text);
  if (!ids.ok()) return FieldError(w, field, absl::StrCat("tokenizer: ", ids.status().message()));
  return ids;
}

absl::Status CheckMessages(const Json& msgs, const char* field, const Where& w) {
  if (!msgs.is_array()) {
    return FieldError(w, field, absl::StrCat("expected a list of messages, got ", msgs.type_name()));
  }
  for (size_t i = 0; i < msgs.size(); ++i) {
    const Json& m = msgs[i];
    auto role = m.is_object() ? m.find("role") : m.end();
    if (!m.is_object() || role == m.end() || !role->is_string()) {
      return FieldError(w, field,
                        absl::StrCat("message ", i, ": expected an object with a string \"role\", got ",
                                     core::Excerpt(m.dump(-1, ' ', false, Json::error_handler_t::replace))));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Render(const Json& msgs, bool add_generation_prompt, const char* field,
                                   const Tokenizer* tok, const Where& w) {
  auto text = tok->RenderChat(msgs.dump(), add_generation_prompt);
  if (!text.ok()) return FieldError(w, field, absl::StrCat("chat template: ", text.status().message()));
  return text;
}

absl::StatusOr<std::string> RenderResponse(const Json& prompt, const std::string& prompt_text,
                                           const Json& response, const char* field, const Tokenizer* tok,
                                           const Where& w) {
  if (response.empty()) return FieldError(w, field, "no response messages after the prompt");
  absl::StatusOr<std::string> text = ChatResponseText(*tok, prompt, prompt_text, response);
  if (absl::IsFailedPrecondition(text.status())) {
    return FieldError(w, field,
                      absl::StrCat(text.status().message(), " (write text rendered by hand instead)"));
  }
  if (!text.ok()) return FieldError(w, field, std::string(text.status().message()));
  return text;
}

}  // namespace zerofit::data::json_line
