#include "sharding/landing_pool.h"

#include "core/status_macros.h"

namespace zerofit::sharding {

absl::StatusOr<LandingPool> LandingPool::Create(device::Device* device,
                                                const std::vector<size_t>& slot_bytes) {
  LandingPool pool(device);
  for (size_t bytes : slot_bytes) ZF_RETURN_IF_ERROR(pool.Add(bytes));
  return pool;
}

absl::Status LandingPool::Add(size_t bytes) {
  Slot s;
  ZF_ASSIGN_OR_RETURN(s.buffer, device_->Allocate(bytes, device::MemoryKind::kDevice));
  ZF_ASSIGN_OR_RETURN(s.consumed, device_->CreateEvent());
  slots_.push_back(std::move(s));
  return absl::OkStatus();
}

absl::StatusOr<int> LandingPool::TryAcquire(size_t bytes, device::Stream& after) {
  int best = -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.free && s.buffer.bytes() >= bytes && (best < 0 || s.buffer.bytes() < slots_[best].buffer.bytes())) {
      best = static_cast<int>(i);
    }
  }
  if (best < 0) return -1;
  Slot& s = slots_[best];
  // The previous shard's consumers read the slot: the reduce-scatter that overwrites it follows them.
  ZF_RETURN_IF_ERROR(s.consumed->Wait(after));
  s.free = false;
  return best;
}

absl::Status LandingPool::Release(int slot, ShardUpdater& sink) {
  Slot& s = slots_[slot];
  ZF_RETURN_IF_ERROR(sink.MarkReceivesConsumed(*s.consumed));
  s.free = true;
  return absl::OkStatus();
}

size_t LandingPool::bytes() const {
  size_t total = 0;
  for (const Slot& s : slots_) total += s.buffer.bytes();
  return total;
}

}  // namespace zerofit::sharding
