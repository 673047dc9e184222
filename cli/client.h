// The CLI's calls to the coordinator, one method each, over the one coordinator client (client/connection.h:
// channel, TLS, token, deadlines, retry of the idempotent calls).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/connection.h"
#include "client/follow_across_restarts.h"
#include "zerofit/v1/coordinator.grpc.pb.h"

namespace zerofit::cli {

// address, token, TLS (CA, server name), the deadline of every call, the retry policy.
using ClientOptions = client::ConnectionOptions;

// The state directory `zerofit serve` writes: token (0600), address, jobs.db.
std::string DefaultStateDir();
// Fills empty address/token from files in `state_dir`. Errors name the file to create or the flag to pass.
absl::Status ResolveClientOptions(const std::string& state_dir, ClientOptions* options);

class Client {
 public:
  explicit Client(const ClientOptions& options);

  // Retried on UNAVAILABLE: the request id makes a repeated submit return the job the first one created.
  absl::StatusOr<zerofit::v1::SubmitJobResponse> Submit(const std::string& request_id,
                                                        const std::string& name, const std::string& spec,
                                                        const std::string& source);
  absl::StatusOr<zerofit::v1::Job> Get(const std::string& id);
  absl::StatusOr<zerofit::v1::ListJobsResponse> List();
  // Sent once: cancelling a job that is already cancelled is an error.
  absl::StatusOr<zerofit::v1::Job> Cancel(const std::string& id, const std::string& reason);
  // Sent once, except the Slurm job id (a keyed write): an exit or an interruption counted twice would end
  // or restart an attempt twice.
  absl::StatusOr<zerofit::v1::LauncherEventResponse> Launcher(const zerofit::v1::LauncherEventRequest& event);
  // Calls `on_line` for every line; with `follow` until the job ends (or `follow_timeout` passes). Streams
  // are not retried (lines already printed would be printed again).
  absl::Status StreamMetrics(const std::string& job_id, int64_t after_step, bool follow,
                             absl::Duration follow_timeout,
                             const std::function<void(const zerofit::v1::Metric&)>& on_metric);
  absl::Status StreamLogs(const std::string& job_id, int64_t after, bool follow,
                          absl::Duration follow_timeout,
                          const std::function<void(const zerofit::v1::LogLine&)>& on_line);

  // --follow across coordinator restarts: each stream starts after the last line (or metric row) handed to
  // the callback, so every one is handed on exactly once (the coordinator's job store keeps them across a
  // restart). Ends when the job does, at `follow.timeout`, or after `follow.reconnect.give_up_after` without
  // a coordinator.
  struct FollowOptions {
    absl::Duration timeout = absl::InfiniteDuration();  // the whole follow, reconnects included
    client::ReconnectPolicy reconnect;
    // Told before each reconnect: why the stream ended, the wait before the next one, and which retry of this
    // outage it is (client::ReconnectEnv::on_retry).
    std::function<void(const absl::Status& why, absl::Duration wait, int retry)> on_reconnect;
  };
  absl::Status FollowLogs(const std::string& job_id, const FollowOptions& follow,
                          const std::function<void(const zerofit::v1::LogLine&)>& on_line);
  absl::Status FollowMetrics(const std::string& job_id, const FollowOptions& follow,
                             const std::function<void(const zerofit::v1::Metric&)>& on_metric);

 private:
  client::Connection connection_;
  std::unique_ptr<zerofit::v1::Jobs::Stub> jobs_;
};

}  // namespace zerofit::cli
