// A micro-batch of preference pairs as flat, padded int32 buffers (torch-free; worker/torch wraps them with
// torch::from_blob, without copying, for as long as the PairBatch lives).
//
// Layout: two halves. With B pairs there are 2B rows; row b (0 <= b < B) is the CHOSEN sequence of pair b
// and row B + b its REJECTED sequence. So a per-row result r[2B] splits as chosen = r[:B], rejected = r[B:]
// with contiguous slices, which is what the DPO and Bradley-Terry losses take
// (worker/torch/train/objectives.h). Row i is prompt ++ response (preference_dataset.h), right-padded with
// pad_id to max_len, the longest row of THIS batch (not the dataset's max_length). Real tokens of row i: [0,
// lengths[i]); response (the tokens the loss scores): [response_start[i], lengths[i]).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/preference_dataset.h"

namespace zerofit::data {

struct PairBatch {
  int64_t num_pairs = 0;                // B
  int64_t max_len = 0;                  // T
  std::vector<int32_t> tokens;          // [2B, T] row-major, in elements
  std::vector<int32_t> lengths;         // [2B] real tokens per row (1 <= lengths <= T)
  std::vector<int32_t> response_start;  // [2B] == prompt length (BOS included) of the row's pair
  std::vector<uint64_t> source_lines;   // [B] JSONL line of each pair, for messages about a bad pair

  int64_t num_rows() const { return 2 * num_pairs; }
  // Element offset of row i in `tokens`.
  int64_t row_offset(int64_t i) const { return i * max_len; }
};

// The batch of pairs[indices[0]], pairs[indices[1]], ... in that order. An empty `indices` gives an empty
// batch (num_pairs 0, max_len 0). InvalidArgument when an index is out of range, a pair has an empty
// response, or a row is longer than int32 can count.
absl::StatusOr<PairBatch> MakePairBatch(const std::vector<PreferencePair>& pairs,
                                        const std::vector<uint64_t>& indices, int32_t pad_id);
// All of `pairs`, in order.
absl::StatusOr<PairBatch> MakePairBatch(const std::vector<PreferencePair>& pairs, int32_t pad_id);

}  // namespace zerofit::data
