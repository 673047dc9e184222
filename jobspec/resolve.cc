#include "jobspec/resolve.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "jobspec/planned_peak.h"
#include "planner/model_shape.h"
#include "planner/search.h"

namespace zerofit::jobspec {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Micro-batches per rank and checkpointing at the spec's world size, and which rule decided.
struct Sizing {
  int gradient_accumulation = 1;
  bool checkpointing = false;
  int64_t rollout_prompts = 0;  // GRPO: prompts per generation pass the planner chose (0: not planned)
  std::string note;
};

// The planner's workload and pins for `spec` (rule 2 pins the micro-batch, rule 3 searches it).
struct PlannerInput {
  planner::Workload workload;
  planner::Constraints constraints;
  planner::Hardware hw;
};

absl::StatusOr<PlannerInput> PlannerInputOf(const JobSpec& spec, const planner::Hardware& hw,
                                            const TrainerFacts& facts) {
  PlannerInput in;
  in.hw = hw;
  planner::Workload& w = in.workload;
  ZF_ASSIGN_OR_RETURN(w.task, planner::ParseTask(spec.task));
  w.seq_len = spec.training.max_length;
  if (w.task == planner::Task::kGrpo) {
    const RolloutSpec& r = spec.grpo.rollout;
    w.prompt_len = spec.training.max_length - r.max_new_tokens;
    w.new_tokens = r.max_new_tokens;
    w.samples_per_prompt = r.samples_per_prompt;
    w.graphed_decode = DecodesAsGraphOnGpu(r.decode);
  }
  w.global_batch = spec.training.global_batch;
  w.element_bytes = spec.training.bf16 ? 2 : 4;
  w.delayed_update = spec.training.delayed_update_from.has_value();
  w.eight_bit_moments = spec.training.optimizer.eight_bit();
  w.min_8bit_size = spec.training.optimizer.min_8bit_size;
  planner::Constraints& c = in.constraints;
  c.nodes = std::max(1, spec.world_size / hw.gpus_per_node);
  if (c.nodes * hw.gpus_per_node != spec.world_size) {
    in.hw.gpus_per_node = spec.world_size;  // a partial node: plan the ranks the job has
    c.nodes = 1;
  }
  c.zero_stage = spec.training.zero_stage;
  c.offload = spec.training.offload;
  c.checkpointing = spec.training.checkpointing;
  c.micro_batch = spec.training.micro_batch;  // pinned, not searched
  ZF_ASSIGN_OR_RETURN(const planner::Reference ref, ReferenceOf(spec, facts.reference));
  if (w.task == planner::Task::kDpo || w.task == planner::Task::kGrpo) c.reference = ref;
  c.lora_rank = spec.lora.rank;
  if (facts.safety) c.safety = *facts.safety;
  if (facts.bucket_bytes) c.bucket_bytes = *facts.bucket_bytes;
  return in;
}

absl::StatusOr<Sizing> SizeAtSpecWorld(const JobSpec& spec, const planner::Hardware& hw,
                                       const TrainerFacts& facts) {
  const TrainingSpec& t = spec.training;
  Sizing z;
  z.checkpointing = t.checkpointing.value_or(false);
  if (t.gradient_accumulation) {
    z.gradient_accumulation = static_cast<int>(*t.gradient_accumulation);
    z.note = absl::StrCat("from the spec: ", z.gradient_accumulation, " micro-batch(es) per rank per step");
    return z;
  }
  const int64_t items = t.global_batch * (spec.task == "grpo" ? spec.grpo.rollout.samples_per_prompt : 1);
  if (t.micro_batch) z.gradient_accumulation = static_cast<int>(items / (*t.micro_batch * spec.world_size));
  auto shape = planner::LoadModelShape(spec.model);
  if (!shape.ok()) {
    z.note = absl::StrCat("not sized by the planner (", shape.status().message(),
                          "): ", z.gradient_accumulation, " micro-batch(es) per rank per step");
    return z;
  }
  ZF_ASSIGN_OR_RETURN(PlannerInput in, PlannerInputOf(spec, hw, facts));
  ZF_ASSIGN_OR_RETURN(planner::Plan plan, planner::MakePlan(*shape, in.workload, in.hw, in.constraints));
  z.gradient_accumulation = static_cast<int>(plan.chosen.strategy.gradient_accumulation);
  z.checkpointing = plan.chosen.strategy.checkpointing;
  z.rollout_prompts = plan.chosen.strategy.rollout_prompts;
  z.note =
      absl::StrCat(t.micro_batch ? "micro-batch from the spec, " : "", "sized by the planner for ", hw.name,
                   ": ", planner::DescribeStrategy(plan.chosen.strategy, in.workload.task),
                   "; predicted peak ", planner::FormatBytes(plan.chosen.memory.device_bytes), " per rank");
  return z;
}

// Every field of the plan that the spec decides alone.
JobPlan PlanOf(const JobSpec& spec, const Sizing& z, planner::Reference reference) {
  const TrainingSpec& t = spec.training;
  JobPlan p;
  p.name = spec.name;
  p.task = spec.task;
  p.model = spec.model;
  p.init = spec.init;
  p.device = spec.device;
  p.world_size = spec.world_size;
  p.world_sizes = AllowedWorldSizes(spec);
  p.data = spec.data;
  p.eval = spec.eval;
  p.steps = t.steps;
  p.global_batch = t.global_batch;
  p.gradient_accumulation = z.gradient_accumulation;
  p.activation_checkpointing = z.checkpointing;
  p.sizing = z.note;
  p.schedule = LrScheduleOf(t);
  if (p.schedule.total_steps <= 0) p.schedule.total_steps = t.steps;
  p.weight_decay = t.weight_decay;
  p.max_grad_norm = t.max_grad_norm;
  p.zero_stage = t.zero_stage;
  p.offload = t.offload;
  p.delayed_update_from = t.delayed_update_from.value_or(-1);
  p.optimizer = t.optimizer;
  p.bf16 = t.bf16;
  p.max_length = t.max_length;
  p.seed = t.seed;
  p.lora = spec.lora;
  if (spec.task == "dpo") p.dpo = spec.dpo;
  if (spec.task == "reward") p.reward = spec.reward;
  if (spec.task == "sft") p.sft = spec.sft;
  p.reference = planner::ReferenceName(reference);
  p.checkpoint = spec.checkpoint;
  p.metrics = spec.metrics;
  p.export_dir = spec.export_dir;
  if (spec.task == "grpo") {
    p.grpo = spec.grpo;
    // The schedule counts optimizer updates: `iterations` per step.
    if (t.decay_steps == 0) p.schedule.total_steps = t.steps * spec.grpo.grpo.iterations;
    RolloutSpec& r = p.grpo.rollout;
    if (r.batch == 0 && z.rollout_prompts > 0) r.batch = z.rollout_prompts * r.samples_per_prompt;
  }
  return p;
}

// Why a job of `spec` keeps no reference model (the error when one is pinned): " with grpo.beta 0 ...".
std::string WhyNoReference(const JobSpec& spec) {
  if (spec.task == "grpo") return " with grpo.beta 0 keeps no reference";
  if (spec.task != "dpo") return " has no reference model";
  const std::string why = spec.dpo.reference_free ? "reference_free" : "loss_type " + spec.dpo.loss_type;
  return absl::StrCat(" with ", why, " keeps no reference");
}

}  // namespace

absl::StatusOr<planner::Reference> ReferenceOf(const JobSpec& spec,
                                               std::optional<planner::Reference> pinned) {
  using planner::Reference;
  const bool lora = spec.lora.enabled();
  const bool dpo = spec.task == "dpo", grpo = spec.task == "grpo";
  const bool free = dpo && DpoIsReferenceFree(spec.dpo);  // simpo, orpo or reference_free
  const bool keeps = (dpo && !free) || (grpo && spec.grpo.grpo.beta > 0);
  if (!keeps) {
    if (pinned && *pinned != Reference::kNone) {
      return absl::InvalidArgumentError(
          absl::StrCat("reference ", planner::ReferenceName(*pinned), ": ", spec.task, WhyNoReference(spec)));
    }
    return Reference::kNone;
  }
  const Reference ref = pinned.value_or(lora ? Reference::kLoraBase : Reference::kResident);
  if (ref == Reference::kLoraBase && !lora) {
    return absl::InvalidArgumentError(
        "reference lora-base is the policy with its LoRA adapters disabled: the job has no `lora` section");
  }
  if (ref == Reference::kNone || (grpo && ref != Reference::kResident && ref != Reference::kLoraBase)) {
    return absl::InvalidArgumentError(absl::StrCat("reference ", planner::ReferenceName(ref), ": ", spec.task,
                                                   grpo ? " keeps resident or lora-base" : " needs one"));
  }
  return ref;
}

absl::StatusOr<planner::Hardware> HardwareOf(const JobSpec& spec) {
  auto hw = planner::ParseHardware(spec.hardware);
  if (!hw.ok()) return absl::InvalidArgumentError(absl::StrCat("hardware: ", hw.status().message()));
  // Ranks that train on the CPU are the Debian LibTorch 1.13 build, whatever GPU profile sizes the job.
  if (spec.device == "cpu") hw->kernels = planner::WorkerKernels::kLibTorch1Eager;
  return hw;
}

absl::StatusOr<JobPlan> Resolve(const JobSpec& spec, const planner::Hardware& hw, const Attempt& attempt,
                                const TrainerFacts& facts) {
  ZF_ASSIGN_OR_RETURN(const Sizing z, SizeAtSpecWorld(spec, hw, facts));
  ZF_ASSIGN_OR_RETURN(const planner::Reference reference, ReferenceOf(spec, facts.reference));
  JobPlan p = PlanOf(spec, z, reference);
  const int world = attempt.world_size > 0 ? attempt.world_size : spec.world_size;
  if (world != p.world_size) return Reshape(p, hw, world);
  p.planned_peak = PlanPeak(p, hw);
  return p;
}

absl::StatusOr<JobPlan> Resolve(const JobSpec& spec, const Attempt& attempt) {
  ZF_ASSIGN_OR_RETURN(const planner::Hardware hw, HardwareOf(spec));
  return Resolve(spec, hw, attempt);
}

JobPlan Replan(const JobPlan& plan, const planner::Hardware& hw, OutOfMemory) {
  JobPlan p = plan;
  const int64_t per_rank = CeilDiv(ItemsPerStep(p), std::max(1, p.world_size));
  const int before = p.gradient_accumulation;
  p.gradient_accumulation = static_cast<int>(std::min<int64_t>(per_rank, 2 * int64_t{before}));
  p.sizing = p.gradient_accumulation > before
                 ? absl::StrCat("re-planned after out-of-memory: ", before, " -> ", p.gradient_accumulation,
                                " micro-batches per rank per step (same global batch ", p.global_batch, ")")
                 : "re-plan after out-of-memory: already one item per micro-batch; retrying as is";
  p.planned_peak = PlanPeak(p, hw);
  return p;
}

JobPlan Reshape(const JobPlan& plan, const planner::Hardware& hw, int world_size) {
  if (world_size == plan.world_size) return plan;
  JobPlan p = plan;
  p.gradient_accumulation =
      GradientAccumulationFor(ItemsPerStep(p), p.world_size, p.gradient_accumulation, world_size);
  p.world_size = world_size;
  p.planned_peak = PlanPeak(p, hw);
  return p;
}

int GradientAccumulationFor(int64_t global_batch, int from_world, int from_micro, int to_world) {
  if (to_world == from_world || to_world < 1 || from_world < 1 || from_micro < 1)
    return std::max(1, from_micro);
  const int64_t per_micro = std::max<int64_t>(1, CeilDiv(global_batch, int64_t{from_world} * from_micro));
  const int64_t per_rank = std::max<int64_t>(1, CeilDiv(global_batch, to_world));
  return static_cast<int>(std::clamp<int64_t>(CeilDiv(per_rank, per_micro), 1, per_rank));
}

}  // namespace zerofit::jobspec
