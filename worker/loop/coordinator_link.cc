#include "worker/loop/coordinator_link.h"

#include <grpcpp/grpcpp.h>

#include <utility>

namespace zerofit::worker {
namespace {
constexpr client::Idempotency kIdempotent = client::Idempotency::kIdempotent;
}  // namespace

CoordinatorLink::CoordinatorLink(const client::ConnectionOptions& options, std::string job)
    : connection_(options),
      job_(std::move(job)),
      workers_(v1::Workers::NewStub(connection_.channel())),
      jobs_(v1::Jobs::NewStub(connection_.channel())) {}

absl::StatusOr<v1::Job> CoordinatorLink::GetJob() {
  v1::GetJobRequest req;
  req.set_id(job_);
  v1::Job job;
  absl::Status s = connection_.Call("get job", kIdempotent,
                                    [&](grpc::ClientContext* ctx) { return jobs_->Get(ctx, req, &job); });
  if (!s.ok()) return s;
  return job;
}

absl::StatusOr<v1::RegisterWorkerResponse> CoordinatorLink::Register(const v1::RegisterWorkerRequest& req) {
  v1::RegisterWorkerResponse resp;
  absl::Status s = connection_.Call(
      "register", kIdempotent, [&](grpc::ClientContext* ctx) { return workers_->Register(ctx, req, &resp); });
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<v1::AcquireStepResponse> CoordinatorLink::AcquireStep(int rank, int64_t step) {
  v1::AcquireStepRequest req;
  req.set_job_id(job_);
  req.set_rank(rank);
  req.set_step(step);
  v1::AcquireStepResponse resp;
  absl::Status s = connection_.Call("acquire step", kIdempotent, [&](grpc::ClientContext* ctx) {
    return workers_->AcquireStep(ctx, req, &resp);
  });
  if (!s.ok()) return s;
  return resp;
}

absl::Status CoordinatorLink::Report(const v1::ReportRequest& req) {
  v1::ReportResponse resp;
  return connection_.Call("report", kIdempotent,
                          [&](grpc::ClientContext* ctx) { return workers_->Report(ctx, req, &resp); });
}

absl::StatusOr<v1::HeartbeatResponse> CoordinatorLink::Heartbeat(int rank, int attempt,
                                                                 const std::string& activity,
                                                                 absl::Duration timeout) {
  v1::HeartbeatRequest req;
  req.set_job_id(job_);
  req.set_rank(rank);
  req.set_attempt(attempt);
  req.set_activity(activity);
  v1::HeartbeatResponse resp;
  // kNotIdempotent: one attempt; the heartbeat thread's own period is the retry.
  absl::Status s =
      connection_.Call("heartbeat", client::Idempotency::kNotIdempotent, timeout,
                       [&](grpc::ClientContext* ctx) { return workers_->Heartbeat(ctx, req, &resp); });
  if (!s.ok()) return s;
  return resp;
}

}  // namespace zerofit::worker
