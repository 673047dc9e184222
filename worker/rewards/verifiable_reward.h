// Verifiable rewards for GRPO (issue 32): a completion's text checked against the data's `answer` field.
//   exact:        the completion, trimmed of surrounding white space, equals the answer (the arithmetic
//                 task's "12+7=" -> "19")
//   last_number:  the last number in the completion equals the answer's number (GSM8K-style "... so the
//                 answer is 1,234."): signs, thousands separators and trailing zeros after a decimal point
//                 do not matter ("1,234.50" == "1234.5"); an answer that is no number never matches
//   regex:        the LAST match of `pattern` in the completion (successive non-overlapping matches, left
//                 to right; text::Regex::FindLast), its capture group `group` (a number, 0 = the whole
//                 match, or a name from "(?<name>...)"; default 1) equals the answer, both trimmed of
//                 surrounding ASCII white space. No match, or a group that took no part in the last match,
//                 is wrong (an earlier match is not consulted). GSM8K: `####\s*(-?[0-9,]+)`; LaTeX:
//                 `\\boxed\{([^}]*)\}`. The pattern is PCRE2 in UTF mode with Oniguruma's \s (see
//                 text/regex.h).
// A match scores `correct`, anything else `wrong`. Pure text, no LibTorch: the rollout scores completions
// after decoding them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace zerofit::text {
class Regex;
}  // namespace zerofit::text

namespace zerofit::rewards {

enum class AnswerRule { kExact, kLastNumber, kRegex };

// "exact" | "last_number" | "regex"; the error names `field`.
absl::StatusOr<AnswerRule> ParseAnswerRule(const std::string& name, const std::string& field);
const char* AnswerRuleName(AnswerRule rule);

struct VerifiableRewardOptions {
  AnswerRule rule = AnswerRule::kExact;
  // kRegex only (both must be empty for the other rules): the pattern (required) and the group, a number
  // ("0" the whole match) or a name; empty means 1.
  std::string pattern;
  std::string group;
  double correct = 1.0;
  double wrong = 0.0;
};

// The names under which the caller (the job spec) read each setting, used in error messages only, e.g.
// {"rewards[0].rule", "rewards[0].pattern", "rewards[0].group"}.
struct VerifiableRewardFields {
  std::string rule = "rule";
  std::string pattern = "pattern";
  std::string group = "group";
};

// A verifiable reward ready to score: the options with the regex compiled once. Copies share the compiled
// pattern, which is immutable, so one VerifiableReward may score from many threads.
class VerifiableReward {
 public:
  // InvalidArgument naming the field: a pattern that does not compile (PCRE2's message and offset), a
  // regex rule without a pattern or a pattern/group given to another rule, a group the pattern lacks.
  static absl::StatusOr<VerifiableReward> Create(const VerifiableRewardOptions& options,
                                                 const VerifiableRewardFields& fields = {});

  // The score of `completion` for a problem whose answer is `answer`. Never fails: for the regex rule a
  // completion that is not valid UTF-8 is read as its lossy decoding (each invalid part U+FFFD, what the
  // tokenizer's decoder produces), and a match PCRE2 gives up on (its match limit, a pattern that
  // backtracks catastrophically on this completion) scores `wrong`.
  double Score(std::string_view completion, std::string_view answer) const;

  const VerifiableRewardOptions& options() const { return options_; }

 private:
  VerifiableReward(VerifiableRewardOptions options, std::shared_ptr<const text::Regex> regex, int group)
      : options_(std::move(options)), regex_(std::move(regex)), group_(group) {}

  bool RegexMatches(std::string_view completion, std::string_view answer) const;

  VerifiableRewardOptions options_;
  std::shared_ptr<const text::Regex> regex_;  // kRegex only
  int group_ = 0;                             // kRegex only: options_.group resolved to a number
};

// The job spec's entry point: the rule by name, pattern and group as written (empty when not given), the
// scores, and the names of the fields they came from for errors.
absl::StatusOr<VerifiableReward> ParseVerifiableReward(const std::string& rule, const std::string& pattern,
                                                       const std::string& group, double correct, double wrong,
                                                       const VerifiableRewardFields& fields);

// The canonical form of the last number in `text` ("-1234.5" for "costs -1,234.50 dollars"): an optional
// minus sign, digits with optional ',' thousands groups, an optional '.' and fraction; leading zeros of the
// integer part and trailing zeros of the fraction dropped. nullopt when `text` holds no digit.
std::optional<std::string> LastNumber(std::string_view text);

}  // namespace zerofit::rewards
