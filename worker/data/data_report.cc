#include "worker/data/data_report.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace zerofit::data {
namespace {

LengthPercentiles Percentiles(std::vector<size_t> v) {
  LengthPercentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  // Nearest rank: the smallest value with at least q of the data at or below it.
  auto at = [&](double q) {
    size_t rank = static_cast<size_t>(q * static_cast<double>(v.size()) + 0.999999);
    return v[std::min(v.size(), std::max<size_t>(rank, 1)) - 1];
  };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  p.max = v.back();
  return p;
}

// Counts of the per-pair findings.
struct PairFindings {
  size_t no_bos = 0, doubled_bos = 0, lost_eos = 0, same = 0, template_without_eos = 0;
};

// `cut` is `p` truncated under options' limits.
void Inspect(const PreferencePair& p, const PreferencePair& cut, const DataExpectations& e,
             const PreferenceDataOptions& options, PairFindings* f) {
  // The sequence's first tokens: an SFT example scored whole (text, messages) has them in its completion.
  auto token = [&p](size_t i) -> int64_t {
    if (i < p.prompt.size()) return p.prompt[i];
    i -= p.prompt.size();
    return i < p.chosen.size() ? p.chosen[i] : -1;
  };
  if (e.expects_bos && token(0) != e.bos_id) ++f->no_bos;
  if (e.bos_id >= 0 && token(0) == e.bos_id && token(1) == e.bos_id) ++f->doubled_bos;
  if (!p.rejected.empty() && p.chosen == p.rejected) ++f->same;
  // A chat rendering ends as its template writes it; one without the EOS token never teaches the model to
  // stop where generation stops (Qwen's base tokenizer: EOS <|endoftext|>, the template's turns end in
  // <|im_end|>).
  auto no_eos = [&](const std::vector<int32_t>& r) {
    return !r.empty() && std::find(r.begin(), r.end(), e.eos_id) == r.end();
  };
  if (p.chat_rendered && e.eos_id >= 0) {
    if (no_eos(p.chosen)) ++f->template_without_eos;
    if (no_eos(p.rejected)) ++f->template_without_eos;
  }
  // A response cut short lost its end: the appended EOS, or the chat template's end of turn.
  if (options.max_length > 0 && (options.add_eos || p.chat_rendered)) {
    if (cut.chosen.size() < p.chosen.size()) ++f->lost_eos;
    if (cut.rejected.size() < p.rejected.size()) ++f->lost_eos;  // an SFT example has no rejected response
  }
}

std::vector<DataLint> Lints(const PairFindings& f, const DataExpectations& e, bool sft) {
  const bool pad_is_eos = e.configured_pad_id < 0 || e.configured_pad_id == e.eos_id;
  std::vector<DataLint> lints = {
      {"pad == eos in the tokenizer config", pad_is_eos ? size_t{1} : 0,
       "zerofit masks padding by length, so this is harmless here; other trainers that mask labels by pad "
       "id also mask every EOS: give such runs a distinct pad_token"},
      {"prompts without the BOS the template/config expects", f.no_bos,
       "set add_bos: true (data.add_bos in the spec, --add-bos), or render prompts with the chat template"},
      {"prompts starting with a doubled BOS", f.doubled_bos,
       "the text (or chat template) already has BOS: set add_bos: false"},
      {"responses that lose their EOS to truncation", f.lost_eos,
       "raise max_length, lower max_prompt_length, or drop overlong pairs"},
      {"chat-rendered responses that never hold the EOS token", f.template_without_eos,
       "the chat template ends turns with a token that is not the tokenizer's EOS, and no EOS is appended to "
       "chat renderings (TRL appends none either): make the template's end-of-turn token the EOS "
       "(data.eos_token in the spec, --eos-token; TRL's eos_token), or use a template that writes eos_token"},
  };
  if (!sft) {
    lints.push_back({"pairs with chosen == rejected", f.same,
                     "remove them: identical responses carry no preference signal"});
  }
  return lints;
}

}  // namespace

PreferencePair TruncatePair(const PreferencePair& whole, int32_t bos_id, int32_t eos_id,
                            const PreferenceDataOptions& options) {
  // Back to the raw ids (without the specials the loader added), then assembled under the real limits.
  PreferenceDataOptions line_options = options;
  if (whole.chat_rendered) line_options.add_eos = false;  // the template's rendering ends the response
  const auto nb = static_cast<std::ptrdiff_t>(options.add_bos ? 1 : 0);
  const auto ne = static_cast<std::ptrdiff_t>(line_options.add_eos ? 1 : 0);
  std::vector<int32_t> prompt(whole.prompt.begin() + nb, whole.prompt.end());
  auto raw = [&](const auto& r) {  // an SFT example's rejected response is empty, and so are most flags
    return r.empty() ? r : std::decay_t<decltype(r)>(r.begin(), r.end() - ne);
  };
  PreferencePair cut = AssemblePreferencePair(prompt, raw(whole.chosen), raw(whole.rejected), bos_id, eos_id,
                                              line_options, whole.source_line, raw(whole.chosen_scored));
  cut.margin = whole.margin;
  cut.chat_rendered = whole.chat_rendered;
  return cut;
}

DataReport BuildDataReport(const std::vector<PreferencePair>& whole, const DataExpectations& expect,
                           const PreferenceDataOptions& options, std::vector<PreferencePair>* truncated) {
  DataReport r;
  r.pairs = whole.size();
  r.sft = options.sft;
  r.add_bos = options.add_bos;
  r.max_length = options.max_length;
  std::vector<size_t> prompt_len, seq_len;
  PairFindings found;
  for (const PreferencePair& p : whole) {
    prompt_len.push_back(p.prompt.size());
    const size_t longest = p.prompt.size() + std::max(p.chosen.size(), p.rejected.size());
    seq_len.push_back(longest);
    if (options.max_length > 0 && longest > static_cast<size_t>(options.max_length)) ++r.truncated_pairs;
    if (p.chat_rendered) ++r.chat_rendered;
    PreferencePair cut = TruncatePair(p, expect.bos_id, expect.eos_id, options);
    Inspect(p, cut, expect, options, &found);
    r.scored_tokens += ScoredTokens(cut);
    r.tokens += cut.prompt.size() + cut.chosen.size();
    if (truncated != nullptr) truncated->push_back(std::move(cut));
  }
  r.prompt = Percentiles(std::move(prompt_len));
  r.sequence = Percentiles(std::move(seq_len));
  r.lints = Lints(found, expect, options.sft);
  return r;
}

std::string FormatDataReport(const DataReport& r, const std::string& source, bool json) {
  auto pct = [](const LengthPercentiles& p) {
    return nlohmann::ordered_json{{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"max", p.max}};
  };
  if (json) {
    nlohmann::ordered_json j = {{"file", source},
                                {r.sft ? "examples" : "pairs", r.pairs},
                                {"add_bos", r.add_bos},
                                {"prompt_tokens", pct(r.prompt)},
                                {"sequence_tokens", pct(r.sequence)},
                                {"max_length", r.max_length},
                                {"truncated_pairs", r.truncated_pairs}};
    j["chat_rendered"] = r.chat_rendered;
    if (r.sft) {
      j["scored_tokens"] = r.scored_tokens;
      j["tokens_after_truncation"] = r.tokens;
    }
    nlohmann::ordered_json lints = nlohmann::ordered_json::array();
    for (const DataLint& l : r.lints)
      lints.push_back({{"check", l.name}, {"count", l.count}, {"fix", l.fix}});
    j["lints"] = std::move(lints);
    return j.dump(2) + "\n";
  }
  const char* what = r.sft ? (r.pairs == 1 ? "example" : "examples") : (r.pairs == 1 ? "pair" : "pairs");
  // Chat renderings end as their template writes them; every other response gets an EOS.
  const std::string eos = r.chat_rendered == 0         ? "EOS appended"
                          : r.chat_rendered == r.pairs ? "chat template renderings, no EOS appended"
                                                       : absl::StrFormat(
                                                             "EOS appended to %d, %d chat template "
                                                             "renderings without",
                                                             r.pairs - r.chat_rendered, r.chat_rendered);
  std::string out = absl::StrFormat("%s: %d %s (add_bos %s, %s)\n", source, r.pairs, what,
                                    r.add_bos ? "true" : "false", eos);
  auto row = [&](const char* name, const LengthPercentiles& p) {
    absl::StrAppendFormat(&out, "  %-16s p50 %6d  p90 %6d  p99 %6d  max %6d\n", name, p.p50, p.p90, p.p99,
                          p.max);
  };
  out += "tokens before truncation:\n";
  row("prompt", r.prompt);
  row("longest sequence", r.sequence);
  if (r.max_length > 0) {
    absl::StrAppendFormat(&out, "truncated at max_length %d: %d of %d %s (%.1f%%)\n", r.max_length,
                          r.truncated_pairs, r.pairs, what,
                          r.pairs ? 100.0 * static_cast<double>(r.truncated_pairs) / r.pairs : 0.0);
  }
  if (r.sft) {
    absl::StrAppendFormat(&out, "scored by the loss: %d of %d tokens after truncation (%.1f%%)\n",
                          r.scored_tokens, r.tokens,
                          r.tokens ? 100.0 * static_cast<double>(r.scored_tokens) / r.tokens : 0.0);
  }
  out += "lint:\n";
  for (const DataLint& l : r.lints) {
    absl::StrAppendFormat(&out, "  %-52s %6d%s\n", l.name, l.count,
                          l.count ? absl::StrCat("  -> ", l.fix) : "");
  }
  return out;
}

}  // namespace zerofit::data
