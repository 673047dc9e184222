// zerofit: the command-line front end. Subcommands: plan (more arrive with the coordinator).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cli/plan_command.h"

int main(int argc, char** argv) {
  CLI::App app{"zerofit: memory-planned distributed RLHF training (reward models, DPO, GRPO)"};
  app.require_subcommand(1);
  zerofit::cli::PlanFlags plan_flags;
  CLI::App* plan = zerofit::cli::AddPlanCommand(app, &plan_flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (plan->parsed()) {
    auto out = zerofit::cli::RunPlan(plan_flags);
    if (!out.ok()) {
      std::fprintf(stderr, "zerofit plan: %s\n", std::string(out.status().message()).c_str());
      return out.status().code() == absl::StatusCode::kFailedPrecondition ? 3 : 2;
    }
    std::fputs(out->c_str(), stdout);
  }
  return 0;
}
