// The resolved job: what a job spec (job_spec.h) becomes once every size is decided, in one typed, versioned
// value. jobspec::Resolve (resolve.h) makes it; the coordinator stores each attempt's and hands it to the
// workers as JSON: workers read the plan, never the YAML, so they link neither yaml-cpp,
// SQLite nor the planner. `zerofit status JOB --plan` prints it. One mapping from the plan to the trainer's
// options lives in worker/torch/train/plan_options.h.
//
// Steps are 0-based everywhere (core/lr_schedule.h): a plan of `steps` N runs steps 0..N-1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/lr_schedule.h"
#include "jobspec/job_spec.h"

namespace zerofit::jobspec {

// Bumped whenever a field changes meaning or is removed; a reader refuses any other version by name rather
// than guess (a worker older than its coordinator says so instead of training something else).
// Version 1 grew `world_sizes` (issue 20); version 2 `sizing` (issue 31); version 3 `reference` and `lora`
// (issue 32); version 4 `init`, `seed`, `delayed_update_from` and `dpo` (issue 31: the trainer's settings
// that only zerofit_train_prefs's flags could give); version 5 `checkpoint.resume`; version 6 `reward` and
// `sft`; version 7 `sft.assistant_only_loss`; version 8 `data.eos_token`, `data.chat_template` and
// the GRPO objective's `importance_sampling_level`, `delta` and `mask_truncated_completions`, the rollout's
// `top_k` and `min_p`; `scale_rewards` a name (group, batch, none) where it was a boolean; `dpo.simpo_gamma`;
// version 9 `dpo.rpo_alpha`, `dpo.reference_free`, `dpo.discopop_tau`, `dpo.ld_alpha` and loss_types orpo and
// discopop, `grpo.top_entropy_quantile`, GRPO's loss_types cispo and sapo with `grpo.sapo_temperature_pos`
// and `sapo_temperature_neg`, `grpo.use_bias_correction_kl`; version 10 `optim` and `min_8bit_size`;
// version 11 GRPO's loss_type rloo and `grpo.normalize_advantages`; version 12 `grpo.reward_clip_range`. A
// worker of an older build refuses the version by name.
inline constexpr int kJobPlanVersion = 12;

// `zerofit plan`'s memory model evaluated for this plan's own sizes (planner::EstimateMemory with the
// plan's micro-batch, accumulation, ZeRO stage, offload and checkpointing), so that a rank can print what it
// was predicted to use next to what it measures. Bytes; 0 where the coordinator could not estimate (a model
// the planner cannot read), and `basis` says why.
struct PlannedPeak {
  int64_t device_bytes = 0;  // per rank (GPU)
  int64_t host_bytes = 0;    // per node
  // "8x64GB (LibTorch 2.x, scaled-dot-product attention): micro-batch 2 x 4, ZeRO-2, ..." or why there is
  // no estimate
  std::string basis;
};

struct JobPlan {
  int version = kJobPlanVersion;
  std::string name;
  std::string task;             // reward | dpo | sft | grpo
  std::string model;            // directory: config.json (+ model.safetensors: the initial weights)
  std::string init;             // the spec's `init`: weights to start from instead of the model's own
  std::string device = "auto";  // auto | cpu | cuda
  // The ranks of the attempt this plan is for (a shrunken attempt: fewer than the spec's).
  int world_size = 1;
  // Every world size an attempt of the job may run at (AllowedWorldSizes: the spec's alone, or with
  // slurm.on_node_loss: shrink one per node count); a worker started at another one refuses to register.
  std::vector<int> world_sizes;
  DataSpec data;
  EvalSpec eval;
  // Sizes, decided: pairs (sequences for SFT) per optimizer step over all ranks, and micro-batches per rank
  // per step (gradient accumulation); the spec's, the planner's, or doubled by an out-of-memory re-plan.
  int64_t steps = 0;
  int64_t global_batch = 0;
  int gradient_accumulation = 1;
  bool activation_checkpointing = false;
  // Which rule decided the sizes (resolve.h): "from the spec: ...", "sized by the planner for ...",
  // "re-planned after out-of-memory: ...", or why the planner could not size it.
  std::string sizing;
  core::LrScheduleOptions schedule;  // peak_lr is the spec's lr; total_steps is set (never 0)
  double weight_decay = 0.0;
  double max_grad_norm = 1.0;
  int zero_stage = 2;
  bool offload = false;
  int64_t delayed_update_from = -1;  // training.delayed_update_from; -1: no delayed parameter update
  OptimizerSpec optimizer;           // training.optim and training.min_8bit_size
  bool bf16 = false;
  int64_t max_length = 0;
  int64_t seed = 1234;    // training.seed: initial weights of new layers and the order of the samples
  LoraSpec lora;          // the spec's; rank 0: a full fine-tune
  DpoSpec dpo;            // task dpo only (the JSON has a "dpo" section then, and only then)
  RewardLossSpec reward;  // task reward only (the JSON has a "reward" section then, and only then)
  SftSpec sft;            // task sft only (the JSON has an "sft" section then, and only then)
  // The frozen reference of DPO and GRPO (planner::ReferenceName's names): "resident", or "lora-base" with
  // LoRA (the policy's base, adapters disabled); "none" for the other tasks and GRPO with beta 0.
  std::string reference = "none";
  CheckpointSpec checkpoint;
  MetricsSpec metrics;
  std::string export_dir;
  PlannedPeak planned_peak;
  GrpoJobSpec grpo;  // task grpo only (the JSON has a "grpo" section then, and only then)
};

// What a step's micro-batches split: pairs (reward, DPO), sequences (SFT) or sampled sequences, i.e.
// global_batch prompts x rollout.samples_per_prompt (GRPO).
int64_t ItemsPerStep(const JobPlan& plan);

// Whether the held-out set is evaluated after 0-based `step` of a run of `steps`: every `every`-th step
// (0: never) and after the last. The one rule for zerofit_worker and zerofit_train_prefs.
bool EvalDue(int64_t steps, int64_t every, int64_t step);

// Versioned JSON, keys in a fixed order (what `zerofit status --plan` prints).
std::string JobPlanToJson(const JobPlan& plan);

// `source` names the text in errors. Unknown keys and another version are errors.
absl::StatusOr<JobPlan> JobPlanFromJson(const std::string& json, const std::string& source);

}  // namespace zerofit::jobspec
