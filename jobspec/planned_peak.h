// `zerofit plan`'s memory model for one resolved plan: what each rank of the attempt is predicted to hold at
// its peak, so that the job prints it at its start and `zerofit status --plan` shows it next to the peaks
// the ranks measure (issue 28: no planner figure had been checked against a GPU).
#pragma once

#include <string>

#include "jobspec/job_plan.h"
#include "planner/hardware.h"

namespace zerofit::jobspec {

// The planner's estimate for `plan`'s own sizes (micro-batch = global batch / (world size x micro-batches),
// accumulation, ZeRO stage, offload, checkpointing, LoRA rank and the plan's reference, as the workers run
// them) on `hw`, or zero bytes with the reason in `basis` where the model's shape cannot be read. Called by
// the resolver (resolve.h) for every plan it makes.
PlannedPeak PlanPeak(const JobPlan& plan, planner::Hardware hw);

}  // namespace zerofit::jobspec
