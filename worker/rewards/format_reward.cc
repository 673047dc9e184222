#include "worker/rewards/format_reward.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "text/regex.h"
#include "worker/rewards/rule_pattern.h"

namespace zerofit::rewards {

absl::StatusOr<FormatReward> FormatReward::Create(const FormatRewardOptions& options,
                                                  const std::string& field) {
  if (options.pattern.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": required"));
  absl::StatusOr<std::shared_ptr<const text::Regex>> regex = CompileRulePattern(options.pattern, field);
  if (!regex.ok()) return regex.status();
  return FormatReward(options, *std::move(regex));
}

double FormatReward::Score(std::string_view completion) const {
  std::string lossy;
  absl::StatusOr<bool> match = regex_->FullMatch(ReadableText(completion, &lossy));
  return match.ok() && *match ? options_.correct : options_.wrong;
}

}  // namespace zerofit::rewards
