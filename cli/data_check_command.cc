#include "cli/data_check_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace zerofit::cli {
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

}  // namespace

absl::StatusOr<DataCheckReport> CheckPreferenceData(const std::string& path, const data::HfTokenizer& tok,
                                                    const data::PreferenceDataOptions& options) {
  data::PreferenceDataOptions whole = options;
  whole.max_length = 0;  // measure before truncation
  if (absl::Status s = data::ValidatePreferenceDataOptions(options, &tok); !s.ok()) return s;
  auto pairs = data::LoadPreferenceJsonl(path, &tok, whole);
  if (!pairs.ok()) return pairs.status();

  DataCheckReport r;
  r.pairs = pairs->size();
  r.add_bos = options.add_bos;
  r.max_length = options.max_length;
  const int32_t bos = tok.bos_id(), eos = tok.eos_id();
  const size_t nb = options.add_bos ? 1 : 0;
  // The template expects BOS when it writes bos_token itself or the tokenizer config asks for one.
  bool template_bos = false;
  if (tok.chat_template() != nullptr) {
    auto source = tok.chat_template()->Source(text::ChatTemplateOptions{});
    template_bos = source.ok() && source->find("bos_token") != std::string::npos;
  }
  const bool expects_bos = bos >= 0 && (template_bos || tok.add_bos_token().value_or(false));

  std::vector<size_t> prompt_len, seq_len;
  size_t no_bos = 0, doubled_bos = 0, lost_eos = 0, same = 0;
  for (const data::PreferencePair& p : *pairs) {
    prompt_len.push_back(p.prompt.size());
    const size_t longest = p.prompt.size() + std::max(p.chosen.size(), p.rejected.size());
    seq_len.push_back(longest);
    if (options.max_length > 0 && longest > static_cast<size_t>(options.max_length)) ++r.truncated_pairs;
    if (expects_bos && (p.prompt.empty() || p.prompt[0] != bos)) ++no_bos;
    if (bos >= 0 && p.prompt.size() >= 2 && p.prompt[0] == bos && p.prompt[1] == bos) ++doubled_bos;
    if (p.chosen == p.rejected) ++same;
    if (options.max_length > 0) {
      // Re-assemble from the raw ids (without the specials the loader added) under the real limits.
      std::vector<int32_t> prompt(p.prompt.begin() + static_cast<std::ptrdiff_t>(nb), p.prompt.end());
      auto raw = [&](const std::vector<int32_t>& r) {
        return std::vector<int32_t>(r.begin(), r.end() - (options.add_eos ? 1 : 0));
      };
      data::PreferencePair cut = data::AssemblePreferencePair(prompt, raw(p.chosen), raw(p.rejected), bos,
                                                              eos, options, p.source_line);
      if (options.add_eos) {
        for (const auto* resp : {&cut.chosen, &cut.rejected}) {
          if (resp->empty() || resp->back() != eos) ++lost_eos;
        }
      }
    }
  }
  r.prompt = Percentiles(std::move(prompt_len));
  r.sequence = Percentiles(std::move(seq_len));

  const bool pad_is_eos = tok.configured_pad_id() < 0 || tok.configured_pad_id() == eos;
  r.lints.push_back({"pad == eos in the tokenizer config", pad_is_eos ? size_t{1} : 0,
                     "zerofit masks padding by length, so this is harmless here; other trainers that mask "
                     "labels by pad id also mask every EOS: give such runs a distinct pad_token"});
  r.lints.push_back({"prompts without the BOS the template/config expects", no_bos,
                     "pass --add-bos true (add_bos in the spec), or render prompts with the chat template"});
  r.lints.push_back({"prompts starting with a doubled BOS", doubled_bos,
                     "the text (or chat template) already has BOS: set add_bos=false"});
  r.lints.push_back({"responses that lose their EOS to truncation", lost_eos,
                     "raise --max-length, lower --max-prompt-length, or drop overlong pairs"});
  r.lints.push_back(
      {"pairs with chosen == rejected", same, "remove them: identical responses carry no preference signal"});
  return r;
}

std::string FormatDataCheck(const DataCheckReport& r, const std::string& path, bool json) {
  auto pct = [](const LengthPercentiles& p) {
    return nlohmann::ordered_json{{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"max", p.max}};
  };
  if (json) {
    nlohmann::ordered_json j = {{"file", path},
                                {"pairs", r.pairs},
                                {"add_bos", r.add_bos},
                                {"prompt_tokens", pct(r.prompt)},
                                {"sequence_tokens", pct(r.sequence)},
                                {"max_length", r.max_length},
                                {"truncated_pairs", r.truncated_pairs}};
    nlohmann::ordered_json lints = nlohmann::ordered_json::array();
    for (const DataLint& l : r.lints)
      lints.push_back({{"check", l.name}, {"count", l.count}, {"fix", l.fix}});
    j["lints"] = std::move(lints);
    return j.dump(2) + "\n";
  }
  std::string out = absl::StrFormat("%s: %d pairs (add_bos %s, EOS appended)\n", path, r.pairs,
                                    r.add_bos ? "true" : "false");
  auto row = [&](const char* name, const LengthPercentiles& p) {
    absl::StrAppendFormat(&out, "  %-16s p50 %6d  p90 %6d  p99 %6d  max %6d\n", name, p.p50, p.p90, p.p99,
                          p.max);
  };
  out += "tokens before truncation:\n";
  row("prompt", r.prompt);
  row("longest sequence", r.sequence);
  if (r.max_length > 0) {
    absl::StrAppendFormat(&out, "truncated at --max-length %d: %d of %d pairs (%.1f%%)\n", r.max_length,
                          r.truncated_pairs, r.pairs,
                          r.pairs ? 100.0 * static_cast<double>(r.truncated_pairs) / r.pairs : 0.0);
  }
  out += "lint:\n";
  for (const DataLint& l : r.lints) {
    absl::StrAppendFormat(&out, "  %-52s %6d%s\n", l.name, l.count,
                          l.count ? absl::StrCat("  -> ", l.fix) : "");
  }
  return out;
}

CLI::App* AddDataCheckCommand(CLI::App& app, DataCheckFlags* flags) {
  CLI::App* data = app.add_subcommand("data", "inspect preference data");
  CLI::App* check =
      data->add_subcommand("check", "token lengths, truncation and lint of a preference JSONL file");
  check->add_option("file", flags->file, "preference JSONL (text, conversational or pre-tokenized)")
      ->required();
  check->add_option("--tokenizer", flags->tokenizer_dir, "model directory with tokenizer.json")->required();
  check->add_option("--max-length", flags->max_length, "longest sequence in tokens (0: no limit)")
      ->capture_default_str();
  check->add_option("--max-prompt-length", flags->max_prompt_length, "longest prompt part when truncating")
      ->capture_default_str();
  check->add_option("--add-bos", flags->add_bos, "auto, true or false")
      ->check(CLI::IsMember({"auto", "true", "false"}))
      ->capture_default_str();
  check->add_flag("--json", flags->json, "one JSON object instead of the table");
  return check;
}

absl::StatusOr<std::string> RunDataCheck(const DataCheckFlags& flags) {
  auto tok = data::HfTokenizer::Load(flags.tokenizer_dir);
  if (!tok.ok()) return tok.status();
  data::PreferenceDataOptions options;
  options.max_length = flags.max_length;
  options.max_prompt_length = flags.max_prompt_length;
  options.add_bos = flags.add_bos == "true" || (flags.add_bos == "auto" && (*tok)->bos_id() >= 0 &&
                                                (*tok)->add_bos_token().value_or(false));
  auto report = CheckPreferenceData(flags.file, **tok, options);
  if (!report.ok()) return report.status();
  return FormatDataCheck(*report, flags.file, flags.json);
}

}  // namespace zerofit::cli
