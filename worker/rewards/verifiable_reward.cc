#include "worker/rewards/verifiable_reward.h"

#include <cctype>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "text/regex.h"
#include "worker/rewards/rule_pattern.h"

namespace zerofit::rewards {
namespace {

bool Digit(char c) { return c >= '0' && c <= '9'; }

// The number starting at text[i] (a digit): its integer digits (',' thousands groups dropped) and fraction
// digits; *end is one past it.
struct NumberToken {
  std::string integer, fraction;
};

NumberToken ReadNumber(std::string_view text, size_t i, size_t* end) {
  NumberToken n;
  while (i < text.size()) {
    if (Digit(text[i])) {
      n.integer += text[i++];
    } else if (text[i] == ',' && i + 3 < text.size() && Digit(text[i + 1]) && Digit(text[i + 2]) &&
               Digit(text[i + 3]) && (i + 4 == text.size() || !Digit(text[i + 4]))) {
      ++i;  // a thousands separator: exactly three digits follow
    } else {
      break;
    }
  }
  if (i + 1 < text.size() && text[i] == '.' && Digit(text[i + 1])) {
    ++i;
    while (i < text.size() && Digit(text[i])) n.fraction += text[i++];
  }
  *end = i;
  return n;
}

std::string Canonical(const NumberToken& n, bool negative) {
  size_t lead = 0;
  while (lead + 1 < n.integer.size() && n.integer[lead] == '0') ++lead;
  std::string fraction = n.fraction;
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  std::string out = n.integer.substr(lead);
  if (!fraction.empty()) absl::StrAppend(&out, ".", fraction);
  if (negative && out != "0") out = "-" + out;
  return out;
}

// Debian's Abseil has its own string_view (not std's): the views are converted.
absl::string_view Trimmed(std::string_view text) {
  return absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
}

absl::StatusOr<std::shared_ptr<const text::Regex>> CompilePattern(const std::string& pattern,
                                                                  const std::string& field) {
  if (pattern.empty())
    return absl::InvalidArgumentError(absl::StrCat(field, ": the regex rule needs a pattern"));
  return CompileRulePattern(pattern, field);
}

}  // namespace

absl::StatusOr<AnswerRule> ParseAnswerRule(const std::string& name, const std::string& field) {
  if (name == "exact") return AnswerRule::kExact;
  if (name == "last_number") return AnswerRule::kLastNumber;
  if (name == "regex") return AnswerRule::kRegex;
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": expected exact, last_number or regex, got '", name.substr(0, 64), "'"));
}

const char* AnswerRuleName(AnswerRule rule) {
  switch (rule) {
    case AnswerRule::kExact:
      return "exact";
    case AnswerRule::kLastNumber:
      return "last_number";
    case AnswerRule::kRegex:
      return "regex";
  }
  return "?";
}

std::optional<std::string> LastNumber(std::string_view text) {
  std::optional<std::string> last;
  size_t i = 0;
  while (i < text.size()) {
    if (!Digit(text[i])) {
      ++i;
      continue;
    }
    // A '-' right before the digits is a sign unless it joins two words or numbers ("12-7", "x-1").
    const bool negative =
        i > 0 && text[i - 1] == '-' && (i == 1 || !std::isalnum(static_cast<unsigned char>(text[i - 2])));
    size_t end = i;
    const NumberToken n = ReadNumber(text, i, &end);
    last = Canonical(n, negative);
    i = end;
  }
  return last;
}

absl::StatusOr<VerifiableReward> VerifiableReward::Create(const VerifiableRewardOptions& options,
                                                          const VerifiableRewardFields& fields) {
  if (options.rule != AnswerRule::kRegex) {
    const auto only_regex = [&](const std::string& field, const char* what) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": only the regex rule takes a ", what, " (",
                                                     fields.rule, " is ", AnswerRuleName(options.rule), ")"));
    };
    if (!options.pattern.empty()) return only_regex(fields.pattern, "pattern");
    if (!options.group.empty()) return only_regex(fields.group, "group");
    return VerifiableReward(options, nullptr, 0);
  }
  absl::StatusOr<std::shared_ptr<const text::Regex>> regex = CompilePattern(options.pattern, fields.pattern);
  if (!regex.ok()) return regex.status();
  absl::StatusOr<int> group = (*regex)->GroupOf(options.group);
  if (!group.ok())
    return absl::InvalidArgumentError(absl::StrCat(fields.group, ": ", group.status().message()));
  if (!group.ok()) return group.status();
  return VerifiableReward(options, *std::move(regex), *group);
}

bool VerifiableReward::RegexMatches(std::string_view completion, std::string_view answer) const {
  std::string lossy;
  completion = ReadableText(completion, &lossy);
  absl::StatusOr<std::optional<text::Regex::Groups>> last = regex_->FindLast(completion);
  if (!last.ok() || !last->has_value()) return false;
  const std::optional<text::Regex::Span>& span = (**last)[group_];
  return span.has_value() &&
         Trimmed(completion.substr(span->first, span->second - span->first)) == Trimmed(answer);
}

double VerifiableReward::Score(std::string_view completion, std::string_view answer) const {
  bool match = false;
  switch (options_.rule) {
    case AnswerRule::kExact:
      match = Trimmed(completion) == Trimmed(answer);
      break;
    case AnswerRule::kLastNumber: {
      const std::optional<std::string> want = LastNumber(answer);
      match = want.has_value() && LastNumber(completion) == want;
      break;
    }
    case AnswerRule::kRegex:
      match = RegexMatches(completion, answer);
      break;
  }
  return match ? options_.correct : options_.wrong;
}

absl::StatusOr<VerifiableReward> ParseVerifiableReward(const std::string& rule, const std::string& pattern,
                                                       const std::string& group, double correct, double wrong,
                                                       const VerifiableRewardFields& fields) {
  absl::StatusOr<AnswerRule> parsed = ParseAnswerRule(rule, fields.rule);
  if (!parsed.ok()) return parsed.status();
  VerifiableRewardOptions options;
  options.rule = *parsed;
  options.pattern = pattern;
  options.group = group;
  options.correct = correct;
  options.wrong = wrong;
  return VerifiableReward::Create(options, fields);
}

}  // namespace zerofit::rewards
