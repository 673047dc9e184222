// The one resolver (jobspec/resolve.h): a table of specs with the plan each must give (micro-batch only,
// accumulation only, both, neither; each task; world sizes; after an out-of-memory failure), the planner's
// choices checked against the planner called directly, and refusals that say why.
#include "jobspec/resolve.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "jobspec/job_spec.h"
#include "planner/model_shape.h"
#include "planner/search.h"

namespace zerofit::jobspec {
namespace {

JobSpec Spec(const std::string& yaml) {
  auto spec = ParseJobSpec(yaml, "job.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec{};
}

// A spec for the Qwen2.5-0.5B shape (a planner preset: no file needed) with `training` and `extra` lines.
std::string Yaml(const std::string& task, int world, const std::string& training,
                 const std::string& extra = "") {
  return absl::StrCat("task: ", task, "\nmodel: Qwen2.5-0.5B\ndata: /d\nworld_size: ", world,
                      "\ntraining: {steps: 10, global_batch: 64, max_length: 512", training, "}\n", extra);
}

struct Row {
  const char* what;
  std::string task;
  int world;
  std::string training;       // extra training keys, ", key: value" each
  int gradient_accumulation;  // expected; 0: the planner's (checked against planner::MakePlan)
  int checkpointing;          // expected 0/1; -1: the planner's
  const char* sizing;         // expected start of JobPlan.sizing
};

TEST(ResolveTest, EverySpecGivesThePlanOfItsRule) {
  const Row rows[] = {
      {"accumulation only", "reward", 2, ", gradient_accumulation: 4", 4, 0, "from the spec: 4"},
      {"accumulation and checkpointing", "dpo", 2, ", gradient_accumulation: 2, checkpointing: true", 2, 1,
       "from the spec: 2"},
      {"both micro-batch and accumulation", "sft", 4, ", micro_batch: 2, gradient_accumulation: 8", 8, 0,
       "from the spec: 8"},
      {"micro-batch only: accumulation = 64 / (4 x 2)", "reward", 2, ", micro_batch: 4", 8, -1,
       "micro-batch from the spec, sized by the planner"},
      {"micro-batch only, DPO, 8 ranks", "dpo", 8, ", micro_batch: 1", 8, -1,
       "micro-batch from the spec, sized by the planner"},
      {"micro-batch only, checkpointing pinned", "sft", 1, ", micro_batch: 16, checkpointing: false", 4, 0,
       "micro-batch from the spec, sized by the planner"},
      {"neither: the planner's", "reward", 1, "", 0, -1, "sized by the planner for 8x64GB"},
      {"neither, DPO", "dpo", 2, "", 0, -1, "sized by the planner for 8x64GB"},
      {"neither, SFT, 16 ranks (two nodes)", "sft", 16, "", 0, -1, "sized by the planner for 8x64GB"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.what);
    const JobSpec spec = Spec(Yaml(r.task, r.world, r.training));
    auto plan = Resolve(spec);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->world_size, r.world);
    EXPECT_EQ(plan->global_batch, 64);
    EXPECT_EQ(plan->sizing.rfind(r.sizing, 0), 0u) << plan->sizing;
    EXPECT_GT(plan->planned_peak.device_bytes, 0) << plan->planned_peak.basis;
    if (r.gradient_accumulation > 0) {
      EXPECT_EQ(plan->gradient_accumulation, r.gradient_accumulation);
    }
    if (r.checkpointing >= 0) {
      EXPECT_EQ(plan->activation_checkpointing, r.checkpointing == 1);
    }
    if (r.gradient_accumulation > 0 && r.checkpointing >= 0) continue;
    // The planner's choice, asked directly with the spec's pins.
    auto shape = planner::LoadModelShape("Qwen2.5-0.5B");
    ASSERT_TRUE(shape.ok());
    auto hw = planner::ParseHardware("8x64GB");
    ASSERT_TRUE(hw.ok());
    planner::Workload w;
    w.task = *planner::ParseTask(r.task);
    w.seq_len = 512;
    w.global_batch = 64;
    w.element_bytes = 4;  // fp32: no bf16 in the spec
    planner::Constraints c;
    c.nodes = r.world >= 8 ? r.world / 8 : 1;
    if (r.world < 8) hw->gpus_per_node = r.world;
    c.zero_stage = 2;
    c.offload = false;
    c.checkpointing = spec.training.checkpointing;
    c.micro_batch = spec.training.micro_batch;
    if (w.task == planner::Task::kDpo) c.reference = planner::Reference::kResident;
    auto direct = planner::MakePlan(*shape, w, *hw, c);
    ASSERT_TRUE(direct.ok()) << direct.status();
    EXPECT_EQ(plan->gradient_accumulation, direct->chosen.strategy.gradient_accumulation);
    EXPECT_EQ(plan->activation_checkpointing, direct->chosen.strategy.checkpointing);
    EXPECT_EQ(64 % (int64_t{r.world} * plan->gradient_accumulation), 0) << "whole micro-batches";
  }
}

TEST(ResolveTest, TheUsersMicroBatchIsNeverReplaced) {
  // 64 pairs over 2 ranks in micro-batches of 32: one micro-batch each, whatever the planner would pick.
  auto plan = Resolve(Spec(Yaml("reward", 2, ", micro_batch: 32")));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->gradient_accumulation, 1);
  // A micro-batch that cannot fit is refused with the planner's reason, not resized. (This spec once gave
  // max_length twice, and the first, 512, was the one read.)
  auto refused =
      Resolve(Spec("task: dpo\nmodel: Qwen2.5-0.5B\ndata: /d\nworld_size: 1\nhardware: 1x16GB\n"
                   "training: {steps: 10, global_batch: 64, max_length: 32768, micro_batch: 64}\n"));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("fit"), std::string::npos) << refused.status();
}

TEST(ResolveTest, AModelThePlannerCannotReadKeepsTheSpecsSizesAndSaysWhy) {
  auto plan =
      Resolve(Spec("task: reward\nmodel: /nonexistent\ndata: /d\nworld_size: 2\n"
                   "training: {global_batch: 16, micro_batch: 2}\n"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->gradient_accumulation, 4);
  EXPECT_NE(plan->sizing.find("not sized by the planner"), std::string::npos) << plan->sizing;
  EXPECT_EQ(plan->planned_peak.device_bytes, 0);
}

TEST(ResolveTest, AnAttemptAtAnotherWorldSizeKeepsThePairsPerMicroBatch) {
  const JobSpec spec = Spec(Yaml("reward", 4, ", micro_batch: 2, gradient_accumulation: 8"));
  auto full = Resolve(spec);
  auto half = Resolve(spec, Attempt{2});
  ASSERT_TRUE(full.ok() && half.ok());
  EXPECT_EQ(half->world_size, 2);
  EXPECT_EQ(half->gradient_accumulation, 16) << "2 pairs a micro-batch: 64 / (2 x 2)";
  EXPECT_EQ(JobPlanToJson(Reshape(*full, *HardwareOf(spec), 2)), JobPlanToJson(*half));
  EXPECT_EQ(JobPlanToJson(Reshape(*full, *HardwareOf(spec), 4)), JobPlanToJson(*full)) << "same world: same";
  EXPECT_GT(half->planned_peak.device_bytes, 0);
  EXPECT_NE(half->planned_peak.basis, full->planned_peak.basis) << "re-predicted for its own sizes";
}

TEST(ResolveTest, TheActivationsAreThoseOfTheBuildTheRanksRun) {
  // GPU ranks (device auto or cuda) run LibTorch 2.x's SDPA, CPU ranks Debian's LibTorch 1.13 eager
  // attention.
  EXPECT_EQ(HardwareOf(Spec(Yaml("dpo", 8, "")))->kernels, planner::WorkerKernels::kLibTorch2Sdpa);
  EXPECT_EQ(HardwareOf(Spec(Yaml("dpo", 8, "", "device: cuda\n")))->kernels,
            planner::WorkerKernels::kLibTorch2Sdpa);
  const JobSpec cpu = Spec(Yaml("dpo", 8, "", "device: cpu\n"));
  EXPECT_EQ(HardwareOf(cpu)->kernels, planner::WorkerKernels::kLibTorch1Eager);
  // The same sizes then predict more bytes: the [heads, T] probabilities at 512 tokens.
  const JobSpec gpu = Spec(Yaml("dpo", 8, ", micro_batch: 2, checkpointing: false"));
  const JobSpec cpu_sized = Spec(Yaml("dpo", 8, ", micro_batch: 2, checkpointing: false", "device: cpu\n"));
  auto on_gpu = Resolve(gpu), on_cpu = Resolve(cpu_sized);
  ASSERT_TRUE(on_gpu.ok() && on_cpu.ok()) << on_gpu.status() << on_cpu.status();
  EXPECT_GT(on_cpu->planned_peak.device_bytes, on_gpu->planned_peak.device_bytes);
  // The job's start line says which build the planned peak counts.
  EXPECT_NE(on_gpu->planned_peak.basis.find("(LibTorch 2.x, scaled-dot-product attention)"),
            std::string::npos)
      << on_gpu->planned_peak.basis;
  EXPECT_NE(on_cpu->planned_peak.basis.find("(LibTorch 1.x, eager attention)"), std::string::npos)
      << on_cpu->planned_peak.basis;
}

TEST(ResolveTest, AReplanAfterOutOfMemoryHalvesTheMicroBatchUntilOnePair) {
  const JobSpec spec = Spec(Yaml("sft", 2, ", micro_batch: 8, gradient_accumulation: 4"));
  const planner::Hardware hw = *HardwareOf(spec);
  auto plan = Resolve(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int expected[] = {8, 16, 32, 32};  // 32 pairs a rank: at most 32 micro-batches
  for (int want : expected) {
    const JobPlan next = Replan(*plan, hw, OutOfMemory{});
    EXPECT_EQ(next.gradient_accumulation, want);
    EXPECT_EQ(next.global_batch, 64);
    EXPECT_EQ(next.sizing.rfind(want > plan->gradient_accumulation
                                    ? "re-planned after out-of-memory"
                                    : "re-plan after out-of-memory: already one item",
                                0),
              0u)
        << next.sizing;
    *plan = next;
  }
}

TEST(ResolveTest, UnknownHardwareIsAnErrorNamingTheFieldAndLine) {
  auto spec = ParseJobSpec("task: reward\nmodel: /m\ndata: /d\nhardware: 8xbanana\n", "job.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("job.yaml:4"), std::string::npos) << spec.status();
  EXPECT_NE(spec.status().message().find("hardware"), std::string::npos) << spec.status();
}

TEST(ResolveTest, GradientAccumulationForKeepsThePairsPerMicroBatch) {
  EXPECT_EQ(GradientAccumulationFor(8, 4, 1, 2), 2);
  EXPECT_EQ(GradientAccumulationFor(8, 2, 2, 4), 1);
  EXPECT_EQ(GradientAccumulationFor(64, 16, 2, 8), 4);
  EXPECT_EQ(GradientAccumulationFor(8, 4, 3, 4), 3)
      << "the same world keeps an out-of-memory re-plan's count";
  EXPECT_EQ(GradientAccumulationFor(12, 4, 1, 8), 1) << "at least 1, at most a rank's pairs";
  EXPECT_EQ(GradientAccumulationFor(10, 2, 1, 1), 2) << "5 pairs per micro-batch, 10 pairs on one rank";
}

}  // namespace
}  // namespace zerofit::jobspec
