// A worker's calls to the coordinator, typed: the one coordinator client (client/connection.h: TLS, token, a
// deadline on every attempt, retry with backoff of idempotent calls while a coordinator restarts) under the
// Workers and Jobs stubs. Every call a worker makes is idempotent: reads, registration (a set of ranks),
// per-step grants the coordinator caches, heartbeats, and reports (metrics keyed by step and rank; a repeat
// after a lost answer can only log its lines twice).
//
// Thread-safe: the heartbeat thread and the loop share one link.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "zerofit/v1/coordinator.grpc.pb.h"

namespace zerofit::worker {

class CoordinatorLink {
 public:
  CoordinatorLink(const client::ConnectionOptions& options, std::string job);

  const std::string& job() const { return job_; }
  const client::Connection& connection() const { return connection_; }

  absl::StatusOr<v1::Job> GetJob();
  absl::StatusOr<v1::RegisterWorkerResponse> Register(const v1::RegisterWorkerRequest& request);
  absl::StatusOr<v1::AcquireStepResponse> AcquireStep(int rank, int64_t step);
  absl::Status Report(const v1::ReportRequest& request);
  // One heartbeat with the rank's attempt and activity, a single attempt bounded by `timeout` (the heartbeat
  // thread measures the coordinator's silence itself). The answer says whether to stop (cancel) or abort.
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(int rank, int attempt, const std::string& activity,
                                                  absl::Duration timeout);

 private:
  client::Connection connection_;
  std::string job_;
  std::unique_ptr<v1::Workers::Stub> workers_;
  std::unique_ptr<v1::Jobs::Stub> jobs_;
};

}  // namespace zerofit::worker
