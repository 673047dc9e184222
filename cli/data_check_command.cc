#include "cli/data_check_command.h"

#include <CLI/CLI.hpp>

#include "worker/data/training_data.h"

namespace zerofit::cli {

absl::StatusOr<data::DataReport> CheckPreferenceData(const std::string& path, const data::HfTokenizer& tok,
                                                     const data::PreferenceDataOptions& options) {
  if (absl::Status s = data::ValidatePreferenceDataOptions(options, &tok); !s.ok()) return s;
  data::PreferenceDataOptions whole = options;
  whole.max_length = 0;  // measure before truncation
  auto pairs = data::LoadPreferenceJsonl(path, &tok, whole);
  if (!pairs.ok()) return pairs.status();
  return data::BuildDataReport(*pairs, tok.expectations(), options);
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
  options.add_bos =
      flags.add_bos == "true" || (flags.add_bos == "auto" && data::AutoAddBos(**tok, flags.file));
  auto report = CheckPreferenceData(flags.file, **tok, options);
  if (!report.ok()) return report.status();
  return data::FormatDataReport(*report, flags.file, flags.json);
}

}  // namespace zerofit::cli
