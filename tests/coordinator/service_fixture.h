// The fixture of the Workers and Jobs service tests (service_test.cc, service_submit_test.cc): a coordinator
// server on loopback with a submitted 2-rank job, real gRPC stubs and the calls a simulated worker makes.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "client/connection.h"
#include "coordinator/service.h"
#include "core/clock.h"
#include "jobspec/job_plan.h"
#include "zerofit/v1/coordinator.grpc.pb.h"

namespace zerofit::coordinator::service_test {

namespace v1 = ::zerofit::v1;

inline client::Connection ConnectionTo(const std::string& address, const std::string& token) {
  client::ConnectionOptions o;
  o.address = address;
  o.token = token;
  return client::Connection(o);
}

// Micro-batches per rank per step of a job's stored plan (-1 where it has none or it does not parse).
inline int PlannedMicroBatches(const JobRecord& job) {
  auto plan = jobspec::JobPlanFromJson(job.plan, job.id);
  return plan.ok() ? plan->gradient_accumulation : -1;
}

inline constexpr const char* kSpec = R"(name: svc
task: reward
model: /m
data: /d
world_size: 2
max_restarts: 2
training:
  steps: 20
  global_batch: 8
  micro_batch: 2
  gradient_accumulation: 2
)";

struct Fixture {
  core::RealClock clock;
  std::unique_ptr<CoordinatorServer> server;
  std::unique_ptr<v1::Jobs::Stub> jobs;
  std::unique_ptr<v1::Workers::Stub> workers;
  std::string job;

  explicit Fixture(absl::Duration heartbeat_timeout = absl::Seconds(10)) {
    ServerOptions o;
    o.db_path = ":memory:";
    o.token = "secret-token-0123456789abcdef0123";
    o.policy.heartbeat_timeout = heartbeat_timeout;
    o.tick = absl::Milliseconds(50);
    auto s = CoordinatorServer::Start(o, &clock);
    EXPECT_TRUE(s.ok()) << s.status();
    server = std::move(*s);
    auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
    jobs = v1::Jobs::NewStub(channel);
    workers = v1::Workers::NewStub(channel);
    v1::SubmitJobRequest req;
    req.set_request_id("req");
    req.set_spec(kSpec);
    v1::SubmitJobResponse resp;
    auto ctx = Context();
    EXPECT_TRUE(jobs->Submit(ctx.get(), req, &resp).ok());
    job = resp.job().id();
  }
  std::unique_ptr<grpc::ClientContext> Context(bool auth = true) const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (auth) ctx->AddMetadata("authorization", "Bearer secret-token-0123456789abcdef0123");
    return ctx;
  }
  v1::RegisterWorkerResponse Register(int rank) {
    v1::RegisterWorkerRequest req;
    req.set_job_id(job);
    req.set_rank(rank);
    req.set_world_size(2);
    req.set_host("node1");
    if (rank == 0)
      for (int i = 0; i < 40; ++i) req.add_sample_lengths(10 + i % 7);
    v1::RegisterWorkerResponse resp;
    auto ctx = Context();
    const grpc::Status s = workers->Register(ctx.get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }
  v1::AcquireStepResponse Acquire(int rank, int64_t step) {
    v1::AcquireStepRequest req;
    req.set_job_id(job);
    req.set_rank(rank);
    req.set_step(step);
    v1::AcquireStepResponse resp;
    auto ctx = Context();
    EXPECT_TRUE(workers->AcquireStep(ctx.get(), req, &resp).ok());
    return resp;
  }
  v1::Job Get() {
    v1::GetJobRequest req;
    req.set_id(job);
    v1::Job j;
    auto ctx = Context();
    EXPECT_TRUE(jobs->Get(ctx.get(), req, &j).ok());
    return j;
  }
  void Report(int rank, int64_t step, int64_t checkpoint, bool finished, bool oom = false) {
    v1::ReportRequest req;
    req.set_job_id(job);
    req.set_rank(rank);
    req.set_step(step);
    req.set_loss(0.5);
    req.set_checkpoint_step(checkpoint);
    req.set_finished(finished);
    req.set_out_of_memory(oom);
    req.add_log_lines("step " + std::to_string(step));
    v1::ReportResponse resp;
    auto ctx = Context();
    const grpc::Status s = workers->Report(ctx.get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
};

}  // namespace zerofit::coordinator::service_test
