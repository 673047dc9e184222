#include "cli/jobs_commands.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "cli/metrics_format.h"
#include "cli/private_files.h"
#include "cli/slurm_commands.h"
#include "cli/stdout_progress.h"
#include "client/connection_flags.h"
#include "coordinator/job_store.h"
#include "coordinator/service.h"
#include "coordinator/state_dir_lock.h"
#include "core/status_macros.h"
#include "core/text_file.h"
#include "jobspec/job_spec.h"

namespace zerofit::cli {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::zerofit::v1;

std::string StateDir(const std::string& given) { return given.empty() ? DefaultStateDir() : given; }

absl::StatusOr<std::string> ReadAll(const std::string& path, const char* flag) {
  auto text = core::ReadTextFile(path);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat(flag, ": cannot read '", path, "'"));
  return text;
}

// The connection the flags (and their environment variables) describe, address and token defaulting to the
// state directory's files.
absl::StatusOr<client::ConnectionOptions> ClientOptionsOf(const JobsFlags& f) {
  client::ConnectionSettings s;
  s.address = f.coordinator;
  s.token = f.token;
  s.tls_ca_file = f.tls_ca;
  s.tls_server_name = f.tls_server_name;
  ZF_ASSIGN_OR_RETURN(client::ConnectionOptions o, client::Resolve(s));
  o.call_timeout = absl::Seconds(10);
  // A person is waiting: ride out a coordinator restart of a few seconds, then say what is wrong.
  o.retry.budget = absl::Seconds(3);
  ZF_RETURN_IF_ERROR(ResolveClientOptions(StateDir(f.state_dir), &o));
  return o;
}

absl::StatusOr<client::CoordinatorClient> MakeClient(const JobsFlags& f) {
  ZF_ASSIGN_OR_RETURN(client::ConnectionOptions o, ClientOptionsOf(f));
  return client::CoordinatorClient(o);
}

// -f: the follow's deadline and how long to wait for a restarted coordinator; each reconnect is said on
// stderr (stdout carries only the job's lines).
absl::StatusOr<client::CoordinatorClient::FollowOptions> FollowOptionsOf(const JobsFlags& f,
                                                                         const char* command) {
  if (!(f.reconnect_timeout_s >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--reconnect-timeout must be >= 0 seconds, got ", f.reconnect_timeout_s));
  }
  client::CoordinatorClient::FollowOptions o;
  o.timeout = absl::Seconds(f.follow_timeout_s);
  o.reconnect.give_up_after = absl::Seconds(f.reconnect_timeout_s);
  // Said once per outage, not at every retry.
  o.on_reconnect = [command, limit = f.reconnect_timeout_s](const absl::Status& why, absl::Duration,
                                                            int retry) {
    if (retry != 0) return;
    std::fprintf(stderr,
                 "zerofit %s: lost the coordinator (%s); following again from the last line printed, "
                 "for up to %gs\n",
                 command, std::string(why.message()).c_str(), limit);
  };
  return o;
}

// One line per job; a job run by Slurm gets Slurm's job id and state next to it.
void PrintJob(const v1::Job& j) {
  std::string extra;
  if (j.interruptions() > 0) absl::StrAppend(&extra, ", interruptions ", j.interruptions());
  if (!j.attempt_note().empty()) absl::StrAppend(&extra, ", on ", j.attempt_note());
  if (!j.slurm_job_id().empty()) {
    absl::StrAppend(&extra, "  [slurm ", j.slurm_job_id(), " ", SlurmJobState(j.slurm_job_id()), "]");
  }
  const std::string checkpoint = j.checkpoint_step() >= 0
                                     ? absl::StrCat("checkpoint step ", j.checkpoint_step())
                                     : std::string("no checkpoint");
  std::printf("%-12s %-20s %-10s attempt %d, restarts %d, %s%s%s%s\n", j.id().c_str(), j.name().c_str(),
              coordinator::JobPhaseName(coordinator::FromProto(j).status.phase), j.attempt(), j.restarts(),
              checkpoint.c_str(), extra.c_str(), j.reason().empty() ? "" : "  ", j.reason().c_str());
}

// The jobs of a state directory whose coordinator is not running (a Slurm job waiting in the queue, or
// finished; a finished `zerofit run`): read from its job store.
absl::StatusOr<std::vector<v1::Job>> JobsFromStore(coordinator::JobStore& store, const fs::path& db,
                                                   const std::string& only) {
  ZF_ASSIGN_OR_RETURN(std::vector<coordinator::JobRecord> records, store.List());
  std::vector<v1::Job> out;
  for (const coordinator::JobRecord& r : records) {
    if (!only.empty() && r.id != only) continue;
    coordinator::ToProto(r, &out.emplace_back());
  }
  if (!only.empty() && out.empty())
    return absl::NotFoundError(absl::StrCat("no job '", only, "' in ", db.string()));
  return out;
}

}  // namespace

std::string NewToken() {
  std::random_device rd;  // reads /dev/urandom
  std::string token;
  for (int i = 0; i < 32; ++i) absl::StrAppendFormat(&token, "%02x", rd() & 0xff);
  return token;
}

// The token: read it, or create it (32 random bytes, hex, mode 0600) on the first serve.
absl::StatusOr<std::string> LoadOrCreateToken(const std::string& path_string) {
  const fs::path path(path_string);
  if (fs::exists(path)) {
    ZF_RETURN_IF_ERROR(CheckTokenFile(path.string()));
    std::ifstream in(path);
    std::string t;
    in >> t;
    if (t.size() < 32) return absl::DataLossError(absl::StrCat(path.string(), ": token too short"));
    return t;
  }
  const std::string token = NewToken();
  ZF_RETURN_IF_ERROR(CreateTokenFile(path.string(), token));
  return token;
}

absl::Status CreateTokenFile(const std::string& path, const std::string& token) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": create"));
  const std::string line = token + "\n";
  const bool ok =
      ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

JobsCommands AddJobsCommands(CLI::App& app, ServeFlags* s, JobsFlags* j) {
  JobsCommands c;
  c.serve = app.add_subcommand("serve", "Run the coordinator (gRPC + SQLite job store)");
  c.serve->add_option("--listen", s->listen, "address to listen on")->capture_default_str();
  c.serve->add_option("--state-dir", s->state_dir, "token, address and job store (default ~/.zerofit)");
  c.serve->add_option("--db", s->db, "SQLite job store (default <state-dir>/jobs.db)");
  c.serve->add_option("--tls-cert", s->tls_cert, "PEM certificate: serve TLS");
  c.serve->add_option("--tls-key", s->tls_key, "PEM private key for --tls-cert");
  c.serve
      ->add_option("--heartbeat-timeout", s->heartbeat_timeout_s,
                   "seconds without a heartbeat that fail a rank")
      ->capture_default_str();
  auto common = [j](CLI::App* a) {
    a->add_option("--state-dir", j->state_dir,
                  "where `zerofit serve` wrote token and address (default ~/.zerofit)");
    a->add_option("--coordinator", j->coordinator, "HOST:PORT of the coordinator");
    a->add_option("--token", j->token, "bearer token (prefer ZEROFIT_TOKEN or --state-dir's token file)")
        ->envname(client::kTokenEnv);
    a->add_option("--tls-ca", j->tls_ca, "PEM CA certificate: connect with TLS")->envname(client::kTlsCaEnv);
    a->add_option("--tls-server-name", j->tls_server_name,
                  "name the coordinator's certificate carries, if not the host of its address")
        ->envname(client::kTlsServerNameEnv);
  };
  c.submit = app.add_subcommand("submit", "Submit a job spec (YAML)");
  common(c.submit);
  c.submit->add_option("spec", j->spec_path, "job.yaml")->required();
  c.submit->add_option("--request-id", j->request_id, "idempotency key (default: a fresh one)");
  c.submit->add_option("--name", j->name, "job name (default: the spec's)");
  c.status = app.add_subcommand("status", "Show a job (all jobs without JOB), with its Slurm job and state");
  common(c.status);
  c.status->add_option("job", j->job, "job id (default: every job)");
  c.status->add_flag("--plan", j->plan,
                     "print the job's resolved plan (versioned JSON: what workers train by)");
  c.list = app.add_subcommand("list", "List jobs");
  common(c.list);
  c.logs = app.add_subcommand("logs", "Print a job's logs");
  common(c.logs);
  c.logs->add_option("job", j->job, "job id")->required();
  c.logs->add_flag("-f,--follow", j->follow, "keep printing until the job ends");
  c.logs
      ->add_option("--reconnect-timeout", j->reconnect_timeout_s,
                   "with -f: seconds to wait for a restarted coordinator before giving up")
      ->capture_default_str();
  c.cancel = app.add_subcommand("cancel", "Cancel a job");
  common(c.cancel);
  c.cancel->add_option("job", j->job, "job id")->required();
  c.cancel->add_option("--reason", j->reason, "recorded with the job");
  c.metrics = app.add_subcommand("metrics", "Print a job's per-step, per-rank metrics");
  common(c.metrics);
  c.metrics->add_option("job", j->job, "job id")->required();
  c.metrics->add_flag("-f,--follow", j->follow, "keep printing until the job ends");
  c.metrics
      ->add_option("--reconnect-timeout", j->reconnect_timeout_s,
                   "with -f: seconds to wait for a restarted coordinator before giving up")
      ->capture_default_str();
  c.metrics->add_option("--format", j->format, "table (default), json (one object per line) or csv");
  c.worker = app.add_subcommand("worker", "Run one rank of a job (start it with mpiexec or srun)");
  common(c.worker);
  c.worker->add_option("--job", j->job, "job id")->required();
  c.worker->add_option("--worker-binary", j->worker_binary, "zerofit_worker to run");
  return c;
}

absl::Status RunServe(const ServeFlags& f) {
  const fs::path dir = StateDir(f.state_dir);
  ZF_RETURN_IF_ERROR(MakePrivateDir(dir.string()));
  // Held until this function returns (or the process dies): before the job store is opened or the address
  // file written, both of which belong to the coordinator that holds it.
  ZF_ASSIGN_OR_RETURN(coordinator::StateDirLock lock, coordinator::StateDirLock::Acquire(dir.string()));
  coordinator::ServerOptions o;
  o.listen = f.listen;
  o.db_path = f.db.empty() ? (dir / "jobs.db").string() : f.db;
  ZF_ASSIGN_OR_RETURN(o.token, LoadOrCreateToken((dir / "token").string()));
  if (!f.tls_cert.empty()) {
    ZF_ASSIGN_OR_RETURN(o.tls_cert_pem, ReadAll(f.tls_cert, "--tls-cert"));
  }
  if (!f.tls_key.empty()) {
    ZF_ASSIGN_OR_RETURN(o.tls_key_pem, ReadAll(f.tls_key, "--tls-key"));
  }
  if (!(f.heartbeat_timeout_s > 0)) return absl::InvalidArgumentError("--heartbeat-timeout must be positive");
  o.policy.heartbeat_timeout = absl::Seconds(f.heartbeat_timeout_s);
  // SIGINT/SIGTERM end the server; they are waited for on this thread, not handled asynchronously.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  core::RealClock clock;
  ZF_ASSIGN_OR_RETURN(auto server, coordinator::CoordinatorServer::Start(o, &clock));
  ZF_RETURN_IF_ERROR(lock.SetAddress(server->address()));
  // Written after the port is open, so a client that reads it can connect.
  ZF_RETURN_IF_ERROR(WritePrivateFileAtomic((dir / "address").string(), server->address() + "\n"));
  std::printf("zerofit coordinator listening on %s (job store %s, token in %s)\n", server->address().c_str(),
              o.db_path.c_str(), (dir / "token").c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  std::printf("zerofit coordinator: signal %d, shutting down\n", sig);
  server->Shutdown();
  return absl::OkStatus();
}

absl::Status RunSubmit(const JobsFlags& f) {
  ZF_ASSIGN_OR_RETURN(std::string spec, jobspec::ReadJobSpecFile(f.spec_path));
  // The coordinator gets the DeepSpeed config's contents, not a path to open (relative to this directory,
  // as `zerofit run` reads it).
  ZF_ASSIGN_OR_RETURN(spec, jobspec::InlineDeepSpeedConfig(spec, f.spec_path));
  ZF_ASSIGN_OR_RETURN(client::CoordinatorClient client, MakeClient(f));
  std::string request_id = f.request_id;
  if (request_id.empty()) {
    std::random_device rd;
    request_id = absl::StrFormat("%08x%08x-%d", rd(), rd(), static_cast<int>(::getpid()));
  }
  ZF_ASSIGN_OR_RETURN(v1::SubmitJobResponse r,
                      client.Submit(request_id, f.name, spec, fs::path(f.spec_path).filename().string()));
  std::printf("%s %s (request %s)\n", r.job().id().c_str(), r.created() ? "submitted" : "already submitted",
              request_id.c_str());
  return absl::OkStatus();
}

namespace {

// Whether an error from the coordinator (or from finding it) lets a command read the state directory's job
// store instead: nobody answered (not started, stopped, or gone with its Slurm allocation) and no
// --coordinator was named. Other errors (a wrong token) are the ones to see.
bool NobodyAnswered(const JobsFlags& f, const absl::Status& asked) {
  const absl::StatusCode c = asked.code();
  const bool unreachable = c == absl::StatusCode::kUnavailable || c == absl::StatusCode::kDeadlineExceeded ||
                           c == absl::StatusCode::kNotFound || c == absl::StatusCode::kFailedPrecondition;
  return unreachable && f.coordinator.empty();
}

// The state directory's job store, read in place of a coordinator that did not answer (`asked`): a Slurm
// job's directory (zerofit submit --slurm wrote slurm_job_id) as is, since its coordinator runs on another
// node; any other only while no process holds its lock (a finished `zerofit run`, a stopped `zerofit
// serve`), since a live coordinator's error (TLS, a token) is the one to see. Else `asked`.
struct StoreRead {
  fs::path path;
  std::optional<coordinator::StateDirLock> lock;  // held while the store is read
  std::unique_ptr<coordinator::JobStore> store;
  std::string note;  // "(coordinator not running; from DIR/jobs.db)"
};

absl::StatusOr<StoreRead> StoreInsteadOf(const JobsFlags& f, const absl::Status& asked) {
  const fs::path dir = StateDir(f.state_dir);
  StoreRead r;
  r.path = dir / "jobs.db";
  if (!NobodyAnswered(f, asked) || !fs::exists(r.path)) return asked;
  if (!fs::exists(dir / "slurm_job_id")) {
    absl::StatusOr<coordinator::StateDirLock> lock = coordinator::StateDirLock::Acquire(dir.string());
    if (!lock.ok()) return asked;  // a coordinator holds the directory
    r.lock.emplace(*std::move(lock));
  }
  ZF_ASSIGN_OR_RETURN(r.store, coordinator::JobStore::Open(r.path.string()));
  r.note = absl::StrCat("(coordinator not running; from ", r.path.string(), ")");
  return r;
}

// The jobs `f` asks about (all of them without f.job), from the coordinator, else from the store
// (StoreInsteadOf). `note` says which store was read, or (`pending`, no jobs) that the Slurm job has not
// started yet, which only Slurm knows.
struct JobsAnswer {
  std::vector<v1::Job> jobs;
  std::string note;
  bool pending = false;
};

absl::StatusOr<JobsAnswer> AskJobs(const JobsFlags& f) {
  JobsAnswer a;
  absl::Status asked = [&]() -> absl::Status {
    ZF_ASSIGN_OR_RETURN(client::CoordinatorClient client, MakeClient(f));
    if (f.job.empty()) {
      ZF_ASSIGN_OR_RETURN(v1::ListJobsResponse r, client.List());
      a.jobs.assign(r.jobs().begin(), r.jobs().end());
    } else {
      ZF_ASSIGN_OR_RETURN(a.jobs.emplace_back(), client.Get(f.job));
    }
    return absl::OkStatus();
  }();
  if (asked.ok()) return a;
  const fs::path dir = StateDir(f.state_dir);
  auto slurm_id = core::ReadTextFile((dir / "slurm_job_id").string());
  if (NobodyAnswered(f, asked) && slurm_id.ok() && !fs::exists(dir / "jobs.db")) {
    const std::string id(absl::StripAsciiWhitespace(*slurm_id));
    a.note = absl::StrFormat("Slurm job %s %s: the zerofit job starts with it (state in %s)", id,
                             SlurmJobState(id), dir.string());
    a.pending = true;
    return a;
  }
  ZF_ASSIGN_OR_RETURN(StoreRead read, StoreInsteadOf(f, asked));
  ZF_ASSIGN_OR_RETURN(a.jobs, JobsFromStore(*read.store, read.path, f.job));
  a.note = read.note;
  return a;
}

// `zerofit logs` / `metrics` without -f: from the coordinator, else (nothing printed yet) from the store.
absl::Status PrintFromCoordinatorOrStore(
    const JobsFlags& f,
    const std::function<absl::Status(client::CoordinatorClient&, int64_t* printed)>& online,
    const std::function<absl::Status(coordinator::JobStore&)>& offline) {
  int64_t printed = 0;
  absl::Status asked = [&]() -> absl::Status {
    ZF_ASSIGN_OR_RETURN(client::CoordinatorClient client, MakeClient(f));
    return online(client, &printed);
  }();
  if (asked.ok() || printed > 0) return asked;
  ZF_ASSIGN_OR_RETURN(StoreRead read, StoreInsteadOf(f, asked));
  ZF_RETURN_IF_ERROR(read.store->Get(f.job).status());  // an unknown job is NotFound, not silence
  std::fprintf(stderr, "%s\n", read.note.c_str());      // stdout carries the job's lines alone
  return offline(*read.store);
}

}  // namespace

absl::Status RunStatus(const JobsFlags& f) {
  ZF_ASSIGN_OR_RETURN(const JobsAnswer a, AskJobs(f));
  // With --plan stdout carries JSON alone (for scripts): the note goes to stderr.
  if (!a.note.empty()) std::fprintf(f.plan ? stderr : stdout, "%s\n", a.note.c_str());
  if (f.plan) {
    for (const v1::Job& j : a.jobs) {
      if (j.plan().empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat(j.id(),
                         ": no stored plan (a job stored by an older zerofit: start `zerofit serve` on "
                         "the state directory, which resolves it again)"));
      }
      std::printf("%s", j.plan().c_str());
    }
    return absl::OkStatus();
  }
  for (const v1::Job& j : a.jobs) PrintJob(j);
  if (a.jobs.empty() && !a.pending) std::printf("no jobs\n");
  return absl::OkStatus();
}

absl::Status RunList(const JobsFlags& f) {
  JobsFlags all = f;
  all.job.clear();
  return RunStatus(all);
}

// How a job's log line is printed by `zerofit logs`.
std::string LogLineText(const v1::LogLine& l) {
  return absl::StrFormat("%s %s | %s",
                         absl::FormatTime("%H:%M:%S", absl::FromUnixMicros(l.unix_us()), absl::UTCTimeZone()),
                         l.source(), l.text());
}

// The job spec's log_every; 0 (about 1% of the steps the lines name) when the job or its spec cannot be read
// (the follow then says what is wrong, or waits for the coordinator).
int64_t LogEveryOf(client::CoordinatorClient& client, const std::string& job_id) {
  auto job = client.Get(job_id);
  if (!job.ok()) return 0;
  auto spec = jobspec::ParseJobSpec(job->spec(), job_id);
  return spec.ok() ? spec->log_every : 0;
}

absl::Status RunLogs(const JobsFlags& f) {
  if (!f.follow) {
    // The whole record: every line the job logged.
    auto print = [](const v1::LogLine& l) {
      std::printf("%s\n", LogLineText(l).c_str());
      std::fflush(stdout);
    };
    return PrintFromCoordinatorOrStore(
        f,
        [&](client::CoordinatorClient& client, int64_t* printed) {
          return client.StreamLogs(f.job, 0, false, absl::ZeroDuration(), [&](const v1::LogLine& l) {
            ++*printed;
            print(l);
          });
        },
        [&](coordinator::JobStore& store) -> absl::Status {
          for (int64_t after = 0;;) {
            ZF_ASSIGN_OR_RETURN(const std::vector<coordinator::LogLine> lines, store.Logs(f.job, after));
            if (lines.empty()) return absl::OkStatus();
            for (const coordinator::LogLine& l : lines) {
              v1::LogLine out;
              coordinator::ToProto(l, &out);
              print(out);
              after = l.seq;
            }
          }
        });
  }
  ZF_ASSIGN_OR_RETURN(client::CoordinatorClient client, MakeClient(f));
  ZF_ASSIGN_OR_RETURN(client::CoordinatorClient::FollowOptions follow, FollowOptionsOf(f, "logs"));
  // While the job runs: on a terminal one progress line redrawn in place, else a line every log_every steps.
  core::RealClock clock;
  const std::unique_ptr<ProgressReporter> progress = StdoutProgress(LogEveryOf(client, f.job), &clock);
  follow.on_reconnect = [&progress, say = follow.on_reconnect](const absl::Status& why, absl::Duration d,
                                                               int retry) {
    progress->Clear();  // the message goes to stderr, maybe the same terminal
    say(why, d, retry);
  };
  return client.FollowLogs(
      f.job, follow, [&progress](const v1::LogLine& l) { progress->JobLine(l.text(), LogLineText(l)); });
}

absl::Status RunMetrics(const JobsFlags& f) {
  ZF_ASSIGN_OR_RETURN(const MetricsFormat format, ParseMetricsFormat(f.format));
  MetricsPrinter printer(format);
  auto print = [&printer](const v1::Metric& m) {
    std::fputs(printer.Row(m).c_str(), stdout);
    std::fflush(stdout);
  };
  if (!f.follow) {
    return PrintFromCoordinatorOrStore(
        f,
        [&](client::CoordinatorClient& client, int64_t* printed) {
          return client.StreamMetrics(f.job, -1, false, absl::ZeroDuration(), [&](const v1::Metric& m) {
            ++*printed;
            print(m);
          });
        },
        [&](coordinator::JobStore& store) -> absl::Status {
          ZF_ASSIGN_OR_RETURN(const std::vector<coordinator::MetricRow> rows, store.Metrics(f.job));
          for (const coordinator::MetricRow& row : rows) {
            v1::Metric out;
            coordinator::ToProto(row, &out);
            print(out);
          }
          return absl::OkStatus();
        });
  }
  ZF_ASSIGN_OR_RETURN(client::CoordinatorClient client, MakeClient(f));
  ZF_ASSIGN_OR_RETURN(const client::CoordinatorClient::FollowOptions follow, FollowOptionsOf(f, "metrics"));
  return client.FollowMetrics(f.job, follow, print);
}

absl::Status RunWorker(const JobsFlags& f) {
  ZF_ASSIGN_OR_RETURN(const client::ConnectionOptions o,
                      ClientOptionsOf(f));  // checks the CA file before the exec
  std::string binary = f.worker_binary;
#ifdef ZEROFIT_WORKER_BINARY
  if (binary.empty()) binary = ZEROFIT_WORKER_BINARY;
#endif
  if (binary.empty()) return absl::InvalidArgumentError("worker: pass --worker-binary");
  std::vector<std::string> args = {binary, "--coordinator", o.address, "--job", f.job};
  for (std::string& a : client::TlsFlags(f.tls_ca, f.tls_server_name)) args.push_back(std::move(a));
  // The token by environment: a command line is visible to every user of the node (`ps`).
  if (::setenv(client::kTokenEnv, o.token.c_str(), 1) != 0)
    return absl::ErrnoToStatus(errno, "worker: setenv");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(binary.c_str(), argv.data());
  return absl::ErrnoToStatus(errno, absl::StrCat("worker: cannot run ", binary));
}

absl::Status RunCancel(const JobsFlags& f) {
  ZF_ASSIGN_OR_RETURN(client::CoordinatorClient client, MakeClient(f));
  ZF_ASSIGN_OR_RETURN(v1::Job j, client.Cancel(f.job, f.reason));
  PrintJob(j);
  return absl::OkStatus();
}

}  // namespace zerofit::cli
