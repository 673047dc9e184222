// Error messages quote at most a bounded excerpt of a value (core/excerpt.h).
#include "core/excerpt.h"

#include <gtest/gtest.h>

#include <string>

namespace zerofit::core {
namespace {

TEST(ExcerptTest, AShortValueIsQuotedWhole) {
  EXPECT_EQ(Excerpt("reward"), "reward");
  EXPECT_EQ(Excerpt(std::string(64, 'a')), std::string(64, 'a'));
  EXPECT_EQ(Excerpt(""), "");
}

TEST(ExcerptTest, ALongValueIsCutAndItsSizeSaid) {
  const std::string cut = Excerpt(std::string(40000, 'x'));
  EXPECT_EQ(cut, std::string(61, 'x') + "... (40000 bytes)");
  EXPECT_EQ(Excerpt(std::string(20, 'y'), 10), "yyyyyyy... (20 bytes)");
}

TEST(ExcerptTest, TheCutNeverSplitsAUtf8Sequence) {
  std::string value;
  for (int i = 0; i < 100; ++i) value += "\xc3\xa9";  // é
  const std::string cut = Excerpt(value, 10);
  EXPECT_EQ(cut, "\xc3\xa9\xc3\xa9\xc3\xa9... (200 bytes)");
}

TEST(ExcerptTest, ControlCharactersAreEscaped) { EXPECT_EQ(Excerpt("a\nb\x1b[2J\t"), "a\\nb\\x1b[2J\\t"); }

TEST(BoundedMessageTest, KeepsShortMessagesAndCutsLongOnesAtACharacter) {
  EXPECT_EQ(BoundedMessage("line 1\nline 2", 100), "line 1\nline 2");
  std::string long_message = "a";
  for (int i = 0; i < 1000; ++i) long_message += "\xe2\x82\xac";  // a 3-byte character
  const std::string cut = BoundedMessage(long_message, 8);
  EXPECT_EQ(cut, "a\xe2\x82\xac\xe2\x82\xac ... (cut at 7 of 3001 bytes)");
}

}  // namespace
}  // namespace zerofit::core
