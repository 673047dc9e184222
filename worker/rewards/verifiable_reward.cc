#include "worker/rewards/verifiable_reward.h"

#include <cctype>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

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

}  // namespace

absl::StatusOr<AnswerRule> ParseAnswerRule(const std::string& name, const std::string& field) {
  if (name == "exact") return AnswerRule::kExact;
  if (name == "last_number") return AnswerRule::kLastNumber;
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": expected exact or last_number, got '", name.substr(0, 64), "'"));
}

const char* AnswerRuleName(AnswerRule rule) { return rule == AnswerRule::kExact ? "exact" : "last_number"; }

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

double VerifiableReward(std::string_view completion, std::string_view answer,
                        const VerifiableRewardOptions& o) {
  bool match = false;
  if (o.rule == AnswerRule::kExact) {
    // Debian's Abseil has its own string_view (not std's): the views are converted.
    match = absl::StripAsciiWhitespace(absl::string_view(completion.data(), completion.size())) ==
            absl::StripAsciiWhitespace(absl::string_view(answer.data(), answer.size()));
  } else {
    const std::optional<std::string> want = LastNumber(answer);
    match = want.has_value() && LastNumber(completion) == want;
  }
  return match ? o.correct : o.wrong;
}

}  // namespace zerofit::rewards
