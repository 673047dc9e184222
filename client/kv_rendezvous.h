// The coordinator's key-value store (Workers.KvPut / KvGet) as a comm::Rendezvous: how ranks started by srun
// exchange the NCCL unique id of an attempt without MPI. Keys are scoped to one job. The calls go through the
// one coordinator client (client/connection.h): its TLS, token, deadlines and retries.
#pragma once

#include <memory>
#include <string>

#include "client/connection.h"
#include "comm/rendezvous.h"

namespace zerofit::client {

class KvRendezvous final : public comm::Rendezvous {
 public:
  // `connection` is copied (copies share its channel).
  KvRendezvous(const client::Connection& connection, std::string job_id);
  ~KvRendezvous() override;
  // Idempotent (the same key gets the same value): retried while the coordinator is unreachable.
  absl::Status Put(const std::string& key, const std::string& value) override;
  // Waits on the server up to `timeout` for the key; retried like Put.
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zerofit::client
