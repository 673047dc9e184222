// Where a training run's preference pairs come from, and loading them: the model directory's config.json,
// training and held-out JSONL (text, conversational or token ids), and the Hugging Face tokenizer that turns
// text into ids in the training process itself. Torch-free: the trainer, the CLI and tests share it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/hf_config.h"
#include "worker/data/data_report.h"
#include "worker/data/preference_dataset.h"
#include "worker/data/tokenizer_overrides.h"

namespace zerofit::data {

struct DataSource {
  std::string train;  // JSONL: text, conversational or pre-tokenized lines (preference_dataset.h)
  std::string test;   // held-out JSONL in the same formats; empty: no held-out set
  // A directory with tokenizer.json (+ tokenizer_config.json): text and chat lines are tokenized with it.
  // Empty: the files must hold token ids only.
  std::string tokenizer_dir;
  TokenizerOverrides tokenizer_overrides;  // data.eos_token, data.chat_template; need tokenizer_dir
  int64_t max_prompt_length = 0;  // the prompt part's limit when a pair is truncated; 0: max_length / 2
  std::optional<bool> add_bos;    // unset: auto (see ResolveAddBos)
  // Task sft: the files hold SFT examples (sft_example.h) or pairs whose chosen response alone is kept.
  bool sft = false;
  bool completion_only_loss = true;  // sft: PreferenceDataOptions::completion_only_loss
  bool assistant_only_loss = false;  // sft: PreferenceDataOptions::assistant_only_loss
};

// The layout of `zerofit_make_arith_prefs` and `zerofit_tokenize` output: DIR/train_ids.jsonl and
// DIR/test_ids.jsonl, token ids only, BOS added.
DataSource DataSourceOfDirectory(const std::string& dir);

// `model_dir` when it holds tokenizer.json (a Hugging Face model directory), else "" (token ids only).
std::string TokenizerDirOf(const std::string& model_dir);

// The prompt part's limit a run truncates with: `max_prompt_length` when given (> 0), else half of
// `max_length` (the spec's data.max_prompt_length, zerofit data check's --max-prompt-length).
int64_t PromptLengthLimit(int64_t max_prompt_length, int64_t max_length);

// "true" / "false" for add_bos; "" and "auto" leave it unset. `field` names the flag or spec field in errors.
absl::StatusOr<std::optional<bool>> ParseAddBos(const std::string& value, const std::string& field);

struct TrainingData {
  std::vector<PreferencePair> train, test;  // truncated under the run's limits
  DataReport report;                        // of the training file, before truncation
  PreferenceDataOptions options;            // what was applied (add_bos resolved, specials)
};

class HfTokenizer;

// add_bos when the spec leaves it unset: true when `tok` has a BOS and tokenizer_config.json's add_bos_token
// is true, except for conversational data (the first line of `train_path`) whose chat template writes
// bos_token itself.
bool AutoAddBos(const HfTokenizer& tok, const std::string& train_path);

// The tokenizer `source` reads text with, its overrides applied; null without tokenizer_dir (token ids
// only), where overrides are an error naming the fields.
absl::StatusOr<std::unique_ptr<HfTokenizer>> LoadDataTokenizer(const DataSource& source);

// Loads both files. Special ids come from the tokenizer when there is one, else from `config` (its
// bos_token_id and eos_token_id are then required); token ids must fit config.vocab_size. add_bos, unset:
// AutoAddBos with a tokenizer, true without one. Errors name
// the file (and line) and the field to change.
absl::StatusOr<TrainingData> LoadTrainingData(const DataSource& source, const core::HfModelConfig& config,
                                              int64_t max_length);

}  // namespace zerofit::data
