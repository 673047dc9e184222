#include "worker/rewards/rule_pattern.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "text/regex.h"
#include "text/unicode.h"

namespace zerofit::rewards {

absl::StatusOr<std::shared_ptr<const text::Regex>> CompileRulePattern(const std::string& pattern,
                                                                      const std::string& field) {
  if (pattern.size() > text::kMaxRulePatternBytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": the pattern has ", pattern.size(),
                                                   " bytes, more than ", text::kMaxRulePatternBytes));
  }
  absl::StatusOr<std::unique_ptr<text::Regex>> regex = text::Regex::Compile(pattern);
  if (!regex.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", regex.status().message()));
  return std::shared_ptr<const text::Regex>(*std::move(regex));
}

std::string_view ReadableText(std::string_view completion, std::string* storage) {
  if (text::IsValidUtf8(completion)) return completion;
  *storage = text::Utf8Lossy(completion);
  return *storage;
}

}  // namespace zerofit::rewards
