#include "client/coordinator_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/status_macros.h"

namespace zerofit::client {
namespace {

// Runs `stream(remaining)` across coordinator restarts (FollowAcrossRestarts) within `o.timeout`.
absl::Status FollowWithin(
    const CoordinatorClient::FollowOptions& o,
    const std::function<absl::Status(absl::Duration remaining, bool* progressed)>& stream) {
  const absl::Time deadline =
      o.timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + o.timeout;
  ReconnectEnv env;
  env.on_retry = o.on_reconnect;
  return FollowAcrossRestarts(
      o.reconnect,
      [&](bool* progressed) -> absl::Status {
        const absl::Duration remaining = deadline - absl::Now();
        if (remaining <= absl::ZeroDuration()) {
          return absl::DeadlineExceededError(absl::StrCat(
              "stopped following after ", absl::FormatDuration(o.timeout), " (the job goes on)"));
        }
        return stream(remaining, progressed);
      },
      env);
}

}  // namespace

CoordinatorClient::CoordinatorClient(const ConnectionOptions& options)
    : CoordinatorClient(Connection(options)) {}

CoordinatorClient::CoordinatorClient(const Connection& connection)
    : connection_(connection),
      jobs_(v1::Jobs::NewStub(connection_.channel())),
      workers_(v1::Workers::NewStub(connection_.channel())) {}

absl::StatusOr<v1::SubmitJobResponse> CoordinatorClient::Submit(const std::string& request_id,
                                                                const std::string& name,
                                                                const std::string& spec,
                                                                const std::string& source) const {
  v1::SubmitJobRequest req;
  req.set_request_id(request_id);
  req.set_name(name);
  req.set_spec(spec);
  req.set_spec_source(source);
  v1::SubmitJobResponse resp;
  ZF_RETURN_IF_ERROR(connection_.Call("submit", Idempotency::kIdempotent, [&](grpc::ClientContext* ctx) {
    return jobs_->Submit(ctx, req, &resp);
  }));
  return resp;
}

absl::StatusOr<v1::Job> CoordinatorClient::Get(const std::string& id) const {
  v1::GetJobRequest req;
  req.set_id(id);
  v1::Job resp;
  ZF_RETURN_IF_ERROR(connection_.Call("status", Idempotency::kIdempotent,
                                      [&](grpc::ClientContext* ctx) { return jobs_->Get(ctx, req, &resp); }));
  return resp;
}

absl::StatusOr<v1::ListJobsResponse> CoordinatorClient::List() const {
  v1::ListJobsResponse resp;
  ZF_RETURN_IF_ERROR(connection_.Call("list", Idempotency::kIdempotent, [&](grpc::ClientContext* ctx) {
    return jobs_->List(ctx, v1::ListJobsRequest(), &resp);
  }));
  return resp;
}

absl::StatusOr<v1::Job> CoordinatorClient::Cancel(const std::string& id, const std::string& reason) const {
  v1::CancelJobRequest req;
  req.set_id(id);
  req.set_reason(reason);
  v1::Job resp;
  ZF_RETURN_IF_ERROR(connection_.Call("cancel", Idempotency::kNotIdempotent, [&](grpc::ClientContext* ctx) {
    return jobs_->Cancel(ctx, req, &resp);
  }));
  return resp;
}

absl::StatusOr<v1::LauncherEventResponse> CoordinatorClient::Launcher(
    const v1::LauncherEventRequest& event) const {
  const Idempotency idempotency = event.event_case() == v1::LauncherEventRequest::kSlurmJobId
                                      ? Idempotency::kIdempotent
                                      : Idempotency::kNotIdempotent;
  v1::LauncherEventResponse resp;
  ZF_RETURN_IF_ERROR(connection_.Call("launcher event", idempotency, [&](grpc::ClientContext* ctx) {
    return jobs_->Launcher(ctx, event, &resp);
  }));
  return resp;
}

absl::Status CoordinatorClient::StreamMetrics(const std::string& job_id, int64_t after_step, bool follow,
                                              absl::Duration follow_timeout,
                                              const std::function<void(const v1::Metric&)>& on_metric) const {
  v1::StreamMetricsRequest req;
  req.set_job_id(job_id);
  req.set_after_step(after_step);
  req.set_follow(follow);
  return ReadStream<v1::Metric>(
      "metrics", follow ? follow_timeout : connection_.options().call_timeout,
      [&](grpc::ClientContext* ctx) { return jobs_->StreamMetrics(ctx, req); }, on_metric);
}

absl::Status CoordinatorClient::StreamLogs(const std::string& job_id, int64_t after, bool follow,
                                           absl::Duration follow_timeout,
                                           const std::function<void(const v1::LogLine&)>& on_line) const {
  v1::StreamLogsRequest req;
  req.set_job_id(job_id);
  req.set_after_seq(after);
  req.set_follow(follow);
  return ReadStream<v1::LogLine>(
      "logs", follow ? follow_timeout : connection_.options().call_timeout,
      [&](grpc::ClientContext* ctx) { return jobs_->StreamLogs(ctx, req); }, on_line);
}

absl::Status CoordinatorClient::FollowLogs(const std::string& job_id, const FollowOptions& follow,
                                           const std::function<void(const v1::LogLine&)>& on_line) const {
  int64_t last = 0;  // the seq of the last line handed on
  return FollowWithin(follow, [&](absl::Duration remaining, bool* progressed) {
    return StreamLogs(job_id, last, true, remaining, [&](const v1::LogLine& l) {
      if (l.seq() <= last) return;  // a coordinator resends nothing older, but a line must never repeat
      on_line(l);
      last = l.seq();
      *progressed = true;
    });
  });
}

absl::Status CoordinatorClient::FollowMetrics(const std::string& job_id, const FollowOptions& follow,
                                              const std::function<void(const v1::Metric&)>& on_metric) const {
  // Rows of the newest step arrive rank by rank: a new stream starts before that step and skips the rows
  // already handed on.
  std::set<std::pair<int64_t, int>> sent;
  int64_t newest = -1;
  return FollowWithin(follow, [&](absl::Duration remaining, bool* progressed) {
    const int64_t after = newest < 0 ? -1 : newest - 1;
    while (!sent.empty() && sent.begin()->first <= after) sent.erase(sent.begin());
    return StreamMetrics(job_id, after, true, remaining, [&](const v1::Metric& m) {
      if (m.step() <= after || !sent.insert({m.step(), m.rank()}).second) return;
      on_metric(m);
      newest = std::max(newest, m.step());
      *progressed = true;
    });
  });
}

absl::StatusOr<v1::RegisterWorkerResponse> CoordinatorClient::Register(
    const v1::RegisterWorkerRequest& req) const {
  v1::RegisterWorkerResponse resp;
  ZF_RETURN_IF_ERROR(connection_.Call("register", Idempotency::kIdempotent, [&](grpc::ClientContext* ctx) {
    return workers_->Register(ctx, req, &resp);
  }));
  return resp;
}

absl::StatusOr<v1::AcquireStepResponse> CoordinatorClient::AcquireStep(const std::string& job_id, int rank,
                                                                       int64_t step) const {
  v1::AcquireStepRequest req;
  req.set_job_id(job_id);
  req.set_rank(rank);
  req.set_step(step);
  v1::AcquireStepResponse resp;
  ZF_RETURN_IF_ERROR(
      connection_.Call("acquire step", Idempotency::kIdempotent,
                       [&](grpc::ClientContext* ctx) { return workers_->AcquireStep(ctx, req, &resp); }));
  return resp;
}

absl::Status CoordinatorClient::Report(const v1::ReportRequest& req) const {
  v1::ReportResponse resp;
  return connection_.Call("report", Idempotency::kIdempotent,
                          [&](grpc::ClientContext* ctx) { return workers_->Report(ctx, req, &resp); });
}

absl::StatusOr<v1::HeartbeatResponse> CoordinatorClient::Heartbeat(const std::string& job_id, int rank,
                                                                   int attempt, const std::string& activity,
                                                                   absl::Duration timeout) const {
  v1::HeartbeatRequest req;
  req.set_job_id(job_id);
  req.set_rank(rank);
  req.set_attempt(attempt);
  req.set_activity(activity);
  v1::HeartbeatResponse resp;
  // kNotIdempotent: one attempt; the heartbeat thread's own period is the retry.
  ZF_RETURN_IF_ERROR(
      connection_.Call("heartbeat", Idempotency::kNotIdempotent, timeout,
                       [&](grpc::ClientContext* ctx) { return workers_->Heartbeat(ctx, req, &resp); }));
  return resp;
}

absl::Status CoordinatorClient::KvPut(const std::string& job_id, const std::string& key,
                                      const std::string& value) const {
  v1::KeyValue req, resp;
  req.set_job_id(job_id);
  req.set_key(key);
  req.set_value(value);
  return connection_.Call(absl::StrCat("rendezvous put '", key, "'"), Idempotency::kIdempotent,
                          absl::Seconds(30),
                          [&](grpc::ClientContext* ctx) { return workers_->KvPut(ctx, req, &resp); });
}

absl::StatusOr<std::string> CoordinatorClient::KvGet(const std::string& job_id, const std::string& key,
                                                     absl::Duration timeout) const {
  v1::KvGetRequest req;
  req.set_job_id(job_id);
  req.set_key(key);
  req.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  v1::KeyValue resp;
  // The server waits up to `timeout`; each attempt's deadline leaves room for the answer to come back.
  ZF_RETURN_IF_ERROR(connection_.Call(
      absl::StrCat("rendezvous get '", key, "'"), Idempotency::kIdempotent, timeout + absl::Seconds(10),
      [&](grpc::ClientContext* ctx) { return workers_->KvGet(ctx, req, &resp); }));
  return resp.value();
}

}  // namespace zerofit::client
