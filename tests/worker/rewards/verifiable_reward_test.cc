// Verifiable rewards: the arithmetic task's exact answer and the last-number rule, on the shapes of text a
// policy writes (sentences, thousands separators, signs, decimals, trailing periods) and on what must not
// match.
#include "worker/rewards/verifiable_reward.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace zerofit::rewards {
namespace {

TEST(VerifiableRewardTest, LastNumberReadsTheLastNumberInItsCanonicalForm) {
  const struct {
    const char* text;
    std::optional<std::string> want;
  } cases[] = {
      {"12+7=19", "19"},
      {"so the answer is 1,234.", "1234"},
      {"it costs -1,234.50 dollars", "-1234.5"},
      {"3 apples and 4 pears: 7", "7"},
      {"12-7=5", "5"},
      {"x-1", "1"},  // a hyphen between a word and a digit is no sign
      {"(-3)", "-3"},
      {"007", "7"},
      {"0.500", "0.5"},
      {"-0", "0"},
      {"1,2345", "2345"},   // not a thousands group: two numbers
      {"version 2.", "2"},  // a sentence's period is no decimal point
      {"no digits here", std::nullopt},
      {"", std::nullopt},
  };
  for (const auto& c : cases) EXPECT_EQ(LastNumber(c.text), c.want) << "'" << c.text << "'";
}

TEST(VerifiableRewardTest, ExactMatchesTheTrimmedCompletionOnly) {
  const VerifiableRewardOptions o;  // exact, 1 / 0
  EXPECT_EQ(VerifiableReward("19", "19", o), 1.0);
  EXPECT_EQ(VerifiableReward(" 19\n", "19", o), 1.0);
  EXPECT_EQ(VerifiableReward("019", "19", o), 0.0) << "exact is exact: the padded task pads its answers";
  EXPECT_EQ(VerifiableReward("19 ", "019", o), 0.0);
  EXPECT_EQ(VerifiableReward("the answer is 19", "19", o), 0.0);
}

TEST(VerifiableRewardTest, LastNumberComparesNumbersWithChosenScores) {
  VerifiableRewardOptions o;
  o.rule = AnswerRule::kLastNumber;
  o.correct = 2.0;
  o.wrong = -0.5;
  EXPECT_EQ(VerifiableReward("First 3, then 4; so 1,234.0", "1234", o), 2.0);
  EXPECT_EQ(VerifiableReward("1234 then 12", "1234", o), -0.5) << "the LAST number counts";
  EXPECT_EQ(VerifiableReward("no number", "12", o), -0.5);
  EXPECT_EQ(VerifiableReward("12", "twelve", o), -0.5) << "an answer that is no number never matches";
}

TEST(VerifiableRewardTest, RuleNamesRoundTripAndUnknownOnesNameTheField) {
  for (const char* name : {"exact", "last_number"}) {
    auto rule = ParseAnswerRule(name, "rewards[0].rule");
    ASSERT_TRUE(rule.ok());
    EXPECT_STREQ(AnswerRuleName(*rule), name);
  }
  auto bad = ParseAnswerRule("fuzzy", "rewards[0].rule");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rewards[0].rule: expected exact or last_number, got 'fuzzy'"),
            std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace zerofit::rewards
