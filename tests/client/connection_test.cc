// The client against an in-process coordinator stand-in whose Workers service fails, stalls or checks the
// token on demand.
#include "client/connection.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/connection_flags.h"
#include "core/text_file.h"
#include "zerofit/v1/coordinator.grpc.pb.h"

namespace zerofit::client {
namespace {

namespace v1 = ::zerofit::v1;

class FakeWorkers final : public v1::Workers::Service {
 public:
  std::atomic<int> calls{0};
  std::atomic<int> unavailable_first{0};  // this many calls answer UNAVAILABLE
  std::atomic<int> stall_ms{0};
  std::string token = "secret";

  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse* resp) override {
    const int n = calls.fetch_add(1);
    auto it = ctx->client_metadata().find("authorization");
    if (it == ctx->client_metadata().end() ||
        std::string(it->second.data(), it->second.size()) != "Bearer " + token)
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong token");
    if (n < unavailable_first.load()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
    if (stall_ms.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms.load()));
    resp->set_cancel(true);
    return grpc::Status::OK;
  }
};

class ConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&service_);
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_ && port > 0);
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now()); }

  ConnectionOptions Options() const {
    ConnectionOptions o;
    o.address = address_;
    o.token = "secret";
    o.call_timeout = absl::Seconds(5);
    o.retry.initial_backoff = absl::Milliseconds(5);
    o.retry.max_backoff = absl::Milliseconds(20);
    o.retry.budget = absl::Seconds(5);
    return o;
  }

  absl::Status Heartbeat(const Connection& c, Idempotency idempotency, v1::HeartbeatResponse* resp) {
    auto stub = v1::Workers::NewStub(c.channel());
    v1::HeartbeatRequest req;
    return c.Call("heartbeat", idempotency,
                  [&](grpc::ClientContext* ctx) { return stub->Heartbeat(ctx, req, resp); });
  }

  FakeWorkers service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(ConnectionTest, RetriesAnIdempotentCallThroughUnavailable) {
  service_.unavailable_first = 3;
  Connection c(Options());
  v1::HeartbeatResponse resp;
  ASSERT_TRUE(Heartbeat(c, Idempotency::kIdempotent, &resp).ok());
  EXPECT_TRUE(resp.cancel());
  EXPECT_EQ(service_.calls.load(), 4);
}

TEST_F(ConnectionTest, NeverRepeatsANonIdempotentCall) {
  service_.unavailable_first = 3;
  Connection c(Options());
  v1::HeartbeatResponse resp;
  const absl::Status s = Heartbeat(c, Idempotency::kNotIdempotent, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(service_.calls.load(), 1);
  EXPECT_NE(s.message().find(address_), std::string::npos) << s;
}

TEST_F(ConnectionTest, GivesUpWhenTheRetryBudgetIsSpent) {
  service_.unavailable_first = 1 << 30;
  ConnectionOptions o = Options();
  o.retry.budget = absl::Milliseconds(300);
  Connection c(o);
  v1::HeartbeatResponse resp;
  const absl::Time start = absl::Now();
  const absl::Status s = Heartbeat(c, Idempotency::kIdempotent, &resp);
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_GT(service_.calls.load(), 2);
  EXPECT_LT(took, absl::Seconds(2));
  EXPECT_NE(s.message().find("attempts"), std::string::npos) << s;
}

TEST_F(ConnectionTest, EveryAttemptHasADeadlineAndATimeoutIsNotRetried) {
  service_.stall_ms = 1000;
  ConnectionOptions o = Options();
  o.call_timeout = absl::Milliseconds(200);
  Connection c(o);
  v1::HeartbeatResponse resp;
  const absl::Time start = absl::Now();
  const absl::Status s = Heartbeat(c, Idempotency::kIdempotent, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(900));
  EXPECT_EQ(service_.calls.load(), 1);
  EXPECT_NE(s.message().find(absl::StrCat("no answer from the coordinator at ", address_, " within 200ms")),
            std::string::npos)
      << s;
}

TEST_F(ConnectionTest, SendsTheTokenAndKeepsOtherCodes) {
  ConnectionOptions o = Options();
  o.token = "wrong";
  Connection c(o);
  v1::HeartbeatResponse resp;
  const absl::Status s = Heartbeat(c, Idempotency::kIdempotent, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_EQ(service_.calls.load(), 1);
  EXPECT_EQ(s.message(), "heartbeat: wrong token");
}

TEST(ConnectionErrors, AnUnreachableCoordinatorIsNamedWithWhatToCheck) {
  ConnectionOptions o;
  o.address = "127.0.0.1:1";  // nothing listens on port 1
  o.call_timeout = absl::Seconds(5);
  Connection plain(o);
  auto stub = v1::Workers::NewStub(plain.channel());
  v1::HeartbeatRequest req;
  v1::HeartbeatResponse resp;
  absl::Status s = plain.Call("heartbeat", Idempotency::kNotIdempotent,
                              [&](grpc::ClientContext* ctx) { return stub->Heartbeat(ctx, req, &resp); });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("heartbeat: cannot reach the coordinator at 127.0.0.1:1"), std::string::npos)
      << s;
  EXPECT_NE(s.message().find("`zerofit serve`"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--tls-ca"), std::string::npos) << s;

  // With TLS the hint names the CA file and the name the certificate must carry.
  const grpc::Status refused(grpc::StatusCode::UNAVAILABLE, "handshake failed");
  o.tls_ca_pem = "-----BEGIN CERTIFICATE-----";
  o.tls_ca_source = "/etc/zerofit/ca.pem";
  s = Connection(o).Error(refused, "get job", o.call_timeout);
  EXPECT_NE(s.message().find("trusts only the CA in /etc/zerofit/ca.pem"), std::string::npos) << s;
  EXPECT_NE(s.message().find("for the name '127.0.0.1'"), std::string::npos) << s;
  o.tls_server_name = "coordinator.internal";
  s = Connection(o).Error(refused, "get job", o.call_timeout, 3);
  EXPECT_NE(s.message().find("for the name 'coordinator.internal'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("(3 attempts)"), std::string::npos) << s;
}

TEST(ConnectionFlags, EnvironmentThenFlagsThenFiles) {
  std::map<std::string, std::string> env = {{kTokenEnv, "from-env"}, {kTlsCaEnv, "/nonexistent/ca.pem"}};
  ConnectionSettings s = SettingsFromEnvironment([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  EXPECT_EQ(s.token, "from-env");
  EXPECT_EQ(s.tls_ca_file, "/nonexistent/ca.pem");
  EXPECT_TRUE(s.tls_server_name.empty());
  EXPECT_FALSE(ParseConnectionFlag("--job", "x", &s));
  const std::string dir = ::testing::TempDir();
  const std::string token_file = dir + "/zerofit_client_token";
  ASSERT_TRUE(core::WriteTextFileAtomic(token_file, "from-file\n").ok());
  EXPECT_TRUE(ParseConnectionFlag("--token-file", token_file, &s));
  EXPECT_TRUE(ParseConnectionFlag("--coordinator", "h:1", &s));
  // The CA file the environment named does not exist: the error names it.
  auto missing = Resolve(s);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/ca.pem"), std::string::npos) << missing.status();
  const std::string not_pem = dir + "/zerofit_client_not_pem";
  ASSERT_TRUE(core::WriteTextFileAtomic(not_pem, "hello\n").ok());
  EXPECT_TRUE(ParseConnectionFlag("--tls-ca", not_pem, &s));
  EXPECT_EQ(Resolve(s).status().code(), absl::StatusCode::kInvalidArgument);
  const std::string ca = dir + "/zerofit_client_ca.pem";
  ASSERT_TRUE(
      core::WriteTextFileAtomic(ca, "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n").ok());
  EXPECT_TRUE(ParseConnectionFlag("--tls-ca", ca, &s));
  EXPECT_TRUE(ParseConnectionFlag("--tls-server-name", "coord", &s));
  auto o = Resolve(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->address, "h:1");
  EXPECT_EQ(o->token, "from-file");  // the flag's file overrides the environment's token
  EXPECT_EQ(o->tls_ca_source, ca);
  EXPECT_EQ(o->tls_server_name, "coord");
  EXPECT_EQ(TlsFlags(ca, "coord"), (std::vector<std::string>{"--tls-ca", ca, "--tls-server-name", "coord"}));
  EXPECT_TRUE(TlsFlags("", "").empty());
}

}  // namespace
}  // namespace zerofit::client
