#include "worker/torch/train/pair_tensors.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "worker/torch/model/reward_readout.h"

namespace zerofit::worker {

int32_t BatchPadId(const core::HfModelConfig& config) {
  return static_cast<int32_t>(config.pad_token_id.value_or(config.eos_token_id.value_or(0)));
}

BatchFormat BatchFormatOf(const core::HfModelConfig& config, bool reward_model) {
  BatchFormat f;
  f.pad_id = BatchPadId(config);
  f.reward_readout = reward_model;
  f.readout_pad_token = config.pad_token_id;
  return f;
}

namespace {

// RewardReadoutPositions on the batch's host tensors (no device, no synchronisation); its refusal names the
// pairs, chosen rows first.
absl::StatusOr<torch::Tensor> HostReadout(const PairTensors& t, std::optional<int64_t> pad_token) {
  try {
    return RewardReadoutPositions(t.tokens, t.lengths, pad_token);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reward read-out of pairs [", absl::StrJoin(t.pair_ids, ", "),
        "] (rows: their chosen responses, then their rejected ones): ", e.what_without_backtrace()));
  }
}

}  // namespace

absl::StatusOr<PairTensors> MakePairTensors(const std::vector<data::PreferencePair>& pairs,
                                            const std::vector<uint64_t>& ids, const BatchFormat& format) {
  ZF_ASSIGN_OR_RETURN(data::PairBatch b, data::MakePairBatch(pairs, ids, format.pad_id, format.rows));
  PairTensors t;
  // .to(kLong) copies, so the tensors do not outlive-reference the PairBatch buffers.
  t.tokens = torch::from_blob(b.tokens.data(), {b.num_rows(), b.max_len}, torch::kInt32).to(torch::kLong);
  t.starts = torch::from_blob(b.response_start.data(), {b.num_rows()}, torch::kInt32).to(torch::kLong);
  t.lengths = torch::from_blob(b.lengths.data(), {b.num_rows()}, torch::kInt32).to(torch::kLong);
  t.pair_ids = ids;
  if (!b.response_start.empty() && b.max_len >= 2) {
    const int64_t first = *std::min_element(b.response_start.begin(), b.response_start.end());
    t.head_from = std::clamp<int64_t>(first - 1, 0, b.max_len - 2);
  }
  if (!b.scored.empty()) {
    t.scored = torch::from_blob(b.scored.data(), {b.num_rows(), b.max_len}, torch::kUInt8).to(torch::kBool);
  }
  t.scored_tokens = b.scored_tokens;
  if (format.reward_readout) {
    ZF_ASSIGN_OR_RETURN(t.readout, HostReadout(t, format.readout_pad_token));
    if (std::any_of(b.margins.begin(), b.margins.end(), [](float m) { return m != 0.0f; })) {
      t.margins = torch::from_blob(b.margins.data(), {b.num_pairs}, torch::kFloat32).clone();
    }
  }
  return t;
}

std::vector<std::vector<uint64_t>> StridedChunks(uint64_t n, int rank, int world, uint64_t chunk) {
  std::vector<std::vector<uint64_t>> out;
  for (uint64_t i = static_cast<uint64_t>(rank); i < n; i += static_cast<uint64_t>(world)) {
    if (out.empty() || out.back().size() == chunk) out.emplace_back();
    out.back().push_back(i);
  }
  return out;
}

}  // namespace zerofit::worker
