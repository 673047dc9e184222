// Wraps CUDA runtime return codes into absl::Status with the call, file:line and CUDA's own text. Shared by
// the CUDA device and the NCCL communicator (comm/nccl/nccl_error.h adds NCCL's codes).
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace zerofit::device {

inline absl::Status CudaStatus(cudaError_t rc, const char* call, const char* file, int line) {
  if (rc == cudaSuccess) return absl::OkStatus();
  // Out of memory is the one error a caller can act on (smaller buckets, offload): keep it distinguishable.
  auto make = rc == cudaErrorMemoryAllocation ? absl::ResourceExhaustedError : absl::InternalError;
  return make(absl::StrCat(call, " failed at ", file, ":", line, ": ", cudaGetErrorName(rc), ": ",
                           cudaGetErrorString(rc)));
}

}  // namespace zerofit::device

#define ZF_CUDA_CALL(call) ::zerofit::device::CudaStatus((call), #call, __FILE__, __LINE__)
