// zerofit: the command-line front end. `plan` sizes a job; `tokenize` runs a Hugging Face tokenizer over
// JSONL; `serve` runs the coordinator; `submit`, `status`, `list`, `logs`, `cancel` talk to it.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zerofit: memory-planned distributed RLHF training (reward models, DPO, GRPO)"};
  app.require_subcommand(1);
  zerofit::cli::PlanFlags plan_flags;
  CLI::App* plan = zerofit::cli::AddPlanCommand(app, &plan_flags);
  zerofit::cli::TokenizeFlags tokenize_flags;
  CLI::App* tokenize = zerofit::cli::AddTokenizeCommand(app, &tokenize_flags);
#ifdef ZEROFIT_CLI_WITH_DATA
  zerofit::cli::DataCheckFlags data_check_flags;
  CLI::App* data_check = zerofit::cli::AddDataCheckCommand(app, &data_check_flags);
#endif
#ifdef ZEROFIT_CLI_WITH_GRPC
  zerofit::cli::ServeFlags serve_flags;
  zerofit::cli::JobsFlags jobs_flags;
  const zerofit::cli::JobsCommands jobs = zerofit::cli::AddJobsCommands(app, &serve_flags, &jobs_flags);
  zerofit::cli::RunFlags run_flags;
  CLI::App* run = zerofit::cli::AddRunCommand(app, &run_flags);
  zerofit::cli::SlurmFlags slurm_flags;
  CLI::App* slurm = zerofit::cli::AddSlurmCommand(app, &slurm_flags);
  jobs.submit->add_flag("--slurm", slurm_flags.submit, "submit to Slurm with sbatch (see `zerofit slurm`)");
  zerofit::cli::AddSlurmSubmitFlags(jobs.submit, &slurm_flags);
  zerofit::cli::SlurmLaunchFlags launch_flags;
  CLI::App* slurm_launch = zerofit::cli::AddSlurmLaunchCommand(app, &launch_flags);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (plan->parsed()) {
    auto out = zerofit::cli::RunPlan(plan_flags);
    if (!out.ok()) return Fail("plan", out.status());
    std::fputs(out->c_str(), stdout);
    return 0;
  }
  if (tokenize->parsed()) {
    auto report = zerofit::cli::RunTokenize(tokenize_flags);
    if (!report.ok()) return Fail("tokenize", report.status());
    if (report->refused == 0) return 0;
    // Every line was written; 1 (not Fail's 2) tells a script the output is complete but has error lines.
    std::fprintf(stderr, "zerofit tokenize: %s\n",
                 zerofit::cli::RefusedLinesMessage(*report, tokenize_flags).c_str());
    return 1;
  }
#ifdef ZEROFIT_CLI_WITH_DATA
  if (data_check->parsed()) {
    auto out = zerofit::cli::RunDataCheck(data_check_flags);
    if (!out.ok()) return Fail("data check", out.status());
    std::fputs(out->c_str(), stdout);
    return 0;
  }
#endif
#ifdef ZEROFIT_CLI_WITH_GRPC
  absl::Status s;
  const char* name = "";
  if (run->parsed()) {
    name = "run";
    s = zerofit::cli::RunRun(run_flags);
  } else if (slurm->parsed()) {
    name = "slurm";
    s = zerofit::cli::RunSlurm(slurm_flags);
  } else if (jobs.submit->parsed() && slurm_flags.submit) {
    name = "submit --slurm";
    slurm_flags.spec_path = jobs_flags.spec_path;
    slurm_flags.state_dir = jobs_flags.state_dir;
    slurm_flags.token = jobs_flags.token;
    slurm_flags.tls_ca = jobs_flags.tls_ca;
    slurm_flags.tls_server_name = jobs_flags.tls_server_name;
    s = zerofit::cli::RunSlurm(slurm_flags);
  } else if (slurm_launch->parsed()) {
    auto code = zerofit::cli::RunSlurmLaunch(launch_flags);
    if (!code.ok()) return Fail("slurm-launch", code.status());
    return *code;
  } else if (jobs.serve->parsed()) {
    name = "serve";
    s = zerofit::cli::RunServe(serve_flags);
  } else if (jobs.submit->parsed()) {
    name = "submit";
    s = zerofit::cli::RunSubmit(jobs_flags);
  } else if (jobs.status->parsed()) {
    name = "status";
    s = zerofit::cli::RunStatus(jobs_flags);
  } else if (jobs.list->parsed()) {
    name = "list";
    s = zerofit::cli::RunList(jobs_flags);
  } else if (jobs.logs->parsed()) {
    name = "logs";
    s = zerofit::cli::RunLogs(jobs_flags);
  } else if (jobs.metrics->parsed()) {
    name = "metrics";
    s = zerofit::cli::RunMetrics(jobs_flags);
  } else if (jobs.worker->parsed()) {
    name = "worker";
    s = zerofit::cli::RunWorker(jobs_flags);
  } else if (jobs.cancel->parsed()) {
    name = "cancel";
    s = zerofit::cli::RunCancel(jobs_flags);
  }
  if (!s.ok()) return Fail(name, s);
#endif
  return 0;
}
