#include "core/lr_schedule.h"

#include <cmath>

#include "gtest/gtest.h"

namespace zerofit::core {
namespace {

LrScheduleOptions Options(LrDecay decay, int64_t warmup, int64_t total, float min_lr = 0.0f) {
  LrScheduleOptions o;
  o.decay = decay;
  o.peak_lr = 1e-3f;
  o.warmup_steps = warmup;
  o.total_steps = total;
  o.min_lr = min_lr;
  return o;
}

TEST(LrScheduleTest, WarmupRisesLinearlyToThePeak) {
  for (LrDecay d : {LrDecay::kConstant, LrDecay::kLinear, LrDecay::kCosine}) {
    const LrScheduleOptions o = Options(d, 10, 110);
    EXPECT_FLOAT_EQ(LearningRateAt(o, 0), 1e-4f) << LrDecayName(d);
    EXPECT_FLOAT_EQ(LearningRateAt(o, 4), 5e-4f) << LrDecayName(d);
    EXPECT_FLOAT_EQ(LearningRateAt(o, 9), 1e-3f) << LrDecayName(d);
  }
}

// Steps are 0-based (core/lr_schedule.h): the first step trains, at peak / warmup, and step s uses the rate
// of update s + 1, never the previous step's.
TEST(LrScheduleTest, TheFirstStepIsStepZeroAndTrains) {
  const LrScheduleOptions o = Options(LrDecay::kLinear, 4, 10);
  EXPECT_FLOAT_EQ(LearningRateAt(o, 0), 2.5e-4f);
  EXPECT_FLOAT_EQ(LearningRateAt(o, 3), 1e-3f);
  EXPECT_FLOAT_EQ(LearningRateAt(o, 9), 0.0f);  // the last step of a 10-step run reaches the floor
}

TEST(LrScheduleTest, ConstantKeepsThePeak) {
  const LrScheduleOptions o = Options(LrDecay::kConstant, 0, 0);
  EXPECT_FLOAT_EQ(LearningRateAt(o, 0), 1e-3f);
  EXPECT_FLOAT_EQ(LearningRateAt(o, 99999), 1e-3f);
}

TEST(LrScheduleTest, LinearDecayMatchesClosedForm) {
  const LrScheduleOptions o = Options(LrDecay::kLinear, 10, 110, 1e-4f);
  EXPECT_FLOAT_EQ(LearningRateAt(o, 59), 1e-3f - 0.5f * 9e-4f);
  EXPECT_FLOAT_EQ(LearningRateAt(o, 34), 1e-3f - 0.25f * 9e-4f);
  EXPECT_FLOAT_EQ(LearningRateAt(o, 109), 1e-4f);
  EXPECT_FLOAT_EQ(LearningRateAt(o, 499), 1e-4f);  // past the end: the floor
}

TEST(LrScheduleTest, CosineDecayMatchesClosedForm) {
  const LrScheduleOptions o = Options(LrDecay::kCosine, 0, 100, 0.0f);
  for (int64_t s = 0; s < 100; ++s) {  // 0-based steps: step s is update s + 1
    const double expected = 1e-3 * 0.5 * (1.0 + std::cos(M_PI * static_cast<double>(s + 1) / 100.0));
    EXPECT_NEAR(LearningRateAt(o, s), expected, 1e-9) << "step " << s;
  }
  EXPECT_FLOAT_EQ(LearningRateAt(o, 49), 5e-4f);
  EXPECT_FLOAT_EQ(LearningRateAt(o, 99), 0.0f);
  // Monotone after warmup.
  const LrScheduleOptions w = Options(LrDecay::kCosine, 20, 200, 1e-5f);
  for (int64_t s = 20; s < 199; ++s) EXPECT_GE(LearningRateAt(w, s), LearningRateAt(w, s + 1)) << s;
  EXPECT_FLOAT_EQ(LearningRateAt(w, 199), 1e-5f);
}

TEST(LrScheduleTest, ParsesNamesAndRejectsBadOptions) {
  EXPECT_EQ(*ParseLrDecay("cosine"), LrDecay::kCosine);
  EXPECT_EQ(*ParseLrDecay("linear"), LrDecay::kLinear);
  EXPECT_EQ(*ParseLrDecay("constant"), LrDecay::kConstant);
  const absl::Status bad = ParseLrDecay("step").status();
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("'step'"), std::string::npos) << bad;

  EXPECT_TRUE(ValidateLrSchedule(Options(LrDecay::kCosine, 10, 100)).ok());
  EXPECT_TRUE(ValidateLrSchedule(Options(LrDecay::kConstant, 10, 0)).ok());
  EXPECT_FALSE(ValidateLrSchedule(Options(LrDecay::kCosine, 100, 100)).ok());       // nothing left to decay
  EXPECT_FALSE(ValidateLrSchedule(Options(LrDecay::kLinear, 0, 100, 2e-3f)).ok());  // floor above peak
  EXPECT_FALSE(ValidateLrSchedule(Options(LrDecay::kLinear, -1, 100)).ok());
  LrScheduleOptions zero = Options(LrDecay::kConstant, 0, 0);
  zero.peak_lr = 0.0f;
  EXPECT_FALSE(ValidateLrSchedule(zero).ok());
}

}  // namespace
}  // namespace zerofit::core
