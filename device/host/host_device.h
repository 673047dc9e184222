// The host device: every buffer is host memory and every stream operation runs inline on the calling
// thread (so events are always complete). What the CPU engine ran before the device seam existed; the
// reference the test device and the CUDA device are compared with.
#pragma once

#include <memory>

#include "device/device.h"
#include "device/memory_counter.h"

namespace zerofit::device {

// Thread-safe.
class HostDevice final : public Device {
 public:
  HostDevice();
  ~HostDevice() override;
  DeviceKind kind() const override { return DeviceKind::kHost; }
  std::string name() const override { return "cpu"; }
  absl::StatusOr<Buffer> Allocate(size_t bytes, MemoryKind kind) override;
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override;
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override;
  absl::StatusOr<std::unique_ptr<Event>> CreateTimingEvent() override;
  Stream& compute_stream() override { return *compute_; }
  bool device_memory_is_host() const override { return true; }
  MemoryStats memory_stats() const override;
  void ResetPeakMemoryStats() override { counter_->ResetPeak(); }

 private:
  std::unique_ptr<Stream> compute_;
  std::shared_ptr<MemoryCounter> counter_;
};

}  // namespace zerofit::device
