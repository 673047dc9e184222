#include "device/cuda/cuda_device.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "device/cuda/cuda_error.h"
#include "device/cuda/cuda_event.h"

namespace zerofit::device {
namespace {

// Zeroing a fresh allocation is short; a stuck one means the GPU is unusable.
constexpr absl::Duration kZeroTimeout = absl::Seconds(60);

}  // namespace

int CudaVisibleDevices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear "no device" / "no driver" so later calls do not see it
    return 0;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int index) {
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device, CudaDevice::Create(index));
  return std::unique_ptr<Device>(std::move(device));
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(int index) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat("device cuda:", index, ": no usable CUDA device (",
                                                      cudaGetErrorName(rc), ": ", cudaGetErrorString(rc),
                                                      ")"));
  }
  if (index < 0 || index >= count) {
    return absl::FailedPreconditionError(absl::StrCat("device cuda:", index, ": this process sees ", count,
                                                      " GPU(s) (check CUDA_VISIBLE_DEVICES and the rank's "
                                                      "local rank)"));
  }
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<CudaStream> compute, CudaStream::WrapLegacy(index));
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(index)));
  cudaStream_t zero_stream = nullptr;
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaStreamCreateWithFlags(&zero_stream, cudaStreamNonBlocking)));
  return std::unique_ptr<CudaDevice>(new CudaDevice(index, std::move(compute), zero_stream));
}

CudaDevice::CudaDevice(int index, std::unique_ptr<CudaStream> compute, cudaStream_t zero_stream)
    : index_(index), compute_(std::move(compute)), zero_stream_(zero_stream) {}

CudaDevice::~CudaDevice() {
  compute_.reset();
  cudaSetDevice(index_);
  cudaStreamDestroy(zero_stream_);  // returns at once
}

std::string CudaDevice::name() const { return absl::StrCat("cuda:", index_); }

absl::StatusOr<Buffer> CudaDevice::Allocate(size_t bytes, MemoryKind kind) {
  if (kind != MemoryKind::kDevice) return AllocateHostMemory(bytes, kind);
  if (bytes == 0) return Buffer();
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(index_)));
  void* p = nullptr;
  absl::Status s = ZF_CUDA_CALL(cudaMalloc(&p, bytes));
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(name(), ": allocating ", bytes, " bytes: ", s.message()));
  }
  const int index = index_;
  Buffer b(p, bytes, MemoryKind::kDevice, [index](void* d, size_t) {
    cudaSetDevice(index);
    cudaFree(d);
  });
  // The engine's streams are non-blocking: they would not wait for a memset on the legacy stream, so the
  // zeroing runs on a private stream and finishes before the buffer is handed out.
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaMemsetAsync(p, 0, bytes, zero_stream_)));
  ZF_RETURN_IF_ERROR(
      PollCuda([st = zero_stream_] { return cudaStreamQuery(st); }, kZeroTimeout, "zeroing device memory"));
  return CountedBuffer(std::move(b), counter_);
}

absl::StatusOr<std::unique_ptr<Stream>> CudaDevice::CreateStream() {
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<CudaStream> s, CudaStream::Create(index_));
  return std::unique_ptr<Stream>(std::move(s));
}

absl::StatusOr<std::unique_ptr<Event>> CudaDevice::CreateEvent() {
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<CudaEvent> e, CudaEvent::Create(index_));
  return std::unique_ptr<Event>(std::move(e));
}

absl::StatusOr<std::unique_ptr<Event>> CudaDevice::CreateTimingEvent() {
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<CudaEvent> e, CudaEvent::Create(index_, CudaEvent::Timing::kOn));
  return std::unique_ptr<Event>(std::move(e));
}

MemoryStats CudaDevice::memory_stats() const {
  MemoryStats s;
  s.allocated_bytes = counter_->allocated();
  s.peak_allocated_bytes = counter_->peak();
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  if (cudaSetDevice(index_) == cudaSuccess && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    s.free_bytes = free_bytes;
    s.total_bytes = total_bytes;
  } else {
    cudaGetLastError();
  }
  return s;
}

}  // namespace zerofit::device
