// `zerofit data check FILE --tokenizer DIR`: what a preference JSONL file becomes under a Hugging Face
// tokenizer before a run spends GPU hours on it: counts, length percentiles, the share truncated at
// --max-length, and lint findings, each with what to change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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
  int64_t max_prompt_length = 256;
  std::string add_bos = "auto";  // auto: the tokenizer has a BOS and tokenizer_config.json's add_bos_token
  bool json = false;
};

struct LengthPercentiles {
  size_t p50 = 0, p90 = 0, p99 = 0, max = 0;
};

struct DataLint {
  std::string name;  // e.g. "doubled BOS"
  size_t count = 0;  // pairs or responses affected (1 for a config finding)
  std::string fix;   // what to change
};

struct DataCheckReport {
  size_t pairs = 0;
  bool add_bos = false;
  LengthPercentiles prompt;    // prompt part, BOS included, before truncation
  LengthPercentiles sequence;  // prompt + the longer response, BOS/EOS included, before truncation
  size_t truncated_pairs = 0;  // pairs whose longer sequence exceeds max_length
  int64_t max_length = 0;
  std::vector<DataLint> lints;  // every check, count 0 when clean
};

// Loads `path` with `tok` (no truncation), then measures and lints it against `options` (max_length,
// max_prompt_length, add_bos; add_eos is on). Load errors name the file and line.
absl::StatusOr<DataCheckReport> CheckPreferenceData(const std::string& path, const data::HfTokenizer& tok,
                                                    const data::PreferenceDataOptions& options);

// The report as a person reads it, or (json) as one JSON object.
std::string FormatDataCheck(const DataCheckReport& report, const std::string& path, bool json);

// Registers `data check` on `app`; returns the `check` subcommand. `flags` must outlive parsing.
CLI::App* AddDataCheckCommand(CLI::App& app, DataCheckFlags* flags);

absl::StatusOr<std::string> RunDataCheck(const DataCheckFlags& flags);

}  // namespace zerofit::cli
