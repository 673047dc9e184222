// A format reward for GRPO (issue 32's rewards, the kind DeepSeek-R1's recipe and open-r1's format_reward
// add to the answer's): the completion's whole text matches a pattern, whatever the answer. Python's
// re.fullmatch: `^<think>.*?</think>\s*<answer>.*?</answer>$` matches only a completion that is exactly
// those two blocks. The pattern is PCRE2 in UTF mode with Oniguruma's \s (text/regex.h); `.` stops at a line
// break unless the pattern starts with (?s) (open-r1's re.DOTALL). Pure text, no LibTorch.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace zerofit::text {
class Regex;
}  // namespace zerofit::text

namespace zerofit::rewards {

struct FormatRewardOptions {
  std::string pattern;  // required
  double correct = 1.0;
  double wrong = 0.0;
};

// Copies share the compiled pattern, which is immutable: one FormatReward may score from many threads.
class FormatReward {
 public:
  // InvalidArgument naming `field`: an empty pattern, one longer than text::kMaxRulePatternBytes, or one
  // that does not compile (PCRE2's message and offset).
  static absl::StatusOr<FormatReward> Create(const FormatRewardOptions& options,
                                             const std::string& field = "pattern");

  // `correct` when the whole completion matches, else `wrong`. Never fails: a completion that is not valid
  // UTF-8 is read as its lossy decoding (what the tokenizer's decoder produces), and a match PCRE2 gives up
  // on (its match limit) scores `wrong`.
  double Score(std::string_view completion) const;

  const FormatRewardOptions& options() const { return options_; }

 private:
  FormatReward(FormatRewardOptions options, std::shared_ptr<const text::Regex> regex)
      : options_(std::move(options)), regex_(std::move(regex)) {}

  FormatRewardOptions options_;
  std::shared_ptr<const text::Regex> regex_;
};

}  // namespace zerofit::rewards
