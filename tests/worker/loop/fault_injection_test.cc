// Test-only fault injection (worker/loop/fault_plan.h, faulty_session.h) and the communicator decorator it
// hooks into (comm/hooked_communicator.h): the ZEROFIT_FAULTS parser with bad input, faults firing at exactly
// their rank, step and attempt, a planned all-gather hang that only Abort() ends, and a rank's activity.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/hooked_communicator.h"
#include "comm/local/local_communicator.h"
#include "worker/loop/fault_plan.h"
#include "worker/loop/faulty_session.h"
#include "worker/loop/rank_activity.h"

namespace zerofit::worker {
namespace {

TEST(FaultPlanTest, ParsesEveryFaultWithDefaults) {
  auto plan = FaultPlan::Parse(
      "rank=1,step=40,fault=hang_allgather; rank=0, step=7, fault=slow, seconds=0.25 ;"
      "rank=2,step=3,fault=exit,code=9,attempt=2;rank=0,step=1,fault=corrupt_report");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->faults().size(), 4u);
  EXPECT_EQ(plan->Describe(),
            "rank 1, step 40, attempt 1: hang_allgather; rank 0, step 7, attempt 1: slow by 0.25s per step; "
            "rank 2, step 3, attempt 2: exit with code 9; rank 0, step 1, attempt 1: corrupt_report");
  EXPECT_EQ(plan->faults()[2].code, 9);
  EXPECT_NE(plan->Find(FaultKind::kHangAllGather, 1, 1, 40), nullptr);
  EXPECT_EQ(plan->Find(FaultKind::kHangAllGather, 1, 1, 41), nullptr) << "one step only";
  EXPECT_EQ(plan->Find(FaultKind::kHangAllGather, 0, 1, 40), nullptr) << "one rank only";
  EXPECT_EQ(plan->Find(FaultKind::kHangAllGather, 1, 2, 40), nullptr)
      << "attempt 1 only: the restart is clean";
  EXPECT_EQ(plan->Find(FaultKind::kSlow, 0, 1, 6), nullptr);
  EXPECT_NE(plan->Find(FaultKind::kSlow, 0, 1, 7), nullptr);
  EXPECT_NE(plan->Find(FaultKind::kSlow, 0, 1, 500), nullptr) << "slow from its step on";
  EXPECT_EQ(plan->Find(FaultKind::kExit, 2, 1, 3), nullptr);
  EXPECT_NE(plan->Find(FaultKind::kExit, 2, 2, 3), nullptr);
  auto empty = FaultPlan::Parse("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->faults().empty());
  EXPECT_EQ(empty->Describe(), "no faults");
}

TEST(FaultPlanTest, BadInputIsRefusedNamingTheFaultAndTheKey) {
  const std::pair<std::string, std::string> cases[] = {
      {"rank=1,step=4", "ZEROFIT_FAULTS: fault 1 ('rank=1,step=4'): key 'fault': required"},
      {"rank=1,step=4,fault=boom",
       "fault 1 ('rank=1,step=4,fault=boom'): key 'fault': expected hang_allgather, exit, slow, "
       "corrupt_report or linger, got 'boom'"},
      {"rank=1,step=4,fault=exit;rank=x,step=1,fault=exit",
       "fault 2 ('rank=x,step=1,fault=exit'): key 'rank': expected an integer in [0, 65535], got 'x'"},
      {"rank=-1,step=4,fault=exit", "key 'rank': expected an integer in [0, 65535], got '-1'"},
      {"rank=1,step=4,fault=exit,code=0", "key 'code': expected an integer in [1, 255], got '0'"},
      {"rank=1,step=4,fault=exit,attempt=0", "key 'attempt': expected an integer in [1, 1000], got '0'"},
      {"rank=1,step=4,fault=slow,seconds=nan", "key 'seconds': expected a number of seconds in (0, 3600]"},
      {"rank=1,step=4,fault=slow,seconds=-1", "key 'seconds': expected a number of seconds in (0, 3600]"},
      {"rank=1,step=4,fault=slow,code=3", "key 'code': only with fault=exit"},
      {"rank=1,step=4,fault=exit,seconds=1", "key 'seconds': only with fault=slow or fault=linger"},
      {"rank=1,rank=2,step=4,fault=exit", "key 'rank': given twice"},
      {"rank=1,step=4=5,fault=exit", "key 'step': expected an integer in [0, 4294967296], got '4=5'"},
      {"rank=1,step=4,fault=exit,colour=red", "key 'colour': unknown key"},
      {"rank=1,,step=4,fault=exit", "expected key=value, got ''"},
      {std::string(5000, 'x'), "ZEROFIT_FAULTS: 5000 bytes, more than the 4096 accepted"},
  };
  for (const auto& [text, want] : cases) {
    auto plan = FaultPlan::Parse(text);
    ASSERT_FALSE(plan.ok()) << text;
    EXPECT_NE(plan.status().message().find(want), std::string::npos) << plan.status() << "\nwanted " << want;
  }
  std::string many;
  for (int i = 0; i < 65; ++i) many += "rank=0,step=1,fault=exit;";
  EXPECT_NE(FaultPlan::Parse(many).status().message().find("more than 64 faults"), std::string::npos);
}

TEST(HookedCommunicatorTest, APlannedAllGatherHangsUntilAbortAndActivityNamesIt) {
  auto plan = FaultPlan::Parse("rank=0,step=5,fault=hang_allgather");
  ASSERT_TRUE(plan.ok());
  RankActivity activity;
  activity.SetAttempt(1);
  comm::LocalCommunicator local;
  comm::HookedCommunicator hooked(&local, [&](comm::HookedCommunicator& self, const char* op) {
    return FaultHook(*plan, 0, activity, self, op);
  });
  float in[2] = {1, 2}, out[2] = {0, 0};
  const comm::Buffer bin{in, 2}, bout{out, 2};
  activity.EnterStep(4);
  ASSERT_TRUE(comm::WaitFor(hooked.AllGather(bin, bout), absl::Seconds(1)).ok()) << "step 4 runs";
  EXPECT_EQ(out[1], 2);
  activity.EnterStep(5);
  ASSERT_TRUE(hooked.AllReduce(bout, comm::ReduceOp::kSum).ok()) << "only the all-gather hangs";
  auto hung = std::async(std::launch::async, [&] { return hooked.AllGather(bin, bout).status(); });
  EXPECT_EQ(hung.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout) << "it hangs";
  const std::string doing = activity.Describe();
  EXPECT_NE(doing.find("attempt 1, step 5: compute for "), std::string::npos) << doing;
  EXPECT_NE(doing.find("; last collective all_gather #1 of the step, issued "), std::string::npos) << doing;
  hooked.Abort();
  ASSERT_EQ(hung.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "Abort() ends the hang";
  EXPECT_EQ(hung.get().code(), absl::StatusCode::kAborted);
  EXPECT_FALSE(hooked.AllReduce(bout, comm::ReduceOp::kSum).ok())
      << "the wrapped communicator was aborted too";
  EXPECT_EQ(hooked.WaitForAbort(absl::ZeroDuration()).code(), absl::StatusCode::kAborted);
}

// A session whose steps report one metric; counts the steps.
class CountingSession final : public TrainingSession {
 public:
  std::vector<int64_t> TrainLengths() const override { return {}; }
  std::string DataReportText() const override { return ""; }
  absl::StatusOr<metrics::StepMetrics> Step(int64_t step, const MicroBatches&) override {
    ++steps;
    metrics::StepMetrics m;
    m.step = step;
    m.Set("loss", 0.5);
    return m;
  }
  absl::StatusOr<std::vector<metrics::NamedValue>> Evaluate() override {
    return std::vector<metrics::NamedValue>{};
  }
  absl::Status SaveCheckpoint(const std::string&, const std::string&, int) override {
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> LoadCheckpoint(const std::string&) override { return 0; }
  absl::Status Export(const std::string&) override { return absl::OkStatus(); }
  int steps = 0;
};

TEST(FaultySessionTest, ExitSlowAndCorruptReportFireAtTheirStepInTheirAttempt) {
  auto plan = FaultPlan::Parse(
      "rank=1,step=3,fault=exit,code=7;rank=1,step=2,fault=slow,seconds=0.2;rank=1,step=1,fault=corrupt_"
      "report");
  ASSERT_TRUE(plan.ok());
  RankActivity activity;
  activity.SetAttempt(1);
  std::vector<int> exits;
  auto inner = std::make_unique<CountingSession>();
  CountingSession* counted = inner.get();
  FaultySession session(std::move(inner), &*plan, 1, &activity, [&](int code) { exits.push_back(code); });
  auto s0 = session.Step(0, {});
  ASSERT_TRUE(s0.ok());
  EXPECT_FALSE(s0->Get(kCorruptMetricName).has_value());
  auto s1 = session.Step(1, {});
  ASSERT_TRUE(s1.ok());
  EXPECT_TRUE(s1->Get(kCorruptMetricName).has_value()) << "step 1's report is corrupt";
  const absl::Time t0 = absl::Now();
  ASSERT_TRUE(session.Step(2, {}).ok());
  EXPECT_GE(absl::Now() - t0, absl::Milliseconds(200)) << "step 2 is slow";
  EXPECT_TRUE(exits.empty());
  ASSERT_TRUE(session.Step(3, {}).ok());  // the test's exit returns; zerofit_worker_faults' does not
  EXPECT_EQ(exits, std::vector<int>{7});
  EXPECT_EQ(counted->steps, 4);
  // Attempt 2 runs clean.
  activity.SetAttempt(2);
  const absl::Time t1 = absl::Now();
  ASSERT_TRUE(session.Step(3, {}).ok());
  EXPECT_LT(absl::Now() - t1, absl::Milliseconds(150));
  EXPECT_EQ(exits.size(), 1u);
}

// linger: the step's work is done (the inner step ran) before the wait, at that step only.
TEST(FaultySessionTest, LingerWaitsAfterItsStepOnly) {
  auto plan = FaultPlan::Parse("rank=1,step=2,fault=linger,seconds=0.2");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->Describe(), "rank 1, step 2, attempt 1: linger for 0.2s after the step");
  RankActivity activity;
  activity.SetAttempt(1);
  auto inner = std::make_unique<CountingSession>();
  CountingSession* counted = inner.get();
  FaultySession session(std::move(inner), &*plan, 1, &activity, [](int) {});
  for (int64_t step : {1, 3}) {
    const absl::Time t = absl::Now();
    ASSERT_TRUE(session.Step(step, {}).ok());
    EXPECT_LT(absl::Now() - t, absl::Milliseconds(150)) << "step " << step;
  }
  const absl::Time t = absl::Now();
  ASSERT_TRUE(session.Step(2, {}).ok());
  EXPECT_GE(absl::Now() - t, absl::Milliseconds(200)) << "step 2 lingers";
  EXPECT_EQ(counted->steps, 3);
}

}  // namespace
}  // namespace zerofit::worker
