// The Jobs service's Submit validation over real gRPC (a spec yaml-cpp throws on, a huge value, a reused
// request id) and the handler guard that every handler's status goes through.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "coordinator/handler_guard.h"
#include "coordinator/service.h"
#include "tests/coordinator/service_fixture.h"
#include "zerofit/v1/coordinator.grpc.pb.h"

namespace zerofit::coordinator {
namespace {

using service_test::Fixture;
using service_test::kSpec;
namespace v1 = ::zerofit::v1;

// No exception crosses the gRPC boundary: a spec with a mapping as a key made yaml-cpp throw out of the
// Submit handler, which the client saw as UNKNOWN "Unexpected error in RPC handling".
TEST(ServiceTest, ASpecWithAComplexKeyIsAnInvalidArgument) {
  Fixture f;
  v1::SubmitJobRequest req;
  req.set_request_id("complex-key");
  req.set_spec("task: sft\nmodel: /m\ndata: /d\n? {a: 1}\n: x\n");
  v1::SubmitJobResponse resp;
  auto ctx = f.Context();
  const grpc::Status s = f.jobs->Submit(ctx.get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("a key must be a plain name"), std::string::npos) << s.error_message();
}

// A 40,000-character `task:` came back as "received initial metadata size exceeds limit": the error quoted
// the whole value and gRPC's trailing metadata could not carry it. Now the field error arrives, bounded; so
// does any other error that quotes what a client sent (a job id, a spec's source name).
TEST(ServiceTest, AHugeValueComesBackAsItsFieldErrorNotAMetadataLimit) {
  Fixture f;
  const std::string huge(40000, 'x');
  v1::SubmitJobRequest req;
  req.set_request_id("huge-task");
  req.set_spec("task: " + huge + "\nmodel: /m\ndata: /d\n");
  req.set_spec_source("job.yaml");
  v1::SubmitJobResponse resp;
  auto ctx = f.Context();
  grpc::Status s = f.jobs->Submit(ctx.get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message().substr(0, 300);
  EXPECT_NE(s.error_message().find("job.yaml:1: field 'task': expected reward, dpo, sft or grpo, got 'xxx"),
            std::string::npos)
      << s.error_message().substr(0, 300);
  EXPECT_LT(s.error_message().size(), 400u);

  req.set_request_id("huge-source");
  req.set_spec("task: sft\nmodel: /m\ndata: ''\n");
  req.set_spec_source(huge);
  ctx = f.Context();
  s = f.jobs->Submit(ctx.get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message().substr(0, 300);
  EXPECT_NE(s.error_message().find(":3: field 'data': required"), std::string::npos)
      << s.error_message().substr(0, 300);
  EXPECT_LT(s.error_message().size(), 700u);

  v1::GetJobRequest get;
  get.set_id(huge);
  v1::Job job;
  ctx = f.Context();
  s = f.jobs->Get(ctx.get(), get, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message().substr(0, 300);
  EXPECT_LE(s.error_message().size(), 2048u + 64) << "bounded at the handler border";
}

// A request id names one request (AIP-155): reused with another spec (steps 20 -> 21) or name it is
// ALREADY_EXISTS naming the job it created, instead of that job answered and the new spec dropped; with the
// same spec, however formatted, it still answers the same job.
TEST(ServiceTest, AReusedRequestIdWithAnotherSpecIsAnErrorNamingTheJob) {
  Fixture f;
  auto submit = [&](const std::string& spec, const std::string& name, v1::SubmitJobResponse* resp) {
    v1::SubmitJobRequest req;
    req.set_request_id("req");
    req.set_name(name);
    req.set_spec(spec);
    auto ctx = f.Context();
    return f.jobs->Submit(ctx.get(), req, resp);
  };
  std::string changed = kSpec;
  changed.replace(changed.find("steps: 20"), 9, "steps: 21");
  v1::SubmitJobResponse resp;
  grpc::Status s = submit(changed, "", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();
  EXPECT_NE(s.error_message().find("request id 'req' already submitted " + f.job + " with a different spec"),
            std::string::npos)
      << s.error_message();
  s = submit(kSpec, "another-name", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();
  EXPECT_NE(s.error_message().find("with a different name"), std::string::npos) << s.error_message();

  // The same spec with comments, other quoting, flow style and key order: the same request.
  const std::string reformatted =
      "# the same job\nname: 'svc'\ntask: reward\nmodel: /m\ndata: \"/d\"\nmax_restarts: 2\n"
      "world_size: 2\ntraining: {gradient_accumulation: 2, micro_batch: 2, global_batch: 8, steps: 20}\n";
  s = submit(reformatted, "", &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.job().id(), f.job);
  EXPECT_FALSE(resp.created());
  EXPECT_EQ(f.Get().spec(), kSpec) << "the job keeps the spec it was submitted with";

  v1::ListJobsResponse list;
  auto ctx = f.Context();
  ASSERT_TRUE(f.jobs->List(ctx.get(), v1::ListJobsRequest(), &list).ok());
  EXPECT_EQ(list.jobs_size(), 1);
}

TEST(HandlerGuardTest, AnExceptionBecomesInternalWithItsMessage) {
  const grpc::Status thrown =
      GuardHandler("Submit", []() -> grpc::Status { throw std::runtime_error("bad conversion"); });
  EXPECT_EQ(thrown.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(thrown.error_message(), "Submit: internal error: bad conversion");
  const grpc::Status other = GuardHandler("Get", []() -> grpc::Status { throw 42; });
  EXPECT_EQ(other.error_code(), grpc::StatusCode::INTERNAL);
  const grpc::Status passed =
      GuardHandler("Get", [] { return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such job"); });
  EXPECT_EQ(passed.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(passed.error_message(), "no such job");
}

// Whatever a handler returns or throws, its message fits gRPC's metadata: bounded at the border.
TEST(HandlerGuardTest, EveryMessageIsBounded) {
  const std::string huge = "field 'task': " + std::string(40000, 'x');
  const grpc::Status returned =
      GuardHandler("Submit", [&] { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, huge); });
  EXPECT_EQ(returned.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LE(returned.error_message().size(), kMaxStatusMessageBytes + 48);
  EXPECT_EQ(returned.error_message().rfind("field 'task': xxx", 0), 0u);
  EXPECT_NE(returned.error_message().find(" ... (cut at 2048 of 40014 bytes)"), std::string::npos);
  const grpc::Status thrown =
      GuardHandler("Submit", [&]() -> grpc::Status { throw std::runtime_error(huge); });
  EXPECT_EQ(thrown.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_LE(thrown.error_message().size(), kMaxStatusMessageBytes + 48);
}

}  // namespace
}  // namespace zerofit::coordinator
