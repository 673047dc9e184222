// The test device: proves the engine's stream ordering on a CPU. Every stream is a FIFO queue run by its
// own thread, which sleeps a random time (up to max_delay) before each operation, so that streams
// interleave differently on every run. "Device" memory is host memory, the kernels are the host references
// (bit-identical to the host device), and events are real cross-thread markers: work that forgets to wait
// for an event runs early and reads or writes the wrong values, which a test comparing against the host
// device sees.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "device/device.h"
#include "device/memory_counter.h"

namespace zerofit::device {

struct TestDeviceOptions {
  uint64_t seed = 1;
  absl::Duration max_delay = absl::Microseconds(200);
  // Deadline of an event wait inside a stream and of the destructor's drain; a wait past it breaks the
  // stream (a missing Record would otherwise hang the test).
  absl::Duration wait_timeout = absl::Seconds(60);
  // Each stream's delays are drawn up to max_delay times a factor picked per stream from {1/4, 1, 4}, so
  // some streams are systematically slower than others (races that need one stream to lag show up).
  bool vary_stream_speed = true;
  // As CUDA runs cudaLaunchHostFunc callbacks: the host functions of every stream of the device one at a
  // time, on a single thread of the device's (the stream waits for its own, in stream order). Off: each
  // stream's thread runs its host functions itself, as it runs every other operation.
  bool serial_host_functions = false;
};

class HostFunctionThread;

// Thread-safe.
class TestDevice final : public Device {
 public:
  explicit TestDevice(TestDeviceOptions options = {});
  ~TestDevice() override;
  DeviceKind kind() const override { return DeviceKind::kTest; }
  std::string name() const override { return "test"; }
  absl::StatusOr<Buffer> Allocate(size_t bytes, MemoryKind kind) override;
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override;
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override;
  absl::StatusOr<std::unique_ptr<Event>> CreateTimingEvent() override;
  Stream& compute_stream() override { return *compute_; }
  bool device_memory_is_host() const override { return true; }
  MemoryStats memory_stats() const override;
  void ResetPeakMemoryStats() override { counter_->ResetPeak(); }
  // How many host functions (Stream::HostFunc) the device's streams have run, all streams together.
  uint64_t host_functions_run() const { return host_functions_run_->load(); }

 private:
  std::unique_ptr<Stream> NewStream();

  TestDeviceOptions options_;
  std::atomic<uint64_t> next_stream_{0};  // seeds each stream's delays differently
  std::shared_ptr<MemoryCounter> counter_;
  std::shared_ptr<std::atomic<uint64_t>> host_functions_run_;  // shared with the streams
  std::shared_ptr<HostFunctionThread> host_thread_;            // null unless serial_host_functions
  std::unique_ptr<Stream> compute_;
};

}  // namespace zerofit::device
