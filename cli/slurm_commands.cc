#include "cli/slurm_commands.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/blocked_signals.h"
#include "cli/jobs_commands.h"
#include "cli/launcher_stop.h"
#include "cli/local_job_files.h"
#include "cli/private_files.h"
#include "cli/stdout_progress.h"
#include "cli/subprocess.h"
#include "cli/supervise.h"
#include "client/connection_flags.h"
#include "coordinator/service.h"
#include "core/excerpt.h"
#include "core/status_macros.h"
#include "core/text_file.h"
#include "jobspec/exit_codes.h"
#include "jobspec/job_spec.h"
#include "launch/launch_env.h"
#include "launch/sbatch_script.h"

namespace zerofit::cli {
namespace {

namespace fs = std::filesystem;

std::string SelfPath() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("zerofit") : p.string();
}

// The job spec with the flags applied, checked; and the text the allocation runs (the spec as written, plus
// the world size when the spec left it to the Slurm section or the flags).
struct Prepared {
  jobspec::JobSpec spec;
  jobspec::SlurmSpec slurm;
  std::string text;
};

// The spec text the allocation and its coordinator read. They size attempts from the slurm section (which
// node counts a shrinking job may run on), so flags that decide it are written into it: --on-node-loss and
// --min-nodes always, and with shrink also --nodes and the ranks per node. `written` is what the text says.
absl::StatusOr<std::string> SnapshotWithNodeLoss(const std::string& text, const std::string& source,
                                                 const jobspec::SlurmSpec& written,
                                                 const jobspec::SlurmSpec& x) {
  const bool shrink = x.on_node_loss == jobspec::NodeLoss::kShrink;
  std::vector<std::pair<std::string, std::string>> set;
  auto field = [&](bool needed, const char* key, auto was, auto now) {
    if (needed && was != now) set.emplace_back(key, absl::StrCat(now));
  };
  field(true, "on_node_loss", std::string(jobspec::NodeLossName(written.on_node_loss)),
        std::string(jobspec::NodeLossName(x.on_node_loss)));
  field(x.min_nodes != written.min_nodes, "min_nodes", written.min_nodes, x.min_nodes);
  field(shrink, "nodes", written.nodes, x.nodes);
  field(shrink, "tasks_per_node", written.tasks_per_node, x.tasks_per_node);
  field(shrink, "gpus_per_node", written.gpus_per_node, x.gpus_per_node);
  if (set.empty()) return text;
  return jobspec::SetSlurmFields(text, source, set);
}

absl::StatusOr<Prepared> Prepare(const SlurmFlags& f) {
  ZF_ASSIGN_OR_RETURN(const std::string text, jobspec::ReadJobSpecFile(f.spec_path));
  ZF_ASSIGN_OR_RETURN(jobspec::JobSpec spec, jobspec::ParseJobSpec(text, f.spec_path));
  jobspec::SlurmSpec x = spec.slurm.value_or(jobspec::SlurmSpec{});
  if (f.nodes) x.nodes = *f.nodes;
  if (f.gpus_per_node) x.gpus_per_node = *f.gpus_per_node;
  if (f.tasks_per_node) x.tasks_per_node = *f.tasks_per_node;
  if (f.cpus_per_task) x.cpus_per_task = *f.cpus_per_task;
  if (f.signal_seconds) x.signal_seconds = *f.signal_seconds;
  if (f.port) x.port = *f.port;
  for (auto [flag, field] : {std::pair{&f.mem, &x.mem},
                             {&f.time, &x.time},
                             {&f.partition, &x.partition},
                             {&f.account, &x.account},
                             {&f.qos, &x.qos},
                             {&f.state_dir, &x.state_dir},
                             {&f.coordinator, &x.coordinator}}) {
    if (!flag->empty()) *field = *flag;
  }
  if (f.min_nodes) x.min_nodes = *f.min_nodes;
  if (!f.on_node_loss.empty()) {
    if (f.on_node_loss != "wait" && f.on_node_loss != "shrink") {
      return absl::InvalidArgumentError(
          absl::StrCat("--on-node-loss: expected wait or shrink, got '", core::Excerpt(f.on_node_loss), "'"));
    }
    x.on_node_loss = f.on_node_loss == "shrink" ? jobspec::NodeLoss::kShrink : jobspec::NodeLoss::kWait;
  }
  ZF_RETURN_IF_ERROR(jobspec::ValidateSlurm(spec, x, f.spec_path));
  // The submitting host usually sees the cluster's shared file system, but the ranks' nodes decide (a path
  // may be node-local): a file problem here is a warning before the job waits in the queue, not a refusal;
  // the ranks check the same files when they start.
  if (const absl::Status files = CheckLocalJobFiles(spec, text, f.spec_path); !files.ok()) {
    std::fprintf(stderr,
                 "zerofit slurm: warning: %s (as this host sees it; the ranks check again on their nodes)\n",
                 std::string(files.message()).c_str());
  }
  Prepared p;
  ZF_ASSIGN_OR_RETURN(p.text,
                      SnapshotWithNodeLoss(text, f.spec_path, spec.slurm.value_or(jobspec::SlurmSpec{}), x));
  if (!spec.world_size_given || spec.world_size != x.nodes * x.ranks_per_node()) {
    spec.world_size = x.nodes * x.ranks_per_node();
    absl::StrAppend(&p.text, p.text.empty() || p.text.back() == '\n' ? "" : "\n",
                    "world_size: ", spec.world_size,
                    "  # slurm nodes x ranks per node (added by zerofit slurm)\n");
    // The appended field must still parse to the same job (a flow-style document would not take it).
    auto again = jobspec::ParseJobSpec(p.text, f.spec_path);
    if (!again.ok() || again->world_size != spec.world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(f.spec_path, ": field 'world_size': cannot add it to this spec; write world_size: ",
                       spec.world_size, " into it"));
    }
  }
  p.spec = spec;
  p.slurm = x;
  return p;
}

// `scontrol show job -o ID` as key=value pairs (empty if Slurm does not know the job).
std::map<std::string, std::string> ScontrolShowJob(const std::string& id) {
  std::map<std::string, std::string> fields;
  auto r = RunCommand({"scontrol", "show", "job", "-o", id}, absl::Seconds(10));
  if (!r.ok() || r->exit_code != 0) return fields;
  for (absl::string_view word : absl::StrSplit(r->output, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    const size_t eq = word.find('=');
    if (eq != absl::string_view::npos) fields.emplace(word.substr(0, eq), word.substr(eq + 1));
  }
  return fields;
}

// The allocation's nodes that Slurm no longer counts as up, with its reason: "node2 down* (Not responding)".
// For the interruption a requeue records: which node took the job down. Empty when every node is up, or when
// sinfo cannot tell (the reason is then only the requeue).
std::string DownNodes(const std::string& nodelist) {
  if (nodelist.empty()) return "";
  auto r = RunCommand({"sinfo", "-h", "-N", "-n", nodelist, "-o", "%N|%T|%E"}, absl::Seconds(10));
  if (!r.ok() || r->exit_code != 0) return "";
  std::map<std::string, std::string> down;  // one line per node even if it sits in several partitions
  for (absl::string_view line : absl::StrSplit(r->output, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> f = absl::StrSplit(line, '|');
    if (f.size() != 3) continue;
    // down, drained, failing or not responding (sinfo marks the last with a trailing '*').
    const bool up = !absl::StartsWith(f[1], "down") && !absl::StartsWith(f[1], "drain") &&
                    !absl::StartsWith(f[1], "fail") && !absl::EndsWith(f[1], "*");
    if (!up) down[f[0]] = absl::StrCat(f[0], " ", f[1], f[2] == "none" ? "" : absl::StrCat(" (", f[2], ")"));
  }
  std::vector<std::string> out;
  for (const auto& [node, text] : down) out.push_back(text);
  return absl::StrJoin(out, ", ");
}

// Tells when to end an srun whose attempt the coordinator has failed (a rank missed its heartbeats, or one
// failed) while srun still runs. Ending it at once (SIGTERM to srun, which passes it to every task of the
// step on every node it can reach; the ranks do not catch it) is what keeps the failed attempt from going on:
// ranks cut off from the coordinator, or blocked in a collective with a vanished peer, would otherwise train
// on, and could write checkpoints the next attempt does not expect. An attempt that fails within one poll of
// forming is not seen running and not fenced here (its ranks then leave by their own heartbeat deadline).
class AttemptFence {
 public:
  void Launched() { formed_ = 0; }
  int formed() const { return formed_; }
  // Called with the job's record while srun runs and is not being stopped yet; true when srun must stop.
  bool ShouldStop(const coordinator::JobRecord& job) {
    const coordinator::JobPhase phase = job.status.phase;
    if (phase == coordinator::JobPhase::kRunning) {
      formed_ = job.status.attempt;
      return false;
    }
    return formed_ != 0 &&
           (phase == coordinator::JobPhase::kRestarting || phase == coordinator::JobPhase::kFailed);
  }

 private:
  int formed_ = 0;  // the attempt this srun runs, once seen running
};

// A shrinking job that Slurm requeued: give it back its node range (launch::RequeueRangeCommand), so that it
// resumes on the nodes left instead of waiting for the lost one. Said in the job's output either way; a
// failure leaves the job waiting, as one with on_node_loss: wait would.
void WidenRequeuedJob(const std::string& scontrol, const std::string& slurm_job_id,
                      const jobspec::JobSpec& spec) {
  if (!spec.slurm) return;
  std::vector<std::string> argv = launch::RequeueRangeCommand(scontrol, slurm_job_id, *spec.slurm);
  if (argv.empty()) return;
  auto r = RunCommand(argv, absl::Seconds(10));
  std::printf("zerofit slurm-launch: on_node_loss: shrink: %s: %s\n", absl::StrJoin(argv, " ").c_str(),
              !r.ok() ? std::string(r.status().message()).c_str()
              : r->exit_code == 0
                  ? "the job resumes on the nodes Slurm has for it"
                  : absl::StrCat("exit ", r->exit_code, ": ", absl::StripAsciiWhitespace(r->output),
                                 " (the job waits for all its nodes)")
                        .c_str());
  std::fflush(stdout);
}

}  // namespace

std::string SlurmJobState(const std::string& id) {
  auto q = RunCommand({"squeue", "-h", "-j", id, "-o", "%T"}, absl::Seconds(10));
  if (q.ok() && q->exit_code == 0) {
    const std::string state(absl::StripAsciiWhitespace(q->output));
    if (!state.empty()) return state;
  }
  const auto fields = ScontrolShowJob(id);
  auto it = fields.find("JobState");
  return it != fields.end() ? it->second : "unknown (not in squeue or scontrol any more)";
}

CLI::App* AddSlurmCommand(CLI::App& app, SlurmFlags* f) {
  CLI::App* c = app.add_subcommand("slurm", "Write a job's sbatch script (and its state directory)");
  c->add_option("spec", f->spec_path, "job.yaml")->required();
  c->add_option("--state-dir", f->state_dir,
                "job store, token, script and output, on a shared filesystem (slurm.state_dir; default "
                "./zerofit-<name>)");
  c->add_option("--tls-ca", f->tls_ca, "CA of an external coordinator that serves TLS");
  c->add_option("--tls-server-name", f->tls_server_name, "name its certificate carries (default: its host)");
  AddSlurmSubmitFlags(c, f);
  return c;
}

void AddSlurmSubmitFlags(CLI::App* c, SlurmFlags* f) {
  c->add_option("--nodes", f->nodes, "nodes (slurm.nodes)");
  c->add_option("--gpus-per-node", f->gpus_per_node, "GPUs per node; one rank each (slurm.gpus_per_node)");
  c->add_option("--tasks-per-node", f->tasks_per_node, "ranks per node (slurm.tasks_per_node)");
  c->add_option("--cpus-per-task", f->cpus_per_task, "CPUs per rank (slurm.cpus_per_task)");
  c->add_option("--mem", f->mem, "memory per node, e.g. 480G (slurm.mem)");
  c->add_option("--time", f->time, "time limit, e.g. 04:00:00 (slurm.time)");
  c->add_option("--partition", f->partition, "partition (slurm.partition)");
  c->add_option("--account", f->account, "account (slurm.account)");
  c->add_option("--qos", f->qos, "QOS (slurm.qos)");
  c->add_option(
      "--signal-seconds", f->signal_seconds,
      "SIGUSR1 this many seconds before the time limit: checkpoint and requeue (slurm.signal_seconds)");
  c->add_option("--slurm-coordinator", f->coordinator,
                "HOST:PORT of an external coordinator (slurm.coordinator)");
  c->add_option("--port", f->port, "coordinator port on the first node (slurm.port; default any)");
  c->add_option(
      "--on-node-loss", f->on_node_loss,
      "wait (for every node, the default) or shrink (resume on the nodes left; slurm.on_node_loss)");
  c->add_option("--min-nodes", f->min_nodes, "the fewest nodes a shrinking job resumes on (slurm.min_nodes)");
  c->add_option("--worker", f->worker, "zerofit_worker binary (default: the one built with zerofit)");
  c->add_option("--sbatch", f->sbatch, "sbatch command")->capture_default_str();
}

CLI::App* AddSlurmLaunchCommand(CLI::App& app, SlurmLaunchFlags* f) {
  CLI::App* c = app.add_subcommand(
      "slurm-launch", "Inside a Slurm allocation (the sbatch script runs it): coordinator + srun workers");
  c->add_option("--state-dir", f->state_dir, "the job's state directory")->required();
  c->add_option("--spec", f->spec, "job spec")->required();
  c->add_option("--coordinator", f->coordinator, "HOST:PORT of an external coordinator");
  c->add_option("--port", f->port, "port to listen on (0: any)")->capture_default_str();
  c->add_option("--worker", f->worker, "zerofit_worker binary");
  c->add_option("--tls-ca", f->tls_ca, "CA of the external coordinator (--coordinator) that serves TLS");
  c->add_option("--tls-server-name", f->tls_server_name, "name its certificate carries (default: its host)");
  c->add_option("--heartbeat-timeout", f->heartbeat_timeout_s, "seconds")->capture_default_str();
  c->add_option("--srun", f->srun, "srun command")->capture_default_str();
  c->add_option("--scontrol", f->scontrol, "scontrol command")->capture_default_str();
  return c;
}

absl::Status RunSlurm(const SlurmFlags& f) {
  ZF_ASSIGN_OR_RETURN(Prepared p, Prepare(f));
  std::error_code ec;
  const fs::path state = fs::absolute(
      p.slurm.state_dir.empty() ? fs::path("zerofit-" + p.spec.name) : fs::path(p.slurm.state_dir), ec);
  // Both go into the script's lines (#SBATCH --output, --chdir, the comment): a line break would start a
  // line of its own, which bash runs.
  for (const auto& [what, path] : {std::pair<const char*, std::string>{"state directory", state.string()},
                                   {"working directory", fs::current_path(ec).string()}}) {
    if (path.find_first_of("\n\r") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ", what, " ", core::QuotedExcerpt(path),
                       " holds a line break, which an sbatch script cannot carry"));
    }
  }
  for (const char* taken : {"jobs.db", "slurm_job_id"}) {
    if (fs::exists(state / taken)) {
      return absl::AlreadyExistsError(absl::StrCat("state directory ", state.string(),
                                                   " already holds a job (", taken,
                                                   "): pass another --state-dir or remove it"));
    }
  }
  ZF_RETURN_IF_ERROR(MakePrivateDir(state.string()));
  if (p.slurm.coordinator.empty()) {
    // The first node's coordinator takes this token; `zerofit status --state-dir` uses it too.
    ZF_RETURN_IF_ERROR(LoadOrCreateToken((state / "token").string()).status());
  } else {
    // An external coordinator: the workers present its token (--token, else `zerofit serve`'s default).
    std::string token = f.token;
    if (token.empty()) {
      const std::string path = (fs::path(DefaultStateDir()) / "token").string();
      // The same check as `zerofit serve`'s: a token file others can read or write is refused, naming it.
      if (fs::exists(path, ec)) ZF_RETURN_IF_ERROR(CheckTokenFile(path));
      auto t = core::ReadTextFile(path);
      if (!t.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("slurm.coordinator ", p.slurm.coordinator, ": pass --token (or have ", path, ")"));
      }
      token = std::string(absl::StripAsciiWhitespace(*t));
    }
    const fs::path token_path = state / "token";
    fs::remove(token_path, ec);
    ZF_RETURN_IF_ERROR(CreateTokenFile(token_path.string(), token));
  }
  ZF_RETURN_IF_ERROR(WritePrivateFileAtomic((state / "job.yaml").string(), p.text));
  std::string worker = f.worker;
#ifdef ZEROFIT_WORKER_BINARY
  if (worker.empty()) worker = ZEROFIT_WORKER_BINARY;
#endif
  launch::SbatchPaths paths;
  paths.zerofit = SelfPath();
  paths.state_dir = state.string();
  paths.spec = (state / "job.yaml").string();
  paths.workdir = fs::current_path(ec).string();
  paths.worker = worker;
  if (!f.tls_ca.empty() || !f.tls_server_name.empty()) {
    if (p.slurm.coordinator.empty()) {
      return absl::InvalidArgumentError(
          "--tls-ca / --tls-server-name are for an external coordinator (slurm.coordinator): the one "
          "slurm-launch starts inside the allocation serves plaintext");
    }
    if (!f.tls_ca.empty()) paths.tls_ca = fs::absolute(f.tls_ca, ec).string();
    paths.tls_server_name = f.tls_server_name;
  }
  const std::string script = launch::SbatchScript(p.spec, p.slurm, paths);
  const std::string script_path = (state / "sbatch.sh").string();
  ZF_RETURN_IF_ERROR(WritePrivateFileAtomic(script_path, script, 0700));
  if (!f.submit) {
    std::fputs(script.c_str(), stdout);
    std::fprintf(stderr, "zerofit slurm: wrote %s (state in %s); submit it with sbatch\n",
                 script_path.c_str(), state.c_str());
    return absl::OkStatus();
  }
  ZF_ASSIGN_OR_RETURN(CommandResult r, RunCommand({f.sbatch, "--parsable", script_path}, absl::Minutes(2)));
  const std::string out(absl::StripAsciiWhitespace(r.output));
  const std::string id = out.substr(0, out.find(';'));  // --parsable: "id" or "id;cluster"
  uint64_t numeric = 0;
  if (r.exit_code != 0 || !absl::SimpleAtoi(id, &numeric)) {
    return absl::UnavailableError(
        absl::StrCat("sbatch ", script_path, " failed (exit ", r.exit_code, "): ", out));
  }
  ZF_RETURN_IF_ERROR(WritePrivateFileAtomic((state / "slurm_job_id").string(), id + "\n"));
  std::printf("submitted Slurm job %s (zerofit job '%s', %d ranks); state in %s\n", id.c_str(),
              p.spec.name.c_str(), p.spec.world_size, state.c_str());
  std::printf("follow it with: zerofit status --state-dir %s; zerofit logs --state-dir %s -f JOB\n",
              state.c_str(), state.c_str());
  return absl::OkStatus();
}

namespace {

// slurm-launch's coordinator: started on this node (the allocation's first) unless --coordinator names an
// external `zerofit serve`; `control` reaches it either way.
struct LaunchCoordinator {
  std::unique_ptr<coordinator::CoordinatorServer> server;  // null when external
  std::unique_ptr<JobControl> control;
  std::string address;  // host:port the ranks dial
};

absl::StatusOr<LaunchCoordinator> StartOrConnect(const SlurmLaunchFlags& f, const fs::path& state,
                                                 const std::string& token, core::Clock* clock) {
  LaunchCoordinator out;
  out.address = f.coordinator;
  if (out.address.empty() && (!f.tls_ca.empty() || !f.tls_server_name.empty())) {
    return absl::InvalidArgumentError(
        "slurm-launch: --tls-ca / --tls-server-name need --coordinator (the coordinator started here serves "
        "plaintext)");
  }
  if (!out.address.empty()) {
    client::ConnectionSettings s;
    s.address = out.address;
    s.token = token;
    s.tls_ca_file = f.tls_ca;
    s.tls_server_name = f.tls_server_name;
    ZF_ASSIGN_OR_RETURN(client::ConnectionOptions o, client::Resolve(s));
    o.call_timeout = absl::Seconds(30);
    out.control = RemoteJobControl(o);
    return out;
  }
  coordinator::ServerOptions o;
  o.listen = absl::StrCat("0.0.0.0:", f.port);
  o.db_path = (state / "jobs.db").string();
  o.token = token;
  o.policy.heartbeat_timeout = absl::Seconds(f.heartbeat_timeout_s);
  ZF_ASSIGN_OR_RETURN(out.server, coordinator::CoordinatorServer::Start(o, clock));
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  const std::string bound = out.server->address();
  out.address = absl::StrCat(host, bound.substr(bound.rfind(':')));
  ZF_RETURN_IF_ERROR(WritePrivateFileAtomic((state / "address").string(), out.address + "\n"));
  out.control = LocalJobControl(&out.server->coordinator());
  return out;
}

// The batch step's exit code once srun is done, and what the job is told first: a SIGTERM from Slurm is a
// requeue (the job interrupted, and widened back if it shrank) or a stop (cancelled); a preemption the job
// survives exits kPreemptedExitCode (requeued when the spec asks); else the job's own outcome.
absl::StatusOr<int> LaunchExitCode(const SlurmLaunchFlags& f, const jobspec::JobSpec& spec,
                                   const launch::SlurmAllocation& allocation, JobControl& c,
                                   const std::string& id, const Supervised& done, bool terminating,
                                   bool preempted) {
  const std::string& slurm_job_id = allocation.job_id;
  const int restarts = allocation.restart_count;
  int code = 0;
  if (terminating) {
    // `scontrol requeue` from outside, scancel, or the time limit. The job is COMPLETING in every case until
    // this process exits; a requeue has already counted one more restart than this run started with.
    const auto fields = ScontrolShowJob(slurm_job_id);
    int now_restarts = -1;
    if (auto it = fields.find("Restarts"); it != fields.end())
      (void)absl::SimpleAtoi(it->second, &now_restarts);
    if (now_restarts > restarts) {
      const std::string down = DownNodes(allocation.nodelist);
      ZF_RETURN_IF_ERROR(
          c.Interrupt(id, absl::StrCat("SIGTERM from Slurm: job ", slurm_job_id, " requeued",
                                       down.empty() ? "" : absl::StrCat(" (lost ", down, ")"))));
      WidenRequeuedJob(f.scontrol, slurm_job_id, spec);
    } else {
      auto reason = fields.find("Reason");
      const bool known = reason != fields.end() && reason->second != "None";
      (void)c.Cancel(id, absl::StrCat("Slurm job ", slurm_job_id, " stopped (scancel or time limit",
                                      known ? absl::StrCat(": ", reason->second) : "", ")"));
    }
    code = 128 + SIGTERM;
  } else if (preempted && !coordinator::IsTerminal(done.job.status.phase)) {
    code = jobspec::kPreemptedExitCode;
    if (spec.slurm.value_or(jobspec::SlurmSpec{}).requeue) {
      // Said (and flushed) first: Slurm ends this batch step as it requeues the job, which may be before
      // scontrol returns here, so the result line below is not always written.
      std::printf("zerofit slurm-launch: requeueing Slurm job %s (scontrol requeue)\n", slurm_job_id.c_str());
      std::fflush(stdout);
      auto r = RunCommand({f.scontrol, "requeue", slurm_job_id}, absl::Seconds(60));
      std::printf(
          "zerofit slurm-launch: scontrol requeue %s: %s\n", slurm_job_id.c_str(),
          !r.ok() ? std::string(r.status().message()).c_str()
          : r->exit_code == 0
              ? "ok"
              : absl::StrCat("exit ", r->exit_code, ": ", absl::StripAsciiWhitespace(r->output)).c_str());
      std::fflush(stdout);
    }
  } else {
    code = done.job.status.phase == coordinator::JobPhase::kSucceeded ? 0 : 1;
  }
  return code;
}

// SIGTERM to srun (it forwards it to every task), SIGKILL to its process group if it has not exited after
// the grace: an srun that cannot reach a node's slurmd must not keep the failed attempt, or this batch step,
// alive. Slurm's own KillWait comes after this for the batch step as a whole.
constexpr absl::Duration kSrunStopGrace = absl::Seconds(5);

// What slurm-launch watches while srun runs: Slurm's signals (SIGUSR1: preempt at a step; SIGTERM/SIGINT:
// stop srun) and an attempt that failed while srun still runs (its ranks are stopped).
struct SrunWatch {
  SrunWatch(BlockedSignals& signals, JobControl& c, const std::string& id, ProgressReporter& progress)
      : signals(signals), c(c), id(id), progress(progress) {}

  BlockedSignals& signals;
  JobControl& c;
  const std::string& id;
  ProgressReporter& progress;
  AttemptFence fence;
  LauncherStop srun_stop{kSrunStopGrace};  // one per launch
  bool preempted = false, terminating = false;

  void Launched() {
    fence.Launched();
    srun_stop = LauncherStop(kSrunStopGrace);
  }

  void Poll(ChildProcess& srun) {
    for (int sig = signals.Take(); sig != 0; sig = signals.Take()) {
      if (sig == SIGUSR1 && !preempted && !terminating) {
        auto stop = c.Preempt(id, "SIGUSR1 from Slurm: time limit or preemption ahead");
        preempted = stop.ok();
        progress.Say(absl::StrCat("zerofit slurm-launch: SIGUSR1: ",
                                  stop.ok() ? absl::StrCat("ranks stop before step ", *stop)
                                            : std::string(stop.status().message())));
      } else if (sig == SIGTERM || sig == SIGINT) {
        terminating = true;
        srun_stop.Begin(srun, absl::Now());
      }
    }
    srun_stop.Tick(srun, absl::Now());
    if (preempted || terminating || srun_stop.stopping()) return;  // those stop the ranks their own way
    auto job = c.Get(id);
    if (job.ok() && fence.ShouldStop(*job)) {
      progress.Say(absl::StrCat("zerofit slurm-launch: attempt ", fence.formed(), " failed while srun runs (",
                                job->status.reason, "): SIGTERM to its ranks, SIGKILL after ",
                                absl::FormatDuration(kSrunStopGrace)));
      srun_stop.Begin(srun, absl::Now());
    }
  }
};

}  // namespace

absl::StatusOr<int> RunSlurmLaunch(const SlurmLaunchFlags& f) {
  auto allocation = launch::ReadSlurmAllocation(&std::getenv);
  if (!allocation.ok()) {
    return absl::Status(
        allocation.status().code(),
        absl::StrCat("slurm-launch runs inside a Slurm allocation: ", allocation.status().message()));
  }
  const std::string slurm_job_id = allocation->job_id;
  ZF_ASSIGN_OR_RETURN(const std::string text, jobspec::ReadJobSpecFile(f.spec));
  ZF_ASSIGN_OR_RETURN(jobspec::JobSpec spec, jobspec::ParseJobSpec(text, f.spec));
  const fs::path state(f.state_dir);
  ZF_RETURN_IF_ERROR(CheckPrivateDir(state.string()));
  ZF_ASSIGN_OR_RETURN(std::string token, LoadOrCreateToken((state / "token").string()));
  std::string worker = f.worker;
#ifdef ZEROFIT_WORKER_BINARY
  if (worker.empty()) worker = ZEROFIT_WORKER_BINARY;
#endif
  if (worker.empty()) return absl::InvalidArgumentError("slurm-launch: pass --worker");
  const int nodes = allocation->nodes, cpus_per_task = allocation->cpus_per_task;
  const int restarts = allocation->restart_count;
  // The spec's world size, or fewer ranks on the nodes a shrinking job was requeued onto.
  ZF_ASSIGN_OR_RETURN(const int world_size, launch::AttemptWorldSize(spec, *allocation));

  BlockedSignals signals({SIGUSR1, SIGTERM, SIGINT});  // before any thread starts
  core::RealClock clock;
  ZF_ASSIGN_OR_RETURN(LaunchCoordinator coord, StartOrConnect(f, state, token, &clock));
  const std::string& address = coord.address;
  JobControl& c = *coord.control;
  // One zerofit job per Slurm job: a requeued run finds the job it submitted before.
  ZF_ASSIGN_OR_RETURN(JobControl::Submitted submitted,
                      c.Submit(absl::StrCat("slurm-", slurm_job_id), text, f.spec));
  const std::string id = submitted.id;
  ZF_RETURN_IF_ERROR(c.SetSlurmJobId(id, slurm_job_id));
  if (!submitted.created) {
    ZF_RETURN_IF_ERROR(c.Interrupt(
        id, absl::StrCat("the previous run of Slurm job ", slurm_job_id, " ended without reporting back")));
  }
  std::printf("zerofit slurm-launch: %s, Slurm job %s (run %d), %d ranks%s on %d node(s), coordinator %s\n",
              id.c_str(), slurm_job_id.c_str(), restarts + 1, world_size,
              world_size == spec.world_size ? "" : absl::StrCat(" (of ", spec.world_size, ")").c_str(), nodes,
              address.c_str());
  std::fflush(stdout);

  // The Slurm job's output is a file: a progress line every log_every steps (stdout_progress.h).
  const std::unique_ptr<ProgressReporter> progress = StdoutProgress(spec.log_every, &clock);
  SrunWatch watch(signals, c, id, *progress);
  bool& preempted = watch.preempted;
  bool& terminating = watch.terminating;
  SuperviseHooks hooks;
  hooks.progress = progress.get();
  hooks.print_earlier_logs = submitted.created;  // a requeued run appends to the output of the first
  hooks.command = [&] {
    watch.Launched();
    std::vector<std::string> argv = launch::SrunCommand(world_size, nodes, cpus_per_task, worker, address,
                                                        (state / "token").string(), id);
    argv[0] = f.srun;
    for (std::string& a : client::TlsFlags(f.tls_ca, f.tls_server_name)) argv.push_back(std::move(a));
    return argv;
  };
  hooks.poll = [&](ChildProcess& srun) { watch.Poll(srun); };
  hooks.after_exit = [&](int) {
    if (terminating) return AfterExit::kStop;
    return preempted ? AfterExit::kReportAndStop : AfterExit::kReportAndContinue;
  };
  ZF_ASSIGN_OR_RETURN(Supervised done, SuperviseJob(c, id, hooks));
  progress->Finish();
  ZF_ASSIGN_OR_RETURN(const int code,
                      LaunchExitCode(f, spec, *allocation, c, id, done, terminating, preempted));
  ZF_ASSIGN_OR_RETURN(coordinator::JobRecord job, c.Get(id));
  std::printf("zerofit slurm-launch: %s %s (attempt %d, restarts %d, interruptions %d)%s%s; exit %d\n",
              id.c_str(), coordinator::JobPhaseName(job.status.phase), job.status.attempt,
              job.status.restarts, job.status.interruptions, job.status.reason.empty() ? "" : ": ",
              job.status.reason.c_str(), code);
  std::fflush(stdout);
  if (coord.server) coord.server->Shutdown();
  return code;
}

}  // namespace zerofit::cli
