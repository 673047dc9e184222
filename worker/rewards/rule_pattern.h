// What the reward rules that read text with a pattern share (verifiable_reward.h's regex rule and
// format_reward.h): the pattern, bounded and compiled once, and the completion as text the pattern can
// read. Pure text, no LibTorch.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace zerofit::text {
class Regex;
}  // namespace zerofit::text

namespace zerofit::rewards {

// `pattern` (non-empty; the caller says why an empty one is wrong) compiled: InvalidArgument naming `field`
// when it is longer than text::kMaxRulePatternBytes or does not compile (PCRE2's message and offset).
absl::StatusOr<std::shared_ptr<const text::Regex>> CompileRulePattern(const std::string& pattern,
                                                                      const std::string& field);

// `completion` as valid UTF-8: itself, or its lossy decoding (each invalid part U+FFFD, what the tokenizer's
// decoder produces) kept in `*storage`.
std::string_view ReadableText(std::string_view completion, std::string* storage);

}  // namespace zerofit::rewards
