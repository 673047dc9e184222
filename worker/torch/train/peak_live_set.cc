#include "worker/torch/train/peak_live_set.h"

#include <algorithm>
#include <utility>

namespace zerofit::worker {

void PeakLiveSet::Allocated(uint64_t address, size_t bytes, std::shared_ptr<const void> context) {
  std::lock_guard<std::mutex> lock(mu_);
  Block& b = live_[address];
  live_bytes_ -= b.bytes;  // 0 for a new address; a stale entry's size otherwise
  b = Block{address, bytes, std::move(context)};
  live_bytes_ += bytes;
  if (live_bytes_ <= peak_bytes_) return;
  peak_bytes_ = live_bytes_;
  const size_t step = std::max<size_t>(size_t{1} << 20, copied_bytes_ / 100);
  if (live_bytes_ >= copied_bytes_ + step) CopyLocked();
}

void PeakLiveSet::Freed(uint64_t address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(address);
  if (it == live_.end()) return;
  live_bytes_ -= it->second.bytes;
  live_.erase(it);
}

void PeakLiveSet::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_bytes_ = live_bytes_;
  CopyLocked();
}

size_t PeakLiveSet::live_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_bytes_;
}

size_t PeakLiveSet::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_bytes_;
}

std::vector<PeakLiveSet::Block> PeakLiveSet::AtPeak() const {
  std::lock_guard<std::mutex> lock(mu_);
  return at_peak_;
}

void PeakLiveSet::CopyLocked() {
  at_peak_.clear();
  at_peak_.reserve(live_.size());
  for (const auto& entry : live_) at_peak_.push_back(entry.second);
  copied_bytes_ = live_bytes_;
}

}  // namespace zerofit::worker
