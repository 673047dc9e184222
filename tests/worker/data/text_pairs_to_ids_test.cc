// zerofit_sentencepiece_ids's input rules (worker/data/text_pairs_to_ids.h): each of the refused inputs below
// was accepted before (an empty output, or a pair with nothing to score).
#include "worker/data/text_pairs_to_ids.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace zerofit::data {
namespace {

// Ids: byte + 3.
class ByteTokenizer final : public Tokenizer {
 public:
  absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text) const override {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(static_cast<int32_t>(c) + 3);
    return ids;
  }
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>&) const override { return std::string(); }
  int32_t bos_id() const override { return 1; }
  int32_t eos_id() const override { return 2; }
  int32_t pad_id() const override { return 0; }
  int32_t vocab_size() const override { return 259; }
};

absl::StatusOr<size_t> Convert(const std::string& text, std::string* out = nullptr) {
  std::istringstream in(text);
  std::ostringstream written;
  auto pairs = TextPairsToIds(ByteTokenizer(), in, "prefs.jsonl", written);
  if (out != nullptr) *out = written.str();
  return pairs;
}

TEST(TextPairsToIdsTest, TextAndIdLinesBecomeIdLines) {
  std::string out;
  auto pairs = Convert(
      "{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"cd\"}\n\n"
      "{\"prompt_ids\": [5], \"chosen_ids\": [6], \"rejected_ids\": [7, 8]}",
      &out);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ(*pairs, 2u);
  EXPECT_EQ(out,
            "{\"chosen_ids\":[101],\"prompt_ids\":[100],\"rejected_ids\":[102,103]}\n"
            "{\"chosen_ids\":[6],\"prompt_ids\":[5],\"rejected_ids\":[7,8]}\n");
}

TEST(TextPairsToIdsTest, BadInputsAreRefusedWithFileAndLine) {
  const std::string good = "{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"c\"}\n";
  const std::pair<std::string, std::string> cases[] = {
      {"", "prefs.jsonl:1: empty file (no preference pairs)"},
      {"\n  \n\t\n", "prefs.jsonl:3: no preference pairs (all 3 lines are blank)"},
      {good + "{\"prompt\": \"a\", \"chosen\": \"\", \"rejected\": \"c\"}\n",
       "prefs.jsonl:2: field 'chosen': empty response (nothing to score)"},
      {good + "{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"\"}\n",
       "prefs.jsonl:2: field 'rejected': empty response (nothing to score)"},
      {good + "{\"prompt_ids\": [1], \"chosen_ids\": [], \"rejected_ids\": [3]}\n",
       "prefs.jsonl:2: field 'chosen_ids': empty response"},
      {good + "{\"prompt_ids\": [1], \"chosen_ids\": [\"\\u00ff\"], \"rejected_ids\": [3]}\n",
       "prefs.jsonl:2: field 'chosen_ids': expected a list of integer ids"},
      {good + "{\"prompt\": \"a\", \"chosen\": \"b\", \"rej",
       "prefs.jsonl:2: not a JSON object (the last line has no newline: was the file cut off"},
      {good + "[1, 2]\n" + good, "prefs.jsonl:2: not a JSON object"},
      {good + std::string(1000, '[') + "\n", "prefs.jsonl:2:1: JSON nested deeper than 64 levels"},
  };
  for (const auto& [text, expected] : cases) {
    auto pairs = Convert(text);
    ASSERT_FALSE(pairs.ok()) << text.substr(0, 200);
    EXPECT_NE(pairs.status().message().find(expected), std::string::npos)
        << pairs.status() << "\nwanted: " << expected;
  }
  // A complete last line without a newline is fine.
  auto pairs = Convert(good + good.substr(0, good.size() - 1));
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ(*pairs, 2u);
}

}  // namespace
}  // namespace zerofit::data
