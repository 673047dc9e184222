// The coordinator's API (zerofit.v1 Jobs and Workers), typed: one method per call, over the one connection
// (connection.h: channel, TLS, token, a deadline on every attempt, retry with backoff of idempotent calls
// while a coordinator restarts). The CLI, the workers (worker/loop) and the rendezvous (kv_rendezvous.h) all
// call the coordinator through this class; none holds a stub of its own.
//
// Thread-safety: immutable after construction; every method may run on many threads at once (a worker's
// heartbeat thread and its loop share one). Copies share the channel.
#pragma once

#include <grpcpp/client_context.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/connection.h"
#include "client/follow_across_restarts.h"
#include "zerofit/v1/coordinator.grpc.pb.h"

namespace zerofit::client {

class CoordinatorClient {
 public:
  explicit CoordinatorClient(const ConnectionOptions& options);
  explicit CoordinatorClient(const Connection& connection);

  const Connection& connection() const { return connection_; }

  // --- Jobs (the CLI) ---
  // Retried on UNAVAILABLE: the request id makes a repeated submit return the job the first one created.
  absl::StatusOr<v1::SubmitJobResponse> Submit(const std::string& request_id, const std::string& name,
                                               const std::string& spec, const std::string& source) const;
  absl::StatusOr<v1::Job> Get(const std::string& id) const;
  absl::StatusOr<v1::ListJobsResponse> List() const;
  // Sent once: cancelling a job that is already cancelled is an error.
  absl::StatusOr<v1::Job> Cancel(const std::string& id, const std::string& reason) const;
  // Sent once, except the Slurm job id (a keyed write): an exit or an interruption counted twice would end
  // or restart an attempt twice.
  absl::StatusOr<v1::LauncherEventResponse> Launcher(const v1::LauncherEventRequest& event) const;
  // Calls `on_metric` / `on_line` for every row; with `follow` until the job ends (or `follow_timeout`
  // passes). Streams are not retried (rows already handed on would be handed on again).
  absl::Status StreamMetrics(const std::string& job_id, int64_t after_step, bool follow,
                             absl::Duration follow_timeout,
                             const std::function<void(const v1::Metric&)>& on_metric) const;
  absl::Status StreamLogs(const std::string& job_id, int64_t after, bool follow,
                          absl::Duration follow_timeout,
                          const std::function<void(const v1::LogLine&)>& on_line) const;

  // --follow across coordinator restarts: each stream starts after the last line (or metric row) handed to
  // the callback, so every one is handed on exactly once (the coordinator's job store keeps them across a
  // restart). Ends when the job does, at `follow.timeout`, or after `follow.reconnect.give_up_after` without
  // a coordinator.
  struct FollowOptions {
    absl::Duration timeout = absl::InfiniteDuration();  // the whole follow, reconnects included
    ReconnectPolicy reconnect;
    // Told before each reconnect: why the stream ended, the wait before the next one, and which retry of this
    // outage it is (ReconnectEnv::on_retry).
    std::function<void(const absl::Status& why, absl::Duration wait, int retry)> on_reconnect;
  };
  absl::Status FollowLogs(const std::string& job_id, const FollowOptions& follow,
                          const std::function<void(const v1::LogLine&)>& on_line) const;
  absl::Status FollowMetrics(const std::string& job_id, const FollowOptions& follow,
                             const std::function<void(const v1::Metric&)>& on_metric) const;

  // --- Workers (the ranks). Every call a worker makes is idempotent and retried: reads, registration (a set
  // of ranks), per-step grants the coordinator caches, and reports (metrics keyed by step and rank; a repeat
  // after a lost answer can only log its lines twice). ---
  absl::StatusOr<v1::RegisterWorkerResponse> Register(const v1::RegisterWorkerRequest& request) const;
  absl::StatusOr<v1::AcquireStepResponse> AcquireStep(const std::string& job_id, int rank,
                                                      int64_t step) const;
  absl::Status Report(const v1::ReportRequest& request) const;
  // One heartbeat with the rank's attempt and activity, a single attempt bounded by `timeout` (the heartbeat
  // thread measures the coordinator's silence itself). The answer says whether to stop (cancel) or abort.
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const std::string& job_id, int rank, int attempt,
                                                  const std::string& activity, absl::Duration timeout) const;
  // The job's key-value store (the rendezvous of ranks started by srun). Put is idempotent (the same key
  // gets the same value); Get waits on the server up to `timeout` for the key. Both retried.
  absl::Status KvPut(const std::string& job_id, const std::string& key, const std::string& value) const;
  absl::StatusOr<std::string> KvGet(const std::string& job_id, const std::string& key,
                                    absl::Duration timeout) const;

 private:
  // One server stream, not retried: `open` starts it on a prepared context (deadline `timeout`, token), every
  // row goes to `on_row`, and the stream's end status comes back as an absl::Status naming `what`.
  template <typename Row, typename Open>
  absl::Status ReadStream(const char* what, absl::Duration timeout, const Open& open,
                          const std::function<void(const Row&)>& on_row) const {
    grpc::ClientContext ctx;
    connection_.Prepare(&ctx, timeout);
    auto reader = open(&ctx);
    Row row;
    while (reader->Read(&row)) on_row(row);
    return connection_.Error(reader->Finish(), what, timeout);
  }

  Connection connection_;
  std::shared_ptr<v1::Jobs::Stub> jobs_;
  std::shared_ptr<v1::Workers::Stub> workers_;
};

}  // namespace zerofit::client
