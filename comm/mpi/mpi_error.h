// Wraps MPI return codes into absl::Status with the call, file:line and MPI's own message.
#pragma once

#include <mpi.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace zerofit::comm {

inline absl::Status MpiStatus(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return absl::OkStatus();
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
  return absl::InternalError(absl::StrCat(call, " failed at ", file, ":", line, ": ", std::string(msg, len),
                                          " (MPI error ", rc, ")"));
}

}  // namespace zerofit::comm

#define ZF_MPI_CALL(call) ::zerofit::comm::MpiStatus((call), #call, __FILE__, __LINE__)
