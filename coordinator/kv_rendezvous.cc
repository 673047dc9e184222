#include "coordinator/kv_rendezvous.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "zerofit/v1/coordinator.grpc.pb.h"

namespace zerofit::coordinator {

namespace v1 = ::zerofit::v1;

struct KvRendezvous::Impl {
  std::unique_ptr<v1::Workers::Stub> stub;
  std::string token, job;

  void Prepare(grpc::ClientContext* ctx, absl::Duration timeout) const {
    ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
    ctx->AddMetadata("authorization", "Bearer " + token);
  }
};

namespace {

absl::Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  const std::string msg = absl::StrCat(what, ": ", s.error_message());
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) return absl::DeadlineExceededError(msg);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) return absl::NotFoundError(msg);
  if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED) return absl::UnauthenticatedError(msg);
  return absl::UnavailableError(msg);
}

}  // namespace

KvRendezvous::KvRendezvous(std::shared_ptr<grpc::Channel> channel, std::string token, std::string job_id)
    : impl_(std::make_unique<Impl>()) {
  impl_->stub = v1::Workers::NewStub(std::move(channel));
  impl_->token = std::move(token);
  impl_->job = std::move(job_id);
}

KvRendezvous::~KvRendezvous() = default;

absl::Status KvRendezvous::Put(const std::string& key, const std::string& value) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, absl::Seconds(30));
  v1::KeyValue req, resp;
  req.set_job_id(impl_->job);
  req.set_key(key);
  req.set_value(value);
  return FromGrpc(impl_->stub->KvPut(&ctx, req, &resp), absl::StrCat("rendezvous put '", key, "'"));
}

absl::StatusOr<std::string> KvRendezvous::Get(const std::string& key, absl::Duration timeout) {
  grpc::ClientContext ctx;
  // The server waits up to `timeout`; the call's own deadline leaves room for the answer to come back.
  impl_->Prepare(&ctx, timeout + absl::Seconds(10));
  v1::KvGetRequest req;
  req.set_job_id(impl_->job);
  req.set_key(key);
  req.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  v1::KeyValue resp;
  const absl::Status s =
      FromGrpc(impl_->stub->KvGet(&ctx, req, &resp), absl::StrCat("rendezvous get '", key, "'"));
  if (!s.ok()) return s;
  return resp.value();
}

}  // namespace zerofit::coordinator
