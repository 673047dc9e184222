#include "cli/client.h"

#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"
#include "core/text_file.h"

namespace zerofit::cli {
namespace {

absl::Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  const std::string msg = absl::StrCat(what, ": ", s.error_message());
  switch (s.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      return absl::InvalidArgumentError(msg);
    case grpc::StatusCode::NOT_FOUND:
      return absl::NotFoundError(msg);
    case grpc::StatusCode::FAILED_PRECONDITION:
      return absl::FailedPreconditionError(msg);
    case grpc::StatusCode::UNAUTHENTICATED:
      return absl::UnauthenticatedError(msg);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(msg);
    case grpc::StatusCode::UNAVAILABLE:
      return absl::UnavailableError(absl::StrCat(msg, " (is `zerofit serve` running?)"));
    default:
      return absl::InternalError(msg);
  }
}

absl::StatusOr<std::string> ReadTrimmed(const std::string& path) {
  ZF_ASSIGN_OR_RETURN(std::string text, core::ReadTextFile(path));
  return std::string(absl::StripAsciiWhitespace(text));
}

}  // namespace

std::string DefaultStateDir() {
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home ? home : ".") / ".zerofit").string();
}

absl::Status ResolveClientOptions(const std::string& state_dir, ClientOptions* o) {
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
      return absl::FailedPreconditionError(absl::StrCat(
          "no token: pass --token or --state-dir (`zerofit serve` writes ", state_dir, "/token)"));
    }
    o->token = *t;
  }
  return absl::OkStatus();
}

Client::Client(const ClientOptions& options) : options_(options) {
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!options.tls_root_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_root_pem;
    creds = grpc::SslCredentials(ssl);
  }
  jobs_ = zerofit::v1::Jobs::NewStub(grpc::CreateChannel(options.address, creds));
}

void Client::Prepare(grpc::ClientContext* ctx, absl::Duration timeout) const {
  ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  if (!options_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + options_.token);
}

absl::StatusOr<zerofit::v1::SubmitJobResponse> Client::Submit(const std::string& request_id,
                                                              const std::string& name,
                                                              const std::string& spec,
                                                              const std::string& source) {
  grpc::ClientContext ctx;
  Prepare(&ctx, options_.timeout);
  zerofit::v1::SubmitJobRequest req;
  req.set_request_id(request_id);
  req.set_name(name);
  req.set_spec(spec);
  req.set_spec_source(source);
  zerofit::v1::SubmitJobResponse resp;
  const absl::Status s = FromGrpc(jobs_->Submit(&ctx, req, &resp), "submit");
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<zerofit::v1::Job> Client::Get(const std::string& id) {
  grpc::ClientContext ctx;
  Prepare(&ctx, options_.timeout);
  zerofit::v1::GetJobRequest req;
  req.set_id(id);
  zerofit::v1::Job resp;
  const absl::Status s = FromGrpc(jobs_->Get(&ctx, req, &resp), "status");
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<zerofit::v1::ListJobsResponse> Client::List() {
  grpc::ClientContext ctx;
  Prepare(&ctx, options_.timeout);
  zerofit::v1::ListJobsResponse resp;
  const absl::Status s = FromGrpc(jobs_->List(&ctx, zerofit::v1::ListJobsRequest(), &resp), "list");
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<zerofit::v1::Job> Client::Cancel(const std::string& id, const std::string& reason) {
  grpc::ClientContext ctx;
  Prepare(&ctx, options_.timeout);
  zerofit::v1::CancelJobRequest req;
  req.set_id(id);
  req.set_reason(reason);
  zerofit::v1::Job resp;
  const absl::Status s = FromGrpc(jobs_->Cancel(&ctx, req, &resp), "cancel");
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<zerofit::v1::LauncherEventResponse> Client::Launcher(
    const zerofit::v1::LauncherEventRequest& event) {
  grpc::ClientContext ctx;
  Prepare(&ctx, options_.timeout);
  zerofit::v1::LauncherEventResponse resp;
  const absl::Status s = FromGrpc(jobs_->Launcher(&ctx, event, &resp), "launcher event");
  if (!s.ok()) return s;
  return resp;
}

absl::Status Client::StreamMetrics(const std::string& job_id, int64_t after_step, bool follow,
                                   absl::Duration follow_timeout,
                                   const std::function<void(const zerofit::v1::Metric&)>& on_metric) {
  grpc::ClientContext ctx;
  Prepare(&ctx, follow ? follow_timeout : options_.timeout);
  zerofit::v1::StreamMetricsRequest req;
  req.set_job_id(job_id);
  req.set_after_step(after_step);
  req.set_follow(follow);
  auto reader = jobs_->StreamMetrics(&ctx, req);
  zerofit::v1::Metric m;
  while (reader->Read(&m)) on_metric(m);
  return FromGrpc(reader->Finish(), "metrics");
}

absl::Status Client::StreamLogs(const std::string& job_id, int64_t after, bool follow,
                                absl::Duration follow_timeout,
                                const std::function<void(const zerofit::v1::LogLine&)>& on_line) {
  grpc::ClientContext ctx;
  Prepare(&ctx, follow ? follow_timeout : options_.timeout);
  zerofit::v1::StreamLogsRequest req;
  req.set_job_id(job_id);
  req.set_after_seq(after);
  req.set_follow(follow);
  auto reader = jobs_->StreamLogs(&ctx, req);
  zerofit::v1::LogLine line;
  while (reader->Read(&line)) on_line(line);
  return FromGrpc(reader->Finish(), "logs");
}

}  // namespace zerofit::cli
