// The coordinator's key-value store (Workers.KvPut / KvGet) as a comm::Rendezvous: how ranks started by srun
// exchange the NCCL unique id of an attempt without MPI. Keys are scoped to one job.
#pragma once

#include <memory>
#include <string>

#include "comm/rendezvous.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace zerofit::coordinator {

class KvRendezvous final : public comm::Rendezvous {
 public:
  KvRendezvous(std::shared_ptr<grpc::Channel> channel, std::string token, std::string job_id);
  ~KvRendezvous() override;
  absl::Status Put(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zerofit::coordinator
