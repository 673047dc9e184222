// The coordinator's plan carries `zerofit plan`'s predicted peak for the plan's own sizes (issue 28), so
// that each rank prints it next to the peak it measures.
#include "jobspec/planned_peak.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "coordinator/coordinator.h"
#include "coordinator/job_store.h"
#include "core/clock.h"
#include "jobspec/job_plan.h"
#include "jobspec/job_spec.h"
#include "jobspec/resolve.h"
#include "planner/memory_model.h"
#include "planner/model_shape.h"

namespace zerofit::coordinator {
namespace {

constexpr char kPinned[] = R"(task: reward
model: Mistral-7B
data: /d
world_size: 8
hardware: 8x64GB
training: {global_batch: 64, micro_batch: 2, gradient_accumulation: 4, max_length: 512, bf16: true,
           checkpointing: true}
)";

// The planner's estimate for micro-batch 2 x 4 on 8 ranks of 8x64GB, computed here from its parts.
planner::MemoryEstimate Expected() {
  auto shape = planner::LoadModelShape("Mistral-7B");
  EXPECT_TRUE(shape.ok()) << shape.status();
  auto hw = planner::ParseHardware("8x64GB");
  EXPECT_TRUE(hw.ok()) << hw.status();
  planner::Workload w;
  w.task = planner::Task::kReward;
  w.seq_len = 512;
  w.global_batch = 64;
  w.element_bytes = 2;
  planner::Strategy s;
  s.micro_batch = 2;
  s.gradient_accumulation = 4;
  s.checkpointing = true;
  return planner::EstimateMemory(*shape, w, s, *hw, 8);
}

TEST(PlannedPeakTest, IsThePlannersEstimateForThePlansOwnSizes) {
  auto spec = jobspec::ParseJobSpec(kPinned, "pinned.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const jobspec::PlannedPeak p = jobspec::Resolve(*spec)->planned_peak;
  const planner::MemoryEstimate want = Expected();
  EXPECT_GT(want.device_bytes, 1e9);
  EXPECT_EQ(p.device_bytes, static_cast<int64_t>(want.device_bytes));
  EXPECT_EQ(p.host_bytes, static_cast<int64_t>(want.host_bytes));
  EXPECT_NE(p.basis.find("micro-batch 2 x accumulation 4"), std::string::npos) << p.basis;
}

TEST(PlannedPeakTest, AModelThePlannerCannotReadHasNoEstimateAndSaysWhy) {
  auto spec = jobspec::ParseJobSpec(
      "task: reward\nmodel: /no/such/model\ndata: /d\n"
      "training: {global_batch: 8, micro_batch: 8, gradient_accumulation: 1}\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const jobspec::PlannedPeak p = jobspec::Resolve(*spec)->planned_peak;
  EXPECT_EQ(p.device_bytes, 0);
  EXPECT_EQ(p.basis.rfind("no estimate: ", 0), 0u) << p.basis;
}

TEST(PlannedPeakTest, TheJobsPlanCarriesIt) {
  core::RealClock clock;
  auto store = JobStore::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto c = Coordinator::Create(std::move(*store), &clock);
  ASSERT_TRUE(c.ok()) << c.status();
  auto r = (*c)->Submit("a", "", kPinned, "pinned.yaml");
  ASSERT_TRUE(r.ok()) << r.status();
  auto plan = jobspec::JobPlanFromJson(r->job.plan, "plan");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->planned_peak.device_bytes, static_cast<int64_t>(Expected().device_bytes));
  EXPECT_EQ(plan->gradient_accumulation, 4);
}

}  // namespace
}  // namespace zerofit::coordinator
