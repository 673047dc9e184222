// What a launcher (zerofit run, zerofit slurm-launch) needs from the coordinator of its job, whether the
// coordinator runs in the same process (LocalJobControl) or elsewhere (RemoteJobControl over gRPC: an
// external `zerofit serve` that a Slurm job's first node reaches by address).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/client_options.h"
#include "client/coordinator_client.h"
#include "coordinator/coordinator.h"

namespace zerofit::cli {

class JobControl {
 public:
  virtual ~JobControl() = default;
  struct Submitted {
    std::string id;
    bool created = false;  // false: the request id had created it before (a requeued Slurm job)
  };
  virtual absl::StatusOr<Submitted> Submit(const std::string& request_id, const std::string& spec,
                                           const std::string& source) = 0;
  virtual absl::StatusOr<coordinator::JobRecord> Get(const std::string& id) = 0;
  // Log lines after `after`; waits up to `wait` when there are none yet.
  virtual absl::StatusOr<std::vector<coordinator::LogLine>> WaitLogs(const std::string& id, int64_t after,
                                                                     absl::Duration wait) = 0;
  virtual absl::Status LauncherExited(const std::string& id, int exit_code) = 0;
  virtual absl::StatusOr<int64_t> Preempt(const std::string& id, const std::string& why) = 0;
  virtual absl::Status Interrupt(const std::string& id, const std::string& why) = 0;
  virtual absl::Status Cancel(const std::string& id, const std::string& why) = 0;
  virtual absl::Status SetSlurmJobId(const std::string& id, const std::string& slurm_job_id) = 0;
};

std::unique_ptr<JobControl> LocalJobControl(coordinator::Coordinator* coordinator);
std::unique_ptr<JobControl> RemoteJobControl(const client::ConnectionOptions& options);

}  // namespace zerofit::cli
