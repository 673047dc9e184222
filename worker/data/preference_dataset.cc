#include "worker/data/preference_dataset.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <istream>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/excerpt.h"
#include "core/json_depth.h"
#include "core/ordered_line_map.h"
#include "core/thread_pool.h"
#include "nlohmann/json.hpp"

namespace zerofit::data {
namespace {

// Ordered: conversational messages reach the chat template with their keys in file order (tojson prints it).
using Json = nlohmann::ordered_json;

// Where a line came from, for error messages "source:line: ...".
struct Where {
  const std::string& source;
  size_t line;
};

absl::Status LineError(const Where& w, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(w.source, ":", w.line, ": ", message));
}

absl::Status FieldError(const Where& w, const char* field, const std::string& message) {
  return LineError(w, absl::StrCat("field '", field, "': ", message));
}

// The special ids and vocabulary every line is checked and assembled against.
struct Specials {
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t vocab_size = 0;  // 0: unknown
};

Specials ResolveSpecials(const PreferenceDataOptions& options, const Tokenizer* tok) {
  if (tok != nullptr) return Specials{tok->bos_id(), tok->eos_id(), tok->vocab_size()};
  return Specials{options.bos_id, options.eos_id, options.vocab_size};
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
                                                 const Where& w) {
  auto text = GetString(obj, field, w);
  if (!text.ok()) return text.status();
  if (tok == nullptr) {
    return FieldError(w, field,
                      "text needs a tokenizer (pass one, or write prompt_ids/chosen_ids/rejected_ids)");
  }
  auto ids = tok->Encode(*text);
  if (!ids.ok()) return FieldError(w, field, absl::StrCat("tokenizer: ", ids.status().message()));
  return ids;
}

// Checks a list of chat messages: each an object with a string "role".
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

// Conversational line to the texts of prompt, chosen and rejected: the prompt messages rendered with
// add_generation_prompt=true, each response the rendering of prompt + response messages minus that prefix
// (as TRL's apply_chat_template does). Without "prompt", the leading messages chosen and rejected share
// are the prompt.
absl::StatusOr<std::array<std::string, 3>> RenderConversation(const Json& obj, const Tokenizer* tok,
                                                              const Where& w) {
  const char* const fields[3] = {"prompt", "chosen", "rejected"};
  for (int k = 1; k < 3; ++k) {
    if (!obj.contains(fields[k])) return FieldError(w, fields[k], "missing");
    if (absl::Status s = CheckMessages(obj[fields[k]], fields[k], w); !s.ok()) return s;
  }
  if (tok == nullptr) {
    return FieldError(w, "chosen", "messages need a tokenizer with a chat template (pass a model directory)");
  }
  Json prompt = Json::array();
  Json responses[2] = {obj["chosen"], obj["rejected"]};
  if (obj.contains("prompt")) {
    if (absl::Status s = CheckMessages(obj["prompt"], "prompt", w); !s.ok()) return s;
    prompt = obj["prompt"];
  } else {
    size_t k = 0;
    while (k < responses[0].size() && k < responses[1].size() && responses[0][k] == responses[1][k]) ++k;
    if (k == 0) {
      return FieldError(w, "prompt",
                        "missing, and chosen and rejected share no leading messages to take it from");
    }
    prompt = Json(responses[0].begin(), responses[0].begin() + static_cast<std::ptrdiff_t>(k));
    for (Json& r : responses) r = Json(r.begin() + static_cast<std::ptrdiff_t>(k), r.end());
  }
  if (prompt.empty()) return FieldError(w, "prompt", "no messages (the chat template needs a prompt)");
  std::array<std::string, 3> out;
  auto prompt_text = Render(prompt, /*add_generation_prompt=*/true, "prompt", tok, w);
  if (!prompt_text.ok()) return prompt_text.status();
  out[0] = std::move(*prompt_text);
  for (int k = 1; k < 3; ++k) {
    const Json& r = responses[k - 1];
    if (r.empty()) return FieldError(w, fields[k], "no response messages after the prompt");
    Json all = prompt;
    all.insert(all.end(), r.begin(), r.end());
    auto full = Render(all, /*add_generation_prompt=*/false, fields[k], tok, w);
    if (!full.ok()) return full.status();
    if (full->compare(0, out[0].size(), out[0]) != 0) {
      return FieldError(
          w, fields[k],
          "the chat template's rendering of prompt + response does not start with its rendering "
          "of the prompt with add_generation_prompt=true, so the response cannot be cut out "
          "(write text pairs rendered by hand instead)");
    }
    out[k] = full->substr(out[0].size());
    if (out[k].empty()) return FieldError(w, fields[k], "empty response (nothing to score)");
  }
  return out;
}

bool IsBlank(const std::string& line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

// A parsed line: its pair and the untruncated token counts (for PreferenceDataStats).
struct ParsedLine {
  PreferencePair pair;
  size_t raw_sizes[3] = {0, 0, 0};  // prompt, chosen, rejected tokens before specials and truncation
};

// One JSONL line to a pair. Pure: safe to call for several lines at once (the tokenizer is thread-safe).
absl::StatusOr<ParsedLine> ParseLine(const std::string& line, const Where& w, const Tokenizer* tok,
                                     const Specials& sp, const PreferenceDataOptions& options) {
  // nlohmann reports parse errors by exception; they are translated here, where the library is called
  // (STYLE 2), and never escape.
  // Nesting is bounded before parsing: copying or rendering a deeper value recursed off the stack.
  if (!core::CheckJsonDepth(line, core::kMaxJsonDepth, w.source).ok()) {
    return LineError(w, absl::StrCat("JSON nested deeper than ", core::kMaxJsonDepth, " levels"));
  }
  Json obj;
  try {
    obj = Json::parse(line);
  } catch (const Json::exception& e) {
    return LineError(w, absl::StrCat("invalid JSON: ", e.what()));
  }
  if (!obj.is_object()) return LineError(w, absl::StrCat("expected a JSON object, got ", obj.type_name()));

  const bool pretokenized =
      obj.contains("prompt_ids") || obj.contains("chosen_ids") || obj.contains("rejected_ids");
  std::vector<int32_t> ids[3];
  const char* const text_fields[3] = {"prompt", "chosen", "rejected"};
  const char* const id_fields[3] = {"prompt_ids", "chosen_ids", "rejected_ids"};
  auto chosen_it = obj.find("chosen");
  const bool conversational = !pretokenized && chosen_it != obj.end() && chosen_it->is_array();
  if (conversational) {
    auto texts = RenderConversation(obj, tok, w);
    if (!texts.ok()) return texts.status();
    for (int k = 0; k < 3; ++k) {
      auto got = tok->Encode((*texts)[k]);
      if (!got.ok())
        return FieldError(w, text_fields[k], absl::StrCat("tokenizer: ", got.status().message()));
      ids[k] = std::move(*got);
    }
  }
  for (int k = 0; k < 3 && !conversational; ++k) {
    auto got = pretokenized ? GetIds(obj, id_fields[k], sp, w) : EncodeField(obj, text_fields[k], tok, w);
    if (!got.ok()) return got.status();
    ids[k] = std::move(*got);
  }
  for (int k = 1; k < 3; ++k) {
    if (ids[k].empty()) {
      return FieldError(w, pretokenized ? id_fields[k] : text_fields[k], "empty response (nothing to score)");
    }
  }
  ParsedLine parsed;
  parsed.pair = AssemblePreferencePair(ids[0], ids[1], ids[2], sp.bos_id, sp.eos_id, options, w.line);
  for (int k = 0; k < 3; ++k) parsed.raw_sizes[k] = ids[k].size();
  return parsed;
}

// Adds one parsed line to the truncation counts.
void CountLine(const ParsedLine& parsed, const PreferenceDataOptions& options, PreferenceDataStats* stats) {
  const PreferencePair& pair = parsed.pair;
  const size_t bos = options.add_bos ? 1 : 0;
  const size_t eos = options.add_eos ? 1 : 0;
  stats->pairs++;
  if (pair.prompt.size() < parsed.raw_sizes[0] + bos) stats->prompts_truncated++;
  if (pair.chosen.size() < parsed.raw_sizes[1] + eos) stats->responses_truncated++;
  if (pair.rejected.size() < parsed.raw_sizes[2] + eos) stats->responses_truncated++;
  stats->longest_sequence = std::max(stats->longest_sequence,
                                     pair.prompt.size() + std::max(pair.chosen.size(), pair.rejected.size()));
}

// ParseLine for a line read by OrderedLineMap: nullopt for a blank line; the cut-off hint on a last line
// without newline that is not valid JSON.
absl::StatusOr<std::optional<ParsedLine>> ParseInputLine(const core::InputLine& line,
                                                         const std::string& source, const Tokenizer* tok,
                                                         const Specials& sp,
                                                         const PreferenceDataOptions& options) {
  if (IsBlank(line.text)) return std::nullopt;
  auto parsed = ParseLine(line.text, Where{source, line.number}, tok, sp, options);
  if (!parsed.ok()) {
    // getline hit the end without a newline: this is the last line, and a writer may have been cut off.
    if (line.unterminated && absl::StrContains(parsed.status().message(), "invalid JSON")) {
      return absl::InvalidArgumentError(
          absl::StrCat(parsed.status().message(),
                       " (the last line has no newline: was the file cut off while being written?)"));
    }
    return parsed.status();
  }
  return std::optional<ParsedLine>(*std::move(parsed));
}

absl::StatusOr<std::vector<PreferencePair>> ParseStream(std::istream& in, const std::string& source,
                                                        const Tokenizer* tok,
                                                        const PreferenceDataOptions& options,
                                                        PreferenceDataStats* stats) {
  if (absl::Status s = ValidatePreferenceDataOptions(options, tok); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
  }
  const Specials sp = ResolveSpecials(options, tok);
  PreferenceDataStats local;
  std::vector<PreferencePair> pairs;
  core::ThreadPool pool(core::ResolveThreadCount(options.threads));
  core::LineChunking chunking;
  chunking.source = source;
  auto lines = core::OrderedLineMap<std::optional<ParsedLine>>(
      in, pool, chunking,
      [&](const core::InputLine& line) { return ParseInputLine(line, source, tok, sp, options); },
      [&](std::optional<ParsedLine> parsed, const core::InputLine&) {
        if (parsed) {
          CountLine(*parsed, options, &local);
          pairs.push_back(std::move(parsed->pair));
        }
        return absl::OkStatus();
      });
  if (!lines.ok()) return lines.status();
  const size_t line_no = *lines;
  if (in.bad()) return absl::DataLossError(absl::StrCat(source, ": read failed after line ", line_no));
  if (line_no == 0) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":1: empty file (no preference pairs)"));
  }
  if (pairs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", line_no, ": no preference pairs (all ", line_no, " lines are blank)"));
  }
  if (stats != nullptr) *stats = local;
  return pairs;
}

}  // namespace

absl::Status ValidatePreferenceDataOptions(const PreferenceDataOptions& options, const Tokenizer* tok) {
  if (options.max_length < 0 || options.max_prompt_length < 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_length (", options.max_length,
                                                   ") and max_prompt_length (", options.max_prompt_length,
                                                   ") must not be negative (max_length 0: no limit)"));
  }
  if (options.max_length > 0) {
    if (options.max_prompt_length >= options.max_length) {
      return absl::InvalidArgumentError(
          absl::StrCat("max_prompt_length (", options.max_prompt_length, ") must be less than max_length (",
                       options.max_length, ") so that at least one response token survives truncation"));
    }
    if (options.add_bos && options.max_prompt_length < 1) {
      return absl::InvalidArgumentError("max_prompt_length must be at least 1 with add_bos (BOS is kept)");
    }
  }
  if (tok != nullptr) {
    // Set or not, the tokenizer's values are the ones used; a different value is a contradiction.
    const bool bos_differs = options.bos_id != -1 && options.bos_id != tok->bos_id();
    const bool eos_differs = options.eos_id != -1 && options.eos_id != tok->eos_id();
    const bool vocab_differs = options.vocab_size != 0 && options.vocab_size != tok->vocab_size();
    if (bos_differs || eos_differs || vocab_differs) {
      return absl::InvalidArgumentError(absl::StrCat(
          "options bos_id ", options.bos_id, " / eos_id ", options.eos_id, " / vocab_size ",
          options.vocab_size, " contradict the tokenizer's ", tok->bos_id(), " / ", tok->eos_id(), " / ",
          tok->vocab_size(), " (leave them unset when a tokenizer is given)"));
    }
  }
  if (options.vocab_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size must not be negative, got ", options.vocab_size));
  }
  const Specials sp = ResolveSpecials(options, tok);
  const char* fix = tok != nullptr ? "the tokenizer has none" : "set bos_id/eos_id in the options";
  if (options.add_bos && sp.bos_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("add_bos needs a BOS id (", fix, "; or set add_bos=false)"));
  }
  if (options.add_eos && sp.eos_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("add_eos needs an EOS id (", fix, "; or set add_eos=false)"));
  }
  if (sp.vocab_size > 0 && (sp.bos_id >= sp.vocab_size || sp.eos_id >= sp.vocab_size)) {
    return absl::InvalidArgumentError(absl::StrCat("bos_id ", sp.bos_id, " / eos_id ", sp.eos_id,
                                                   " must be below vocab_size ", sp.vocab_size));
  }
  return absl::OkStatus();
}

PreferencePair AssemblePreferencePair(const std::vector<int32_t>& prompt, const std::vector<int32_t>& chosen,
                                      const std::vector<int32_t>& rejected, int32_t bos_id, int32_t eos_id,
                                      const PreferenceDataOptions& options, size_t source_line) {
  const size_t bos = options.add_bos ? 1 : 0;
  const size_t eos = options.add_eos ? 1 : 0;
  const size_t max_length = static_cast<size_t>(options.max_length);
  const size_t longest_response = std::max(chosen.size(), rejected.size()) + eos;

  size_t prompt_keep = prompt.size();  // prompt tokens kept, BOS not counted
  if (max_length > 0 && bos + prompt.size() + longest_response > max_length &&
      bos + prompt.size() > static_cast<size_t>(options.max_prompt_length)) {
    prompt_keep = static_cast<size_t>(options.max_prompt_length) - bos;
  }

  PreferencePair pair;
  pair.source_line = source_line;
  pair.prompt.reserve(bos + prompt_keep);
  if (bos) pair.prompt.push_back(bos_id);
  pair.prompt.insert(pair.prompt.end(), prompt.end() - static_cast<std::ptrdiff_t>(prompt_keep),
                     prompt.end());

  // Validated options guarantee budget >= 1 when max_length > 0.
  const size_t budget = max_length > 0 ? max_length - pair.prompt.size() : std::numeric_limits<size_t>::max();
  auto response = [&](const std::vector<int32_t>& r) {
    std::vector<int32_t> out(r);
    if (eos) out.push_back(eos_id);
    if (out.size() > budget) out.resize(budget);  // right truncation; drops EOS with the tail
    return out;
  };
  pair.chosen = response(chosen);
  pair.rejected = response(rejected);
  return pair;
}

absl::StatusOr<std::vector<PreferencePair>> ParsePreferenceJsonl(const std::string& contents,
                                                                 const std::string& source,
                                                                 const Tokenizer* tok,
                                                                 const PreferenceDataOptions& options,
                                                                 PreferenceDataStats* stats) {
  std::istringstream in(contents);
  return ParseStream(in, source, tok, options, stats);
}

absl::StatusOr<std::vector<PreferencePair>> LoadPreferenceJsonl(const std::string& path, const Tokenizer* tok,
                                                                const PreferenceDataOptions& options,
                                                                PreferenceDataStats* stats) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return absl::NotFoundError(absl::StrCat(path, ": cannot open preference data: ", std::strerror(err)));
  }
  return ParseStream(in, path, tok, options, stats);
}

}  // namespace zerofit::data
