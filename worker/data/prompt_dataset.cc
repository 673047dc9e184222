#include "worker/data/prompt_dataset.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/json_depth.h"
#include "core/line_reader.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"
#include "worker/data/line_chat_tokenizer.h"

namespace zerofit::data {
namespace {

using Json = nlohmann::ordered_json;

struct PromptLine {
  const std::string& path;
  size_t line;
};

absl::Status PromptLineError(const PromptLine& w, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(w.path, ":", w.line, ": ", message));
}

absl::Status PromptFieldError(const PromptLine& w, const std::string& field, const std::string& message) {
  return PromptLineError(w, absl::StrCat("field '", field, "': ", message));
}

// The ids must lie in the vocabulary: the options' (the model's, in training), else the tokenizer's, else
// int32's range (an id past it would wrap when stored).
int64_t VocabularyBound(const Tokenizer* tok, const PromptDataOptions& o) {
  if (o.vocab_size > 0) return o.vocab_size;
  if (tok != nullptr && tok->vocab_size() > 0) return tok->vocab_size();
  return int64_t{std::numeric_limits<int32_t>::max()} + 1;
}

absl::StatusOr<std::vector<int32_t>> PromptIdList(const Json& obj, const char* field, const Tokenizer* tok,
                                                  const PromptDataOptions& o, const PromptLine& w) {
  const Json& v = obj.at(field);
  if (!v.is_array())
    return PromptFieldError(w, field, absl::StrCat("expected a list of token ids, got ", v.type_name()));
  const int64_t vocab = VocabularyBound(tok, o);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& e = v[i];
    // An unsigned id past int64's range reads as negative: refused too.
    const bool in_range = e.is_number_integer() && e.get<int64_t>() >= 0 && e.get<int64_t>() < vocab;
    if (!in_range) {
      return PromptFieldError(w, absl::StrCat(field, "[", i, "]"),
                              absl::StrCat("expected a token id in [0, ", vocab, "), got ", e.dump()));
    }
    ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
  }
  return ids;
}

// The prompt's tokens (without BOS) and whether the form adds BOS itself (a chat template does). A chat
// prompt's messages and extras go to `out` (Prompt::messages_json, chat_extras).
absl::StatusOr<std::pair<std::vector<int32_t>, bool>> PromptIds(const Json& obj, const Tokenizer* tok,
                                                                const PromptDataOptions& o,
                                                                const PromptLine& w, Prompt* out) {
  const int forms = obj.contains("prompt") + obj.contains("messages") + obj.contains("prompt_ids");
  if (forms != 1) {
    return PromptLineError(
        w, "expected exactly one of 'prompt' (text, or chat messages), 'messages' (chat) or 'prompt_ids'");
  }
  if (obj.contains("prompt_ids")) {
    ZF_ASSIGN_OR_RETURN(std::vector<int32_t> ids, PromptIdList(obj, "prompt_ids", tok, o, w));
    return std::make_pair(std::move(ids), false);
  }
  const char* field = obj.contains("prompt") ? "prompt" : "messages";
  if (tok == nullptr)
    return PromptFieldError(w, field, "text needs a tokenizer (a model directory with tokenizer.json)");
  // TRL's conversational prompt is a list of messages under "prompt"; "messages" is the same.
  const bool chat = obj.contains("messages") || obj["prompt"].is_array();
  std::string text;
  if (!chat) {
    if (!obj["prompt"].is_string()) {
      return PromptFieldError(w, field,
                              absl::StrCat("expected a string or a list of {role, content} messages, got ",
                                           obj["prompt"].type_name()));
    }
    text = obj["prompt"].get<std::string>();
  } else {
    if (!obj[field].is_array())
      return PromptFieldError(w, field, "expected a list of {role, content} messages");
    absl::StatusOr<ChatExtras> extras = ChatExtrasOf(obj);  // TRL's tools and chat_template_kwargs columns
    if (!extras.ok()) return PromptLineError(w, std::string(extras.status().message()));
    absl::StatusOr<std::string> rendered =
        tok->RenderChat(obj[field].dump(), /*add_generation_prompt=*/true, *extras);
    if (!rendered.ok())
      return PromptFieldError(w, field, absl::StrCat("chat template: ", rendered.status().message()));
    text = std::move(*rendered);
    out->messages_json = obj[field].dump();  // for the reward models' rendering of its completions
    out->chat_extras = std::move(*extras);
  }
  absl::StatusOr<std::vector<int32_t>> ids = tok->Encode(text);
  if (!ids.ok()) return PromptFieldError(w, field, absl::StrCat("tokenizer: ", ids.status().message()));
  return std::make_pair(std::move(*ids), chat);
}

absl::StatusOr<std::optional<std::string>> AnswerOf(const Json& obj, const PromptLine& w) {
  auto it = obj.find("answer");
  if (it == obj.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_number()) return std::optional<std::string>(it->dump());
  return PromptFieldError(w, "answer", absl::StrCat("expected a string or a number, got ", it->type_name()));
}

// Keeps BOS and the last tokens of a prompt longer than the limit.
bool TruncatePrompt(std::vector<int32_t>* ids, bool has_bos, int64_t limit) {
  if (limit <= 0 || static_cast<int64_t>(ids->size()) <= limit) return false;
  const size_t keep_from = ids->size() - static_cast<size_t>(limit - (has_bos ? 1 : 0));
  ids->erase(ids->begin() + (has_bos ? 1 : 0), ids->begin() + static_cast<std::ptrdiff_t>(keep_from));
  return true;
}

absl::StatusOr<Prompt> ParsePromptLine(const std::string& line, const PromptLine& w, const Tokenizer* tok,
                                       const PromptDataOptions& o, bool* truncated) {
  if (!core::CheckJsonDepth(line, core::kMaxJsonDepth, w.path).ok()) {
    return PromptLineError(w, absl::StrCat("JSON nested deeper than ", core::kMaxJsonDepth, " levels"));
  }
  Json obj;
  try {
    obj = Json::parse(line);
  } catch (const Json::exception& e) {
    return PromptLineError(w, absl::StrCat("invalid JSON: ", e.what()));
  }
  if (!obj.is_object())
    return PromptLineError(w, absl::StrCat("expected a JSON object, got ", obj.type_name()));
  Prompt p;
  ZF_ASSIGN_OR_RETURN(auto prompt, PromptIds(obj, tok, o, w, &p));
  p.source_line = w.line;
  const int32_t bos = tok != nullptr ? tok->bos_id() : o.bos_id;
  const bool add_bos = o.add_bos && bos >= 0 && !prompt.second;
  if (add_bos) p.ids.push_back(bos);
  p.ids.insert(p.ids.end(), prompt.first.begin(), prompt.first.end());
  if (p.ids.empty()) return PromptLineError(w, "empty prompt (generation needs at least one token)");
  *truncated = TruncatePrompt(&p.ids, add_bos, o.max_prompt_length);
  ZF_ASSIGN_OR_RETURN(p.answer, AnswerOf(obj, w));
  if (obj.contains("answer_ids")) {
    ZF_ASSIGN_OR_RETURN(p.answer_ids, PromptIdList(obj, "answer_ids", tok, o, w));
  }
  return p;
}

}  // namespace

absl::StatusOr<PromptData> LoadPrompts(const std::string& path, const Tokenizer* tok,
                                       const PromptDataOptions& options) {
  std::ifstream in;
  ZF_RETURN_IF_ERROR(core::OpenLineInput(path, &in));
  PromptData data;
  size_t line_no = 0;
  std::string line;
  for (;;) {
    const absl::StatusOr<bool> read = core::ReadLine(in, &line);
    if (!read.ok())
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no + 1, ": ", read.status().message()));
    if (!*read) break;
    ++line_no;
    if (std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; }))
      continue;
    bool truncated = false;
    ZF_ASSIGN_OR_RETURN(Prompt p, ParsePromptLine(line, PromptLine{path, line_no}, tok, options, &truncated));
    data.truncated += truncated ? 1 : 0;
    data.longest_prompt = std::max(data.longest_prompt, p.ids.size());
    data.prompts.push_back(std::move(p));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed after line ", line_no));
  if (data.prompts.empty())
    return absl::InvalidArgumentError(absl::StrCat(path, ": no prompts (the file is empty)"));
  return data;
}

}  // namespace zerofit::data
