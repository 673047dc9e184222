// Verifiable rewards for GRPO (issue 32): a completion's text checked against the data's `answer` field.
//   exact:        the completion, trimmed of surrounding white space, equals the answer (the arithmetic
//                 task's "12+7=" -> "19")
//   last_number:  the last number in the completion equals the answer's number (GSM8K-style "... so the
//                 answer is 1,234."): signs, thousands separators and trailing zeros after a decimal point
//                 do not matter ("1,234.50" == "1234.5"); an answer that is no number never matches
// A match scores `correct`, anything else `wrong`. Pure text, no LibTorch: the rollout scores completions
// after decoding them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace zerofit::rewards {

enum class AnswerRule { kExact, kLastNumber };

// "exact" | "last_number"; the error names `field`.
absl::StatusOr<AnswerRule> ParseAnswerRule(const std::string& name, const std::string& field);
const char* AnswerRuleName(AnswerRule rule);

struct VerifiableRewardOptions {
  AnswerRule rule = AnswerRule::kExact;
  double correct = 1.0;
  double wrong = 0.0;
};

// The canonical form of the last number in `text` ("-1234.5" for "costs -1,234.50 dollars"): an optional
// minus sign, digits with optional ',' thousands groups, an optional '.' and fraction; leading zeros of the
// integer part and trailing zeros of the fraction dropped. nullopt when `text` holds no digit.
std::optional<std::string> LastNumber(std::string_view text);

// The score of `completion` for a problem whose answer is `answer`.
double VerifiableReward(std::string_view completion, std::string_view answer,
                        const VerifiableRewardOptions& options);

}  // namespace zerofit::rewards
