// The one resolver from a job spec to the plan its workers train by (issue 31). Every size is decided here
// and nowhere else: the coordinator (at submit, for each attempt, after an out-of-memory failure),
// `zerofit plan JOB.yaml`, Slurm jobs (through their coordinator) and zerofit_train_prefs (which builds a
// JobSpec from its flags) all call these functions.
//
// The rules, in order:
//   1. `training.gradient_accumulation` given: that many micro-batches per rank per step; checkpointing the
//      spec's (off when unset). The planner is not asked.
//   2. `training.micro_batch` given: accumulation = global_batch / (micro_batch x world_size) (the spec
//      checked that it divides); the planner, with the micro-batch pinned, decides checkpointing when the
//      spec leaves it out.
//   3. Neither: the planner's search on the spec's model, task, sizes and hardware.
// Every field the user gave is honoured or the job is refused with the planner's reason; `JobPlan.sizing`
// says which rule decided. A model whose config.json the planner cannot read gets rule 1 or 2's sizes, or
// one micro-batch, and the reason in `sizing`.
//
// Pure apart from reading the model's config.json (planner::LoadModelShape).
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "jobspec/job_plan.h"
#include "jobspec/job_spec.h"
#include "planner/hardware.h"
#include "planner/memory_model.h"

namespace zerofit::jobspec {

// Which attempt of the job a plan is for.
struct Attempt {
  int world_size = 0;  // ranks; 0: the spec's world_size
};

// What a program knows about the job beyond the spec (zerofit_train_prefs' trainer flags): pinned for the
// planner so that it sizes the job that will run. Unset fields keep the defaults of ReferenceOf.
struct TrainerFacts {
  std::optional<planner::Reference> reference;
  std::optional<double> safety;
  std::optional<size_t> bucket_bytes;
};

// The reference the workers keep (JobPlan.reference): DPO's is resident, GRPO's resident when beta > 0 and
// none otherwise; with LoRA the policy's own base (lora-base) instead of a resident copy; the other tasks
// none. `pinned` (a trainer flag) replaces the default; an error names what cannot run (lora-base without
// LoRA; GRPO with a reference other than resident or lora-base, or any with beta 0).
absl::StatusOr<planner::Reference> ReferenceOf(const JobSpec& spec, std::optional<planner::Reference> pinned);

// The hardware a spec names (`hardware:`), or an error naming the field.
absl::StatusOr<planner::Hardware> HardwareOf(const JobSpec& spec);

// The plan of `spec` for `attempt` on `hw`: sized by the rules above at the spec's world size, then for the
// attempt's (Reshape), with its predicted peak. Errors: the planner's (no strategy fits, with why).
absl::StatusOr<JobPlan> Resolve(const JobSpec& spec, const planner::Hardware& hw, const Attempt& attempt,
                                const TrainerFacts& facts = {});
// The same on the spec's own hardware.
absl::StatusOr<JobPlan> Resolve(const JobSpec& spec, const Attempt& attempt = {});

// The plan after an attempt ran out of memory: twice the micro-batches per rank (half the pairs per
// micro-batch), the same global batch, at most one pair per micro-batch; unchanged where it already is one
// pair (`sizing` says so either way). Peak re-predicted on `hw`.
struct OutOfMemory {};
JobPlan Replan(const JobPlan& plan, const planner::Hardware& hw, OutOfMemory);

// The plan at `world_size` ranks (a Slurm job that shrank after losing a node, or grew back): the same
// global batch and pairs per micro-batch, more or fewer micro-batches per rank (GradientAccumulationFor). The
// same world size returns `plan` unchanged.
JobPlan Reshape(const JobPlan& plan, const planner::Hardware& hw, int world_size);

// Micro-batches per rank per step at `to_world` ranks for a job of `global_batch` pairs that ran
// `from_micro` micro-batches per rank at `from_world` ranks: the same pairs per micro-batch (rounded up),
// at least 1, at most the pairs a rank gets. Equal worlds return `from_micro`.
int GradientAccumulationFor(int64_t global_batch, int from_world, int from_micro, int to_world);

}  // namespace zerofit::jobspec
