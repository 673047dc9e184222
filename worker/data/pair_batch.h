// A micro-batch of preference pairs as flat, padded int32 buffers (torch-free; worker/torch wraps them with
// torch::from_blob, without copying, for as long as the PairBatch lives).
//
// Layout: two halves. With B pairs there are 2B rows; row b (0 <= b < B) is the CHOSEN sequence of pair b
// and row B + b its REJECTED sequence (PairRows::kChosenOnly, SFT's batches: the B chosen rows alone). So a
// per-row result r[2B] splits as chosen = r[:B], rejected = r[B:] with contiguous slices, which is what the
// DPO and Bradley-Terry losses take (worker/torch/train/objectives.h). Row i is prompt ++ response
// (preference_dataset.h), right-padded with pad_id to max_len, the longest row of THIS batch (not the
// dataset's max_length). Real tokens of row i: [0, lengths[i]); response (the tokens the loss scores):
// [response_start[i], lengths[i]), or where `scored` says when an SFT example scores only some of them
// (assistant_only_loss: PreferencePair::chosen_scored).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/preference_dataset.h"

namespace zerofit::data {

// Which rows a batch holds: both responses of each pair (reward models, DPO), or the chosen ones alone (SFT,
// whose loss reads nothing else: its examples have no rejected response).
enum class PairRows { kChosenAndRejected, kChosenOnly };

struct PairBatch {
  int64_t num_pairs = 0;                // B
  int64_t rows_per_pair = 2;            // 1 with PairRows::kChosenOnly
  int64_t max_len = 0;                  // T
  std::vector<int32_t> tokens;          // [rows, T] row-major, in elements (rows = num_rows())
  std::vector<int32_t> lengths;         // [rows] real tokens per row (1 <= lengths <= T)
  std::vector<int32_t> response_start;  // [rows] == prompt length (BOS included) of the row's pair
  std::vector<uint64_t> source_lines;   // [B] JSONL line of each pair, for messages about a bad pair
  std::vector<float> margins;           // [B] each pair's PreferencePair::margin (reward models)
  // [rows, T] row-major, 1 at each position the loss scores: empty unless a pair has chosen_scored (then a
  // row without it scores its whole response).
  std::vector<uint8_t> scored;
  // The chosen rows' tokens a loss scores, the pairs' ScoredTokens summed: SFT's loss units, DPO's NLL
  // term's.
  int64_t scored_tokens = 0;

  int64_t num_rows() const { return rows_per_pair * num_pairs; }
  // Element offset of row i in `tokens`.
  int64_t row_offset(int64_t i) const { return i * max_len; }
};

// The batch of pairs[indices[0]], pairs[indices[1]], ... in that order. An empty `indices` gives an empty
// batch (num_pairs 0, max_len 0). InvalidArgument when an index is out of range, a row's response is empty
// (with kChosenOnly the rejected response is not looked at), or a row is longer than int32 can count.
absl::StatusOr<PairBatch> MakePairBatch(const std::vector<PreferencePair>& pairs,
                                        const std::vector<uint64_t>& indices, int32_t pad_id,
                                        PairRows rows = PairRows::kChosenAndRejected);
// All of `pairs`, in order.
absl::StatusOr<PairBatch> MakePairBatch(const std::vector<PreferencePair>& pairs, int32_t pad_id);

}  // namespace zerofit::data
