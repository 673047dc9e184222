#include "worker/rewards/format_reward.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "text/regex.h"
#include "text/unicode.h"

namespace zerofit::rewards {

absl::StatusOr<FormatReward> FormatReward::Create(const FormatRewardOptions& options,
                                                  const std::string& field) {
  if (options.pattern.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": required"));
  if (options.pattern.size() > text::kMaxRulePatternBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", options.pattern.size(), " bytes, more than ", text::kMaxRulePatternBytes));
  }
  absl::StatusOr<std::unique_ptr<text::Regex>> regex = text::Regex::Compile(options.pattern);
  if (!regex.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", regex.status().message()));
  return FormatReward(options, std::shared_ptr<const text::Regex>(std::move(*regex)));
}

double FormatReward::Score(std::string_view completion) const {
  std::string lossy;
  if (!text::IsValidUtf8(completion)) {
    lossy = text::Utf8Lossy(completion);
    completion = lossy;
  }
  absl::StatusOr<bool> match = regex_->FullMatch(completion);
  return match.ok() && *match ? options_.correct : options_.wrong;
}

}  // namespace zerofit::rewards
