// A host tensor's copy on a device that does not make the host wait for the device's queue.
//
// LibTorch synchronises the stream after a blocking copy between host and GPU, and a copy from pageable
// memory is staged and blocks: either way the host waits until the GPU has run everything queued before it
// (the previous micro-batch's backward, the policy's forward) and the GPU then idles while the host queues
// what comes next. From pinned memory with non_blocking the copy is queued like a kernel; LibTorch's caching
// host allocator keeps the pinned block until the copy has run.
#pragma once

#include <torch/torch.h>

namespace zerofit::worker {

// `host` (a CPU tensor) on `device`: through pinned memory and a non-blocking copy on a GPU, as it is on the
// CPU; an undefined tensor stays undefined.
torch::Tensor HostToDevice(const torch::Tensor& host, const torch::Device& device);

}  // namespace zerofit::worker
