// device::Stream on a CUDA stream. Owned streams are created non-blocking (they never synchronise with the
// legacy default stream); the device's compute_stream() wraps cudaStreamLegacy without owning it, because
// LibTorch computes there unless told otherwise.
//
// Every runtime call is preceded by cudaSetDevice(device): ranks may drive their GPUs from several threads,
// and kernel launches, the legacy stream and allocations all depend on the calling thread's current device.
// The destructor never waits: cudaStreamDestroy returns at once and CUDA releases the stream when its work
// has run; host functions still queued keep the state they need alive themselves.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "device/stream.h"

namespace zerofit::device {

// The stream's first asynchronous error (a failed host function, a CUDA fault seen by a query).
// Thread-safe: CUDA's host-function thread sets it while the engine's thread reads it.
class StickyStatus {
 public:
  void Update(const absl::Status& s);
  absl::Status Get();

 private:
  std::mutex mu_;
  absl::Status status_;  // guarded by mu_
};

class CudaStream final : public Stream {
 public:
  // A new non-blocking stream on GPU `device`.
  static absl::StatusOr<std::unique_ptr<CudaStream>> Create(int device);
  // The legacy default stream of GPU `device`, not owned.
  static absl::StatusOr<std::unique_ptr<CudaStream>> WrapLegacy(int device);
  ~CudaStream() override;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  absl::Status Copy(void* dst, const void* src, size_t bytes) override;
  absl::Status Fill(void* dst, uint8_t value, size_t bytes) override;
  absl::Status Accumulate(const void* src, core::DType src_type, float* acc, size_t n, float scale) override;
  absl::Status SumOfSquares(const void* src, core::DType dtype, size_t n, double* out) override;
  absl::Status Convert(const void* src, core::DType src_type, void* dst, core::DType dst_type,
                       size_t n) override;
  absl::Status AdamW(const AdamWArgs& args) override;
  absl::Status AdamW8bit(const AdamW8bitArgs& args) override;
  absl::Status HostFunc(std::function<absl::Status()> fn) override;
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override;
  absl::Status Synchronize(absl::Duration timeout) override;
  absl::Status status() override;
  void* native_handle() const override { return stream_; }

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }

 private:
  CudaStream(int device, cudaStream_t stream, bool owned);
  absl::Status AllocateScratch();

  const int device_;
  cudaStream_t stream_;
  const bool owned_;
  bool scratch_async_ = false;  // scratch_ came from cudaMallocAsync (freed stream-ordered)
  double* scratch_ = nullptr;   // SumOfSquares partials: cuda::kSumOfSquaresMaxBlocks doubles, this stream's
  std::shared_ptr<StickyStatus> status_ = std::make_shared<StickyStatus>();
};

// Polls `query` (cudaStreamQuery / cudaEventQuery) until it stops returning cudaErrorNotReady or `timeout`
// passes (yielding first, then sleeping 50 us between polls): the host never blocks in the driver forever.
// Returns OK, the query's CUDA error, or DeadlineExceeded naming `what`.
absl::Status PollCuda(const std::function<cudaError_t()>& query, absl::Duration timeout, const char* what);

}  // namespace zerofit::device
