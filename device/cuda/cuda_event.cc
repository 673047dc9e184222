#include "device/cuda/cuda_event.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "device/cuda/cuda_error.h"
#include "device/cuda/cuda_stream.h"

namespace zerofit::device {
namespace {

absl::StatusOr<CudaStream*> AsCuda(Stream& stream) {
  auto* s = dynamic_cast<CudaStream*>(&stream);
  if (s == nullptr) return absl::InvalidArgumentError("cuda event: used with another device's stream");
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaEvent>> CudaEvent::Create(int device, Timing timing) {
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device)));
  cudaEvent_t e = nullptr;
  const unsigned flags = timing == Timing::kOn ? cudaEventDefault : cudaEventDisableTiming;
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaEventCreateWithFlags(&e, flags)));
  return std::unique_ptr<CudaEvent>(new CudaEvent(device, e, timing));
}

CudaEvent::~CudaEvent() {
  cudaSetDevice(device_);
  cudaEventDestroy(event_);
}

absl::Status CudaEvent::Record(Stream& stream) {
  ZF_ASSIGN_OR_RETURN(CudaStream * s, AsCuda(stream));
  // An event records only on a stream of its own GPU (CUDA's rule); waits may cross GPUs.
  if (s->device() != device_) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda event of cuda:", device_, " recorded on a stream of cuda:", s->device()));
  }
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device_)));
  return ZF_CUDA_CALL(cudaEventRecord(event_, s->get()));
}

absl::Status CudaEvent::Wait(Stream& stream) {
  ZF_ASSIGN_OR_RETURN(CudaStream * s, AsCuda(stream));
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(s->device())));
  return ZF_CUDA_CALL(cudaStreamWaitEvent(s->get(), event_, 0));
}

absl::Status CudaEvent::Synchronize(absl::Duration timeout) {
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device_)));
  return PollCuda([e = event_] { return cudaEventQuery(e); }, timeout, "cuda event synchronize");
}

bool CudaEvent::Query() {
  cudaSetDevice(device_);
  // An error is "done" too: the marked work will not run any further, and Synchronize reports why.
  return cudaEventQuery(event_) != cudaErrorNotReady;
}

absl::StatusOr<double> CudaEvent::MillisecondsSince(Event& start) {
  auto* other = dynamic_cast<CudaEvent*>(&start);
  if (other == nullptr) return absl::InvalidArgumentError("cuda event: timed against another device's event");
  if (timing_ != Timing::kOn || other->timing_ != Timing::kOn) {
    return absl::InvalidArgumentError("cuda event: MillisecondsSince needs two timing events");
  }
  if (other->device_ != device_) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda event of cuda:", device_, " timed against one of cuda:", other->device_));
  }
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device_)));
  float ms = 0.0f;
  const cudaError_t rc = cudaEventElapsedTime(&ms, other->event_, event_);
  if (rc == cudaSuccess) return static_cast<double>(ms);
  // Both are ordinary outcomes here, not faults: clear them, so that no later cudaGetLastError (a kernel
  // launch's check) reports them as its own.
  (void)cudaGetLastError();
  if (rc == cudaErrorNotReady) return absl::FailedPreconditionError("cuda event: not reached yet");
  if (rc == cudaErrorInvalidResourceHandle)
    return absl::FailedPreconditionError("cuda event: never recorded");
  return ZF_CUDA_CALL(rc);
}

}  // namespace zerofit::device
