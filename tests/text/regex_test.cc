// text::Regex beyond the tokenizer's FindAll: compile errors that point into the pattern as written, and
// the capture groups of the last match (numbered and named), which the verifiable reward's regex rule reads.
#include "text/regex.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zerofit::text {
namespace {

// The offset in a compile error is the pattern's as the user wrote it, not the translated one's (the \s
// rewrite makes the translation ~100 bytes longer per \s).
TEST(RegexTest, CompileErrorOffsetIsInTheWrittenPattern) {
  absl::StatusOr<std::unique_ptr<Regex>> bad = Regex::Compile(R"(\s+\S*(x)");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(bad.status().message()),
            R"(regex "\s+\S*(x": missing closing parenthesis at offset 8)");
  bad = Regex::Compile(R"(a[\s)");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(std::string(bad.status().message()),
            R"(regex "a[\s": missing terminating ] for character class at offset 4)");
  bad = Regex::Compile(R"(\s{2,1})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(std::string(bad.status().message()),
            R"(regex "\s{2,1}": numbers out of order in {} quantifier at offset 6)");
}

// A pattern is checked to be UTF-8 (PCRE2 reads past a truncated sequence when told not to check).
TEST(RegexTest, PatternThatIsNotUtf8IsAnError) {
  absl::StatusOr<std::unique_ptr<Regex>> bad = Regex::Compile("ab\xE2\x82");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("UTF-8 error"), absl::string_view::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("at offset 2"), absl::string_view::npos) << bad.status();
}

std::unique_ptr<Regex> CompileOrNull(const std::string& pattern) {
  absl::StatusOr<std::unique_ptr<Regex>> regex = Regex::Compile(pattern);
  EXPECT_TRUE(regex.ok()) << regex.status();
  return regex.ok() ? *std::move(regex) : nullptr;
}

// The last match's groups, as the text they cover ("-" for a group that took no part); "none" when there is
// no match.
std::vector<std::string> LastGroupTexts(const Regex& regex, std::string_view subject) {
  absl::StatusOr<std::optional<Regex::Groups>> last = regex.FindLast(subject);
  EXPECT_TRUE(last.ok()) << last.status();
  if (!last.ok() || !last->has_value()) return {"none"};
  std::vector<std::string> out;
  for (const std::optional<Regex::Span>& span : **last) {
    out.push_back(span ? std::string(subject.substr(span->first, span->second - span->first)) : "-");
  }
  return out;
}

using GroupTexts = std::vector<std::string>;

TEST(RegexTest, FindLastGivesTheLastMatchsNumberedGroups) {
  std::unique_ptr<Regex> pair = CompileOrNull(R"((\d+)-(\d+))");
  ASSERT_NE(pair, nullptr);
  EXPECT_EQ(pair->GroupCount(), 2);
  EXPECT_EQ(LastGroupTexts(*pair, "1-2, 30-40 and 500-6"), (GroupTexts{"500-6", "500", "6"}));
  EXPECT_EQ(LastGroupTexts(*pair, "no pairs"), (GroupTexts{"none"}));
  EXPECT_EQ(LastGroupTexts(*pair, ""), (GroupTexts{"none"}));
  // Non-overlapping, left to right: "1-2-3" matches "1-2" only, so the last match is not "2-3".
  EXPECT_EQ(LastGroupTexts(*pair, "1-2-3"), (GroupTexts{"1-2", "1", "2"}));
  std::unique_ptr<Regex> none = CompileOrNull("x+");
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->GroupCount(), 0);
  EXPECT_EQ(LastGroupTexts(*none, "xx.x"), (GroupTexts{"x"}));
}

TEST(RegexTest, GroupThatTookNoPartIsNullopt) {
  std::unique_ptr<Regex> regex = CompileOrNull(R"(answer: (?:(\d+)|(\w+))(!)?)");
  ASSERT_NE(regex, nullptr);
  EXPECT_EQ(LastGroupTexts(*regex, "answer: 12! answer: twelve"),
            (GroupTexts{"answer: twelve", "-", "twelve", "-"}));
  EXPECT_EQ(LastGroupTexts(*regex, "answer: twelve answer: 12!"),
            (GroupTexts{"answer: 12!", "12", "-", "!"}));
  // A group that matched an empty string took part: "" is not "-".
  std::unique_ptr<Regex> empty = CompileOrNull(R"(\[(\d*)\])");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(LastGroupTexts(*empty, "[7] []"), (GroupTexts{"[]", ""}));
}

TEST(RegexTest, NamedGroupsHaveNumbers) {
  std::unique_ptr<Regex> regex = CompileOrNull(R"((?<unit>[a-z]+)=(?<value>-?\d+))");
  ASSERT_NE(regex, nullptr);
  EXPECT_EQ(regex->GroupCount(), 2);
  absl::StatusOr<int> value = regex->GroupNumber("value");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 2);
  EXPECT_EQ(*regex->GroupNumber("unit"), 1);
  EXPECT_EQ(regex->GroupNumber("val").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(regex->GroupNumber("").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LastGroupTexts(*regex, "m=3, s=-12"), (GroupTexts{"s=-12", "s", "-12"}));
  std::unique_ptr<Regex> twice = CompileOrNull(R"((?J)(?<n>\d+)|(?<n>[a-z]+))");
  ASSERT_NE(twice, nullptr);
  EXPECT_EQ(twice->GroupNumber("n").status().code(), absl::StatusCode::kInvalidArgument);
}

// Empty matches count (unlike FindAll); after one, a non-empty match may start at the same position, and
// the search moves on by whole code points.
TEST(RegexTest, FindLastCountsEmptyMatches) {
  auto last_span = [](const std::string& pattern, std::string_view subject) -> std::optional<Regex::Span> {
    std::unique_ptr<Regex> regex = CompileOrNull(pattern);
    if (regex == nullptr) return std::nullopt;
    absl::StatusOr<std::optional<Regex::Groups>> last = regex->FindLast(subject);
    EXPECT_TRUE(last.ok()) << last.status();
    return last.ok() && last->has_value() ? (**last)[1] : std::nullopt;
  };
  EXPECT_EQ(last_span("(a*)", "baa"), Regex::Span(3, 3));        // "", "aa", "" (at the end)
  EXPECT_EQ(last_span("(a*)(?=b)", "baab"), Regex::Span(3, 3));  // "", "aa", "" (before the last b)
  EXPECT_EQ(last_span("^(|ab)", "ab"), Regex::Span(0, 2));       // "", then "ab" at the same position
  EXPECT_EQ(last_span("()", "é"), Regex::Span(2, 2));            // "" at 0 and 2, never inside é
}

// Spans are bytes; \s is Unicode White_Space (U+3000 here) and \d matches other scripts' digits (UCP).
TEST(RegexTest, FindLastOnUtf8) {
  std::unique_ptr<Regex> regex = CompileOrNull(R"(答案\s*[:：]\s*(\S+))");
  ASSERT_NE(regex, nullptr);
  const std::string text = "答案：七。 答案:\xE3\x80\x80四十二";
  absl::StatusOr<std::optional<Regex::Groups>> last = regex->FindLast(text);
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_TRUE(last->has_value());
  EXPECT_EQ((**last)[1], Regex::Span(text.size() - 9, text.size()));
  EXPECT_EQ(LastGroupTexts(*regex, text), (GroupTexts{"答案:\xE3\x80\x80四十二", "四十二"}));
  std::unique_ptr<Regex> digits = CompileOrNull(R"((\d+))");
  ASSERT_NE(digits, nullptr);
  EXPECT_EQ(LastGroupTexts(*digits, "7 \xD9\xA4\xD9\xA2"),
            (GroupTexts{"\xD9\xA4\xD9\xA2", "\xD9\xA4\xD9\xA2"}));
}

// FullMatch is Python's re.fullmatch (each expectation here is what Python 3 prints): the whole subject, an
// alternative that stops early backtracked into one that reaches the end; `.` stops at a line break unless
// (?s) (open-r1's re.DOTALL format reward); UCP digits.
TEST(RegexTest, FullMatchIsPythonsFullmatch) {
  const struct {
    const char* pattern;
    std::string subject;
    bool want;
  } cases[] = {
      {R"(<think>.*?</think>\s*<answer>.*?</answer>)", "<think>a</think> <answer>4</answer>", true},
      {R"(<think>.*?</think>\s*<answer>.*?</answer>)", "<think>a</think> <answer>4</answer> extra", false},
      {R"(<think>.*?</think>\s*<answer>.*?</answer>)", "<think>a\nb</think><answer>4</answer>", false},
      {R"((?s)<think>.*?</think>\s*<answer>.*?</answer>)", "<think>a\nb</think><answer>4</answer>", true},
      {R"(^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$)",
       "<think>\nx\n</think>\n<answer>\n4\n</answer>", true},
      {"a|ab", "ab", true},
      {"a", "ba", false},
      {"a$", "a\n", false},
      {"", "", true},
      {R"(\d+)", "\xD9\xA4\xD9\xA2", true},
  };
  for (const auto& c : cases) {
    std::unique_ptr<Regex> regex = CompileOrNull(c.pattern);
    ASSERT_NE(regex, nullptr) << c.pattern;
    absl::StatusOr<bool> got = regex->FullMatch(c.subject);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, c.want) << c.pattern << " on " << c.subject;
  }
  std::unique_ptr<Regex> any = CompileOrNull(".*");
  ASSERT_NE(any, nullptr);
  EXPECT_EQ(any->FullMatch("\xFF").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RegexTest, FindLastRejectsTextThatIsNotUtf8) {
  std::unique_ptr<Regex> regex = CompileOrNull("(x)");
  ASSERT_NE(regex, nullptr);
  absl::StatusOr<std::optional<Regex::Groups>> bad = regex->FindLast("x x \xE2\x82");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("at byte 4"), absl::string_view::npos) << bad.status();
}

// PCRE2's match limit stops catastrophic backtracking; FindLast reports it rather than a "no match".
TEST(RegexTest, FindLastReportsAMatchThatGivesUp) {
  std::unique_ptr<Regex> regex = CompileOrNull("^(a+)+$");
  ASSERT_NE(regex, nullptr);
  absl::StatusOr<std::optional<Regex::Groups>> last = regex->FindLast(std::string(40, 'a') + "b");
  EXPECT_EQ(last.status().code(), absl::StatusCode::kInternal) << last.status();
}

// FindLast goes on after a match; FindAll's pieces are not changed by it (the tokenizer depends on them).
TEST(RegexTest, FindAllStillDropsEmptyMatches) {
  std::unique_ptr<Regex> star = CompileOrNull("a*");
  ASSERT_NE(star, nullptr);
  std::vector<std::pair<size_t, size_t>> spans;
  ASSERT_TRUE(star->FindAll("baabéa", &spans).ok());
  EXPECT_EQ(spans, (std::vector<std::pair<size_t, size_t>>{{1, 3}, {6, 7}}));
}

}  // namespace
}  // namespace zerofit::text
