// The CUDA device: device memory from cudaMalloc (counted for memory_stats), pinned host memory from
// cudaHostAlloc (AllocateHostMemory), non-blocking streams, events, and the engine's kernels (.cu files in
// this folder, each matching its host reference in device/kernels.h). compute_stream() is the legacy
// default stream, where LibTorch computes unless told otherwise; the engine orders its own streams against
// it with events, never a device-wide synchronize.
//
// Every call that depends on the calling thread's current device sets it first (cudaSetDevice(index)), so
// a rank may use its Device from any thread. Thread-safe.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "device/cuda/cuda_stream.h"
#include "device/device.h"
#include "device/memory_counter.h"

namespace zerofit::device {

class CudaDevice final : public Device {
 public:
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Create(int index);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string name() const override;
  // kDevice: cudaMalloc, zeroed on a private stream before it is returned. Freeing (Buffer::Reset) is
  // cudaFree, which synchronises the GPU: release device buffers at teardown, not on the hot path.
  absl::StatusOr<Buffer> Allocate(size_t bytes, MemoryKind kind) override;
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override;
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override;
  absl::StatusOr<std::unique_ptr<Event>> CreateTimingEvent() override;
  Stream& compute_stream() override { return *compute_; }
  bool device_memory_is_host() const override { return false; }
  // allocated/peak from this Device's own buffers; total/free from cudaMemGetInfo (0 if it fails).
  MemoryStats memory_stats() const override;
  void ResetPeakMemoryStats() override { counter_->ResetPeak(); }

  int index() const { return index_; }

 private:
  CudaDevice(int index, std::unique_ptr<CudaStream> compute, cudaStream_t zero_stream);

  const int index_;
  std::shared_ptr<MemoryCounter> counter_ = std::make_shared<MemoryCounter>();
  std::unique_ptr<CudaStream> compute_;  // wraps cudaStreamLegacy
  cudaStream_t zero_stream_;             // zeroes new allocations without touching the engine's streams
};

// GPUs visible to this process (cudaGetDeviceCount; 0 when there is no driver or no device).
int CudaVisibleDevices();
// cuda:<index>; FailedPrecondition naming how many GPUs are visible when the index is not one of them.
absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int index);

}  // namespace zerofit::device
