// text::Regex beyond the tokenizer's FindAll: compile errors that point into the pattern as written, and
// the capture groups of the last match (numbered and named), which the verifiable reward's regex rule reads.
#include "text/regex.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

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

}  // namespace
}  // namespace zerofit::text
