// How one flat range of `numel` elements is split across `world` ranks.
//
// The range is padded up to `padded_numel`, a multiple of world * alignment, so every rank owns an equal,
// aligned, contiguous block of `shard_numel` elements: [shard_offset, shard_offset + shard_numel). Equal
// blocks are what reduce-scatter / all-gather (NCCL in particular) require. The padding tail is never a real
// element; `valid_numel` says how many of this rank's elements are real (the last ranks may own only
// padding).
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"

namespace zerofit::sharding {

struct ShardLayout {
  size_t numel = 0;         // real elements
  size_t padded_numel = 0;  // multiple of world * alignment, >= numel
  size_t shard_numel = 0;   // padded_numel / world
  size_t shard_offset = 0;  // rank * shard_numel
  size_t valid_numel = 0;   // real elements inside this rank's shard
  int world = 1;
  int rank = 0;

  // Pads instead of refusing odd sizes. alignment is in elements (> 0); world > 0; 0 <= rank < world.
  static absl::StatusOr<ShardLayout> Make(size_t numel, int world, int rank, size_t alignment);

  size_t padding() const { return padded_numel - numel; }
};

// Rounds `n` up to a multiple of `multiple` (> 0).
constexpr size_t RoundUp(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace zerofit::sharding
