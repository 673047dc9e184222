#include "worker/data/pair_batch.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace zerofit::data {
namespace {

// A row's `scored` flags (row = its first position): the chosen response's chosen_scored, or the whole
// response when it has none (a rejected response always).
void MarkScored(const PreferencePair& p, size_t half, uint8_t* row) {
  uint8_t* response = row + p.prompt.size();
  if (half == 0 && !p.chosen_scored.empty()) {
    std::copy(p.chosen_scored.begin(), p.chosen_scored.end(), response);
  } else {
    std::fill_n(response, half == 0 ? p.chosen.size() : p.rejected.size(), uint8_t{1});
  }
}

}  // namespace

absl::StatusOr<PairBatch> MakePairBatch(const std::vector<PreferencePair>& pairs,
                                        const std::vector<uint64_t>& indices, int32_t pad_id, PairRows rows) {
  PairBatch batch;
  const size_t num_pairs = indices.size();
  const size_t halves = rows == PairRows::kChosenOnly ? 1 : 2;
  batch.num_pairs = static_cast<int64_t>(num_pairs);
  batch.rows_per_pair = static_cast<int64_t>(halves);
  size_t max_len = 0;
  for (size_t b = 0; b < num_pairs; ++b) {
    if (indices[b] >= pairs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("MakePairBatch: index ", indices[b], " (position ", b,
                                                     ") is outside the ", pairs.size(), " pairs"));
    }
    const PreferencePair& p = pairs[indices[b]];
    if (p.chosen.empty() || (halves == 2 && p.rejected.empty())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MakePairBatch: pair from line ", p.source_line, " has an empty ",
          p.chosen.empty() ? "chosen" : "rejected (an SFT example, which reward models and DPO cannot use)",
          " response"));
    }
    if (!p.chosen_scored.empty() && p.chosen_scored.size() != p.chosen.size()) {
      return absl::InvalidArgumentError(absl::StrCat("MakePairBatch: pair from line ", p.source_line, " has ",
                                                     p.chosen_scored.size(), " scored flags for ",
                                                     p.chosen.size(), " chosen tokens"));
    }
    const size_t longest = halves == 2 ? std::max(p.chosen.size(), p.rejected.size()) : p.chosen.size();
    max_len = std::max(max_len, p.prompt.size() + longest);
  }
  if (max_len > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("MakePairBatch: a sequence of ", max_len, " tokens"));
  }
  batch.max_len = static_cast<int64_t>(max_len);
  batch.tokens.assign(halves * num_pairs * max_len, pad_id);
  batch.lengths.resize(halves * num_pairs);
  batch.response_start.resize(halves * num_pairs);
  batch.source_lines.resize(num_pairs);
  batch.margins.resize(num_pairs);
  const bool masked = std::any_of(indices.begin(), indices.end(),
                                  [&](uint64_t i) { return !pairs[i].chosen_scored.empty(); });
  if (masked) batch.scored.assign(halves * num_pairs * max_len, 0);
  for (size_t b = 0; b < num_pairs; ++b) {
    const PreferencePair& p = pairs[indices[b]];
    batch.source_lines[b] = p.source_line;
    batch.margins[b] = static_cast<float>(p.margin);
    batch.scored_tokens += static_cast<int64_t>(ScoredTokens(p));
    for (size_t half = 0; half < halves; ++half) {
      const std::vector<int32_t>& response = half == 0 ? p.chosen : p.rejected;
      const size_t row = half * num_pairs + b;
      int32_t* dst = batch.tokens.data() + row * max_len;
      std::copy(p.prompt.begin(), p.prompt.end(), dst);
      std::copy(response.begin(), response.end(), dst + p.prompt.size());
      batch.lengths[row] = static_cast<int32_t>(p.prompt.size() + response.size());
      batch.response_start[row] = static_cast<int32_t>(p.prompt.size());
      if (masked) MarkScored(p, half, batch.scored.data() + row * max_len);
    }
  }
  return batch;
}

absl::StatusOr<PairBatch> MakePairBatch(const std::vector<PreferencePair>& pairs, int32_t pad_id) {
  std::vector<uint64_t> all(pairs.size());
  std::iota(all.begin(), all.end(), uint64_t{0});
  return MakePairBatch(pairs, all, pad_id);
}

}  // namespace zerofit::data
