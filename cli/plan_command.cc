#include "cli/plan_command.h"

#include <CLI/CLI.hpp>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/excerpt.h"
#include "core/status_macros.h"
#include "core/text_file.h"
#include "jobspec/job_spec.h"
#include "jobspec/resolve.h"
#include "planner/plan_report.h"

namespace zerofit::cli {
namespace {

absl::StatusOr<std::optional<bool>> OnOff(const std::string& flag, const std::string& v) {
  if (v.empty() || v == "auto") return std::optional<bool>();
  if (v == "on" || v == "true" || v == "yes") return std::optional<bool>(true);
  if (v == "off" || v == "false" || v == "no") return std::optional<bool>(false);
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": expected on, off or auto, got '", core::Excerpt(v), "'"));
}

}  // namespace

CLI::App* AddPlanCommand(CLI::App& app, PlanFlags* f) {
  CLI::App* plan = app.add_subcommand(
      "plan",
      "Predict peak GPU and host memory per rank and pick micro-batch, accumulation, ZeRO stage, offload, "
      "checkpointing, LoRA and reference strategy so the job fits");
  CLI::Option* spec = plan->add_option("--spec", f->spec,
                                       "a job spec: print the plan it resolves to, as `zerofit submit` "
                                       "stores it (the flags below do not apply)");
  plan->add_option("--world-size", f->spec_world, "with --spec: the plan of an attempt at this many ranks")
      ->needs(spec);
  plan->add_option("--model", f->model,
                   "model directory, config.json, or preset (Mistral-7B, Llama-2-7B, "
                   "Llama-3-8B, Qwen2.5-0.5B, Qwen2.5-7B)")
      ->excludes(spec);
  plan->add_option("--task", f->task, "reward | dpo | grpo | sft")->capture_default_str();
  plan->add_option(
          "--hardware", f->hardware,
          "GPUs per node and kind: 8x64GB, 8xa100-40, a100-80, h100-80, h200-141, v100-32, rtx4090-24")
      ->capture_default_str();
  plan->add_option("--nodes", f->nodes, "nodes")->capture_default_str();
  plan->add_option("--global-batch", f->global_batch,
                   "per optimizer step: sequences (sft), pairs (reward, dpo) or prompts (grpo)")
      ->capture_default_str();
  plan->add_option("--seq-len", f->seq_len, "longest training sequence (prompt + response)")
      ->capture_default_str();
  plan->add_flag("--json", f->json, "print JSON instead of the table");
  plan->add_flag("--allow-lora", f->allow_lora, "let the search use LoRA (ranks 8, 16, 64) when it helps");
  plan->add_option("--host-gb", f->host_gb, "host RAM per node in GB (default: the hardware profile's)")
      ->check(CLI::Validator(
          [](std::string& v) {
            double gb = 0;
            return absl::SimpleAtod(v, &gb) && gb > 0
                       ? std::string()
                       : absl::StrCat("expected a positive number of GB, got '", core::Excerpt(v), "'");
          },
          "GB > 0"));
  plan->add_option("--safety", f->safety, "usable fraction of GPU memory")->capture_default_str();
  plan->add_option("--max-stage", f->max_stage, "highest ZeRO stage to consider (the workers run stage 2)")
      ->capture_default_str();
  plan->add_option("--prompt-len", f->prompt_len, "GRPO: prompt tokens")->capture_default_str();
  plan->add_option("--new-tokens", f->new_tokens, "GRPO: generated tokens per sample")->capture_default_str();
  plan->add_option("--samples-per-prompt", f->samples_per_prompt, "GRPO: samples per prompt")
      ->capture_default_str();
  plan->add_option("--reward-models", f->reward_models,
                   "frozen reward/cost models resident next to the policy (Safe-RLHF: 2)")
      ->capture_default_str();
  plan->add_option("--stage", f->stage, "pin the ZeRO stage (0-3)");
  plan->add_option("--offload", f->offload, "pin optimizer offload: on | off");
  plan->add_flag(
      "--delayed-update", f->delayed_update,
      "with offload: the delayed parameter update (a second gradient shard and staging on the host)");
  plan->add_option("--optim", f->optim,
                   "the optimizer, as the job spec's training.optim: adamw_torch (fp32 moments) | adamw_8bit "
                   "(8-bit moments, bitsandbytes' AdamW8bit; with offload in host memory)")
      ->capture_default_str();
  plan->add_option("--min-8bit-size", f->min_8bit_size,
                   "with adamw_8bit: tensors of fewer elements keep fp32 moments")
      ->capture_default_str();
  plan->add_option(
          "--decode", f->decode,
          "GRPO: the rollouts' decode steps, auto | eager | static | cuda_graph (a replayed CUDA graph: "
          "no host dispatch a step; auto, the worker's default, is cuda_graph on a GPU)")
      ->capture_default_str();
  plan->add_option("--checkpointing", f->checkpointing, "pin activation checkpointing: on | off");
  plan->add_option("--reference", f->reference,
                   "pin the reference strategy: resident | offloaded | precomputed | lora-base (LoRA only); "
                   "grpo also none (grpo.beta 0: no KL, no reference model, TRL's default)");
  plan->add_option("--micro-batch", f->micro_batch, "pin the micro-batch per GPU");
  return plan;
}

namespace {

// --spec: the resolver's plan of a job spec file (relative paths in it resolve against its folder).
absl::StatusOr<std::string> SpecPlan(const PlanFlags& f) {
  ZF_ASSIGN_OR_RETURN(const std::string text, jobspec::ReadJobSpecFile(f.spec));
  const std::string dir = std::filesystem::path(f.spec).parent_path().string();
  ZF_ASSIGN_OR_RETURN(const jobspec::JobSpec spec,
                      jobspec::ParseJobSpec(text, f.spec, dir.empty() ? "." : dir));
  if (f.spec_world < 0) return absl::InvalidArgumentError("--world-size must be >= 1");
  ZF_ASSIGN_OR_RETURN(const jobspec::JobPlan plan, jobspec::Resolve(spec, jobspec::Attempt{f.spec_world}));
  return jobspec::JobPlanToJson(plan);
}

}  // namespace

absl::StatusOr<std::string> RunPlan(const PlanFlags& f) {
  if (!f.spec.empty()) return SpecPlan(f);
  if (f.model.empty()) return absl::InvalidArgumentError("give --model (or --spec JOB.yaml)");
  ZF_ASSIGN_OR_RETURN(planner::ModelShape model, planner::LoadModelShape(f.model));
  if (f.host_gb < 0) {
    return absl::InvalidArgumentError("--host-gb must be > 0 (leave it out for the hardware profile's)");
  }
  ZF_ASSIGN_OR_RETURN(planner::Hardware hw, planner::ParseHardware(f.hardware, f.host_gb));
  planner::Workload w;
  ZF_ASSIGN_OR_RETURN(w.task, planner::ParseTask(f.task));
  w.seq_len = f.seq_len;
  w.global_batch = f.global_batch;
  w.prompt_len = f.prompt_len;
  w.new_tokens = f.new_tokens;
  w.samples_per_prompt = f.samples_per_prompt;
  w.extra_frozen_models = f.reward_models;
  w.delayed_update = f.delayed_update;
  auto optim = jobspec::ParseOptimizerName(f.optim);
  if (!optim.ok()) return absl::InvalidArgumentError(absl::StrCat("--optim: ", optim.status().message()));
  w.eight_bit_moments = *optim == jobspec::OptimizerKind::kAdamW8bit;
  if (f.min_8bit_size < 0) return absl::InvalidArgumentError("--min-8bit-size must be >= 0");
  w.min_8bit_size = f.min_8bit_size;
  if (!jobspec::IsDecodeMode(f.decode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--decode: '", f.decode.substr(0, 40), "' is not auto, eager, static or cuda_graph"));
  }
  w.graphed_decode = jobspec::DecodesAsGraphOnGpu(f.decode);
  if (f.reward_models < 0) return absl::InvalidArgumentError("--reward-models must be >= 0");
  if (!(f.safety > 0 && f.safety <= 1)) return absl::InvalidArgumentError("--safety must lie in (0, 1]");
  planner::Constraints c;
  c.nodes = f.nodes;
  c.allow_lora = f.allow_lora;
  c.safety = f.safety;
  c.max_stage = f.max_stage;
  if (!f.stage.empty()) {
    int st = -1;
    if (!absl::SimpleAtoi(f.stage, &st) || st < 0 || st > 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("--stage: expected 0, 1, 2 or 3, got '", core::Excerpt(f.stage), "'"));
    }
    c.zero_stage = st;
  }
  ZF_ASSIGN_OR_RETURN(c.offload, OnOff("--offload", f.offload));
  ZF_ASSIGN_OR_RETURN(c.checkpointing, OnOff("--checkpointing", f.checkpointing));
  if (!f.reference.empty()) {
    absl::StatusOr<planner::Reference> ref = planner::ParseReference(f.reference);
    const bool grpo_without_kl = f.task == "grpo" && ref.ok() && *ref == planner::Reference::kNone;
    if (!ref.ok() || (*ref == planner::Reference::kNone && !grpo_without_kl)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--reference: expected resident, offloaded, precomputed or lora-base (grpo: also none), "
          "got '",
          core::Excerpt(f.reference), "'"));
    }
    c.reference = *ref;
  }
  if (!f.micro_batch.empty()) {
    int64_t mb = 0;
    if (!absl::SimpleAtoi(f.micro_batch, &mb) || mb < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--micro-batch: expected a positive integer, got '",
                                                     core::Excerpt(f.micro_batch), "'"));
    }
    c.micro_batch = mb;
  }
  ZF_ASSIGN_OR_RETURN(planner::Plan plan, planner::MakePlan(model, w, hw, c));
  return f.json ? planner::PlanJson(plan) + "\n" : planner::PlanTable(plan);
}

}  // namespace zerofit::cli
