#include "planner/plan_report.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace zerofit::planner {
namespace {

std::string Thousands(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

const char* Unit(Task t) {
  switch (t) {
    case Task::kReward:
    case Task::kDpo:
      return "pairs";
    case Task::kGrpo:
      return "prompts";
    case Task::kSft:
      return "sequences";
  }
  return "items";
}

}  // namespace

std::string PlanTable(const Plan& p) {
  const Workload& w = p.workload;
  const Strategy& s = p.chosen.strategy;
  const MemoryEstimate& e = p.chosen.memory;
  std::string out =
      absl::StrFormat("zerofit plan: %s (%s, %s parameters), task %s on %d x %s = %d GPU%s\n", p.model.name,
                      p.model.source, Thousands(p.model.parameter_count), TaskName(w.task), p.nodes,
                      p.hardware.name, p.world_size, p.world_size == 1 ? "" : "s");
  if (w.task == Task::kGrpo) {
    absl::StrAppendFormat(&out, "  global batch %d prompts x %d samples, prompt %d + %d new tokens\n",
                          w.global_batch, w.samples_per_prompt, w.prompt_len, w.new_tokens);
  } else {
    absl::StrAppendFormat(&out, "  global batch %d %s, sequence length %d\n", w.global_batch, Unit(w.task),
                          w.seq_len);
  }
  if (w.eight_bit_moments) {
    absl::StrAppendFormat(
        &out, "  AdamW with 8-bit moments (adamw_8bit; fp32 ones for tensors under %d elements)\n",
        w.min_8bit_size);
  }
  absl::StrAppendFormat(&out, "\nchosen: %s\n", DescribeStrategy(s, w.task));
  absl::StrAppendFormat(&out, "  %d x %d x %d GPU%s = %d %s per step; %s trainable parameters\n",
                        s.micro_batch, s.gradient_accumulation, p.world_size, p.world_size == 1 ? "" : "s",
                        s.micro_batch * s.gradient_accumulation * p.world_size,
                        w.task == Task::kGrpo ? "sequences" : Unit(w.task),
                        Thousands(e.trainable_parameters));
  absl::StrAppendFormat(&out, "\nper GPU (cap %s = safety x %s), peak during %s:\n",
                        FormatBytes(p.device_cap), FormatBytes(p.hardware.gpu_bytes), e.peak_phase);
  absl::StrAppendFormat(&out, "  (activations as a worker of %s keeps them)\n",
                        WorkerKernelsName(p.hardware.kernels));
  for (const MemoryItem& i : e.device) {
    absl::StrAppendFormat(&out, "  %-40s %10s   %s\n", i.name, FormatBytes(i.bytes), i.detail);
  }
  absl::StrAppendFormat(&out, "  %-40s %10s   %.0f%% of the cap\n", "total", FormatBytes(e.device_bytes),
                        100 * e.device_bytes / p.device_cap);
  if (w.task == Task::kGrpo) {
    const GrpoPasses g = EstimateGrpoPasses(p.model, w, s, p.hardware, p.world_size);
    absl::StrAppendFormat(&out, "  GRPO passes: generation %s (%s), training %s (%s)\n",
                          FormatBytes(g.generation), g.generation_phase, FormatBytes(g.training),
                          g.training_phase);
  }
  absl::StrAppendFormat(&out, "\nhost per node (cap %s):\n", FormatBytes(p.host_cap));
  if (e.host.empty()) absl::StrAppend(&out, "  (nothing beyond the processes themselves)\n");
  for (const MemoryItem& i : e.host) {
    absl::StrAppendFormat(&out, "  %-40s %10s   %s\n", i.name, FormatBytes(i.bytes), i.detail);
  }
  const StepTime& t = p.chosen.time;
  const TimeUnit u = TimeUnitFor(t.total());
  const auto time = [&u](double s) { return FormatTime(s, u); };
  absl::StrAppend(&out, "\nthroughput model: ", time(t.total()), " ", u.name, "/step = compute ",
                  time(t.compute), " + recompute ", time(t.recompute), " + reference ", time(t.reference),
                  " + exposed communication ", time(t.communication), " + offload ", time(t.offload),
                  " + generation ", time(t.generation), "\n");
  absl::StrAppendFormat(&out, "\nnot chosen (%d of %d configurations fit):\n", p.candidates_fitting,
                        p.candidates_searched);
  for (const std::string& r : p.rejected) absl::StrAppend(&out, "  ", r, "\n");
  if (!p.levers.empty()) {
    absl::StrAppend(&out, "\nnot searched (they change what is trained; yours to choose):\n");
    for (const std::string& l : p.levers) absl::StrAppend(&out, "  ", l, "\n");
  }
  return out;
}

std::string PlanJson(const Plan& p) {
  using Json = nlohmann::ordered_json;
  const Strategy& s = p.chosen.strategy;
  const MemoryEstimate& e = p.chosen.memory;
  Json j;
  j["model"] = {{"name", p.model.name},
                {"source", p.model.source},
                {"parameters", p.model.parameter_count},
                {"trainable_parameters", e.trainable_parameters}};
  j["task"] = TaskName(p.workload.task);
  j["hardware"] = {{"name", p.hardware.name},
                   {"nodes", p.nodes},
                   {"gpus", p.world_size},
                   {"gpu_bytes", static_cast<int64_t>(p.hardware.gpu_bytes)},
                   {"device_cap_bytes", static_cast<int64_t>(p.device_cap)},
                   {"host_cap_bytes", static_cast<int64_t>(p.host_cap)},
                   {"worker_kernels", WorkerKernelsName(p.hardware.kernels)}};
  j["workload"] = {{"global_batch", p.workload.global_batch},
                   {"seq_len", p.workload.seq_len},
                   {"optim", p.workload.eight_bit_moments ? "adamw_8bit" : "adamw_torch"}};
  if (p.workload.eight_bit_moments) j["workload"]["min_8bit_size"] = p.workload.min_8bit_size;
  if (p.workload.task == Task::kGrpo) {
    j["workload"]["prompt_len"] = p.workload.prompt_len;
    j["workload"]["new_tokens"] = p.workload.new_tokens;
    j["workload"]["samples_per_prompt"] = p.workload.samples_per_prompt;
  }
  j["plan"] = {{"micro_batch", s.micro_batch},
               {"gradient_accumulation", s.gradient_accumulation},
               {"zero_stage", s.zero_stage},
               {"offload", s.offload},
               {"checkpointing", s.checkpointing},
               {"lora_rank", s.lora_rank},
               {"reference", ReferenceName(s.reference)},
               {"rollout_prompts", s.rollout_prompts}};
  Json dev = Json::array();
  for (const MemoryItem& i : e.device)
    dev.push_back(
        {{"name", i.name}, {"bytes", static_cast<int64_t>(std::llround(i.bytes))}, {"detail", i.detail}});
  Json host = Json::array();
  for (const MemoryItem& i : e.host)
    host.push_back(
        {{"name", i.name}, {"bytes", static_cast<int64_t>(std::llround(i.bytes))}, {"detail", i.detail}});
  j["memory"] = {{"device_bytes", static_cast<int64_t>(std::llround(e.device_bytes))},
                 {"host_bytes_per_node", static_cast<int64_t>(std::llround(e.host_bytes))},
                 {"peak_phase", e.peak_phase},
                 {"device", dev},
                 {"host", host}};
  if (p.workload.task == Task::kGrpo) {
    // Each pass's device peak (the step's is the larger): what a GPU run's per-pass peaks are checked
    // against.
    const GrpoPasses g = EstimateGrpoPasses(p.model, p.workload, s, p.hardware, p.world_size);
    j["memory"]["grpo_passes"] = {
        {"generation_bytes", static_cast<int64_t>(std::llround(g.generation))},
        {"generation_phase", g.generation_phase},
        {"training_bytes", static_cast<int64_t>(std::llround(g.training))},
        {"training_phase", g.training_phase},
        {"generation_tensor_bytes", static_cast<int64_t>(std::llround(g.generation_tensors))},
        {"training_tensor_bytes", static_cast<int64_t>(std::llround(g.training_tensors))}};
  }
  const StepTime& t = p.chosen.time;
  j["step_seconds"] = {{"total", t.total()},
                       {"compute", t.compute},
                       {"recompute", t.recompute},
                       {"reference", t.reference},
                       {"communication", t.communication},
                       {"offload", t.offload},
                       {"generation", t.generation}};
  j["candidates"] = {{"searched", p.candidates_searched}, {"fitting", p.candidates_fitting}};
  j["rejected"] = p.rejected;
  j["levers"] = p.levers;
  return j.dump(2);
}

}  // namespace zerofit::planner
