// device::Device: where the engine's buffers live and its streams run. Three implementations
// (device_factory.h names them): the host (operations run inline on the calling thread), CUDA (streams,
// events, cudaMemcpyAsync, pinned memory and small kernels), and a test device whose every stream is a
// queue run by its own thread with random delays, so that a missing event wait gives wrong numbers on a CPU.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "device/buffer.h"
#include "device/stream.h"

namespace zerofit::device {

enum class DeviceKind { kHost, kCuda, kTest };
const char* DeviceKindName(DeviceKind kind);

struct MemoryStats {
  size_t allocated_bytes = 0;       // device memory this Device allocated and still holds
  size_t peak_allocated_bytes = 0;  // high-water mark of allocated_bytes since the last ResetPeakMemoryStats
  size_t total_bytes = 0;           // the device's capacity (0 when unknown)
  size_t free_bytes = 0;            // what the driver reports free now (0 when unknown)
};

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  // "cpu", "cuda:0", "test".
  virtual std::string name() const = 0;
  // Zeroed memory of `kind`. Pinned memory that cannot be locked is returned pageable with pin_status set.
  virtual absl::StatusOr<Buffer> Allocate(size_t bytes, MemoryKind kind) = 0;
  virtual absl::StatusOr<std::unique_ptr<Stream>> CreateStream() = 0;
  virtual absl::StatusOr<std::unique_ptr<Event>> CreateEvent() = 0;
  // An event that also times its markings (Event::MillisecondsSince). On CUDA it costs a little more to
  // record than CreateEvent's, so the engine's ordering uses those and only its clocks use these.
  virtual absl::StatusOr<std::unique_ptr<Event>> CreateTimingEvent() = 0;
  // The stream the model computes on, not owned: on CUDA the legacy default stream LibTorch uses unless
  // told otherwise; on the host the inline stream; on the test device a delayed stream like the others.
  virtual Stream& compute_stream() = 0;
  // True when host code may read kDevice memory directly (host and test devices, after synchronising).
  virtual bool device_memory_is_host() const = 0;
  virtual MemoryStats memory_stats() const = 0;
  // Starts a new window for memory_stats().peak_allocated_bytes (it becomes allocated_bytes now), as
  // LibTorch's resetPeakStats does for its caching allocator: a training step reports its own peak.
  virtual void ResetPeakMemoryStats() = 0;
};

// Host memory of `kind` (pageable or pinned: cudaHostAlloc when a CUDA device is visible, else mlock;
// kDevice is pageable here). Shared by the host and test devices.
absl::StatusOr<Buffer> AllocateHostMemory(size_t bytes, MemoryKind kind);

}  // namespace zerofit::device
