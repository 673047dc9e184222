#include "coordinator/service.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "coordinator/handler_guard.h"
#include "core/status_macros.h"
#include "zerofit/v1/coordinator.grpc.pb.h"

namespace zerofit::coordinator {
namespace {

namespace v1 = ::zerofit::v1;

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case absl::StatusCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case absl::StatusCode::kFailedPrecondition:
      code = grpc::StatusCode::FAILED_PRECONDITION;
      break;
    case absl::StatusCode::kAlreadyExists:
      code = grpc::StatusCode::ALREADY_EXISTS;
      break;
    case absl::StatusCode::kDeadlineExceeded:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    case absl::StatusCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    default:
      code = grpc::StatusCode::INTERNAL;
  }
  return grpc::Status(code, std::string(s.message()));
}

// Every call carries "authorization: Bearer <token>".
grpc::Status Authorize(const grpc::ServerContext* ctx, const std::string& token) {
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it == md.end() || std::string(it->second.data(), it->second.size()) != "Bearer " + token) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing or wrong bearer token (see the token file written by `zerofit serve`)");
  }
  return grpc::Status::OK;
}

v1::JobPhase ToProto(JobPhase p) {
  switch (p) {
    case JobPhase::kQueued:
      return v1::QUEUED;
    case JobPhase::kRunning:
      return v1::RUNNING;
    case JobPhase::kRestarting:
      return v1::RESTARTING;
    case JobPhase::kSucceeded:
      return v1::SUCCEEDED;
    case JobPhase::kFailed:
      return v1::FAILED;
    case JobPhase::kCancelled:
      return v1::CANCELLED;
  }
  return v1::JOB_PHASE_UNSPECIFIED;
}

JobPhase FromProto(v1::JobPhase p) {
  switch (p) {
    case v1::RUNNING:
      return JobPhase::kRunning;
    case v1::RESTARTING:
      return JobPhase::kRestarting;
    case v1::SUCCEEDED:
      return JobPhase::kSucceeded;
    case v1::FAILED:
      return JobPhase::kFailed;
    case v1::CANCELLED:
      return JobPhase::kCancelled;
    default:
      return JobPhase::kQueued;
  }
}

// What a plain bind() of each address `listen` (HOST:PORT) names gives now: 0, or the errno of the first
// that failed (EADDRINUSE first: another socket listens there). SO_REUSEADDR is set as gRPC's own listener
// sets it, so that a port with only connections in TIME_WAIT counts as free. InvalidArgument when the
// address does not resolve.
absl::StatusOr<int> BindErrno(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? listen : listen.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int gai = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
  if (gai != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen ", listen, ": not a HOST:PORT this machine can listen on: ", gai_strerror(gai)));
  }
  int bind_errno = 0;
  for (const addrinfo* a = found; a != nullptr && bind_errno != EADDRINUSE; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0) bind_errno = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return bind_errno;
}

absl::Status AddressInUseError(const std::string& listen) {
  return absl::UnavailableError(absl::StrCat("address in use: ", listen,
                                             " (another zerofit serve? `zerofit status --coordinator ",
                                             listen, "`; or pass another --listen)"));
}

// Why gRPC could not listen on `listen` (it says only that it failed, in its log).
absl::Status ListenError(const std::string& listen) {
  ZF_ASSIGN_OR_RETURN(const int bind_errno, BindErrno(listen));
  if (bind_errno == EADDRINUSE) return AddressInUseError(listen);
  return absl::UnavailableError(absl::StrCat("cannot listen on ", listen, bind_errno != 0 ? ": " : "",
                                             bind_errno != 0 ? std::strerror(bind_errno) : ""));
}

// Port 0 asks for any free port: nothing to probe.
bool NamesAPort(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  return colon != std::string::npos && listen.substr(colon + 1) != "0";
}

#define ZF_AUTH(ctx)                                      \
  do {                                                    \
    grpc::Status auth_status_ = Authorize((ctx), token_); \
    if (!auth_status_.ok()) return auth_status_;          \
  } while (0)

class JobsService final : public v1::Jobs::Service {
 public:
  JobsService(Coordinator* c, std::string token, const std::atomic<bool>* stopping)
      : c_(c), token_(std::move(token)), stopping_(stopping) {}

  grpc::Status Submit(grpc::ServerContext* ctx, const v1::SubmitJobRequest* req,
                      v1::SubmitJobResponse* resp) override {
    return GuardHandler("Submit", [&]() -> grpc::Status {
      ZF_AUTH(ctx);
      auto r = c_->Submit(req->request_id(), req->name(), req->spec(), req->spec_source());
      if (!r.ok()) return ToGrpc(r.status());
      ToProto(r->job, resp->mutable_job());
      resp->set_created(r->created);
      return grpc::Status::OK;
    });
  }
  grpc::Status Get(grpc::ServerContext* ctx, const v1::GetJobRequest* req, v1::Job* resp) override {
    return GuardHandler("Get", [&]() -> grpc::Status {
      ZF_AUTH(ctx);
      auto j = c_->Get(req->id());
      if (!j.ok()) return ToGrpc(j.status());
      ToProto(*j, resp);
      return grpc::Status::OK;
    });
  }
  grpc::Status List(grpc::ServerContext* ctx, const v1::ListJobsRequest*,
                    v1::ListJobsResponse* resp) override {
    return GuardHandler("List", [&]() -> grpc::Status {
      ZF_AUTH(ctx);
      auto jobs = c_->List();
      if (!jobs.ok()) return ToGrpc(jobs.status());
      for (const JobRecord& j : *jobs) ToProto(j, resp->add_jobs());
      return grpc::Status::OK;
    });
  }
  grpc::Status Cancel(grpc::ServerContext* ctx, const v1::CancelJobRequest* req, v1::Job* resp) override {
    return GuardHandler("Cancel", [&]() -> grpc::Status {
      ZF_AUTH(ctx);
      auto j = c_->Cancel(req->id(), req->reason());
      if (!j.ok()) return ToGrpc(j.status());
      ToProto(*j, resp);
      return grpc::Status::OK;
    });
  }
  grpc::Status Launcher(grpc::ServerContext* ctx, const v1::LauncherEventRequest* req,
                        v1::LauncherEventResponse* resp) override {
    return GuardHandler("Launcher", [&]() -> grpc::Status {
      ZF_AUTH(ctx);
      absl::Status s;
      switch (req->event_case()) {
        case v1::LauncherEventRequest::kExited:
          s = c_->LauncherExited(req->job_id(), req->exited());
          break;
        case v1::LauncherEventRequest::kPreempt: {
          auto stop = c_->Preempt(req->job_id(), req->preempt());
          s = stop.status();
          if (stop.ok()) resp->set_stop_step(*stop);
          break;
        }
        case v1::LauncherEventRequest::kInterrupted:
          s = c_->Interrupt(req->job_id(), req->interrupted());
          break;
        case v1::LauncherEventRequest::kSlurmJobId:
          s = c_->SetSlurmJobId(req->job_id(), req->slurm_job_id());
          break;
        default:
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "launcher event: no event set");
      }
      if (!s.ok()) return ToGrpc(s);
      auto j = c_->Get(req->job_id());
      if (!j.ok()) return ToGrpc(j.status());
      ToProto(*j, resp->mutable_job());
      return grpc::Status::OK;
    });
  }
  grpc::Status StreamLogs(grpc::ServerContext* ctx, const v1::StreamLogsRequest* req,
                          grpc::ServerWriter<v1::LogLine>* writer) override {
    return GuardHandler("StreamLogs", [&]() -> grpc::Status {
      ZF_AUTH(ctx);
      int64_t after = req->after_seq();
      while (!ctx->IsCancelled() && !stopping_->load()) {
        auto lines = c_->WaitLogs(req->job_id(), after, absl::Seconds(1));
        if (!lines.ok()) return ToGrpc(lines.status());
        for (const LogLine& l : *lines) {
          v1::LogLine out;
          ToProto(l, &out);
          if (!writer->Write(out)) return grpc::Status::OK;  // the client went away
          after = l.seq;
        }
        if (!req->follow()) return grpc::Status::OK;
        if (lines->empty()) {
          auto job = c_->Get(req->job_id());
          if (!job.ok()) return ToGrpc(job.status());
          if (IsTerminal(job->status.phase)) return grpc::Status::OK;
        }
      }
      return Interrupted(ctx);
    });
  }
  grpc::Status StreamMetrics(grpc::ServerContext* ctx, const v1::StreamMetricsRequest* req,
                             grpc::ServerWriter<v1::Metric>* writer) override {
    return GuardHandler("StreamMetrics", [&]() -> grpc::Status {
      ZF_AUTH(ctx);
      int64_t after = req->after_step();
      int64_t seen_log =
          0;  // metrics have no change signal of their own: wake on log lines (workers log each step)
      std::set<std::pair<int64_t, int>> sent;  // rows of the newest step may still be arriving rank by rank
      while (!ctx->IsCancelled() && !stopping_->load()) {
        auto rows = c_->Metrics(req->job_id(), after);
        if (!rows.ok()) return ToGrpc(rows.status());
        int64_t newest = after;
        bool wrote = false;
        for (const MetricRow& m : *rows) {
          newest = std::max(newest, m.step);
          if (!sent.insert({m.step, m.rank}).second) continue;
          v1::Metric out;
          ToProto(m, &out);
          if (!writer->Write(out)) return grpc::Status::OK;
          wrote = true;
        }
        after = std::max(after, newest - 1);
        while (!sent.empty() && sent.begin()->first <= after) sent.erase(sent.begin());
        if (!req->follow()) return grpc::Status::OK;
        auto job = c_->Get(req->job_id());
        if (!job.ok()) return ToGrpc(job.status());
        if (IsTerminal(job->status.phase) && !wrote) return grpc::Status::OK;
        auto lines = c_->WaitLogs(req->job_id(), seen_log, absl::Seconds(1));
        if (lines.ok() && !lines->empty()) seen_log = lines->back().seq;
      }
      return Interrupted(ctx);
    });
  }
  grpc::Status Watch(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                     grpc::ServerWriter<v1::Job>* writer) override {
    return GuardHandler("Watch", [&]() -> grpc::Status {
      ZF_AUTH(ctx);
      auto job = c_->Get(req->id());
      if (!job.ok()) return ToGrpc(job.status());
      while (true) {
        v1::Job out;
        ToProto(*job, &out);
        if (!writer->Write(out) || IsTerminal(job->status.phase)) return grpc::Status::OK;
        JobStatus known = job->status;
        do {
          if (ctx->IsCancelled() || stopping_->load()) return Interrupted(ctx);
          job = c_->WaitStatus(req->id(), known, absl::Seconds(1));
          if (!job.ok()) return ToGrpc(job.status());
        } while (job->status.phase == known.phase && job->status.attempt == known.attempt &&
                 job->status.checkpoint_step == known.checkpoint_step);
      }
    });
  }

 private:
  // A follow stream that ends before its job does. OK would tell the client the job ended; a coordinator
  // shutting down says UNAVAILABLE, so that a client follows again from its last line once it is back.
  grpc::Status Interrupted(const grpc::ServerContext* ctx) const {
    if (stopping_->load() && !ctx->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");
    }
    return grpc::Status::OK;
  }

  Coordinator* c_;
  std::string token_;
  const std::atomic<bool>* stopping_;
};

class WorkersService final : public v1::Workers::Service {
 public:
  WorkersService(Coordinator* c, std::string token) : c_(c), token_(std::move(token)) {}

  grpc::Status Register(grpc::ServerContext* ctx, const v1::RegisterWorkerRequest* req,
                        v1::RegisterWorkerResponse* resp) override {
    return GuardHandler("Register", [&]() -> grpc::Status {
      ZF_AUTH(ctx);
      std::vector<int64_t> lengths(req->sample_lengths().begin(), req->sample_lengths().end());
      auto r = c_->Register(req->job_id(), req->rank(), req->world_size(), req->host(), lengths);
      if (!r.ok()) return ToGrpc(r.status());
      resp->set_attempt(r->attempt);
      resp->set_resume_step(r->resume_step);
      resp->set_spec(r->spec);
      resp->set_request_id(r->request_id);
      resp->set_plan(r->plan);
      return grpc::Status::OK;
    });
  }
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override {
    return GuardHandler("Heartbeat", [&]() -> grpc::Status {
      ZF_AUTH(ctx);
      auto answer = c_->Heartbeat(req->job_id(), HeartbeatInfo{req->rank(), req->attempt(), req->activity()});
      if (!answer.ok()) return ToGrpc(answer.status());
      resp->set_cancel(answer->cancel);
      resp->set_abort(answer->abort);
      return grpc::Status::OK;
    });
  }
  grpc::Status AcquireStep(grpc::ServerContext* ctx, const v1::AcquireStepRequest* req,
                           v1::AcquireStepResponse* resp) override {
    return GuardHandler("AcquireStep", [&]() -> grpc::Status {
      ZF_AUTH(ctx);
      auto a = c_->AcquireStep(req->job_id(), req->step(), req->rank());
      if (!a.ok()) return ToGrpc(a.status());
      if (a->stop || a->cancel) {
        resp->set_step(req->step());
        resp->set_stop(a->stop);
        resp->set_cancel(a->cancel);
        return grpc::Status::OK;
      }
      const jobspec::StepAssignment& step = *a->assignment;
      if (req->rank() < 0 || static_cast<size_t>(req->rank()) >= step.ranks.size()) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("rank ", req->rank(), " out of range"));
      }
      resp->set_step(step.global_step);
      resp->set_epoch(step.epoch);
      for (const auto& micro : step.ranks[static_cast<size_t>(req->rank())]) {
        auto* mb = resp->add_micro_batches();
        for (uint64_t s : micro) mb->add_samples(s);
      }
      return grpc::Status::OK;
    });
  }
  grpc::Status Report(grpc::ServerContext* ctx, const v1::ReportRequest* req, v1::ReportResponse*) override {
    return GuardHandler("Report", [&]() -> grpc::Status {
      ZF_AUTH(ctx);
      WorkerReport r;
      r.rank = req->rank();
      r.attempt = req->attempt();
      r.host = req->host().empty() ? ctx->peer() : req->host();
      r.step = req->step();
      r.loss = req->loss();
      r.accuracy = req->accuracy();
      r.tokens_per_s = req->tokens_per_s();
      r.peak_bytes = req->peak_bytes();
      if (req->metrics_size() > static_cast<int>(kMaxNamedMetrics)) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "too many named metrics in one report");
      }
      for (const v1::NamedValue& v : req->metrics()) r.named.emplace_back(v.name(), v.value());
      r.log_lines.assign(req->log_lines().begin(), req->log_lines().end());
      r.checkpoint_step = req->checkpoint_step();
      r.finished = req->finished();
      r.exit_code = req->exit_code();
      r.out_of_memory = req->out_of_memory();
      r.after_abort = req->after_abort();
      return ToGrpc(c_->Report(req->job_id(), r));
    });
  }
  grpc::Status KvPut(grpc::ServerContext* ctx, const v1::KeyValue* req, v1::KeyValue* resp) override {
    return GuardHandler("KvPut", [&]() -> grpc::Status {
      ZF_AUTH(ctx);
      *resp = *req;
      return ToGrpc(c_->KvPut(req->job_id(), req->key(), req->value()));
    });
  }
  grpc::Status KvGet(grpc::ServerContext* ctx, const v1::KvGetRequest* req, v1::KeyValue* resp) override {
    return GuardHandler("KvGet", [&]() -> grpc::Status {
      ZF_AUTH(ctx);
      const absl::Duration wait =
          absl::Milliseconds(std::min<int64_t>(std::max<int64_t>(req->timeout_ms(), 0), 600000));
      auto v = c_->KvGet(req->job_id(), req->key(), wait);
      if (!v.ok()) return ToGrpc(v.status());
      resp->set_job_id(req->job_id());
      resp->set_key(req->key());
      resp->set_value(*v);
      return grpc::Status::OK;
    });
  }

 private:
  Coordinator* c_;
  std::string token_;
};

}  // namespace

void ToProto(const LogLine& l, ::zerofit::v1::LogLine* out) {
  out->set_seq(l.seq);
  out->set_source(l.source);
  out->set_text(l.text);
  out->set_unix_us(absl::ToUnixMicros(l.time));
}

void ToProto(const MetricRow& m, ::zerofit::v1::Metric* out) {
  out->set_step(m.step);
  out->set_rank(m.rank);
  out->set_loss(m.loss);
  out->set_accuracy(m.accuracy);
  out->set_tokens_per_s(m.tokens_per_s);
  out->set_peak_bytes(m.peak_bytes);
  out->set_unix_us(absl::ToUnixMicros(m.time));
  for (const auto& [name, value] : m.named) {
    ::zerofit::v1::NamedValue* v = out->add_values();
    v->set_name(name);
    v->set_value(value);
  }
}

void ToProto(const JobRecord& j, ::zerofit::v1::Job* out) {
  out->set_id(j.id);
  out->set_request_id(j.request_id);
  out->set_name(j.name);
  out->set_spec(j.spec);
  out->set_phase(ToProto(j.status.phase));
  out->set_attempt(j.status.attempt);
  out->set_restarts(j.status.restarts);
  out->set_world_size(j.status.world_size);
  out->set_checkpoint_step(j.status.checkpoint_step);
  out->set_reason(j.status.reason);
  out->set_created_unix_us(absl::ToUnixMicros(j.created));
  out->set_since_unix_us(absl::ToUnixMicros(j.status.since));
  out->set_plan(j.plan);
  out->set_interruptions(j.status.interruptions);
  out->set_slurm_job_id(j.slurm_job_id);
  out->set_attempt_note(j.attempt_note);
}

JobRecord FromProto(const ::zerofit::v1::Job& j) {
  JobRecord r;
  r.id = j.id();
  r.request_id = j.request_id();
  r.name = j.name();
  r.spec = j.spec();
  r.status.phase = FromProto(j.phase());
  r.status.attempt = j.attempt();
  r.status.restarts = j.restarts();
  r.status.interruptions = j.interruptions();
  r.status.world_size = j.world_size();
  r.status.checkpoint_step = j.checkpoint_step();
  r.status.reason = j.reason();
  r.status.since = absl::FromUnixMicros(j.since_unix_us());
  r.created = absl::FromUnixMicros(j.created_unix_us());
  r.slurm_job_id = j.slurm_job_id();
  r.attempt_note = j.attempt_note();
  r.plan = j.plan();
  return r;
}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(const ServerOptions& o,
                                                                            const core::Clock* clock) {
  if (o.token.empty()) return absl::InvalidArgumentError("CoordinatorServer: an auth token is required");
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<JobStore> store, JobStore::Open(o.db_path));
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer());
  ZF_ASSIGN_OR_RETURN(s->coordinator_, Coordinator::Create(std::move(store), clock, o.policy));
  s->jobs_ = std::make_unique<JobsService>(s->coordinator_.get(), o.token, &s->stopping_);
  s->workers_ = std::make_unique<WorkersService>(s->coordinator_.get(), o.token);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!o.tls_cert_pem.empty() || !o.tls_key_pem.empty()) {
    if (o.tls_cert_pem.empty() || o.tls_key_pem.empty()) {
      return absl::InvalidArgumentError("TLS needs both a certificate and a key");
    }
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({o.tls_key_pem, o.tls_cert_pem});
    creds = grpc::SslServerCredentials(ssl);
  }
  // gRPC sets SO_REUSEPORT by default on Linux: a second coordinator on a busy port would then start as
  // well, and the kernel would hand each client connection to either one at random.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A port in use is found before gRPC tries it: gRPC would print its own raw error line on stderr, ahead
  // of this clear one. Anything else (an address that does not resolve, a port taken in between) is left to
  // gRPC and explained by ListenError.
  if (NamesAPort(o.listen)) {
    const absl::StatusOr<int> probed = BindErrno(o.listen);
    if (probed.ok() && *probed == EADDRINUSE) return AddressInUseError(o.listen);
  }
  int port = 0;
  builder.AddListeningPort(o.listen, creds, &port);
  builder.RegisterService(s->jobs_.get());
  builder.RegisterService(s->workers_.get());
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || port == 0) return ListenError(o.listen);
  const std::string host = o.listen.substr(0, o.listen.rfind(':'));
  s->address_ = absl::StrCat(host, ":", port);
  CoordinatorServer* self = s.get();
  const absl::Duration tick = o.tick;
  s->ticker_ = std::thread([self, tick] {
    while (!self->stopping_.load()) {
      absl::SleepFor(tick);
      (void)self->coordinator_->Tick();  // a store error here surfaces on the next RPC that touches the job
    }
  });
  return s;
}

void CoordinatorServer::Wait() {
  if (server_) server_->Wait();
}

void CoordinatorServer::Shutdown() {
  if (stopping_.exchange(true)) return;
  coordinator_->Shutdown();
  // Streams notice `stopping_` within their 1 s wait; give them that long before cancelling.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

CoordinatorServer::~CoordinatorServer() {
  if (server_) Shutdown();
  if (ticker_.joinable()) ticker_.join();
}

}  // namespace zerofit::coordinator
