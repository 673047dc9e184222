// The one client of the coordinator (zerofit.v1 Jobs and Workers), shared by the CLI, the workers and the
// rendezvous: one channel (plaintext, or TLS verified against a CA), the bearer token on every call, a
// deadline on every attempt, retry with backoff of idempotent calls on UNAVAILABLE, and errors that name
// the address and what to check.
//
//   client::Connection c(options);
//   auto stub = zerofit::v1::Workers::NewStub(c.channel());
//   absl::Status s = c.Call("heartbeat", client::Idempotency::kIdempotent,
//                           [&](grpc::ClientContext* ctx) { return stub->Heartbeat(ctx, req, &resp); });
//
// Thread-safety: a Connection is immutable after construction; Call may run on many threads at once (the
// worker's heartbeat thread and its main thread share one). Copies share the channel.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/retry_policy.h"

namespace grpc {
class Channel;
class ClientContext;
class Status;
}  // namespace grpc

namespace zerofit::client {

struct ConnectionOptions {
  std::string address;  // host:port of `zerofit serve` (or an embedded coordinator)
  std::string token;    // sent as "authorization: Bearer <token>"; empty: none (the server will refuse)
  // Non-empty: TLS, the server's certificate verified against this CA (PEM). Empty: plaintext.
  std::string tls_ca_pem;
  std::string tls_ca_source;  // where tls_ca_pem came from (a path), for error messages
  // Non-empty: the name the server's certificate must carry, instead of the host of `address` (a
  // coordinator reached by IP, or through a tunnel). grpc.ssl_target_name_override.
  std::string tls_server_name;
  absl::Duration call_timeout = absl::Seconds(30);  // the deadline of every attempt of a call
  RetryPolicy retry;
};

class Connection {
 public:
  // One attempt of a call: issue it on `ctx` (deadline and token already set) and return gRPC's status.
  using Attempt = std::function<grpc::Status(grpc::ClientContext* ctx)>;

  // Creating the channel does not connect: an unreachable coordinator shows up on the first call.
  explicit Connection(ConnectionOptions options);

  const ConnectionOptions& options() const { return options_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // Runs `attempt` with the options' call_timeout (or `timeout`) as each attempt's deadline. UNAVAILABLE is
  // retried per options().retry when `idempotency` allows; every other code is returned at once. `what`
  // names the call in errors ("report", "get job").
  absl::Status Call(std::string_view what, Idempotency idempotency, const Attempt& attempt) const;
  absl::Status Call(std::string_view what, Idempotency idempotency, absl::Duration timeout,
                    const Attempt& attempt) const;

  // Sets a deadline `timeout` from now and the token on `ctx`: for streams, which are not retried (a broken
  // stream that already delivered messages would deliver them again).
  void Prepare(grpc::ClientContext* ctx, absl::Duration timeout) const;

  // A failed call as an absl::Status with the same code, "<what>: <gRPC's message>". UNAVAILABLE says which
  // address could not be reached and what to check (server running, port, TLS on both sides or neither);
  // DEADLINE_EXCEEDED names the address and the deadline. `attempts` > 1 is mentioned.
  absl::Status Error(const grpc::Status& status, std::string_view what, absl::Duration timeout,
                     int attempts = 1) const;

 private:
  struct Jitter;  // the random draws of the backoff waits (shared by copies; guarded)
  ConnectionOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<Jitter> jitter_;
};

}  // namespace zerofit::client
