// The one mapping from a resolved job plan (jobspec/job_plan.h) to the trainer's options: the coordinator's
// workers and zerofit_train_prefs both go through it.
#pragma once

#include "absl/status/statusor.h"
#include "jobspec/job_plan.h"
#include "worker/data/job_files.h"
#include "worker/torch/train/preference_session.h"

namespace zerofit::worker {

// A GRPO plan's rollout, objective and reward sources as the trainer's options.
absl::StatusOr<GrpoTaskOptions> GrpoTaskOptionsOf(const jobspec::GrpoJobSpec& grpo);

// The weights a run starts from: the plan's `init`, else the model directory's model.safetensors when it
// has one, else none (a random initialisation from the seed).
std::string InitWeightsOf(const jobspec::JobPlan& plan);

// A DPO plan's loss as the trainer's options.
absl::StatusOr<DpoOptions> DpoOptionsOf(const jobspec::DpoSpec& spec);

// Task, model, initial weights, seed, data, sizes, schedule, optimizer, offload (and its delayed update),
// activation checkpointing, dtype, LoRA, reference, DPO loss, GRPO, device, evaluation: everything the run
// trains; how this process runs it is RuntimeOptions. Errors name the plan field.
absl::StatusOr<PreferenceTrainOptions> OptionsFromPlan(const jobspec::JobPlan& plan);

}  // namespace zerofit::worker
