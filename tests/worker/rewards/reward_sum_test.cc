// Rewards from several sources: the weighted sum per completion, each source's mean and spread, and the
// errors that name the source.
#include "worker/rewards/reward_sum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace zerofit::rewards {
namespace {

TEST(RewardSumTest, SumsWeightedSourcesAndReportsEachSourcesStatistics) {
  auto sum = SumRewards({{"answer", 1.0, {1, 0, 1, 1}}, {"rm", 0.5, {0.2, -0.4, 1.0, 0.6}}});
  ASSERT_TRUE(sum.ok()) << sum.status();
  const double want[] = {1.1, -0.2, 1.5, 1.3};
  ASSERT_EQ(sum->total.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(sum->total[i], want[i], 1e-15) << i;
  ASSERT_EQ(sum->sources.size(), 2u);
  EXPECT_EQ(sum->sources[0].name, "answer");
  EXPECT_DOUBLE_EQ(sum->sources[0].mean, 0.75);
  EXPECT_NEAR(sum->sources[0].stddev, std::sqrt(0.1875), 1e-15);  // population std of {1, 0, 1, 1}
  EXPECT_NEAR(sum->sources[1].mean, 0.35, 1e-15);
}

TEST(RewardSumTest, MismatchedOrNonFiniteInputsAreErrorsNamingTheSource) {
  EXPECT_FALSE(SumRewards({}).ok());
  auto lengths = SumRewards({{"answer", 1, {1, 0}}, {"rm", 1, {0.5}}});
  ASSERT_FALSE(lengths.ok());
  EXPECT_NE(lengths.status().message().find("'rm' scored 1 completions, 'answer' 2"), std::string::npos)
      << lengths.status();
  auto nan = SumRewards({{"rm", 1, {0.5, std::numeric_limits<double>::quiet_NaN()}}});
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("'rm' gave completion 1 a non-finite score"), std::string::npos);
  EXPECT_FALSE(SumRewards({{"rm", std::numeric_limits<double>::infinity(), {0.5}}}).ok());
}

}  // namespace
}  // namespace zerofit::rewards
