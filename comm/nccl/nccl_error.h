// Wraps NCCL return codes into absl::Status with the call, file:line and NCCL's text; CUDA runtime codes
// use device/cuda/cuda_error.h (ZF_CUDA_CALL), shared with the CUDA device.
#pragma once

#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "device/cuda/cuda_error.h"

namespace zerofit::comm {

// ncclInProgress is not an error: a non-blocking communicator's call has been accepted and finishes
// asynchronously (poll ncclCommGetAsyncError until it leaves ncclInProgress).
inline absl::Status NcclStatus(ncclResult_t rc, const char* call, const char* file, int line) {
  if (rc == ncclSuccess || rc == ncclInProgress) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, " failed at ", file, ":", line, ": ", ncclGetErrorString(rc),
                                          " (ncclResult ", static_cast<int>(rc), ")"));
}

}  // namespace zerofit::comm

#define ZF_NCCL_CALL(call) ::zerofit::comm::NcclStatus((call), #call, __FILE__, __LINE__)
