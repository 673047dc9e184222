// zerofit_worker: one training process per rank of a coordinator job (launched by `zerofit run`, or by srun
// under Slurm). What a rank does is the worker loop's (worker/loop/worker_loop.h: plan, registration,
// resume, steps, reports, checkpoints, preemption with exit code 75, cancel); this program wires it to MPI,
// the launcher's environment and the torch training session (worker/torch/train/torch_training_session.h).
//   ZEROFIT_TOKEN=... mpiexec -n W zerofit_worker --coordinator HOST:PORT --job JOB-ID
//   srun --mpi=pmix zerofit_worker --coordinator HOST:PORT --token-file STATE/token --job JOB-ID
// The token comes from a 0600 file or the inherited environment, never the command line; a coordinator that
// serves TLS takes --tls-ca CA.pem
// [--tls-server-name NAME] (or ZEROFIT_TLS_CA, ZEROFIT_TLS_SERVER_NAME): client/connection_flags.h.
//
// The communicator is wrapped in a comm::HookedCommunicator that notes each collective in the rank's
// activity (worker/loop/rank_activity.h), which every heartbeat carries for the coordinator's progress
// watchdog; when the coordinator answers `abort` the heartbeat thread aborts it and, 5 s later, _exits with
// kAbortedExitCode if the process is still there (worker/loop/heartbeater.h).
//
// Built with ZEROFIT_FAULT_INJECTION this is zerofit_worker_faults, for tests only: it reads ZEROFIT_FAULTS
// (worker/loop/fault_plan.h) and injects those faults. zerofit_worker is built without it.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/connection_flags.h"
#include "comm/communicator_factory.h"
#include "comm/hooked_communicator.h"
#include "core/status_macros.h"
#ifdef ZEROFIT_HAVE_NCCL
#include "comm/nccl/nccl_communicator.h"
#endif
#include "jobspec/exit_codes.h"
#include "launch/crash_report.h"
#include "launch/launch_env.h"
#include "launch/parent_watch.h"
#include "worker/loop/rank_activity.h"
#include "worker/loop/run_worker.h"
#ifdef ZEROFIT_FAULT_INJECTION
#include "worker/loop/faulty_session.h"
#endif
#include "worker/mpi_main.h"
#include "worker/torch/train/runtime_options.h"
#include "worker/torch/train/torch_training_session.h"

namespace zerofit::worker {
namespace {

struct Flags {
  client::ConnectionOptions connection;
  std::string job;
  int heartbeat_ms = 1000;
  int coordinator_timeout_s = 30;
#ifdef ZEROFIT_FAULT_INJECTION
  FaultPlan faults;  // from ZEROFIT_FAULTS
#endif
};

constexpr const char* kUsage =
    "usage: mpiexec -n W zerofit_worker --coordinator HOST:PORT (--token-file PATH | ZEROFIT_TOKEN) "
    "[--tls-ca CA.pem] [--tls-server-name NAME] --job JOB-ID [--heartbeat-ms 1000] "
    "[--coordinator-timeout-s 30]";

absl::StatusOr<int> PositiveFlag(const std::string& flag, const std::string& value, int minimum) {
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (end == value.c_str() || *end != '\0' || v < minimum || v > 86400000) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " must be an integer >= ", minimum, ", got '", value, "'"));
  }
  return static_cast<int>(v);
}

absl::StatusOr<Flags> Parse(int argc, char** argv) {
  Flags f;
  client::ConnectionSettings connection = client::SettingsFromEnvironment(&std::getenv);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return absl::CancelledError(kUsage);
    if (a == "--token") {  // STYLE 19: every local user reads a command line in /proc/PID/cmdline
      return absl::InvalidArgumentError(
          "--token would put the token on the command line, where every local user can read it: pass "
          "--token-file PATH (mode 0600) or set ZEROFIT_TOKEN");
    }
    if (i + 1 >= argc)
      return absl::InvalidArgumentError(absl::StrCat("flag ", a, " needs a value\n", kUsage));
    const std::string v = argv[++i];
    if (client::ParseConnectionFlag(a, v, &connection)) {
      continue;
    } else if (a == "--job") {
      f.job = v;
    } else if (a == "--heartbeat-ms") {
      ZF_ASSIGN_OR_RETURN(f.heartbeat_ms, PositiveFlag(a, v, 10));
    } else if (a == "--coordinator-timeout-s") {
      ZF_ASSIGN_OR_RETURN(f.coordinator_timeout_s, PositiveFlag(a, v, 1));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '", a, "'\n", kUsage));
    }
  }
  ZF_ASSIGN_OR_RETURN(f.connection, client::Resolve(connection));
  if (f.connection.address.empty() || f.connection.token.empty() || f.job.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--coordinator, --token-file (or ZEROFIT_TOKEN) and --job are required\n", kUsage));
  }
  // A call that cannot reach the coordinator gives up when the heartbeats would (worker_loop.h).
  f.connection.retry.budget = absl::Seconds(f.coordinator_timeout_s);
#ifdef ZEROFIT_FAULT_INJECTION
  const char* faults = std::getenv("ZEROFIT_FAULTS");
  ZF_ASSIGN_OR_RETURN(f.faults, FaultPlan::Parse(faults ? faults : ""));
  std::fprintf(stderr, "zerofit_worker_faults: %s\n", f.faults.Describe().c_str());
#endif
  return f;
}

// The process exit code: 0, or kPreemptedExitCode after a preemption checkpoint.
absl::StatusOr<int> Run(const comm::MpiEnvironment& env, const Flags& f) {
  torch::set_num_threads(1);
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> comm, comm::CreateHostCommunicator(env));
  // srun / mpiexec / torchrun's view of this process; it must match the communicator's.
  ZF_ASSIGN_OR_RETURN(const launch::LaunchEnv launched, launch::ReadLaunchEnv(&std::getenv));
  ZF_RETURN_IF_ERROR(launch::CheckAgainst(launched, comm->rank(), comm->world_size()));
  char hostname[256] = {0};
  ::gethostname(hostname, sizeof(hostname) - 1);
  RankActivity activity;
  const int rank = comm->rank();
  comm::HookedCommunicator hooked(comm.get(), [&, rank](comm::HookedCommunicator& self, const char* op) {
#ifdef ZEROFIT_FAULT_INJECTION
    return FaultHook(f.faults, rank, activity, self, op);
#else
    (void)self;
    (void)rank;
    activity.NoteCollective(op);
    return absl::OkStatus();
#endif
  });

  WorkerLoopOptions o;
  o.rank = comm->rank();
  o.world_size = comm->world_size();
  o.hostname = hostname;
  o.launched_as = launch::Describe(launched);
  o.heartbeat_period = absl::Milliseconds(f.heartbeat_ms);
  o.coordinator_silence_limit = absl::Seconds(f.coordinator_timeout_s);
  o.barrier = [&](absl::Duration timeout) { return hooked.Barrier(timeout); };
  o.activity = &activity;
  // The device communicator the session creates (NCCL on a GPU) is aborted with the host one, so that a rank
  // stuck in an NCCL collective returns (ncclCommAbort never waits for peers) rather than at the _exit grace.
  // The session owns it and outlives the heartbeat thread that calls this (WorkerLoop stops that thread
  // first); one created after the abort is aborted at once.
  std::atomic<bool> aborted{false};
  std::atomic<comm::Communicator*> device_comm{nullptr};
  o.abort = [&] {
    aborted = true;
    hooked.Abort();
    if (comm::Communicator* d = device_comm.load()) d->Abort();
  };
  o.exit_after_abort = [] { ::_exit(jobspec::kAbortedExitCode); };
  o.make_session = [&](const jobspec::JobPlan& plan,
                       const AttemptContext& attempt) -> absl::StatusOr<std::unique_ptr<TrainingSession>> {
    // The plan says what to train; this process adds only how it runs (its GPU, the NCCL rendezvous).
    RuntimeOptions runtime;
    runtime.local_rank = launched.local_rank;
#ifdef ZEROFIT_HAVE_NCCL
    // NCCL's unique id travels through the coordinator's key-value store, under a key of this attempt.
    if (attempt.rendezvous == nullptr) return absl::InternalError("the worker loop gave no rendezvous");
    runtime.nccl = [&, rendezvous = attempt.rendezvous, number = attempt.attempt](
                       int cuda_device) -> absl::StatusOr<std::unique_ptr<comm::Communicator>> {
      ZF_ASSIGN_OR_RETURN(auto nccl, comm::NcclCommunicator::CreateWithRendezvous(
                                         *rendezvous, absl::StrCat("nccl-id/attempt-", number), comm->rank(),
                                         comm->world_size(), cuda_device, comm->options()));
      device_comm = nccl.get();
      if (aborted) nccl->Abort();
      return std::unique_ptr<comm::Communicator>(std::move(nccl));
    };
#endif
    ZF_ASSIGN_OR_RETURN(std::unique_ptr<TrainingSession> session,
                        MakeTorchTrainingSession(plan, runtime, &hooked));
#ifdef ZEROFIT_FAULT_INJECTION
    return std::unique_ptr<TrainingSession>(std::make_unique<FaultySession>(
        std::move(session), &f.faults, rank, &activity, [](int code) { ::_exit(code); }));
#else
    return std::unique_ptr<TrainingSession>(std::move(session));
#endif
  };
  return RunWorker(std::move(o), f.connection, f.job);
}

}  // namespace
}  // namespace zerofit::worker

int main(int argc, char** argv) {
  // A rank dies with its launcher (mpiexec, slurmstepd): armed first, before MPI or gRPC start threads, with
  // the parent read before anything else could take time (launch/parent_watch.h says why SIGKILL).
  const pid_t parent = ::getppid();
  if (const absl::Status watched = zerofit::launch::ExitWithParent(SIGKILL, parent); !watched.ok()) {
    std::fprintf(stderr, "zerofit_worker: %s\n", std::string(watched.message()).c_str());
    return 1;
  }
  // A crash before MPI_Init (whose handlers take over some signals) or outside them prints the stack into the
  // job's output (launch/crash_report.h): multinode_e2e saw a rank die of SIGSEGV at start, without a word.
  if (const absl::Status report = zerofit::launch::InstallCrashReport("zerofit_worker"); !report.ok()) {
    std::fprintf(stderr, "zerofit_worker: %s\n", std::string(report.message()).c_str());
  }
  return zerofit::worker::MpiMain(argc, argv, &zerofit::worker::Parse, &zerofit::worker::Run);
}
