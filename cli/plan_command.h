// `zerofit plan`: flags -> planner::MakePlan -> a table (default) or JSON on stdout; or `--spec JOB.yaml`:
// the job plan jobspec::Resolve gives the spec, as `zerofit submit` stores it and `zerofit status --plan`
// prints it.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "planner/search.h"

namespace CLI {
class App;
}

namespace zerofit::cli {

struct PlanFlags {
  std::string spec;    // a job spec: print its resolved plan (the other flags do not apply)
  int spec_world = 0;  // --world-size with --spec: an attempt at that many ranks (0: the spec's)
  std::string model;
  std::string task = "sft";
  std::string hardware = "8x64GB";
  int nodes = 1;
  int64_t global_batch = 64;
  int64_t seq_len = 2048;
  bool json = false;
  bool allow_lora = false;
  bool delayed_update = false;        // with offload: count the delayed update's second gradient buffer
  std::string optim = "adamw_torch";  // adamw_8bit: 8-bit AdamW moments (jobspec/optimizer_spec.h)
  int64_t min_8bit_size = 4096;
  std::string decode = "auto";  // GRPO: rollout.decode (auto | eager | static | cuda_graph)
  double host_gb = 0;
  double safety = 0.95;
  int max_stage = 2;
  // GRPO
  int64_t prompt_len = 512;
  int64_t new_tokens = 1024;
  int64_t samples_per_prompt = 16;
  int reward_models = 0;  // extra frozen models (Safe-RLHF: 2)
  // Pins (empty: searched)
  std::string stage, offload, checkpointing, reference, micro_batch;
};

// Registers the `plan` subcommand on `app`; `flags` must outlive parsing.
CLI::App* AddPlanCommand(CLI::App& app, PlanFlags* flags);

// Builds the plan the flags describe and renders it.
absl::StatusOr<std::string> RunPlan(const PlanFlags& flags);

}  // namespace zerofit::cli
