// `zerofit data check FILE --tokenizer DIR`: what a preference JSONL file becomes under a Hugging Face
// tokenizer before a run spends GPU hours on it: counts, length percentiles, the share truncated at
// --max-length, and lint findings, each with what to change. With --prompts, FILE is a GRPO prompt file
// (worker/data/prompt_dataset.h): prompts, how many carry an answer, the longest, and how many lose their
// start to max_length - max_new_tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/data_report.h"
#include "worker/data/hf_tokenizer.h"
#include "worker/data/preference_dataset.h"

namespace CLI {
class App;
}

namespace zerofit::cli {

struct DataCheckFlags {
  std::string file;
  std::string tokenizer_dir;
  int64_t max_length = 512;
  int64_t max_prompt_length = 0;  // 0: max_length / 2, as a training run's default
  std::string add_bos = "auto";   // auto: the tokenizer has a BOS and tokenizer_config.json's add_bos_token
  data::TokenizerOverrides
      overrides;  // --eos-token, --chat-template: the job's data.eos_token, chat_template
  bool json = false;
  bool prompts = false;  // FILE holds GRPO prompts
  bool sft = false;      // FILE holds SFT examples (or pairs, of which the chosen response is kept)
  bool assistant_only_loss = false;  // with sft: every line a conversation whose assistant turns are scored
  int64_t max_new_tokens = 256;      // with --prompts: what max_length keeps for the completion
};

// A GRPO prompt file under `tok` and the job's limits: the lines a run would refuse are errors naming file,
// line and field; otherwise one report (text, or JSON with `json`).
absl::StatusOr<std::string> CheckPromptData(const std::string& path, const data::HfTokenizer& tok,
                                            int64_t max_prompt_length, bool add_bos, bool json);

// Loads `path` with `tok` (no truncation), then measures and lints it against `options` (max_length,
// max_prompt_length, add_bos; add_eos is on). Load errors name the file and line.
absl::StatusOr<data::DataReport> CheckPreferenceData(const std::string& path, const data::HfTokenizer& tok,
                                                     const data::PreferenceDataOptions& options);

// Registers `data check` on `app`; returns the `check` subcommand. `flags` must outlive parsing.
CLI::App* AddDataCheckCommand(CLI::App& app, DataCheckFlags* flags);

absl::StatusOr<std::string> RunDataCheck(const DataCheckFlags& flags);

}  // namespace zerofit::cli
