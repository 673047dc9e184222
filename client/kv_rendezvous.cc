#include "client/kv_rendezvous.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "zerofit/v1/coordinator.grpc.pb.h"

namespace zerofit::client {

namespace v1 = ::zerofit::v1;

struct KvRendezvous::Impl {
  client::Connection connection;
  std::unique_ptr<v1::Workers::Stub> stub;
  std::string job;
};

KvRendezvous::KvRendezvous(const client::Connection& connection, std::string job_id)
    : impl_(new Impl{connection, v1::Workers::NewStub(connection.channel()), std::move(job_id)}) {}

KvRendezvous::~KvRendezvous() = default;

absl::Status KvRendezvous::Put(const std::string& key, const std::string& value) {
  v1::KeyValue req, resp;
  req.set_job_id(impl_->job);
  req.set_key(key);
  req.set_value(value);
  return impl_->connection.Call(
      absl::StrCat("rendezvous put '", key, "'"), client::Idempotency::kIdempotent, absl::Seconds(30),
      [&](grpc::ClientContext* ctx) { return impl_->stub->KvPut(ctx, req, &resp); });
}

absl::StatusOr<std::string> KvRendezvous::Get(const std::string& key, absl::Duration timeout) {
  v1::KvGetRequest req;
  req.set_job_id(impl_->job);
  req.set_key(key);
  req.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  v1::KeyValue resp;
  // The server waits up to `timeout`; each attempt's deadline leaves room for the answer to come back.
  ZF_RETURN_IF_ERROR(
      impl_->connection.Call(absl::StrCat("rendezvous get '", key, "'"), client::Idempotency::kIdempotent,
                             timeout + absl::Seconds(10),
                             [&](grpc::ClientContext* ctx) { return impl_->stub->KvGet(ctx, req, &resp); }));
  return resp.value();
}

}  // namespace zerofit::client
