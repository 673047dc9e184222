// The gRPC face of the coordinator: zerofit.v1.Jobs and zerofit.v1.Workers (thin translations to
// Coordinator), grpc.health.v1, bearer-token auth on every call, optional TLS, and a ticker that fails
// attempts whose workers stopped sending heartbeats.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "coordinator/coordinator.h"

namespace zerofit::v1 {
class Job;
class LogLine;
class Metric;
}  // namespace zerofit::v1

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace zerofit::coordinator {

// A job record as the wire's Job message, and back (for clients that work on the domain's records).
void ToProto(const JobRecord& job, ::zerofit::v1::Job* out);
JobRecord FromProto(const ::zerofit::v1::Job& job);
// A stored log line and metric row as the wire's messages (the streams', and `zerofit logs`/`metrics` reading
// a state directory's store).
void ToProto(const LogLine& line, ::zerofit::v1::LogLine* out);
void ToProto(const MetricRow& row, ::zerofit::v1::Metric* out);

struct ServerOptions {
  std::string listen = "127.0.0.1:0";     // port 0: pick a free one (see CoordinatorServer::address)
  std::string db_path;                    // the SQLite job store
  std::string token;                      // required as "authorization: Bearer <token>" on every call
  std::string tls_cert_pem, tls_key_pem;  // both set: TLS
  JobPolicy policy;
  absl::Duration tick = absl::Milliseconds(500);
};

class CoordinatorServer {
 public:
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(const ServerOptions& options,
                                                                  const core::Clock* clock);
  ~CoordinatorServer();  // stops accepting, wakes streams, waits for handlers (bounded by their deadlines)
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  std::string address() const { return address_; }
  Coordinator& coordinator() { return *coordinator_; }
  void Wait();  // blocks until Shutdown (from another thread or a signal handler thread)
  void Shutdown();

 private:
  CoordinatorServer() = default;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<grpc::Service> jobs_, workers_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::atomic<bool> stopping_{false};
  std::thread ticker_;
};

}  // namespace zerofit::coordinator
