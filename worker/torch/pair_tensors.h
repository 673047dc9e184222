// A padded batch of preference pairs (data::PairBatch) as LibTorch tensors, and the strided split of a pair
// set across ranks used by evaluation and by the reference pre-pass.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/preference_dataset.h"

namespace zerofit::worker {

struct PairTensors {
  torch::Tensor tokens, starts, lengths;  // [2B, T], [2B], [2B] int64: chosen rows, then rejected rows
  std::vector<uint64_t> pair_ids;         // the B pair indices, in row order
};

absl::StatusOr<PairTensors> MakePairTensors(const std::vector<data::PreferencePair>& pairs,
                                            const std::vector<uint64_t>& ids, int32_t pad_id);

// Rank `rank`'s share of pairs [0, n) (every world-th pair, starting at rank), in chunks of at most `chunk`.
std::vector<std::vector<uint64_t>> StridedChunks(uint64_t n, int rank, int world, uint64_t chunk);

}  // namespace zerofit::worker
