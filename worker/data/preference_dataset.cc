#include "worker/data/preference_dataset.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <istream>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/json_depth.h"
#include "core/line_reader.h"
#include "core/ordered_line_map.h"
#include "core/status_macros.h"
#include "core/thread_pool.h"
#include "nlohmann/json.hpp"
#include "worker/data/json_line_fields.h"
#include "worker/data/line_chat_tokenizer.h"
#include "worker/data/sft_example.h"

namespace zerofit::data {
namespace {

using json_line::CheckMessages;
using json_line::FieldError;
using json_line::Json;
using json_line::LineError;
using json_line::Specials;
using json_line::Where;

Specials ResolveSpecials(const PreferenceDataOptions& options, const Tokenizer* tok) {
  if (tok != nullptr) return Specials{tok->bos_id(), tok->eos_id(), tok->vocab_size()};
  return Specials{options.bos_id, options.eos_id, options.vocab_size};
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
  auto prompt_text = json_line::Render(prompt, /*add_generation_prompt=*/true, "prompt", tok, w);
  if (!prompt_text.ok()) return prompt_text.status();
  out[0] = std::move(*prompt_text);
  for (int k = 1; k < 3; ++k) {
    auto text = json_line::RenderResponse(prompt, out[0], responses[k - 1], fields[k], tok, w);
    if (!text.ok()) return text.status();
    out[k] = std::move(*text);
  }
  return out;
}

bool IsBlank(const std::string& line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

// A parsed line: its pair and the untruncated token counts (for PreferenceDataStats).
struct ParsedLine {
  PreferencePair pair;
  size_t whole_sizes[3] = {0, 0, 0};  // prompt, chosen, rejected parts before truncation, specials included
};

// Whether a response gets an EOS: add_eos, unless it already ends with one (TRL appends eos_token to a text
// that does not end with it).
bool AppendsEos(const std::vector<int32_t>& response, int32_t eos_id, const PreferenceDataOptions& options) {
  return options.add_eos && (response.empty() || response.back() != eos_id);
}

// One JSONL line as a JSON object. nlohmann reports parse errors by exception; they are translated here,
// where the library is called (STYLE 2), and never escape.
absl::StatusOr<Json> ParseObject(const std::string& line, const Where& w) {
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
  return obj;
}

// A pair's line to the raw ids (no specials) of prompt, chosen and rejected.
absl::StatusOr<std::array<std::vector<int32_t>, 3>> PairIds(const Json& obj, const Tokenizer* tok,
                                                            const Specials& sp, const Where& w) {
  const bool pretokenized =
      obj.contains("prompt_ids") || obj.contains("chosen_ids") || obj.contains("rejected_ids");
  std::array<std::vector<int32_t>, 3> ids;
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
    auto got = pretokenized ? json_line::GetIds(obj, id_fields[k], sp, w)
                            : json_line::EncodeField(obj, text_fields[k], tok, w,
                                                     "prompt_ids/chosen_ids/rejected_ids");
    if (!got.ok()) return got.status();
    ids[k] = std::move(*got);
  }
  for (int k = 1; k < 3; ++k) {
    if (ids[k].empty()) {
      return FieldError(w, pretokenized ? id_fields[k] : text_fields[k], "empty response (nothing to score)");
    }
  }
  return ids;
}

// A pair line's optional "margin" (PreferencePair::margin): a finite number.
absl::StatusOr<double> MarginOf(const Json& obj, const Where& w) {
  auto it = obj.find("margin");
  if (it == obj.end() || it->is_null()) return 0.0;
  if (!it->is_number() || !std::isfinite(it->get<double>())) {
    return FieldError(w, "margin", absl::StrCat("expected a finite number, got ", it->dump()));
  }
  return it->get<double>();
}

// A line the chat template renders (messages, or chosen/completion as message lists): its responses end as
// the template writes them (Qwen's `<|im_end|>\n`, Llama 3's `<|eot_id|>`, Mistral's `</s>`), so no EOS is
// appended, as TRL's SFT, DPO and reward trainers append none to conversational data.
bool ChatRendered(const Json& obj) {
  for (const char* ids : {"prompt_ids", "chosen_ids", "rejected_ids", "completion_ids"}) {
    if (obj.contains(ids)) return false;
  }
  if (obj.contains("messages")) return true;
  for (const char* key : {"chosen", "completion"}) {
    auto it = obj.find(key);
    if (it != obj.end() && it->is_array()) return true;
  }
  return false;
}

// One JSONL line to a pair (options.sft: to an SFT example, whose rejected response is empty). Pure: safe
// to call for several lines at once (the tokenizer is thread-safe).
absl::StatusOr<ParsedLine> ParseLine(const std::string& line, const Where& w, const Tokenizer* tok,
                                     const Specials& sp, const PreferenceDataOptions& options) {
  ZF_ASSIGN_OR_RETURN(const Json obj, ParseObject(line, w));
  // The line's tools and chat_template_kwargs reach every rendering of its messages (TRL's columns).
  absl::StatusOr<ChatExtras> extras = ChatExtrasOf(obj);
  if (!extras.ok()) return LineError(w, std::string(extras.status().message()));
  std::optional<LineChatTokenizer> line_tok;
  if (tok != nullptr && HasChatExtras(*extras)) tok = &line_tok.emplace(*tok, std::move(*extras));
  std::array<std::vector<int32_t>, 3> ids;
  std::vector<uint8_t> scored;
  double margin = 0;
  const bool pair_line = IsPreferencePairLine(obj);
  if (!pair_line && options.sft) {
    const SftScoring scoring{options.completion_only_loss, options.assistant_only_loss};
    ZF_ASSIGN_OR_RETURN(SftIds example, ParseSftExample(obj, tok, sp, scoring, w));
    ids[0] = std::move(example.prompt);
    ids[1] = std::move(example.completion);
    scored = std::move(example.scored);
  } else if (pair_line && options.sft && options.assistant_only_loss) {
    return LineError(w,
                     "a preference pair, but assistant_only_loss scores the assistant's messages of SFT "
                     "conversations: write {\"messages\": [...]}, or set assistant_only_loss false");
  } else if (!pair_line && IsSftExampleLine(obj)) {
    return LineError(w,
                     "an SFT example (text, prompt/completion or messages), but reward models and DPO train "
                     "on preference pairs: give chosen and rejected responses, or use task sft");
  } else {
    ZF_ASSIGN_OR_RETURN(ids, PairIds(obj, tok, sp, w));
    if (options.sft) {
      ids[2].clear();  // an SFT example keeps the chosen response only
    } else {
      ZF_ASSIGN_OR_RETURN(margin, MarginOf(obj, w));
    }
  }
  // (With assistant_only_loss the reader has applied completion_only_loss to the assistant's turns.)
  if (options.sft && !options.completion_only_loss && !options.assistant_only_loss && !ids[0].empty()) {
    ids[0].insert(ids[0].end(), ids[1].begin(), ids[1].end());  // the prompt is scored as completion
    ids[1] = std::move(ids[0]);
    ids[0].clear();
  }
  ParsedLine parsed;
  PreferenceDataOptions line_options = options;
  const bool rendered = ChatRendered(obj);
  if (rendered) line_options.add_eos = false;
  parsed.pair =
      AssemblePreferencePair(ids[0], ids[1], ids[2], sp.bos_id, sp.eos_id, line_options, w.line, scored);
  parsed.pair.margin = margin;
  parsed.pair.chat_rendered = rendered;
  parsed.whole_sizes[0] = ids[0].size() + (line_options.add_bos ? 1 : 0);
  for (int k = 1; k < 3; ++k) {
    const bool appended = !ids[k].empty() && AppendsEos(ids[k], sp.eos_id, line_options);
    parsed.whole_sizes[k] = ids[k].size() + (appended ? 1 : 0);
  }
  return parsed;
}

// Adds one parsed line to the truncation counts.
void CountLine(const ParsedLine& parsed, PreferenceDataStats* stats) {
  const PreferencePair& pair = parsed.pair;
  stats->pairs++;
  if (pair.prompt.size() < parsed.whole_sizes[0]) stats->prompts_truncated++;
  if (pair.chosen.size() < parsed.whole_sizes[1]) stats->responses_truncated++;
  if (!pair.rejected.empty() && pair.rejected.size() < parsed.whole_sizes[2]) stats->responses_truncated++;
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
          CountLine(*parsed, &local);
          pairs.push_back(std::move(parsed->pair));
        }
        return absl::OkStatus();
      });
  if (!lines.ok()) return lines.status();
  const size_t line_no = *lines;
  const char* what = options.sft ? "SFT examples" : "preference pairs";
  if (in.bad()) return absl::DataLossError(absl::StrCat(source, ": read failed after line ", line_no));
  if (line_no == 0) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":1: empty file (no ", what, ")"));
  }
  if (pairs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", line_no, ": no ", what, " (all ", line_no, " lines are blank)"));
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
  if (options.assistant_only_loss && !options.sft) {
    return absl::InvalidArgumentError(
        "assistant_only_loss applies to SFT examples only (reward models and DPO score whole responses)");
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
                                      const PreferenceDataOptions& options, size_t source_line,
                                      const std::vector<uint8_t>& chosen_scored) {
  const size_t bos = options.add_bos ? 1 : 0;
  const size_t max_length = static_cast<size_t>(options.max_length);
  auto whole = [&](const std::vector<int32_t>& r) {
    return r.size() + (!r.empty() && AppendsEos(r, eos_id, options) ? 1 : 0);
  };
  const size_t longest_response = std::max(whole(chosen), whole(rejected));

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
    if (AppendsEos(r, eos_id, options)) out.push_back(eos_id);
    if (out.size() > budget) out.resize(budget);  // right truncation; drops EOS with the tail
    return out;
  };
  pair.chosen = response(chosen);
  if (!rejected.empty()) pair.rejected = response(rejected);  // empty: an SFT example
  if (!chosen_scored.empty()) {
    pair.chosen_scored = chosen_scored;
    pair.chosen_scored.resize(pair.chosen.size(), chosen_scored.back());  // EOS, or cut with the tail
  }
  return pair;
}

size_t ScoredTokens(const PreferencePair& e) {
  const size_t unpredicted = e.prompt.empty() ? 1 : 0;
  if (e.chosen_scored.empty()) return e.chosen.size() - std::min(unpredicted, e.chosen.size());
  return static_cast<size_t>(
      std::count(e.chosen_scored.begin() + std::min(unpredicted, e.chosen_scored.size()),
                 e.chosen_scored.end(), uint8_t{1}));
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
  std::ifstream in;
  ZF_RETURN_IF_ERROR(core::OpenLineInput(path, &in));
  return ParseStream(in, path, tok, options, stats);
}

}  // namespace zerofit::data
