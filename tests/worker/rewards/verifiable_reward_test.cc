// Verifiable rewards: the arithmetic task's exact answer, the last-number rule and the regex rule, on the
// shapes of text a policy writes (sentences, thousands separators, signs, decimals, trailing periods, GSM8K's
// "#### 42", LaTeX's \boxed{}) and on what must not match; and the errors a job spec gets.
#include "worker/rewards/verifiable_reward.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

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

VerifiableReward Make(const VerifiableRewardOptions& options) {
  absl::StatusOr<VerifiableReward> reward = VerifiableReward::Create(options);
  EXPECT_TRUE(reward.ok()) << reward.status();
  return *std::move(reward);
}

VerifiableReward MakeRegex(const std::string& pattern, const std::string& group = "") {
  VerifiableRewardOptions o;
  o.rule = AnswerRule::kRegex;
  o.pattern = pattern;
  o.group = group;
  return Make(o);
}

TEST(VerifiableRewardTest, ExactMatchesTheTrimmedCompletionOnly) {
  const VerifiableReward r = Make({});  // exact, 1 / 0
  EXPECT_EQ(r.Score("19", "19"), 1.0);
  EXPECT_EQ(r.Score(" 19\n", "19"), 1.0);
  EXPECT_EQ(r.Score("019", "19"), 0.0) << "exact is exact: the padded task pads its answers";
  EXPECT_EQ(r.Score("19 ", "019"), 0.0);
  EXPECT_EQ(r.Score("the answer is 19", "19"), 0.0);
}

TEST(VerifiableRewardTest, LastNumberComparesNumbersWithChosenScores) {
  VerifiableRewardOptions o;
  o.rule = AnswerRule::kLastNumber;
  o.correct = 2.0;
  o.wrong = -0.5;
  const VerifiableReward r = Make(o);
  EXPECT_EQ(r.Score("First 3, then 4; so 1,234.0", "1234"), 2.0);
  EXPECT_EQ(r.Score("1234 then 12", "1234"), -0.5) << "the LAST number counts";
  EXPECT_EQ(r.Score("no number", "12"), -0.5);
  EXPECT_EQ(r.Score("12", "twelve"), -0.5) << "an answer that is no number never matches";
}

// GSM8K's reference solutions end in "#### <answer>"; a policy trained on them writes the same.
TEST(VerifiableRewardTest, RegexGsm8kAnswerLine) {
  const VerifiableReward r = MakeRegex(R"(####\s*(-?[0-9,]+))");
  EXPECT_EQ(r.Score("3 + 4 = 7 apples.\n#### 7", "7"), 1.0);
  EXPECT_EQ(r.Score("####42\n", " 42 "), 1.0) << "both sides trimmed";
  EXPECT_EQ(r.Score("#### -1,234", "-1,234"), 1.0) << "the group's text is compared, not a number";
  EXPECT_EQ(r.Score("#### 1234", "1,234"), 0.0);
  EXPECT_EQ(r.Score("#### 7 or maybe\n#### 8", "7"), 0.0) << "the LAST match counts";
  EXPECT_EQ(r.Score("#### 7 or maybe\n#### 8", "8"), 1.0);
  EXPECT_EQ(r.Score("#### 8\nno, 7", "7"), 0.0) << "text after the last match does not count";
  EXPECT_EQ(r.Score("the answer is 7", "7"), 0.0) << "no match is wrong";
  EXPECT_EQ(r.Score("", "7"), 0.0);
  EXPECT_EQ(r.Score("#### 7", "#### 7"), 0.0) << "the group (1) is compared, not the whole match";
}

TEST(VerifiableRewardTest, RegexBoxedAnswer) {
  const VerifiableReward r = MakeRegex(R"(\\boxed\{([^}]*)\})");
  EXPECT_EQ(r.Score(R"(so $x = \boxed{ \frac{1}{2} }$)", R"(\frac{1)"), 1.0) << "[^}]* stops at the first }";
  EXPECT_EQ(r.Score(R"(first \boxed{3}, corrected: \boxed{4}.)", "4"), 1.0);
  EXPECT_EQ(r.Score(R"(first \boxed{3}, corrected: \boxed{4}.)", "3"), 0.0);
  EXPECT_EQ(r.Score(R"(\boxed{})", ""), 1.0) << "an empty group took part: it equals an empty answer";
  EXPECT_EQ(r.Score(R"(\boxed{4)", "4"), 0.0) << "unclosed: no match";
  EXPECT_EQ(r.Score(R"(boxed{4})", "4"), 0.0) << "the backslash is part of the pattern";
}

// The group is chosen by number (0: the whole match) or by name; the last match's group is read even where
// an earlier match had it and the last one does not.
TEST(VerifiableRewardTest, RegexGroupByNumberOrName) {
  const std::string pattern = R"(answer (?:is (?<num>\d+)|was (?<word>[a-z]+)))";
  const std::string text = "answer is 12, or the answer was twelve";
  EXPECT_EQ(MakeRegex(pattern, "2").Score(text, "twelve"), 1.0);
  EXPECT_EQ(MakeRegex(pattern, "word").Score(text, "twelve"), 1.0);
  EXPECT_EQ(MakeRegex(pattern, "0").Score(text, "answer was twelve"), 1.0);
  EXPECT_EQ(MakeRegex(pattern, "").Score(text, "12"), 0.0)
      << "group 1 took no part in the last match: wrong, the earlier match is not consulted";
  EXPECT_EQ(MakeRegex(pattern, "num").Score(text, "12"), 0.0);
  EXPECT_EQ(MakeRegex(pattern, "num").Score("answer was x; answer is 12", "12"), 1.0);
  EXPECT_EQ(MakeRegex(pattern, "1").Score("answer was x; answer is 12", "12"), 1.0);
  EXPECT_EQ(MakeRegex(pattern, "2").Score("answer was x; answer is 12", "x"), 0.0);
}

// Optional groups: "(?:...)?" makes a match whose group took no part; such a last match is wrong.
TEST(VerifiableRewardTest, RegexOptionalGroupThatTookNoPartIsWrong) {
  const VerifiableReward r = MakeRegex(R"(Answer:(?: (\d+))?)");
  EXPECT_EQ(r.Score("Answer: 5", "5"), 1.0);
  EXPECT_EQ(r.Score("Answer: 5. Answer: unsure", "5"), 0.0);
  EXPECT_EQ(r.Score("Answer: unsure", ""), 0.0) << "a group that took no part is not an empty string";
}

TEST(VerifiableRewardTest, RegexOnUtf8Completions) {
  const VerifiableReward r = MakeRegex(R"(答案\s*[:：]\s*(\S+?)。)");
  EXPECT_EQ(r.Score("先算 3+4。答案：七。", "七"), 1.0);
  EXPECT_EQ(r.Score("答案：六。不对，答案:\u3000七。", "七"), 1.0) << "U+3000 is white space, last match";
  EXPECT_EQ(r.Score("答案：六。不对，答案:\u3000七。", "六"), 0.0);
  // Not valid UTF-8 (a code point cut off): read as its lossy decoding, the match before it still counts.
  EXPECT_EQ(r.Score("答案：七。\xE4\xB8", "七"), 1.0);
  EXPECT_EQ(MakeRegex(R"(=\s*(\S+)$)").Score("x = \xE4\xB8", "\xEF\xBF\xBD"), 1.0) << "U+FFFD";
}

// Scores are read by the rollout, which must not stop for one completion: a match that PCRE2 gives up on
// (catastrophic backtracking) is wrong.
TEST(VerifiableRewardTest, RegexThatGivesUpIsWrong) {
  const VerifiableReward r = MakeRegex(R"(^(a+)+$)");
  EXPECT_EQ(r.Score("aaaa", "aaaa"), 1.0);
  EXPECT_EQ(r.Score(std::string(40, 'a') + "b", "a"), 0.0);
}

TEST(VerifiableRewardTest, CopiesShareTheCompiledPattern) {
  std::vector<VerifiableReward> rewards(3, MakeRegex(R"(=\s*(\d+))"));
  for (const VerifiableReward& r : rewards) EXPECT_EQ(r.Score("1+1 = 2", "2"), 1.0);
  EXPECT_EQ(rewards[2].options().pattern, R"(=\s*(\d+))");
}

TEST(VerifiableRewardTest, ParseErrorsNameTheField) {
  const VerifiableRewardFields fields{"rewards[0].rule", "rewards[0].pattern", "rewards[0].group"};
  auto error = [&](const std::string& rule, const std::string& pattern, const std::string& group) {
    absl::StatusOr<VerifiableReward> r = ParseVerifiableReward(rule, pattern, group, 1.0, 0.0, fields);
    EXPECT_FALSE(r.ok());
    EXPECT_TRUE(r.ok() || r.status().code() == absl::StatusCode::kInvalidArgument) << r.status();
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  EXPECT_EQ(error("regex", R"(####\s*(-?[0-9,]+)", ""),
            R"(rewards[0].pattern: regex "####\s*(-?[0-9,]+": missing closing parenthesis at offset 17)");
  EXPECT_EQ(error("regex", "x[", ""),
            R"(rewards[0].pattern: regex "x[": missing terminating ] for character class at offset 2)");
  EXPECT_EQ(error("regex", "", ""), "rewards[0].pattern: the regex rule needs a pattern");
  EXPECT_EQ(error("regex", std::string(5000, 'a'), ""),
            "rewards[0].pattern: the pattern has 5000 bytes, more than 4096");
  EXPECT_EQ(
      error("regex", "#### [0-9]+", ""),
      "rewards[0].group: group 1 does not exist, the pattern has 0 capture group(s) (0 is the whole match)");
  EXPECT_EQ(
      error("regex", "(a)(b)", "3"),
      "rewards[0].group: group 3 does not exist, the pattern has 2 capture group(s) (0 is the whole match)");
  EXPECT_EQ(
      error("regex", "(a)(b)", "99999999999"),
      "rewards[0].group: group 99999999999 does not exist, the pattern has 2 capture group(s) (0 is the "
      "whole match)");
  EXPECT_EQ(error("regex", "(?<x>a)", "y"), R"-(rewards[0].group: regex "(?<x>a)" has no group named 'y')-");
  EXPECT_EQ(error("regex", "(?<x>a)", "-1"),
            R"-(rewards[0].group: regex "(?<x>a)" has no group named '-1')-");
  EXPECT_EQ(error("exact", "(a)", ""),
            "rewards[0].pattern: only the regex rule takes a pattern (rewards[0].rule is exact)");
  EXPECT_EQ(error("last_number", "", "1"),
            "rewards[0].group: only the regex rule takes a group (rewards[0].rule is last_number)");
  EXPECT_EQ(error("regexp", "(a)", ""),
            "rewards[0].rule: expected exact, last_number or regex, got 'regexp'");

  absl::StatusOr<VerifiableReward> ok = ParseVerifiableReward("regex", "(?<n>\\d+)", "n", 2.0, -1.0, fields);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->Score("7 then 8", "8"), 2.0);
  EXPECT_EQ(ok->Score("7 then 8", "7"), -1.0);
  ok = ParseVerifiableReward("last_number", "", "", 1.0, 0.0, fields);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->Score("so 1,234.", "1234"), 1.0);
}

TEST(VerifiableRewardTest, RuleNamesRoundTripAndUnknownOnesNameTheField) {
  for (const char* name : {"exact", "last_number", "regex"}) {
    auto rule = ParseAnswerRule(name, "rewards[0].rule");
    ASSERT_TRUE(rule.ok());
    EXPECT_STREQ(AnswerRuleName(*rule), name);
  }
  auto bad = ParseAnswerRule("fuzzy", "rewards[0].rule");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rewards[0].rule: expected exact, last_number or regex, got 'fuzzy'"),
            std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace zerofit::rewards
