#include "cli/client.h"

#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "cli/private_files.h"
#include "core/status_macros.h"
#include "core/text_file.h"

namespace zerofit::cli {
namespace {

using client::Idempotency;

absl::StatusOr<std::string> ReadTrimmed(const std::string& path) {
  ZF_ASSIGN_OR_RETURN(std::string text, core::ReadTextFile(path));
  return std::string(absl::StripAsciiWhitespace(text));
}

// Runs `stream(remaining)` across coordinator restarts (client::FollowAcrossRestarts) within `o.timeout`.
absl::Status FollowWithin(
    const Client::FollowOptions& o,
    const std::function<absl::Status(absl::Duration remaining, bool* progressed)>& stream) {
  const absl::Time deadline =
      o.timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + o.timeout;
  client::ReconnectEnv env;
  env.on_retry = o.on_reconnect;
  return client::FollowAcrossRestarts(
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

std::string DefaultStateDir() {
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home ? home : ".") / ".zerofit").string();
}

absl::Status ResolveClientOptions(const std::string& state_dir, ClientOptions* o) {
  // A directory others can write could hold their address (the token would go to them) or their token.
  if ((o->address.empty() || o->token.empty()) && std::filesystem::exists(state_dir)) {
    ZF_RETURN_IF_ERROR(CheckPrivateDir(state_dir));
  }
  if (o->address.empty()) {
    auto a = ReadTrimmed((std::filesystem::path(state_dir) / "address").string());
    if (!a.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no coordinator address: pass --coordinator HOST:PORT or start `zerofit serve --state-dir ",
          state_dir, "` (it writes ", state_dir, "/address)"));
    }
    o->address = *a;
  }
  if (o->token.empty()) {
    auto t = ReadTrimmed((std::filesystem::path(state_dir) / "token").string());
    if (!t.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no token: set ZEROFIT_TOKEN, pass --token or --state-dir (`zerofit serve` writes ",
                       state_dir, "/token)"));
    }
    o->token = *t;
  }
  return absl::OkStatus();
}

Client::Client(const ClientOptions& options)
    : connection_(options), jobs_(zerofit::v1::Jobs::NewStub(connection_.channel())) {}

absl::StatusOr<zerofit::v1::SubmitJobResponse> Client::Submit(const std::string& request_id,
                                                              const std::string& name,
                                                              const std::string& spec,
                                                              const std::string& source) {
  zerofit::v1::SubmitJobRequest req;
  req.set_request_id(request_id);
  req.set_name(name);
  req.set_spec(spec);
  req.set_spec_source(source);
  zerofit::v1::SubmitJobResponse resp;
  ZF_RETURN_IF_ERROR(connection_.Call("submit", Idempotency::kIdempotent, [&](grpc::ClientContext* ctx) {
    return jobs_->Submit(ctx, req, &resp);
  }));
  return resp;
}

absl::StatusOr<zerofit::v1::Job> Client::Get(const std::string& id) {
  zerofit::v1::GetJobRequest req;
  req.set_id(id);
  zerofit::v1::Job resp;
  ZF_RETURN_IF_ERROR(connection_.Call("status", Idempotency::kIdempotent,
                                      [&](grpc::ClientContext* ctx) { return jobs_->Get(ctx, req, &resp); }));
  return resp;
}

absl::StatusOr<zerofit::v1::ListJobsResponse> Client::List() {
  zerofit::v1::ListJobsResponse resp;
  ZF_RETURN_IF_ERROR(connection_.Call("list", Idempotency::kIdempotent, [&](grpc::ClientContext* ctx) {
    return jobs_->List(ctx, zerofit::v1::ListJobsRequest(), &resp);
  }));
  return resp;
}

absl::StatusOr<zerofit::v1::Job> Client::Cancel(const std::string& id, const std::string& reason) {
  zerofit::v1::CancelJobRequest req;
  req.set_id(id);
  req.set_reason(reason);
  zerofit::v1::Job resp;
  ZF_RETURN_IF_ERROR(connection_.Call("cancel", Idempotency::kNotIdempotent, [&](grpc::ClientContext* ctx) {
    return jobs_->Cancel(ctx, req, &resp);
  }));
  return resp;
}

absl::StatusOr<zerofit::v1::LauncherEventResponse> Client::Launcher(
    const zerofit::v1::LauncherEventRequest& event) {
  const Idempotency idempotency = event.event_case() == zerofit::v1::LauncherEventRequest::kSlurmJobId
                                      ? Idempotency::kIdempotent
                                      : Idempotency::kNotIdempotent;
  zerofit::v1::LauncherEventResponse resp;
  ZF_RETURN_IF_ERROR(connection_.Call("launcher event", idempotency, [&](grpc::ClientContext* ctx) {
    return jobs_->Launcher(ctx, event, &resp);
  }));
  return resp;
}

absl::Status Client::StreamMetrics(const std::string& job_id, int64_t after_step, bool follow,
                                   absl::Duration follow_timeout,
                                   const std::function<void(const zerofit::v1::Metric&)>& on_metric) {
  const absl::Duration timeout = follow ? follow_timeout : connection_.options().call_timeout;
  grpc::ClientContext ctx;
  connection_.Prepare(&ctx, timeout);
  zerofit::v1::StreamMetricsRequest req;
  req.set_job_id(job_id);
  req.set_after_step(after_step);
  req.set_follow(follow);
  auto reader = jobs_->StreamMetrics(&ctx, req);
  zerofit::v1::Metric m;
  while (reader->Read(&m)) on_metric(m);
  return connection_.Error(reader->Finish(), "metrics", timeout);
}

absl::Status Client::StreamLogs(const std::string& job_id, int64_t after, bool follow,
                                absl::Duration follow_timeout,
                                const std::function<void(const zerofit::v1::LogLine&)>& on_line) {
  const absl::Duration timeout = follow ? follow_timeout : connection_.options().call_timeout;
  grpc::ClientContext ctx;
  connection_.Prepare(&ctx, timeout);
  zerofit::v1::StreamLogsRequest req;
  req.set_job_id(job_id);
  req.set_after_seq(after);
  req.set_follow(follow);
  auto reader = jobs_->StreamLogs(&ctx, req);
  zerofit::v1::LogLine line;
  while (reader->Read(&line)) on_line(line);
  return connection_.Error(reader->Finish(), "logs", timeout);
}

absl::Status Client::FollowLogs(const std::string& job_id, const FollowOptions& follow,
                                const std::function<void(const zerofit::v1::LogLine&)>& on_line) {
  int64_t last = 0;  // the seq of the last line handed on
  return FollowWithin(follow, [&](absl::Duration remaining, bool* progressed) {
    return StreamLogs(job_id, last, true, remaining, [&](const zerofit::v1::LogLine& l) {
      if (l.seq() <= last) return;  // a coordinator resends nothing older, but a line must never repeat
      on_line(l);
      last = l.seq();
      *progressed = true;
    });
  });
}

absl::Status Client::FollowMetrics(const std::string& job_id, const FollowOptions& follow,
                                   const std::function<void(const zerofit::v1::Metric&)>& on_metric) {
  // Rows of the newest step arrive rank by rank: a new stream starts before that step and skips the rows
  // already handed on.
  std::set<std::pair<int64_t, int>> sent;
  int64_t newest = -1;
  return FollowWithin(follow, [&](absl::Duration remaining, bool* progressed) {
    const int64_t after = newest < 0 ? -1 : newest - 1;
    while (!sent.empty() && sent.begin()->first <= after) sent.erase(sent.begin());
    return StreamMetrics(job_id, after, true, remaining, [&](const zerofit::v1::Metric& m) {
      if (m.step() <= after || !sent.insert({m.step(), m.rank()}).second) return;
      on_metric(m);
      newest = std::max(newest, m.step());
      *progressed = true;
    });
  });
}

}  // namespace zerofit::cli
