// A client of the coordinator for the CLI: where it is (address), how to prove who we are (bearer token), and
// one method per call, each with a deadline.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "zerofit/v1/coordinator.grpc.pb.h"

namespace zerofit::cli {

struct ClientOptions {
  std::string address;       // host:port
  std::string token;         // bearer token
  std::string tls_root_pem;  // set: TLS, verifying the server with this CA
  absl::Duration timeout = absl::Seconds(10);
};

// The state directory `zerofit serve` writes: token (0600), address, jobs.db.
std::string DefaultStateDir();
// Fills empty address/token from files in `state_dir`. Errors name the file to create or the flag to pass.
absl::Status ResolveClientOptions(const std::string& state_dir, ClientOptions* options);

class Client {
 public:
  explicit Client(const ClientOptions& options);

  absl::StatusOr<zerofit::v1::SubmitJobResponse> Submit(const std::string& request_id,
                                                        const std::string& name, const std::string& spec,
                                                        const std::string& source);
  absl::StatusOr<zerofit::v1::Job> Get(const std::string& id);
  absl::StatusOr<zerofit::v1::ListJobsResponse> List();
  absl::StatusOr<zerofit::v1::Job> Cancel(const std::string& id, const std::string& reason);
  absl::StatusOr<zerofit::v1::LauncherEventResponse> Launcher(const zerofit::v1::LauncherEventRequest& event);
  // Calls `on_line` for every line; with `follow` until the job ends (or `follow_timeout` passes).
  absl::Status StreamMetrics(const std::string& job_id, int64_t after_step, bool follow,
                             absl::Duration follow_timeout,
                             const std::function<void(const zerofit::v1::Metric&)>& on_metric);
  absl::Status StreamLogs(const std::string& job_id, int64_t after, bool follow,
                          absl::Duration follow_timeout,
                          const std::function<void(const zerofit::v1::LogLine&)>& on_line);

 private:
  void Prepare(grpc::ClientContext* ctx, absl::Duration timeout) const;
  ClientOptions options_;
  std::unique_ptr<zerofit::v1::Jobs::Stub> jobs_;
};

}  // namespace zerofit::cli
