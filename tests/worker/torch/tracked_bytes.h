// What a piece of a model keeps for backward and what its forward and backward peak at, counted by the
// tracking allocator (worker/torch/train/tracking_allocator.h) on the CPU.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "worker/torch/train/tracking_allocator.h"

namespace zerofit::worker {

// Bytes a forward leaves allocated for backward beyond its inputs and its output: allocated bytes with the
// output held, less those before the call, less the output's own.
template <typename Fn>
int64_t KeptBytes(Fn fn) {
  TrackingAllocator tracker;
  ScopedTrackingAllocator scope(&tracker);
  const int64_t before = tracker.live_bytes();
  torch::Tensor y = fn();
  return tracker.live_bytes() - before - static_cast<int64_t>(y.numel() * y.element_size());
}

// The peak of a forward and its backward over what was allocated before the forward.
template <typename Fn>
int64_t ForwardBackwardPeakBytes(Fn fn, const torch::Tensor& dy) {
  TrackingAllocator tracker;
  ScopedTrackingAllocator scope(&tracker);
  tracker.ResetPeak();
  const int64_t start = tracker.live_bytes();
  fn().backward(dy);
  return tracker.peak_bytes() - start;
}

}  // namespace zerofit::worker
