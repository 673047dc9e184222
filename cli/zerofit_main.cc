// zerofit: the command-line front end. `plan` sizes a job; `tokenize` runs a Hugging Face tokenizer over
// JSONL; `serve` runs the coordinator; `submit`, `status`, `list`, `logs`, `cancel` talk to it.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cli/plan_command.h"
#include "cli/tokenize_command.h"
#ifdef ZEROFIT_CLI_WITH_DATA
#include "cli/data_check_command.h"
#endif
#ifdef ZEROFIT_CLI_WITH_GRPC
#include "cli/jobs_commands.h"
#include "cli/run_command.h"
#include "cli/slurm_commands.h"
#endif

namespace {

int Fail(const char* command, const absl::Status& s) {
  std::fprintf(stderr, "zerofit %s: %s\n", command, std::string(s.message()).c_str());
  return s.code() == absl::StatusCode::kFailedPrecondition ? 3 : 2;
}

// One subcommand: its parser and what running it exits with.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

// A subcommand whose result is a status: 0, or Fail's code naming it.
std::function<int()> ByStatus(const char* name, std::function<absl::Status()> run) {
  return [name, run = std::move(run)] {
    const absl::Status s = run();
    return s.ok() ? 0 : Fail(name, s);
  };
}

// A subcommand that prints its text result on stdout.
std::function<int()> Printing(const char* name, std::function<absl::StatusOr<std::string>()> run) {
  return [name, run = std::move(run)] {
    auto out = run();
    if (!out.ok()) return Fail(name, out.status());
    std::fputs(out->c_str(), stdout);
    return 0;
  };
}

namespace cli = zerofit::cli;

// Every flag struct the subcommands fill, alive for the whole run.
struct Flags {
  cli::PlanFlags plan;
  cli::TokenizeFlags tokenize;
#ifdef ZEROFIT_CLI_WITH_DATA
  cli::DataCheckFlags data_check;
#endif
#ifdef ZEROFIT_CLI_WITH_GRPC
  cli::ServeFlags serve;
  cli::JobsFlags jobs;
  cli::RunFlags run;
  cli::SlurmFlags slurm;
  cli::SlurmLaunchFlags launch;
#endif
};

int Tokenize(const cli::TokenizeFlags& f) {
  auto report = cli::RunTokenize(f);
  if (!report.ok()) return Fail("tokenize", report.status());
  if (report->refused == 0) return 0;
  // Every line was written; 1 (not Fail's 2) tells a script the output is complete but has error lines.
  std::fprintf(stderr, "zerofit tokenize: %s\n", cli::RefusedLinesMessage(*report, f).c_str());
  return 1;
}

#ifdef ZEROFIT_CLI_WITH_GRPC
// `submit --slurm`: the submit flags handed to `zerofit slurm`.
absl::Status SubmitToSlurm(Flags& f) {
  f.slurm.spec_path = f.jobs.spec_path;
  f.slurm.state_dir = f.jobs.state_dir;
  f.slurm.token = f.jobs.token;
  f.slurm.tls_ca = f.jobs.tls_ca;
  f.slurm.tls_server_name = f.jobs.tls_server_name;
  return cli::RunSlurm(f.slurm);
}

void AddJobCommands(CLI::App& app, Flags& f, std::vector<Command>* commands) {
  const cli::JobsCommands jobs = cli::AddJobsCommands(app, &f.serve, &f.jobs);
  CLI::App* run = cli::AddRunCommand(app, &f.run);
  CLI::App* slurm = cli::AddSlurmCommand(app, &f.slurm);
  jobs.submit->add_flag("--slurm", f.slurm.submit, "submit to Slurm with sbatch (see `zerofit slurm`)");
  cli::AddSlurmSubmitFlags(jobs.submit, &f.slurm);
  CLI::App* launch = cli::AddSlurmLaunchCommand(app, &f.launch);
  commands->push_back({run, ByStatus("run", [&f] { return cli::RunRun(f.run); })});
  commands->push_back({slurm, ByStatus("slurm", [&f] { return cli::RunSlurm(f.slurm); })});
  commands->push_back({launch, [&f] {
                         auto code = cli::RunSlurmLaunch(f.launch);
                         return code.ok() ? *code : Fail("slurm-launch", code.status());
                       }});
  commands->push_back({jobs.serve, ByStatus("serve", [&f] { return cli::RunServe(f.serve); })});
  commands->push_back({jobs.submit, [&f] {
                         if (f.slurm.submit)
                           return ByStatus("submit --slurm", [&f] { return SubmitToSlurm(f); })();
                         return ByStatus("submit", [&f] { return cli::RunSubmit(f.jobs); })();
                       }});
  const std::pair<CLI::App*, std::pair<const char*, absl::Status (*)(const cli::JobsFlags&)>>
      by_jobs_flags[] = {
          {jobs.status, {"status", cli::RunStatus}}, {jobs.list, {"list", cli::RunList}},
          {jobs.logs, {"logs", cli::RunLogs}},       {jobs.metrics, {"metrics", cli::RunMetrics}},
          {jobs.worker, {"worker", cli::RunWorker}}, {jobs.cancel, {"cancel", cli::RunCancel}},
      };
  for (const auto& [app_of, named] : by_jobs_flags) {
    const auto [name, fn] = named;
    commands->push_back({app_of, ByStatus(name, [&f, fn = fn] { return fn(f.jobs); })});
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zerofit: memory-planned distributed RLHF training (reward models, DPO, GRPO)"};
  app.require_subcommand(1);
  Flags f;
  std::vector<Command> commands;
  commands.push_back(
      {cli::AddPlanCommand(app, &f.plan), Printing("plan", [&f] { return cli::RunPlan(f.plan); })});
  commands.push_back({cli::AddTokenizeCommand(app, &f.tokenize), [&f] { return Tokenize(f.tokenize); }});
#ifdef ZEROFIT_CLI_WITH_DATA
  commands.push_back({cli::AddDataCheckCommand(app, &f.data_check),
                      Printing("data check", [&f] { return cli::RunDataCheck(f.data_check); })});
#endif
#ifdef ZEROFIT_CLI_WITH_GRPC
  AddJobCommands(app, f, &commands);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (const Command& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return 0;
}
