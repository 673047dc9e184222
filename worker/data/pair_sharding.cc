#include "worker/data/pair_sharding.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace zerofit::data {

IndexRange EvenSplit(uint64_t total, uint64_t parts, uint64_t index) {
  const uint64_t base = total / parts;
  const uint64_t extra = total % parts;  // the first `extra` parts take base + 1
  const uint64_t begin = index * base + (index < extra ? index : extra);
  return IndexRange{begin, begin + base + (index < extra ? 1 : 0)};
}

absl::StatusOr<std::vector<std::vector<uint64_t>>> ShardPairs(const std::vector<uint64_t>& global_batch,
                                                              int rank, int world, int micro_batches) {
  if (world < 1 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShardPairs: rank ", rank, " is not in [0, world) for world ", world));
  }
  if (micro_batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShardPairs: micro_batches must be >= 1, got ", micro_batches));
  }
  const IndexRange mine =
      EvenSplit(global_batch.size(), static_cast<uint64_t>(world), static_cast<uint64_t>(rank));
  std::vector<std::vector<uint64_t>> out(static_cast<size_t>(micro_batches));
  for (int m = 0; m < micro_batches; ++m) {
    const IndexRange r =
        EvenSplit(mine.size(), static_cast<uint64_t>(micro_batches), static_cast<uint64_t>(m));
    out[m].assign(global_batch.begin() + static_cast<std::ptrdiff_t>(mine.begin + r.begin),
                  global_batch.begin() + static_cast<std::ptrdiff_t>(mine.begin + r.end));
  }
  return out;
}

}  // namespace zerofit::data
