// LandingPool: where the reduce-scatters land when the updater consumes each landed shard as it arrives
// (offload's device-to-host copy, the device updater's fp32 accumulation): a few device buffers sized as the
// largest buckets' shards, each reused once its last consumer has run, instead of one buffer the size of the
// whole shard (2 B a shard element in bf16: at world size 1 a second copy of the model's gradients).
//
// A slot's reuse is ordered on the device, not waited for on the host: Release records an event after the
// consumers the updater has enqueued (ShardUpdater::MarkReceivesConsumed), and the next Acquire of that slot
// makes the stream the next reduce-scatter follows wait for it.
//
// Not thread-safe: the engine's thread (GradientReducer).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "device/device.h"
#include "sharding/shard_updater.h"

namespace zerofit::sharding {

class LandingPool {
 public:
  // One slot per entry of `slot_bytes` (the largest buckets' shards, in bytes), allocated now.
  static absl::StatusOr<LandingPool> Create(device::Device* device, const std::vector<size_t>& slot_bytes);

  // The smallest free slot holding `bytes`, with `after` ordered after its previous consumers; -1 when every
  // slot that big is taken (the caller completes an in-flight bucket, or Adds a slot).
  absl::StatusOr<int> TryAcquire(size_t bytes, device::Stream& after);
  absl::Status Add(size_t bytes);
  void* data(int slot) { return slots_[slot].buffer.data(); }
  // The slot's shard has gone to `sink`, whose consumers of it are enqueued: the slot is free once they ran.
  absl::Status Release(int slot, ShardUpdater& sink);

  size_t slots() const { return slots_.size(); }
  size_t bytes() const;

 private:
  struct Slot {
    device::Buffer buffer;
    std::unique_ptr<device::Event> consumed;  // recorded after the last consumers of what landed here
    bool free = true;
  };
  explicit LandingPool(device::Device* device) : device_(device) {}

  device::Device* device_;
  std::vector<Slot> slots_;
};

}  // namespace zerofit::sharding
