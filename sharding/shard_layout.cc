#include "sharding/shard_layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace zerofit::sharding {

absl::StatusOr<ShardLayout> ShardLayout::Make(size_t numel, int world, int rank, size_t alignment) {
  if (world <= 0) return absl::InvalidArgumentError(absl::StrCat("ShardLayout: world size ", world, " <= 0"));
  if (rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat("ShardLayout: rank ", rank, " outside [0, ", world, ")"));
  }
  if (alignment == 0) return absl::InvalidArgumentError("ShardLayout: alignment must be > 0 elements");
  ShardLayout l;
  l.numel = numel;
  l.world = world;
  l.rank = rank;
  l.padded_numel = RoundUp(std::max<size_t>(numel, 1), static_cast<size_t>(world) * alignment);
  l.shard_numel = l.padded_numel / static_cast<size_t>(world);
  l.shard_offset = static_cast<size_t>(rank) * l.shard_numel;
  l.valid_numel = numel > l.shard_offset ? std::min(l.shard_numel, numel - l.shard_offset) : 0;
  return l;
}

}  // namespace zerofit::sharding
