#include "worker/metrics/training_alarms.h"

#include <cmath>
#include <string>

#include "gtest/gtest.h"

namespace zerofit::worker::metrics {
namespace {

StepMetrics Step(int64_t step, double loss, double accuracy, double lr, double grad_norm = 1.0) {
  StepMetrics m;
  m.step = step;
  m.Set(metric_names::kLoss, loss);
  m.Set(metric_names::kAccuracy, accuracy);
  m.Set(metric_names::kLearningRate, lr);
  m.Set(metric_names::kGradNorm, grad_norm);
  return m;
}

TEST(TrainingAlarmsTest, ANanOrInfLossIsAnErrorNamingStepAndRank) {
  AlarmOptions o;
  o.rank = 3;
  TrainingAlarms alarms(o);
  EXPECT_TRUE(alarms.Observe(Step(0, 0.7, 0.5, 1e-3)).ok());
  auto nan = alarms.Observe(Step(17, NAN, 0.5, 1e-3));
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("step 17: the loss is NaN on rank 3"), std::string::npos)
      << nan.status();
  auto inf = TrainingAlarms(o).Observe(Step(4, INFINITY, 0.5, 1e-3));
  ASSERT_FALSE(inf.ok());
  EXPECT_NE(inf.status().message().find("step 4: the loss is Inf on rank 3"), std::string::npos);
  // A rank whose own share is finite names the others.
  StepMetrics other = Step(9, NAN, 0.5, 1e-3);
  other.Set(metric_names::kRankLoss, 0.25);
  auto elsewhere = TrainingAlarms(o).Observe(other);
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_NE(elsewhere.status().message().find(
                "step 9: the loss is NaN on another rank (rank 3's own loss is 0.25)"),
            std::string::npos)
      << elsewhere.status();
}

TEST(TrainingAlarmsTest, ARewardModelAtChanceForNStepsWarnsOnceNamingTheCauses) {
  AlarmOptions o;
  o.reward_model = true;
  o.stuck_steps = 5;
  TrainingAlarms alarms(o);
  int warnings = 0;
  std::string text;
  for (int64_t s = 0; s < 12; ++s) {
    auto w = alarms.Observe(Step(s, std::log(2.0) + 0.001, 0.51, 1e-3));
    ASSERT_TRUE(w.ok());
    for (const std::string& line : *w) {
      ++warnings;
      text = line;
      EXPECT_EQ(s, 4) << "warned at step " << s;
    }
  }
  EXPECT_EQ(warnings, 1);
  EXPECT_NE(text.find("padding"), std::string::npos) << text;
  EXPECT_NE(text.find("identical"), std::string::npos) << text;
  EXPECT_NE(text.find("learning rate of 0"), std::string::npos) << text;
  // Learning resumes, then a new stuck run warns again.
  ASSERT_TRUE(alarms.Observe(Step(12, 0.4, 0.8, 1e-3)).ok());
  for (int64_t s = 13; s < 18; ++s) {
    auto w = alarms.Observe(Step(s, std::log(2.0), 0.5, 1e-3));
    ASSERT_TRUE(w.ok());
    warnings += static_cast<int>(w->size());
  }
  EXPECT_EQ(warnings, 2);
}

TEST(TrainingAlarmsTest, ChanceIsNotAnAlarmForDpoOrWhileLearning) {
  AlarmOptions o;
  o.stuck_steps = 2;
  TrainingAlarms dpo(o);  // reward_model = false
  for (int64_t s = 0; s < 10; ++s) EXPECT_TRUE(dpo.Observe(Step(s, std::log(2.0), 0.5, 1e-3))->empty());
  o.reward_model = true;
  TrainingAlarms rm(o);
  for (int64_t s = 0; s < 10; ++s) EXPECT_TRUE(rm.Observe(Step(s, 0.5, 0.75, 1e-3))->empty());
}

TEST(TrainingAlarmsTest, ALearningRateOfZeroIsNamedFirst) {
  AlarmOptions o;
  o.reward_model = true;
  o.stuck_steps = 3;
  TrainingAlarms alarms(o);
  std::string text;
  for (int64_t s = 0; s < 3; ++s) {
    auto w = alarms.Observe(Step(s, std::log(2.0), 0.5, 0.0));  // kept: the loop reads into it
    ASSERT_TRUE(w.ok());
    for (const std::string& line : *w) text = line;
  }
  EXPECT_NE(text.find("THE LEARNING RATE IS 0"), std::string::npos) << text;
}

TEST(TrainingAlarmsTest, AGradientNormSpikeIsLoggedAndLeavesTheBaseline) {
  AlarmOptions o;
  o.spike_warmup_steps = 5;
  o.spike_factor = 10;
  TrainingAlarms alarms(o);
  for (int64_t s = 0; s < 8; ++s) EXPECT_TRUE(alarms.Observe(Step(s, 0.5, 0.7, 1e-3, 1.0))->empty());
  auto spike = alarms.Observe(Step(8, 0.5, 0.7, 1e-3, 50.0));
  ASSERT_TRUE(spike.ok());
  ASSERT_EQ(spike->size(), 1u);
  EXPECT_NE((*spike)[0].find("step 8: gradient norm 50"), std::string::npos) << (*spike)[0];
  EXPECT_TRUE(alarms.Observe(Step(9, 0.5, 0.7, 1e-3, 9.0))->empty());     // below 10x of a baseline of 1
  EXPECT_EQ(alarms.Observe(Step(10, 0.5, 0.7, 1e-3, 50.0))->size(), 1u);  // the spike did not raise it
}

// GRPO: a run of steps where every group's rewards were equal (no advantage anywhere) warns once, when it
// reaches no_signal_steps; a step with one informative group ends the run.
TEST(TrainingAlarmsTest, GrpoWithoutALearningSignalWarnsOnce) {
  AlarmOptions o;
  o.no_signal_steps = 3;
  TrainingAlarms alarms(o);
  auto grpo = [](int64_t step, double flat) {
    StepMetrics m = Step(step, 0.0, 0.0, 1e-3);
    m.Set(metric_names::kGrpoZeroStdGroups, flat);
    m.Set(metric_names::kGrpoReward, 0.0);
    return m;
  };
  std::vector<int64_t> warned;
  const double flat[] = {1, 1, 0.5, 1, 1, 1, 1, 1, 0.9, 1, 1, 1};
  for (int64_t step = 0; step < 12; ++step) {
    absl::StatusOr<std::vector<std::string>> w = alarms.Observe(grpo(step, flat[step]));
    ASSERT_TRUE(w.ok()) << w.status();
    for (const std::string& line : *w) {
      if (line.find("every group's rewards were equal") == std::string::npos) continue;
      EXPECT_NE(line.find("for 3 steps"), std::string::npos) << line;
      warned.push_back(step);
    }
  }
  EXPECT_EQ(warned, (std::vector<int64_t>{5, 11}));
  // Other tasks report no such metric: never.
  TrainingAlarms reward(o);
  for (int64_t step = 0; step < 10; ++step) EXPECT_TRUE(reward.Observe(Step(step, 0.5, 0.8, 1e-3))->empty());
}

}  // namespace
}  // namespace zerofit::worker::metrics
