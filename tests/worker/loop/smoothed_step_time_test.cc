// The progress line's ETA (issue 29): a smoothed step time, in which the first step's warm-up does not last
// and a change of pace shows within ~20 steps; and the ETA as a person reads it.
#include "worker/loop/smoothed_step_time.h"

#include <gtest/gtest.h>

namespace zerofit::worker {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(SmoothedStepTimeTest, NothingBeforeTheFirstStepThenTheWarmUpOnlyUntilTheSecond) {
  SmoothedStepTime t(kStart);
  EXPECT_FALSE(t.Remaining(10).has_value());
  t.StepEnded(kStart + absl::Seconds(30));  // loading and warm-up
  EXPECT_EQ(*t.Remaining(10), absl::Seconds(300));
  t.StepEnded(kStart + absl::Seconds(31));  // the pace of the steps from here
  EXPECT_EQ(*t.PerStep(), absl::Seconds(1));
  EXPECT_EQ(*t.Remaining(100), absl::Seconds(100));
  EXPECT_EQ(*t.Remaining(0), absl::ZeroDuration());
}

TEST(SmoothedStepTimeTest, OneSlowStepMovesTheEtaByItsWeightAndAChangeOfPaceIsFollowed) {
  SmoothedStepTime t(kStart);
  absl::Time now = kStart;
  auto step = [&](absl::Duration d) {
    now += d;
    t.StepEnded(now);
  };
  for (int i = 0; i < 5; ++i) step(absl::Seconds(1));
  step(absl::Seconds(11));  // an evaluation: +10 s x 0.1
  EXPECT_NEAR(absl::ToDoubleSeconds(*t.PerStep()), 2.0, 1e-9);
  for (int i = 0; i < 60; ++i) step(absl::Seconds(1));
  EXPECT_NEAR(absl::ToDoubleSeconds(*t.PerStep()), 1.0, 0.01);
  // Twice as slow from here (another job on the machine): after 30 steps the ETA says so within 5%;
  // the mean since the start would still say ~1.3 s.
  for (int i = 0; i < 30; ++i) step(absl::Seconds(2));
  EXPECT_NEAR(absl::ToDoubleSeconds(*t.PerStep()), 2.0, 0.1);
}

TEST(SmoothedStepTimeTest, FormatEtaReadsLikeAClock) {
  EXPECT_EQ(FormatEta(absl::Seconds(0)), "0s");
  EXPECT_EQ(FormatEta(absl::Seconds(42.7)), "42s");
  EXPECT_EQ(FormatEta(absl::Seconds(185)), "3m05s");
  EXPECT_EQ(FormatEta(absl::Seconds(3600 * 2 + 7 * 60 + 59)), "2h07m");
  EXPECT_EQ(FormatEta(absl::Hours(76)), "3d04h");
  EXPECT_EQ(FormatEta(-absl::Seconds(3)), "0s");
}

}  // namespace
}  // namespace zerofit::worker
