// What a preference data set becomes under a tokenizer before a run spends GPU hours on it: counts, length
// percentiles, the share truncated at max_length, and lint findings, each with what to change. Printed by
// `zerofit data check` and by rank 0 of every training run before its first step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "worker/data/preference_dataset.h"

namespace zerofit::data {

struct LengthPercentiles {
  size_t p50 = 0, p90 = 0, p99 = 0, max = 0;  // nearest rank
};

struct DataLint {
  std::string name;  // e.g. "prompts starting with a doubled BOS"
  size_t count = 0;  // pairs or responses affected (1 for a config finding)
  std::string fix;   // what to change
};

// What the lint holds the data against: the tokenizer's special ids and whether its template or config
// expects prompts to start with BOS.
struct DataExpectations {
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t configured_pad_id = -1;  // -1: the config names no pad token (padding falls back to EOS)
  bool expects_bos = false;
};

struct DataReport {
  size_t pairs = 0;  // or SFT examples (sft)
  bool sft = false;
  bool add_bos = false;
  LengthPercentiles prompt;    // prompt part, BOS included, before truncation
  LengthPercentiles sequence;  // prompt + the longer response, BOS/EOS included, before truncation
  size_t truncated_pairs = 0;  // pairs whose longer sequence exceeds max_length
  int64_t max_length = 0;
  // sft: after truncation, the tokens SFT's loss scores (the completion's, or its assistant turns' with
  // assistant_only_loss; never a row's position 0, which nothing predicts) and all tokens of the examples.
  size_t scored_tokens = 0, tokens = 0;
  // Pairs or examples whose responses are chat-template renderings (PreferencePair::chat_rendered): no EOS
  // appended to them. The others have one appended.
  size_t chat_rendered = 0;
  std::vector<DataLint> lints;  // every check, count 0 when clean
};

// Measures and lints `whole`: pairs loaded with `options` but max_length 0 (nothing truncated yet).
// `options` holds the real limits the run applies. `truncated` (optional) receives every pair truncated
// under them (TruncatePair with the expectations' BOS and EOS), the same pairs the lint inspects.
DataReport BuildDataReport(const std::vector<PreferencePair>& whole, const DataExpectations& expect,
                           const PreferenceDataOptions& options,
                           std::vector<PreferencePair>* truncated = nullptr);

// A pair of `whole` (loaded untruncated with `options`' add_bos/add_eos) truncated under `options`' limits,
// exactly as loading it with them would have.
PreferencePair TruncatePair(const PreferencePair& whole, int32_t bos_id, int32_t eos_id,
                            const PreferenceDataOptions& options);

// The report as a person reads it, `source` naming the file, or (json) as one JSON object.
std::string FormatDataReport(const DataReport& report, const std::string& source, bool json);

}  // namespace zerofit::data
