// zerofit_worker: one training process per rank of a coordinator job (launched by `zerofit run`, or by srun
// under Slurm). It reads the job's resolved plan from the coordinator, builds the training session, registers
// (rank 0 with the length of every training pair), resumes from the job's last checkpoint, then for every
// step asks the coordinator for its micro-batches, trains them, reports metrics and log lines, and
// checkpoints every `checkpoint.every` steps. A heartbeat thread keeps the attempt alive; a cancelled job
// stops at the next step. A preemption (the coordinator answers a step with `stop`) makes every rank
// checkpoint the step before and exit with kPreemptedExitCode (75), which the Slurm launcher turns into a
// requeue.
//   mpiexec -n W zerofit_worker --coordinator HOST:PORT --token TOKEN --job JOB-ID
//   srun --mpi=pmix zerofit_worker --coordinator HOST:PORT --token-file STATE/token --job JOB-ID
// The token may also come from ZEROFIT_TOKEN; a coordinator that serves TLS takes --tls-ca CA.pem
// [--tls-server-name NAME] (or ZEROFIT_TLS_CA, ZEROFIT_TLS_SERVER_NAME): client/connection_flags.h.
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/connection.h"
#include "client/connection_flags.h"
#include "comm/communicator_factory.h"
#include "core/status_macros.h"
#ifdef ZEROFIT_HAVE_NCCL
#include "comm/nccl/nccl_communicator.h"
#endif
#include "coordinator/kv_rendezvous.h"
#include "core/text_file.h"
#include "jobspec/exit_codes.h"
#include "jobspec/job_plan.h"
#include "launch/launch_env.h"
#include "sharding/checkpoint_owner.h"
#include "worker/metrics/metrics_recorder.h"
#include "worker/mpi_main.h"
#include "worker/torch/train/named_step_metrics.h"
#include "worker/torch/train/plan_options.h"
#include "worker/torch/train/preference_trainer.h"
#include "zerofit/v1/coordinator.grpc.pb.h"

namespace zerofit::worker {
namespace {

namespace v1 = ::zerofit::v1;

struct Flags {
  client::ConnectionOptions connection;
  std::string job;
  int heartbeat_ms = 1000;
};

constexpr const char* kUsage =
    "usage: mpiexec -n W zerofit_worker --coordinator HOST:PORT (--token TOKEN | --token-file PATH | "
    "ZEROFIT_TOKEN) [--tls-ca CA.pem] [--tls-server-name NAME] --job JOB-ID [--heartbeat-ms 1000]";

absl::StatusOr<Flags> Parse(int argc, char** argv) {
  Flags f;
  client::ConnectionSettings connection = client::SettingsFromEnvironment(&std::getenv);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return absl::CancelledError(kUsage);
    if (i + 1 >= argc)
      return absl::InvalidArgumentError(absl::StrCat("flag ", a, " needs a value\n", kUsage));
    const std::string v = argv[++i];
    if (client::ParseConnectionFlag(a, v, &connection)) {
      continue;
    } else if (a == "--job") {
      f.job = v;
    } else if (a == "--heartbeat-ms") {
      f.heartbeat_ms = std::atoi(v.c_str());
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '", a, "'\n", kUsage));
    }
  }
  ZF_ASSIGN_OR_RETURN(f.connection, client::Resolve(connection));
  if (f.connection.address.empty() || f.connection.token.empty() || f.job.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--coordinator, --token (or --token-file, or ZEROFIT_TOKEN) and --job are required\n", kUsage));
  }
  if (f.heartbeat_ms < 10) return absl::InvalidArgumentError("--heartbeat-ms must be >= 10");
  return f;
}

// The worker's calls, through the one coordinator client (client/connection.h: TLS, token, a 30 s deadline
// per attempt; idempotent calls retried with backoff for up to a minute while a coordinator restarts).
// Every call of the worker is idempotent: reads, per-step grants the coordinator caches, heartbeats,
// registration (a set of ranks), and reports (metrics keyed by step and rank; a repeat after a lost answer
// can only log its lines twice).
class CoordinatorLink {
 public:
  explicit CoordinatorLink(const client::ConnectionOptions& o)
      : connection_(o),
        workers_(v1::Workers::NewStub(connection_.channel())),
        jobs_(v1::Jobs::NewStub(connection_.channel())) {}

  absl::Status Call(const char* what, client::Idempotency idempotency,
                    const client::Connection::Attempt& fn) {
    return connection_.Call(what, idempotency, fn);
  }
  v1::Workers::Stub& workers() { return *workers_; }
  v1::Jobs::Stub& jobs() { return *jobs_; }
  const client::Connection& connection() const { return connection_; }

 private:
  client::Connection connection_;
  std::unique_ptr<v1::Workers::Stub> workers_;
  std::unique_ptr<v1::Jobs::Stub> jobs_;
};
constexpr client::Idempotency kIdempotent = client::Idempotency::kIdempotent;

// Sends heartbeats every `period` until destroyed; records a stop request from the coordinator.
class Heartbeater {
 public:
  Heartbeater(CoordinatorLink* link, std::string job, int rank, absl::Duration period)
      : thread_([this, link, job, rank, period] {
          std::unique_lock<std::mutex> lock(mu_);
          while (!done_) {
            lock.unlock();
            v1::HeartbeatRequest req;
            req.set_job_id(job);
            req.set_rank(rank);
            v1::HeartbeatResponse resp;
            const absl::Status s = link->Call("heartbeat", kIdempotent, [&](grpc::ClientContext* ctx) {
              return link->workers().Heartbeat(ctx, req, &resp);
            });
            if (s.ok() && resp.cancel()) stop_.store(true);
            lock.lock();
            cv_.wait_for(lock, absl::ToChronoMilliseconds(period), [this] { return done_; });
          }
        }) {}
  ~Heartbeater() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  bool stop_requested() const { return stop_.load(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts after the members above exist
};

// The process exit code: 0, or kPreemptedExitCode after a preemption checkpoint.
absl::StatusOr<int> Run(const comm::MpiEnvironment& env, const Flags& f) {
  torch::set_num_threads(1);
  ZF_ASSIGN_OR_RETURN(auto comm, comm::CreateHostCommunicator(env));
  const int rank = comm->rank(), world = comm->world_size();
  // srun / mpiexec / torchrun's view of this process; it must match the communicator's.
  ZF_ASSIGN_OR_RETURN(const launch::LaunchEnv launched, launch::ReadLaunchEnv(&std::getenv));
  ZF_RETURN_IF_ERROR(launch::CheckAgainst(launched, rank, world));
  char hostname[256] = {0};
  ::gethostname(hostname, sizeof(hostname) - 1);
  CoordinatorLink link(f.connection);
  auto report = [&](const std::string& line, int64_t step, const StepReport* sr, int64_t checkpoint,
                    bool finished, int exit_code, bool oom = false,
                    const metrics::StepMetrics* named = nullptr) {
    v1::ReportRequest req;
    req.set_job_id(f.job);
    req.set_rank(rank);
    req.set_host(hostname);
    req.set_step(sr ? step : -1);
    if (sr) {
      struct rusage usage;
      if (::getrusage(RUSAGE_SELF, &usage) == 0)
        req.set_peak_bytes(int64_t{usage.ru_maxrss} * 1024);  // host peak
    }
    if (sr && sr->metrics.pairs > 0) {
      req.set_loss(sr->metrics.loss_sum / sr->metrics.pairs);
      req.set_accuracy(sr->metrics.correct / sr->metrics.pairs);
      req.set_tokens_per_s(sr->metrics.pairs / std::max(1e-9, sr->result.breakdown.wall_ms / 1e3));
    }
    if (named) {
      for (const metrics::NamedValue& v : named->values) {
        v1::NamedValue* out = req.add_metrics();
        out->set_name(v.name);
        out->set_value(v.value);
      }
    }
    if (!line.empty()) req.add_log_lines(line);
    req.set_checkpoint_step(checkpoint);
    req.set_finished(finished);
    req.set_exit_code(exit_code);
    req.set_out_of_memory(oom);
    v1::ReportResponse resp;
    return link.Call("report", kIdempotent,
                     [&](grpc::ClientContext* ctx) { return link.workers().Report(ctx, req, &resp); });
  };

  // The resolved plan, from the coordinator (jobspec/job_plan.h): the spec with every size decided.
  v1::GetJobRequest get;
  get.set_id(f.job);
  v1::Job job;
  ZF_RETURN_IF_ERROR(link.Call("get job", kIdempotent,
                               [&](grpc::ClientContext* ctx) { return link.jobs().Get(ctx, get, &job); }));
  ZF_ASSIGN_OR_RETURN(const jobspec::JobPlan plan, jobspec::JobPlanFromJson(job.plan(), f.job));
  if (plan.world_size != world) {
    return absl::InvalidArgumentError(absl::StrCat("job ", f.job, " wants world_size ", plan.world_size,
                                                   " but mpiexec started ", world, " ranks"));
  }
  ZF_ASSIGN_OR_RETURN(PreferenceTrainOptions options, OptionsFromPlan(plan));
  options.local_rank = launched.local_rank;
#ifdef ZEROFIT_HAVE_NCCL
  // NCCL's unique id travels through the coordinator's key-value store, under a key of this attempt.
  options.nccl = [&](int cuda_device) -> absl::StatusOr<std::unique_ptr<comm::Communicator>> {
    coordinator::KvRendezvous rendezvous(link.connection(), f.job);
    ZF_ASSIGN_OR_RETURN(auto nccl, comm::NcclCommunicator::CreateWithRendezvous(
                                       rendezvous, absl::StrCat("nccl-id/attempt-", job.attempt()), rank,
                                       world, cuda_device, comm->options()));
    return std::unique_ptr<comm::Communicator>(std::move(nccl));
  };
#endif
  auto session_or = PreferenceSession::Create(options, comm.get());
  if (!session_or.ok()) {
    (void)report(absl::StrCat("cannot start: ", session_or.status().message()), -1, nullptr, -1, true, 1);
    return session_or.status();
  }
  std::unique_ptr<PreferenceSession> session = std::move(*session_or);

  v1::RegisterWorkerRequest reg;
  reg.set_job_id(f.job);
  reg.set_rank(rank);
  reg.set_world_size(world);
  reg.set_host(hostname);
  if (rank == 0)
    for (int64_t len : session->TrainLengths()) reg.add_sample_lengths(len);
  v1::RegisterWorkerResponse registered;
  ZF_RETURN_IF_ERROR(link.Call("register", kIdempotent, [&](grpc::ClientContext* ctx) {
    return link.workers().Register(ctx, reg, &registered);
  }));
  // Every rank registered (and rank 0's lengths arrived) before anyone asks for a step.
  ZF_RETURN_IF_ERROR(comm->Barrier(absl::Minutes(5)));
  int64_t first = registered.resume_step();
  if (first == 0 && !plan.checkpoint.dir.empty()) {
    // Starting over: the first save would replace whatever checkpoint.dir holds, so it must be ours (an
    // attempt of this job that died before its checkpoint was recorded) or nothing.
    ZF_RETURN_IF_ERROR(sharding::CheckCheckpointDirIsOurs(plan.checkpoint.dir, registered.request_id()));
  }
  if (first > 0) {
    if (plan.checkpoint.dir.empty()) {
      return absl::FailedPreconditionError("the job resumes at a checkpoint but has no checkpoint.dir");
    }
    ZF_ASSIGN_OR_RETURN(const int64_t applied, session->LoadCheckpoint(plan.checkpoint.dir));
    if (applied != first) {
      return absl::DataLossError(absl::StrCat(plan.checkpoint.dir, ": checkpoint holds ", applied,
                                              " steps, the coordinator expected ", first));
    }
  }
  // Named metrics: alarms on every rank, the spec's sinks (metrics: {tensorboard, jsonl}) on rank 0.
  metrics::RecorderOptions ro;
  if (rank == 0) {
    ro.tensorboard_dir = plan.metrics.tensorboard;
    ro.jsonl_path = plan.metrics.jsonl;
  }
  ro.hostname = hostname;
  ro.now_unix_s = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  ro.alarms.reward_model = options.task == PreferenceTrainOptions::Task::kReward;
  ro.alarms.rank = rank;
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<metrics::MetricsRecorder> recorder,
                      metrics::MetricsRecorder::Create(ro));
  Heartbeater heartbeat(&link, f.job, rank, absl::Milliseconds(f.heartbeat_ms));
  ZF_RETURN_IF_ERROR(
      report(absl::StrCat("started: ", launch::Describe(launched)), -1, nullptr, -1, false, 0));
  if (rank == 0) {
    ZF_RETURN_IF_ERROR(report(absl::StrCat("attempt ", registered.attempt(), ": ", session->num_train_pairs(),
                                           " training pairs, steps ", first, "..", plan.steps - 1),
                              -1, nullptr, -1, false, 0));
    if (first == 0) {  // the data report once per job, not again on every resume
      const std::string text = data::FormatDataReport(session->data_report(), options.data.train, false);
      for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
        ZF_RETURN_IF_ERROR(report(absl::StrCat("data: ", line), -1, nullptr, -1, false, 0));
      }
    }
  }
  std::optional<EvalReport> last_eval;
  const absl::Time start = absl::Now();
  int64_t saved = first - 1;  // the last step whose checkpoint exists
  for (int64_t step = first; step < plan.steps; ++step) {
    if (heartbeat.stop_requested()) {
      (void)report("stopping: the coordinator asked to", -1, nullptr, -1, true, 0);
      return 0;
    }
    v1::AcquireStepRequest acq;
    acq.set_job_id(f.job);
    acq.set_rank(rank);
    acq.set_step(step);
    v1::AcquireStepResponse assignment;
    ZF_RETURN_IF_ERROR(link.Call("acquire step", kIdempotent, [&](grpc::ClientContext* ctx) {
      return link.workers().AcquireStep(ctx, acq, &assignment);
    }));
    if (assignment.stop()) {
      // Preempted: every rank got `stop` for this same step (the coordinator picked it), so the checkpoint
      // below is collective and consistent.
      int64_t checkpoint = -1;
      std::string what = "no checkpoint.dir: the next attempt starts over";
      if (!plan.checkpoint.dir.empty()) {
        if (saved < step - 1) {
          ZF_RETURN_IF_ERROR(session->SaveCheckpoint(
              plan.checkpoint.dir, sharding::CheckpointOwnerExtra(f.job, registered.request_id(), step - 1),
              plan.checkpoint.keep));
          saved = step - 1;
        }
        checkpoint = saved;
        what = saved >= 0 ? absl::StrCat("checkpoint at step ", saved) : "nothing trained yet";
      }
      ZF_RETURN_IF_ERROR(report(rank == 0 ? absl::StrCat("preempted before step ", step, ": ", what,
                                                         "; exiting with code ", jobspec::kPreemptedExitCode)
                                          : "",
                                -1, nullptr, rank == 0 ? checkpoint : -1, true, jobspec::kPreemptedExitCode));
      return jobspec::kPreemptedExitCode;
    }
    std::vector<std::vector<uint64_t>> micro;
    for (const auto& mb : assignment.micro_batches())
      micro.emplace_back(mb.samples().begin(), mb.samples().end());
    auto stepped = session->Step(step, micro);
    if (!stepped.ok()) {
      // Out of memory (LibTorch's CPU or CUDA allocator): tell the coordinator, which re-plans the next
      // attempt.
      const std::string msg(stepped.status().message());
      const bool oom = stepped.status().code() == absl::StatusCode::kResourceExhausted ||
                       msg.find("out of memory") != std::string::npos ||
                       msg.find("can't allocate memory") != std::string::npos;
      (void)report(absl::StrCat("step ", step, " failed: ", msg), -1, nullptr, -1, true, 1, oom);
      return stepped.status();
    }
    StepReport sr = *std::move(stepped);
    if (EvalDue(options, step)) {  // held-out evaluation (eval.every, and after the last step)
      auto eval = session->Evaluate();
      if (!eval.ok()) {
        (void)report(absl::StrCat("evaluation after step ", step, " failed: ", eval.status().message()), -1,
                     nullptr, -1, true, 1);
        return eval.status();
      }
      sr.eval = last_eval = *eval;
    }
    const metrics::StepMetrics named = NamedStepMetrics(
        sr, options.task,
        HostSample{rank, absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()), HostPeakRssBytes()});
    auto alarms = recorder->Record(named);
    if (!alarms.ok()) {  // training cannot be right (a NaN loss): stop, saying where
      (void)report(std::string(alarms.status().message()), step, &sr, -1, true, 1, false, &named);
      return alarms.status();
    }
    for (const std::string& warning : *alarms) {
      if (rank == 0) ZF_RETURN_IF_ERROR(report(warning, -1, nullptr, -1, false, 0));
    }
    int64_t checkpoint = -1;
    const bool last = step + 1 == plan.steps;
    if (!plan.checkpoint.dir.empty() && ((step + 1) % plan.checkpoint.every == 0 || last)) {
      ZF_RETURN_IF_ERROR(session->SaveCheckpoint(
          plan.checkpoint.dir, sharding::CheckpointOwnerExtra(f.job, registered.request_id(), step),
          plan.checkpoint.keep));
      checkpoint = step;
      saved = step;
    }
    {
      const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
      const int64_t done = step - first + 1, left = plan.steps - step - 1;
      // Every rank reports its step metrics (with its peak memory); rank 0 also the progress line and the
      // checkpoint.
      const std::string line =
          rank != 0
              ? ""
              : absl::StrFormat(
                    "step %d/%d  loss %.4f  acc %.3f  margin %.3f  lr %.3e  %.0f pairs/s  ETA %.0fs%s%s",
                    step + 1, plan.steps, sr.metrics.loss_sum / std::max(1.0, sr.metrics.pairs),
                    sr.metrics.correct / std::max(1.0, sr.metrics.pairs),
                    sr.metrics.margin_sum / std::max(1.0, sr.metrics.pairs), sr.lr,
                    sr.metrics.pairs / std::max(1e-9, sr.result.breakdown.wall_ms / 1e3),
                    elapsed / static_cast<double>(done) * static_cast<double>(left),
                    checkpoint >= 0 ? absl::StrCat("  (checkpoint step ", checkpoint, ")") : "",
                    sr.eval ? absl::StrFormat(
                                  "  | eval: held-out acc %.3f loss %.4f (%.0f pairs)", sr.eval->accuracy(),
                                  sr.eval->metrics.loss_sum / std::max(1.0, sr.eval->metrics.pairs),
                                  sr.eval->metrics.pairs)
                            : "");
      ZF_RETURN_IF_ERROR(report(line, step, &sr, rank == 0 ? checkpoint : -1, false, 0, false, &named));
    }
  }
  if (!last_eval) {  // no step ran in this attempt
    ZF_ASSIGN_OR_RETURN(last_eval, session->Evaluate());
  }
  const EvalReport& eval = *last_eval;
  if (!plan.export_dir.empty()) {  // rank 0 writes; the others wait at the barrier below
    if (absl::Status exported = session->Export(plan.export_dir); !exported.ok()) {
      (void)report(absl::StrCat("export to ", plan.export_dir, " failed: ", exported.message()), -1, nullptr,
                   -1, true, 1);
      return exported;
    }
  }
  ZF_RETURN_IF_ERROR(comm->Barrier(absl::Minutes(5)));
  ZF_RETURN_IF_ERROR(report(rank == 0 ? absl::StrFormat("done: held-out accuracy %.3f over %.0f pairs",
                                                        eval.accuracy(), eval.metrics.pairs)
                                      : "",
                            -1, nullptr, -1, true, 0));
  return 0;
}

}  // namespace
}  // namespace zerofit::worker

int main(int argc, char** argv) {
  return zerofit::worker::MpiMain(argc, argv, &zerofit::worker::Parse, &zerofit::worker::Run);
}
