// The format reward (worker/rewards/format_reward.h): the whole completion matches the pattern, as
// open-r1's format_reward (re.match of ^...$ with re.DOTALL) and TRL's documented example score it.
#include "worker/rewards/format_reward.h"

#include <gtest/gtest.h>

#include <string>

namespace zerofit::rewards {
namespace {

TEST(FormatRewardTest, TheWholeCompletionMustMatch) {
  FormatRewardOptions o;
  o.pattern = R"((?s)<think>.*?</think>\s*<answer>.*?</answer>)";
  o.correct = 1.0;
  o.wrong = -0.5;
  absl::StatusOr<FormatReward> r = FormatReward::Create(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->Score("<think>2+2 is 4\nsure</think>\n<answer>4</answer>"), 1.0);
  EXPECT_EQ(r->Score("<answer>4</answer>"), -0.5);                              // no thinking block
  EXPECT_EQ(r->Score("<think>x</think><answer>4</answer> and more"), -0.5);     // text after it
  EXPECT_EQ(r->Score("The answer: <think>x</think><answer>4</answer>"), -0.5);  // text before it
  EXPECT_EQ(r->Score("<think>\xFF</think><answer>4</answer>"), 1.0) << "invalid UTF-8 read lossily";
}

TEST(FormatRewardTest, AMatchPcreGivesUpOnScoresWrong) {
  FormatRewardOptions o;
  o.pattern = "(a+)+$";  // catastrophic backtracking on a long run of a's that cannot end the match
  absl::StatusOr<FormatReward> r = FormatReward::Create(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->Score(std::string(40, 'a') + "b"), 0.0);
  EXPECT_EQ(r->Score("aaa"), 1.0);
}

TEST(FormatRewardTest, BadPatternsAreNamed) {
  FormatRewardOptions o;
  EXPECT_EQ(FormatReward::Create(o, "rewards[1].pattern").status().message(), "rewards[1].pattern: required");
  o.pattern = "(unclosed";
  const absl::Status s = FormatReward::Create(o, "rewards[1].pattern").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("rewards[1].pattern: ", 0), 0u) << s;
}

}  // namespace
}  // namespace zerofit::rewards
