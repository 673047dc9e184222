// Wraps CUDA runtime and NCCL return codes into absl::Status with the call, file:line and the library's text.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace zerofit::comm {

inline absl::Status CudaStatus(cudaError_t rc, const char* call, const char* file, int line) {
  if (rc == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, " failed at ", file, ":", line, ": ", cudaGetErrorName(rc),
                                          ": ", cudaGetErrorString(rc)));
}

inline absl::Status NcclStatus(ncclResult_t rc, const char* call, const char* file, int line) {
  if (rc == ncclSuccess || rc == ncclInProgress) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, " failed at ", file, ":", line, ": ", ncclGetErrorString(rc),
                                          " (ncclResult ", static_cast<int>(rc), ")"));
}

}  // namespace zerofit::comm

#define ZF_CUDA_CALL(call) ::zerofit::comm::CudaStatus((call), #call, __FILE__, __LINE__)
#define ZF_NCCL_CALL(call) ::zerofit::comm::NcclStatus((call), #call, __FILE__, __LINE__)
