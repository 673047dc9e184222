// Splitting a global batch of preference pairs across data-parallel ranks and micro-batches.
//
// The unit is the pair: a pair's chosen and rejected sequences always land on the same rank and in the same
// micro-batch (DPO and Bradley-Terry compare them inside one forward pass). Rank r of W takes the contiguous
// block [start_r, start_r + size_r) of the global batch, where the first (B mod W) ranks take one pair more;
// inside a rank, its micro-batches are split the same way. So rank sizes differ by at most one and so do
// micro-batch sizes, and the union over ranks is the global batch, each pair exactly once, in order.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace zerofit::data {

// The half-open range [begin, end) of `total` items that part `index` of `parts` takes (as above).
// Preconditions: parts >= 1, 0 <= index < parts.
struct IndexRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
};
IndexRange EvenSplit(uint64_t total, uint64_t parts, uint64_t index);

// This rank's share of `global_batch` (pair indices, e.g. from Sampler::Next), as `micro_batches` lists.
// When the rank holds fewer pairs than micro_batches, the trailing micro-batches are empty: every rank still
// runs the same number of micro-steps (collectives stay matched) and skips the forward of an empty one. Loss
// normalization must use the global pair count, not the per-rank one.
// InvalidArgument unless world >= 1, 0 <= rank < world and micro_batches >= 1.
absl::StatusOr<std::vector<std::vector<uint64_t>>> ShardPairs(const std::vector<uint64_t>& global_batch,
                                                              int rank, int world, int micro_batches);

}  // namespace zerofit::data
