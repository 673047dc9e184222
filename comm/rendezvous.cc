#include "comm/rendezvous.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zerofit::comm {

absl::StatusOr<std::string> ShareFromRankZero(Rendezvous& rendezvous, int rank, const std::string& key,
                                              const std::function<absl::StatusOr<std::string>()>& make,
                                              absl::Duration timeout) {
  if (rank < 0) return absl::InvalidArgumentError(absl::StrCat("rendezvous: rank ", rank, " < 0"));
  if (rank == 0) {
    ZF_ASSIGN_OR_RETURN(std::string value, make());
    ZF_RETURN_IF_ERROR(rendezvous.Put(key, value));
    return value;
  }
  auto value = rendezvous.Get(key, timeout);
  if (!value.ok()) {
    return absl::Status(value.status().code(), absl::StrCat("rank ", rank, " waiting for rank 0's '", key,
                                                            "': ", value.status().message()));
  }
  return value;
}

}  // namespace zerofit::comm
