#include "jobspec/planned_peak.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "planner/memory_model.h"
#include "planner/search.h"

namespace zerofit::jobspec {
namespace {

PlannedPeak NoEstimate(const absl::Status& why) {
  PlannedPeak p;
  p.basis = absl::StrCat("no estimate: ", why.message());
  return p;
}

}  // namespace

PlannedPeak PlanPeak(const JobPlan& plan, planner::Hardware hw) {
  auto shape = planner::LoadModelShape(plan.model);
  if (!shape.ok()) return NoEstimate(shape.status());
  auto task = planner::ParseTask(plan.task);
  if (!task.ok()) return NoEstimate(task.status());
  const int world = std::max(1, plan.world_size);
  hw.gpus_per_node = std::min(hw.gpus_per_node, world);  // a partial node holds the ranks the job has
  planner::Workload w;
  w.task = *task;
  w.seq_len = plan.max_length;
  w.global_batch = plan.global_batch;
  w.element_bytes = plan.bf16 ? 2 : 4;
  w.delayed_update = plan.delayed_update_from >= 0;
  w.eight_bit_moments = plan.optimizer.eight_bit();
  w.min_8bit_size = plan.optimizer.min_8bit_size;
  planner::Strategy s;
  s.gradient_accumulation = std::max(1, plan.gradient_accumulation);
  s.micro_batch =
      std::max<int64_t>(1, ItemsPerStep(plan) / (static_cast<int64_t>(world) * s.gradient_accumulation));
  s.zero_stage = plan.zero_stage;
  s.offload = plan.offload;
  s.checkpointing = plan.activation_checkpointing;
  s.lora_rank = plan.lora.rank;
  auto reference = planner::ParseReference(plan.reference);
  if (!reference.ok()) return NoEstimate(reference.status());
  s.reference = *reference;
  if (*task == planner::Task::kGrpo) {
    const RolloutSpec& r = plan.grpo.rollout;
    w.prompt_len = plan.max_length - r.max_new_tokens;
    w.new_tokens = r.max_new_tokens;
    w.samples_per_prompt = r.samples_per_prompt;
    const int64_t prompts_per_rank = std::max<int64_t>(1, plan.global_batch / world);
    s.rollout_prompts = r.batch > 0 ? std::max<int64_t>(1, r.batch / r.samples_per_prompt) : prompts_per_rank;
  }
  const planner::MemoryEstimate m = planner::EstimateMemory(*shape, w, s, hw, world);
  PlannedPeak p;
  p.device_bytes = static_cast<int64_t>(m.device_bytes);
  p.host_bytes = static_cast<int64_t>(m.host_bytes);
  p.basis = absl::StrCat(hw.name, " (", planner::WorkerKernelsName(hw.kernels),
                         "): ", planner::DescribeStrategy(s, w.task), ", peak in ", m.peak_phase);
  return p;
}

}  // namespace zerofit::jobspec
