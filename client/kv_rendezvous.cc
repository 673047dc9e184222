#include "client/kv_rendezvous.h"

#include <utility>

namespace zerofit::client {

KvRendezvous::KvRendezvous(const CoordinatorClient& coordinator, std::string job_id)
    : coordinator_(coordinator), job_(std::move(job_id)) {}

absl::Status KvRendezvous::Put(const std::string& key, const std::string& value) {
  return coordinator_.KvPut(job_, key, value);
}

absl::StatusOr<std::string> KvRendezvous::Get(const std::string& key, absl::Duration timeout) {
  return coordinator_.KvGet(job_, key, timeout);
}

}  // namespace zerofit::client
