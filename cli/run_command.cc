#include "cli/run_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/jobs_commands.h"
#include "cli/supervise.h"
#include "client/connection_flags.h"
#include "coordinator/service.h"
#include "core/status_macros.h"
#include "core/text_file.h"

namespace zerofit::cli {

namespace fs = std::filesystem;

CLI::App* AddRunCommand(CLI::App& app, RunFlags* f) {
  CLI::App* run = app.add_subcommand("run", "Run a job locally: embedded coordinator + mpiexec workers");
  run->add_option("spec", f->spec_path, "job.yaml")->required();
  run->add_option("--state-dir", f->state_dir, "job store and token (default: a fresh temporary directory)");
  run->add_option("--worker", f->worker, "zerofit_worker binary");
  run->add_option("--mpiexec", f->mpiexec, "MPI launcher")->capture_default_str();
  run->add_option("--heartbeat-timeout", f->heartbeat_timeout_s, "seconds")->capture_default_str();
  return run;
}

absl::Status RunRun(const RunFlags& f) {
  auto text = core::ReadTextFile(f.spec_path);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat("run: cannot read '", f.spec_path, "'"));
  std::string worker = f.worker;
#ifdef ZEROFIT_WORKER_BINARY
  if (worker.empty()) worker = ZEROFIT_WORKER_BINARY;
#endif
  if (worker.empty() || !fs::exists(worker)) {
    return absl::NotFoundError(absl::StrCat("run: zerofit_worker not found ('", worker, "'): pass --worker"));
  }
  std::string state = f.state_dir;
  if (state.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "zerofit-run-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return absl::ErrnoToStatus(errno, "run: mkdtemp");
    state = tmpl;
  }
  std::error_code ec;
  fs::create_directories(state, ec);
  const std::string token = NewToken();
  coordinator::ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = (fs::path(state) / "jobs.db").string();
  o.token = token;
  o.policy.heartbeat_timeout = absl::Seconds(f.heartbeat_timeout_s);
  core::RealClock clock;
  ZF_ASSIGN_OR_RETURN(auto server, coordinator::CoordinatorServer::Start(o, &clock));
  coordinator::Coordinator& c = server->coordinator();
  ZF_ASSIGN_OR_RETURN(auto submitted, c.Submit(absl::StrCat("run-", ::getpid(), "-", token.substr(0, 8)), "",
                                               *text, fs::path(f.spec_path).filename().string()));
  const std::string id = submitted.job.id;
  ZF_ASSIGN_OR_RETURN(jobspec::JobSpec spec, jobspec::ParseJobSpec(*text, f.spec_path));
  std::printf("zerofit run: %s on %d ranks (coordinator %s, state %s)\n", id.c_str(), spec.world_size,
              server->address().c_str(), state.c_str());
  SuperviseHooks hooks;
  hooks.command = [&] {
    std::vector<std::string> args = {f.mpiexec, "--oversubscribe"};
    if (::geteuid() == 0) args.push_back("--allow-run-as-root");
    for (const std::string& a : {std::string("-n"), std::to_string(spec.world_size), worker,
                                 std::string("--coordinator"), server->address(), std::string("--job"), id}) {
      args.push_back(a);
    }
    return args;
  };
  // The token by environment (mpiexec's ranks on this host inherit it), not on a command line `ps` shows.
  hooks.env = {absl::StrCat(client::kTokenEnv, "=", token)};
  ZF_ASSIGN_OR_RETURN(Supervised done, SuperviseJob(*LocalJobControl(&c), id, hooks));
  const coordinator::JobRecord& job = done.job;
  std::printf("zerofit run: %s %s after %d attempt(s)%s%s\n", id.c_str(),
              coordinator::JobPhaseName(job.status.phase), job.status.attempt,
              job.status.reason.empty() ? "" : ": ", job.status.reason.c_str());
  if (job.status.phase != coordinator::JobPhase::kSucceeded) {
    return absl::AbortedError(absl::StrCat(id, " ", coordinator::JobPhaseName(job.status.phase)));
  }
  return absl::OkStatus();
}

}  // namespace zerofit::cli
