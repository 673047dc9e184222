#include "cli/data_check_command.h"

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "worker/data/prompt_dataset.h"
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

absl::StatusOr<std::string> CheckPromptData(const std::string& path, const data::HfTokenizer& tok,
                                            int64_t max_prompt_length, bool add_bos, bool json) {
  data::PromptDataOptions o;
  o.max_prompt_length = max_prompt_length;
  o.add_bos = add_bos;
  absl::StatusOr<data::PromptData> d = data::LoadPrompts(path, &tok, o);
  if (!d.ok()) return d.status();
  size_t answered = 0;
  for (const data::Prompt& p : d->prompts) answered += p.answer.has_value() ? 1 : 0;
  if (json) {
    const nlohmann::ordered_json j = {{"file", path},
                                      {"prompts", d->prompts.size()},
                                      {"with_answer", answered},
                                      {"longest_prompt", d->longest_prompt},
                                      {"truncated", d->truncated}};
    return j.dump() + "\n";
  }
  return absl::StrCat(path, ": ", d->prompts.size(), d->prompts.size() == 1 ? " prompt, " : " prompts, ",
                      answered, " with an answer; longest ", d->longest_prompt, " tokens; ", d->truncated,
                      " truncated to their last ", max_prompt_length,
                      " tokens (max_length - max_new_tokens)\n");
}

CLI::App* AddDataCheckCommand(CLI::App& app, DataCheckFlags* flags) {
  CLI::App* data =
      app.add_subcommand("data", "inspect training data (preference pairs, SFT examples, prompts)");
  CLI::App* check =
      data->add_subcommand("check", "token lengths, truncation and lint of a preference JSONL file");
  check->add_option("file", flags->file, "preference JSONL (text, conversational or pre-tokenized)")
      ->required();
  check->add_option("--tokenizer", flags->tokenizer_dir, "model directory with tokenizer.json")->required();
  check->add_option("--max-length", flags->max_length, "longest sequence in tokens (0: no limit)")
      ->capture_default_str();
  check
      ->add_option("--max-prompt-length", flags->max_prompt_length,
                   "longest prompt part when truncating (0: --max-length / 2, as training)")
      ->capture_default_str();
  check->add_option("--add-bos", flags->add_bos, "auto, true or false")
      ->check(CLI::IsMember({"auto", "true", "false"}))
      ->capture_default_str();
  check->add_option(
      "--eos-token", flags->overrides.eos_token,
      "a token of the vocabulary that replaces the tokenizer's EOS, as the job's data.eos_token");
  check->add_option(
      "--chat-template", flags->overrides.chat_template,
      "a .jinja/.j2 file or model directory whose chat template replaces the tokenizer's, as the "
      "job's data.chat_template");
  check->add_flag("--json", flags->json, "one JSON object instead of the table");
  check->add_flag("--prompts", flags->prompts,
                  "FILE holds GRPO prompts (prompt, messages or prompt_ids + answer)");
  check->add_flag(
      "--sft", flags->sft,
      "FILE holds SFT examples (text, prompt + completion, messages, prompt_ids + completion_ids)");
  check->add_flag(
      "--assistant-only-loss", flags->assistant_only_loss,
      "with --sft: only the assistant's messages are scored, as the job's sft.assistant_only_loss "
      "(every line must be a conversation whose turns the chat template writes one by one)");
  check
      ->add_option("--max-new-tokens", flags->max_new_tokens,
                   "with --prompts: the completion's share of max_length")
      ->capture_default_str();
  return check;
}

absl::StatusOr<std::string> RunDataCheck(const DataCheckFlags& flags) {
  if (flags.prompts && flags.sft) return absl::InvalidArgumentError("--prompts and --sft exclude each other");
  if (flags.assistant_only_loss && !flags.sft) {
    return absl::InvalidArgumentError("--assistant-only-loss applies to SFT examples: add --sft");
  }
  auto tok = data::HfTokenizer::Load(flags.tokenizer_dir, flags.overrides);
  if (!tok.ok()) return tok.status();
  if (flags.prompts) {
    if (flags.max_new_tokens < 1 || flags.max_new_tokens >= flags.max_length) {
      return absl::InvalidArgumentError(absl::StrCat("--max-new-tokens ", flags.max_new_tokens,
                                                     " must be in [1, --max-length ", flags.max_length, ")"));
    }
    const bool add_bos =
        flags.add_bos == "true" || (flags.add_bos == "auto" && data::AutoAddBos(**tok, flags.file));
    return CheckPromptData(flags.file, **tok, flags.max_length - flags.max_new_tokens, add_bos, flags.json);
  }
  data::PreferenceDataOptions options;
  options.sft = flags.sft;
  options.assistant_only_loss = flags.assistant_only_loss;
  options.max_length = flags.max_length;
  options.max_prompt_length = data::PromptLengthLimit(flags.max_prompt_length, flags.max_length);
  options.add_bos =
      flags.add_bos == "true" || (flags.add_bos == "auto" && data::AutoAddBos(**tok, flags.file));
  auto report = CheckPreferenceData(flags.file, **tok, options);
  if (!report.ok()) return report.status();
  return data::FormatDataReport(*report, flags.file, flags.json);
}

}  // namespace zerofit::cli
