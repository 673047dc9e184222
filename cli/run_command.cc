#include "cli/run_command.h"

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/blocked_signals.h"
#include "cli/jobs_commands.h"
#include "cli/launcher_stop.h"
#include "cli/local_job_files.h"
#include "cli/private_files.h"
#include "cli/stdout_progress.h"
#include "cli/supervise.h"
#include "client/connection_flags.h"
#include "coordinator/service.h"
#include "coordinator/state_dir_lock.h"
#include "core/cpu_affinity.h"
#include "core/status_macros.h"
#include "core/text_file.h"
#include "launch/mpiexec_command.h"
#include "sharding/checkpoint_rotation.h"

namespace zerofit::cli {

namespace fs = std::filesystem;

namespace {

// From SIGTERM to mpiexec's process group until SIGKILL: Open MPI's mpiexec ends its ranks within about a
// second; the whole job is gone well inside the 10 s a supervisor (systemd's default is 90 s) allows.
constexpr absl::Duration kStopGrace = absl::Seconds(5);

const char* SignalName(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

// --overwrite-checkpoints: the workers run on this host, so the earlier jobs' checkpoints are removed here,
// before the submit (whose check then finds checkpoint.dir marked as this request's).
absl::Status RetireCheckpoints(const std::string& dir, const std::string& request_id) {
  if (dir.empty()) return absl::OkStatus();
  ZF_ASSIGN_OR_RETURN(const std::vector<std::string> removed,
                      sharding::RetireOtherJobsCheckpoints(dir, core::DirOwner{"", request_id}));
  for (const std::string& path : removed) {
    std::printf("zerofit run: --overwrite-checkpoints: removed %s\n", path.c_str());
  }
  return absl::OkStatus();
}

}  // namespace

CLI::App* AddRunCommand(CLI::App& app, RunFlags* f) {
  CLI::App* run = app.add_subcommand("run", "Run a job locally: embedded coordinator + mpiexec workers");
  run->add_option("spec", f->spec_path, "job.yaml")->required();
  run->add_option("--state-dir", f->state_dir, "job store and token (default: a fresh temporary directory)");
  run->add_option("--worker", f->worker, "zerofit_worker binary");
  run->add_option("--mpiexec", f->mpiexec, "MPI launcher")->capture_default_str();
  run->add_option("--heartbeat-timeout", f->heartbeat_timeout_s, "seconds")->capture_default_str();
  CLI::Option* overwrite = run->add_flag(
      "--overwrite-checkpoints", f->overwrite_checkpoints,
      "replace the checkpoints an earlier zerofit job left in checkpoint.dir (never files zerofit "
      "did not write)");
  run->add_flag(
         "--resume", f->resume,
         "continue from the latest checkpoint in checkpoint.dir, whichever zerofit job wrote it (a run "
         "stopped with Ctrl-C, or killed): the spec's checkpoint.resume")
      ->excludes(overwrite);
  return run;
}

std::string RunOutputs(const jobspec::JobSpec& spec, const std::string& checkpoint_note) {
  auto where = [](const std::string& path) { return fs::absolute(path).lexically_normal().string(); };
  std::string out = "zerofit run: outputs\n";
  const size_t empty = out.size();
  if (!spec.export_dir.empty()) {
    absl::StrAppend(&out, "  model:       ", where(spec.export_dir),
                    "  (model.safetensors + config.json, Hugging Face format)\n");
  }
  if (!spec.checkpoint.dir.empty()) {
    absl::StrAppend(&out, "  checkpoint:  ", where(spec.checkpoint.dir), checkpoint_note, "\n");
  }
  if (!spec.metrics.jsonl.empty()) {
    absl::StrAppend(&out, "  metrics:     ", where(spec.metrics.jsonl), "  (one JSON object per step)\n");
  }
  if (!spec.metrics.tensorboard.empty()) {
    absl::StrAppend(&out, "  TensorBoard: tensorboard --logdir ", where(spec.metrics.tensorboard), "\n");
  }
  if (out.size() == empty) {
    out += "  none: the spec sets no export:, checkpoint: or metrics: {jsonl, tensorboard}\n";
  }
  return out;
}

namespace {

// The worker program: --worker, else the one built in this tree.
absl::StatusOr<std::string> WorkerPath(const RunFlags& f) {
  std::string worker = f.worker;
#ifdef ZEROFIT_WORKER_BINARY
  if (worker.empty()) worker = ZEROFIT_WORKER_BINARY;
#endif
  if (worker.empty() || !fs::exists(worker)) {
    return absl::NotFoundError(absl::StrCat("run: zerofit_worker not found ('", worker, "'): pass --worker"));
  }
  return worker;
}

// --state-dir, else a fresh private temporary folder; made private (0700) either way.
absl::StatusOr<std::string> StateDir(const RunFlags& f) {
  std::string state = f.state_dir;
  if (state.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "zerofit-run-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return absl::ErrnoToStatus(errno, "run: mkdtemp");  // mode 0700
    state = tmpl;
  }
  ZF_RETURN_IF_ERROR(MakePrivateDir(state));
  return state;
}

// The job's last line (its phase after how many attempts, and why), then what it wrote; an error unless it
// succeeded.
absl::Status ReportOutcome(const std::string& id, const jobspec::JobSpec& spec,
                           const coordinator::JobRecord& job) {
  // attempt 0: no launch formed an attempt (its ranks failed before all of them registered).
  const std::string attempts = job.status.attempt == 0 ? std::string("before its ranks formed an attempt")
                               : job.status.attempt == 1
                                   ? std::string("after 1 attempt")
                                   : absl::StrCat("after ", job.status.attempt, " attempts");
  std::printf("zerofit run: %s %s %s%s%s\n", id.c_str(), coordinator::JobPhaseName(job.status.phase),
              attempts.c_str(), job.status.reason.empty() ? "" : ": ", job.status.reason.c_str());
  if (job.status.phase != coordinator::JobPhase::kSucceeded) {
    return absl::AbortedError(absl::StrCat(id, " ", coordinator::JobPhaseName(job.status.phase)));
  }
  const std::string checkpoint = job.status.checkpoint_step >= 0
                                     ? absl::StrCat(" (step ", job.status.checkpoint_step, ")")
                                     : std::string();
  std::printf("%s", RunOutputs(spec, checkpoint).c_str());
  return absl::OkStatus();
}

}  // namespace

absl::Status RunRun(const RunFlags& f) {
  // SIGINT/SIGTERM (Ctrl-C, `timeout`, a supervisor) stop the workers before this process ends; blocked
  // before the coordinator's threads start, so that they inherit the mask.
  BlockedSignals signals({SIGINT, SIGTERM});
  ZF_ASSIGN_OR_RETURN(const std::string text, jobspec::ReadJobSpecFile(f.spec_path));
  // The spec and the files its workers will read and write, before anything is started or written.
  ZF_ASSIGN_OR_RETURN(jobspec::JobSpec spec, jobspec::ParseJobSpec(text, f.spec_path));
  if (f.resume) ZF_RETURN_IF_ERROR(jobspec::ResumeFromCheckpointDir(&spec, text, f.spec_path));
  ZF_RETURN_IF_ERROR(CheckLocalJobFiles(spec, text, f.spec_path));
  ZF_ASSIGN_OR_RETURN(const std::string worker, WorkerPath(f));
  ZF_ASSIGN_OR_RETURN(const std::string state, StateDir(f));
  // One coordinator per state dir (coordinator/state_dir_lock.h): a `zerofit serve` or another `zerofit run`
  // on the same --state-dir is refused, naming its PID, before the job store is opened.
  ZF_ASSIGN_OR_RETURN(coordinator::StateDirLock lock, coordinator::StateDirLock::Acquire(state));
  const std::string token = NewToken();
  coordinator::ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = (fs::path(state) / "jobs.db").string();
  o.token = token;
  o.policy.heartbeat_timeout = absl::Seconds(f.heartbeat_timeout_s);
  core::RealClock clock;
  ZF_ASSIGN_OR_RETURN(auto server, coordinator::CoordinatorServer::Start(o, &clock));
  ZF_RETURN_IF_ERROR(lock.SetAddress(server->address()));
  coordinator::Coordinator& c = server->coordinator();
  // The request id is stored and printed: no part of the token in it.
  const std::string request_id = absl::StrCat("run-", ::getpid(), "-", NewToken().substr(0, 8));
  if (f.overwrite_checkpoints) ZF_RETURN_IF_ERROR(RetireCheckpoints(spec.checkpoint.dir, request_id));
  ZF_ASSIGN_OR_RETURN(auto submitted,
                      c.Submit(request_id, "", text, fs::path(f.spec_path).filename().string(), f.resume));
  const std::string id = submitted.job.id;
  std::printf("zerofit run: %s on %d ranks (coordinator %s, state %s)\n", id.c_str(), spec.world_size,
              server->address().c_str(), state.c_str());
  // On a terminal one progress line redrawn in place, else a line every log_every steps; ended on a fresh
  // line however this function returns (before main prints an error).
  const std::unique_ptr<ProgressReporter> progress = StdoutProgress(spec.log_every, &clock);
  SuperviseHooks hooks;
  hooks.progress = progress.get();
  hooks.command = [&] {
    launch::MpiexecLaunch l;
    l.mpiexec = f.mpiexec;
    l.world_size = spec.world_size;
    l.host_cpus = core::AllowedCpus();
    l.as_root = ::geteuid() == 0;
    l.worker = {worker, "--coordinator", server->address(), "--job", id};
    return launch::MpiexecCommand(l);
  };
  // The token by environment (mpiexec's ranks on this host inherit it), not on a command line `ps` shows.
  hooks.env = {absl::StrCat(client::kTokenEnv, "=", token)};
  LauncherStop stop(kStopGrace);
  int stopped_by = 0;
  hooks.poll = [&](ChildProcess& launcher) {
    for (int sig = signals.Take(); sig != 0; sig = signals.Take()) {
      progress->Say(
          absl::StrCat("zerofit run: ", SignalName(sig), ": stopping the workers (SIGTERM to mpiexec",
                       stop.stopping() ? "; again: SIGKILL now"
                                       : absl::StrCat(", SIGKILL after ", absl::FormatDuration(kStopGrace)),
                       ")"));
      stopped_by = sig;
      stop.Begin(launcher, absl::Now());
    }
    stop.Tick(launcher, absl::Now());
  };
  hooks.after_exit = [&](int) { return stop.stopping() ? AfterExit::kStop : AfterExit::kReportAndContinue; };
  std::unique_ptr<JobControl> control = LocalJobControl(&c);
  ZF_ASSIGN_OR_RETURN(Supervised done, SuperviseJob(*control, id, hooks));
  progress->Finish();
  if (stopped_by != 0) {
    while (signals.Take() != 0) {
    }  // the user insisting while the workers stopped: they are stopped
    const std::string why = absl::StrCat("zerofit run stopped by ", SignalName(stopped_by));
    ZF_RETURN_IF_ERROR(control->Cancel(id, why));
    return absl::CancelledError(absl::StrCat(id, ": ", why, " (the job is cancelled)"));
  }
  return ReportOutcome(id, spec, done.job);
}

}  // namespace zerofit::cli
