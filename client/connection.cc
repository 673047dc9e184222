#include "client/connection.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <mutex>
#include <random>

#include "absl/strings/str_cat.h"

namespace zerofit::client {
namespace {

// The host part of host:port ("[::1]:7070" -> "::1"): the name TLS verifies when no override is given.
std::string HostOf(const std::string& address) {
  std::string host = address.substr(0, address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

}  // namespace

// Calls come from several threads; a retry is rare enough that the lock costs nothing.
struct Connection::Jitter {
  std::mutex mu;
  std::mt19937_64 engine{std::random_device{}()};

  double UnitRandom() {  // uniform in [0, 1)
    std::lock_guard<std::mutex> lock(mu);
    return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
  }
};

Connection::Connection(ConnectionOptions options)
    : options_(std::move(options)), jitter_(std::make_shared<Jitter>()) {
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  grpc::ChannelArguments args;
  if (!options_.tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options_.tls_ca_pem;
    creds = grpc::SslCredentials(ssl);
    if (!options_.tls_server_name.empty()) args.SetSslTargetNameOverride(options_.tls_server_name);
  }
  // gRPC's own reconnect backoff grows to 120 s by default: a coordinator restarted after a minute would
  // then be seen only long after our retries gave up. Even our own longest wait (retry.max_backoff, 5 s) is
  // too long for a worker: a restarted coordinator gives the ranks one heartbeat timeout (as short as a few
  // seconds) to show up, and a channel still backing off misses it (multinode_e2e (c) saw "rank 0 missed
  // heartbeats for 5.0s"). One connection attempt a second to a coordinator that is down costs nothing.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  channel_ = grpc::CreateCustomChannel(options_.address, creds, args);
}

void Connection::Prepare(grpc::ClientContext* ctx, absl::Duration timeout) const {
  ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  if (!options_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + options_.token);
}

absl::Status Connection::Call(std::string_view what, Idempotency idempotency, const Attempt& attempt) const {
  return Call(what, idempotency, options_.call_timeout, attempt);
}

absl::Status Connection::Call(std::string_view what, Idempotency idempotency, absl::Duration timeout,
                              const Attempt& attempt) const {
  const absl::Time first = absl::Now();
  for (int n = 0;; ++n) {
    grpc::ClientContext ctx;
    Prepare(&ctx, timeout);
    const grpc::Status s = attempt(&ctx);
    if (s.ok()) return absl::OkStatus();
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE || idempotency != Idempotency::kIdempotent) {
      return Error(s, what, timeout, n + 1);
    }
    const absl::Duration wait = BackoffDelay(options_.retry, n, jitter_->UnitRandom());
    if (absl::Now() + wait - first > options_.retry.budget) return Error(s, what, timeout, n + 1);
    absl::SleepFor(wait);
  }
}

absl::Status Connection::Error(const grpc::Status& s, std::string_view what, absl::Duration timeout,
                               int attempts) const {
  if (s.ok()) return absl::OkStatus();
  const std::string call(what);  // absl::StrCat takes absl::string_view, not std::string_view, on Debian 12
  // gRPC's codes are absl's, number for number.
  const auto code = static_cast<absl::StatusCode>(static_cast<int>(s.error_code()));
  const std::string tries = attempts > 1 ? absl::StrCat(" (", attempts, " attempts)") : "";
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    const std::string tls =
        options_.tls_ca_pem.empty()
            ? "this client connects without TLS: a coordinator started with --tls-cert needs --tls-ca CA.pem "
              "(or ZEROFIT_TLS_CA) here"
            : absl::StrCat(
                  "this client uses TLS and trusts only the CA in ",
                  options_.tls_ca_source.empty() ? "--tls-ca" : options_.tls_ca_source,
                  ": the coordinator must serve TLS (--tls-cert/--tls-key) with a certificate from "
                  "that CA for the name '",
                  options_.tls_server_name.empty() ? HostOf(options_.address) : options_.tls_server_name,
                  "' (--tls-server-name to expect another)");
    return absl::UnavailableError(absl::StrCat(
        call, ": cannot reach the coordinator at ", options_.address, tries, ": ", s.error_message(),
        ". Check that `zerofit serve` runs there and listens on that address (its state directory's "
        "`address` file), that this host can reach the port, and that TLS matches: ",
        tls));
  }
  // gRPC's own words when the deadline passed on this side; a server's DEADLINE_EXCEEDED (a rendezvous key
  // nobody set in time) is an answer, reported as such below.
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && s.error_message() == "Deadline Exceeded") {
    return absl::DeadlineExceededError(
        absl::StrCat(call, ": no answer from the coordinator at ", options_.address, " within ",
                     absl::FormatDuration(timeout), tries, ": ", s.error_message()));
  }
  return absl::Status(code, absl::StrCat(call, ": ", s.error_message()));
}

}  // namespace zerofit::client
