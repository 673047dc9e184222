// The coordinator's key-value store (Workers.KvPut / KvGet) as a comm::Rendezvous: how ranks started by srun
// exchange the NCCL unique id of an attempt without MPI. Keys are scoped to one job. The calls go through the
// one typed coordinator client (coordinator_client.h): its TLS, token, deadlines and retries.
#pragma once

#include <string>

#include "client/coordinator_client.h"
#include "comm/rendezvous.h"

namespace zerofit::client {

class KvRendezvous final : public comm::Rendezvous {
 public:
  // `coordinator` is copied (copies share its channel).
  KvRendezvous(const CoordinatorClient& coordinator, std::string job_id);
  // Idempotent (the same key gets the same value): retried while the coordinator is unreachable.
  absl::Status Put(const std::string& key, const std::string& value) override;
  // Waits on the server up to `timeout` for the key; retried like Put.
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;

 private:
  CoordinatorClient coordinator_;
  std::string job_;
};

}  // namespace zerofit::client
