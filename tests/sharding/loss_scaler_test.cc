#include "sharding/loss_scaler.h"

#include <gtest/gtest.h>

namespace zerofit::sharding {
namespace {

TEST(LossScalerTest, BacksOffOnOverflowAndGrowsAfterInterval) {
  LossScalerOptions o;
  o.enabled = true;
  o.initial_scale = 1024;
  o.growth_interval = 3;
  DynamicLossScaler s(o);
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_FALSE(s.Update(true));
  EXPECT_EQ(s.scale(), 512);
  EXPECT_TRUE(s.Update(false));
  EXPECT_TRUE(s.Update(false));
  EXPECT_EQ(s.scale(), 512);
  EXPECT_TRUE(s.Update(false));
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.skipped_steps(), 1);
}

TEST(LossScalerTest, NeverBelowMinimumAndOneWhenDisabled) {
  LossScalerOptions o;
  o.enabled = true;
  o.initial_scale = 2;
  o.min_scale = 1;
  DynamicLossScaler s(o);
  s.Update(true);
  s.Update(true);
  EXPECT_EQ(s.scale(), 1);
  DynamicLossScaler off(LossScalerOptions{});
  EXPECT_EQ(off.scale(), 1);
  EXPECT_FALSE(off.Update(true));  // overflow still skips
  EXPECT_EQ(off.scale(), 1);
}

}  // namespace
}  // namespace zerofit::sharding
