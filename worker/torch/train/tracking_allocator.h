// A CPU allocator for LibTorch that counts exact tensor bytes: live bytes now and the peak since the last
// ResetPeak(). Used by the planner's measurement harness (memory_probe.h) to compare predicted with measured
// memory. Installed for a scope with ScopedTrackingAllocator; allocations made while it is installed are
// freed through it even after it is uninstalled (the deleter travels with each DataPtr).
#pragma once

#include <c10/core/Allocator.h>
#include <torch/version.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace zerofit::worker {

// LibTorch 2.3 made Allocator::allocate non-const and added copy_data.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define ZEROFIT_ALLOCATOR_NEW_API 1
#endif

class TrackingAllocator final : public c10::Allocator {
 public:
#ifdef ZEROFIT_ALLOCATOR_NEW_API
  c10::DataPtr allocate(size_t n) override;
  void copy_data(void* dest, const void* src, size_t count) const override;
#else
  c10::DataPtr allocate(size_t n) const override;
#endif
  c10::DeleterFnPtr raw_deleter() const override;

  int64_t live_bytes() const { return live_.load(); }
  int64_t peak_bytes() const { return peak_.load(); }
  int64_t allocations() const { return allocations_.load(); }
  // Peak := live now.
  void ResetPeak() { peak_.store(live_.load()); }

  // Called by the deleter of every block this allocator handed out.
  void Release(int64_t bytes) { live_.fetch_sub(bytes); }

 private:
  void Add(int64_t bytes) const;

  mutable std::atomic<int64_t> live_{0};
  mutable std::atomic<int64_t> peak_{0};
  mutable std::atomic<int64_t> allocations_{0};
};

// Makes `allocator` LibTorch's CPU allocator for the scope; restores the previous one on exit. Not nestable
// with other code that swaps the CPU allocator. `allocator` must outlive every tensor allocated through it.
class ScopedTrackingAllocator {
 public:
  explicit ScopedTrackingAllocator(TrackingAllocator* allocator);
  ~ScopedTrackingAllocator();
  ScopedTrackingAllocator(const ScopedTrackingAllocator&) = delete;
  ScopedTrackingAllocator& operator=(const ScopedTrackingAllocator&) = delete;

 private:
  c10::Allocator* previous_;
};

}  // namespace zerofit::worker
