// GRPO prompt files (worker/data/prompt_dataset.h): the three line forms, answers, BOS, truncation, and
// errors that name the file, line and field.
#include "worker/data/prompt_dataset.h"

#include <gtest/gtest.h>

#include "core/line_reader.h"
#include "tests/worker/data/test_support.h"

namespace zerofit::data {
namespace {

using testing::FakeTokenizer;
using testing::ScopedTempDir;

std::vector<int32_t> PromptChars(const std::string& s) {
  std::vector<int32_t> ids;
  for (char c : s) ids.push_back(FakeTokenizer::Id(c));
  return ids;
}

TEST(PromptDatasetTest, TextAndIdLinesWithAnswers) {
  ScopedTempDir dir;
  const std::string path = dir.Write("p.jsonl",
                                     "{\"prompt\": \"1+2=\", \"answer\": \"3\"}\n"
                                     "\n"
                                     "{\"prompt_ids\": [7, 8], \"answer\": 12, \"answer_ids\": [9]}\n"
                                     "{\"prompt\": \"x\"}\n");
  FakeTokenizer tok;
  PromptDataOptions o;
  o.vocab_size = tok.vocab_size();
  absl::StatusOr<PromptData> d = LoadPrompts(path, &tok, o);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->prompts.size(), 3u);
  std::vector<int32_t> want = {tok.bos_id()};
  for (int32_t id : PromptChars("1+2=")) want.push_back(id);
  EXPECT_EQ(d->prompts[0].ids, want);
  EXPECT_EQ(d->prompts[0].answer.value_or("?"), "3");
  EXPECT_EQ(d->prompts[0].source_line, 1u);
  EXPECT_EQ(d->prompts[1].ids, (std::vector<int32_t>{tok.bos_id(), 7, 8}));
  EXPECT_EQ(d->prompts[1].answer.value_or("?"), "12");  // a number answer is its JSON text
  EXPECT_EQ(d->prompts[1].answer_ids, (std::vector<int32_t>{9}));
  EXPECT_EQ(d->prompts[1].source_line, 3u);
  EXPECT_FALSE(d->prompts[2].answer.has_value());
  EXPECT_EQ(d->longest_prompt, 5u);
  EXPECT_EQ(d->truncated, 0u);
}

TEST(PromptDatasetTest, WithoutBosAndWithoutTokenizer) {
  ScopedTempDir dir;
  const std::string path = dir.Write("p.jsonl", "{\"prompt_ids\": [5, 6, 7], \"answer\": \"1\"}\n");
  PromptDataOptions o;
  o.bos_id = 2;
  o.vocab_size = 10;
  absl::StatusOr<PromptData> d = LoadPrompts(path, nullptr, o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->prompts[0].ids, (std::vector<int32_t>{2, 5, 6, 7}));
  o.add_bos = false;
  d = LoadPrompts(path, nullptr, o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->prompts[0].ids, (std::vector<int32_t>{5, 6, 7}));
}

TEST(PromptDatasetTest, LongPromptsKeepBosAndTheirLastTokens) {
  ScopedTempDir dir;
  const std::string path = dir.Write("p.jsonl",
                                     "{\"prompt_ids\": [5, 6, 7, 8, 9]}\n"
                                     "{\"prompt_ids\": [5, 6]}\n");
  PromptDataOptions o;
  o.bos_id = 2;
  o.max_prompt_length = 4;
  absl::StatusOr<PromptData> d = LoadPrompts(path, nullptr, o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->prompts[0].ids, (std::vector<int32_t>{2, 7, 8, 9}));
  EXPECT_EQ(d->prompts[1].ids, (std::vector<int32_t>{2, 5, 6}));
  EXPECT_EQ(d->truncated, 1u);
  EXPECT_EQ(d->longest_prompt, 4u);
}

// Each bad line is refused with the file, its line and the field.
TEST(PromptDatasetTest, ErrorsNameFileLineAndField) {
  ScopedTempDir dir;
  FakeTokenizer tok;
  PromptDataOptions o;
  o.vocab_size = 20;
  const struct {
    std::string line, want;
  } cases[] = {
      {"{\"answer\": \"1\"}", ":2: expected exactly one of 'prompt'"},
      {"{\"prompt\": \"a\", \"prompt_ids\": [1]}", ":2: expected exactly one of"},
      {"{\"prompt\": 5}",
       ":2: field 'prompt': expected a string or a list of {role, content} messages, got number"},
      {"{\"prompt\": [{\"role\": \"user\", \"content\": \"hi\"}]}", ":2: field 'prompt': chat template:"},
      {"{\"prompt_ids\": [1, 99]}", ":2: field 'prompt_ids[1]': expected a token id in [0, 20), got 99"},
      {"{\"prompt_ids\": \"1\"}", ":2: field 'prompt_ids': expected a list of token ids"},
      {"{\"prompt\": \"a\", \"answer\": [1]}",
       ":2: field 'answer': expected a string or a number, got array"},
      {"{\"prompt\": \"a\", \"answer_ids\": [-1]}", ":2: field 'answer_ids[0]'"},
      {"{\"messages\": \"hi\"}", ":2: field 'messages': expected a list"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", ":2: field 'messages': chat template:"},
      {"[1, 2]", ":2: expected a JSON object, got array"},
      {"{\"prompt\": ", ":2: invalid JSON"},
      {"{\"prompt_ids\": []}", ":2: empty prompt"},
  };
  for (const auto& c : cases) {
    const std::string path = dir.Write("bad.jsonl", "{\"prompt\": \"ok\"}\n" + c.line + "\n");
    o.add_bos = c.line.find("[]") == std::string::npos;  // an empty prompt without BOS is empty
    absl::StatusOr<PromptData> d = LoadPrompts(path, &tok, o);
    ASSERT_FALSE(d.ok()) << c.line;
    EXPECT_NE(d.status().message().find(path + c.want), std::string::npos) << d.status();
  }
  EXPECT_NE(LoadPrompts(dir.Write("empty.jsonl", "\n\n"), &tok, o).status().message().find("no prompts"),
            std::string::npos);
  // A line past core::kMaxLineBytes (a JSON array on one line, a binary file) is refused at its line, not
  // read into memory whole.
  const std::string huge =
      dir.Write("huge.jsonl", "{\"prompt\": \"ok\"}\n" + std::string(core::kMaxLineBytes + 1, '['));
  const absl::Status overlong = LoadPrompts(huge, &tok, o).status();
  EXPECT_NE(overlong.message().find(huge + ":2: longer than"), std::string::npos)
      << overlong.message().substr(0, 300);
  const absl::Status no_tok = LoadPrompts(dir.Write("t.jsonl", "{\"prompt\": \"a\"}\n"), nullptr, o).status();
  EXPECT_NE(no_tok.message().find("t.jsonl:1: field 'prompt': text needs a tokenizer"), std::string::npos)
      << no_tok;
}

// Token ids are checked against the options' vocabulary (the model's, in training), else the tokenizer's
// (`zerofit data check --prompts` passes no model), else int32's range: the check once said "[0, 0)" without
// a vocabulary, and an id past 2^31 - 1 wrapped when stored.
TEST(PromptDatasetTest, TokenIdsStayInTheVocabularyTheLoaderKnows) {
  ScopedTempDir dir;
  FakeTokenizer tok;
  const std::string too_big = std::to_string(tok.vocab_size());
  const struct {
    const Tokenizer* tok;
    int32_t vocab;
    std::string ids, want;
  } cases[] = {
      {&tok, 0, "[1, " + too_big + "]",
       "field 'prompt_ids[1]': expected a token id in [0, " + too_big + "), got " + too_big},
      {&tok, 5, "[1, 7]", "field 'prompt_ids[1]': expected a token id in [0, 5), got 7"},
      {nullptr, 0, "[1, 2147483648]", "field 'prompt_ids[1]': expected a token id in [0, 2147483648)"},
      {nullptr, 0, "[18446744073709551615]", "field 'prompt_ids[0]': expected a token id in [0, 2147483648)"},
  };
  for (const auto& c : cases) {
    PromptDataOptions o;
    o.vocab_size = c.vocab;
    const std::string path = dir.Write("ids.jsonl", "{\"prompt_ids\": " + c.ids + "}\n");
    absl::StatusOr<PromptData> d = LoadPrompts(path, c.tok, o);
    ASSERT_FALSE(d.ok()) << c.ids;
    EXPECT_NE(d.status().message().find(path + ":1: " + c.want), std::string::npos) << d.status();
  }
  PromptDataOptions o;
  absl::StatusOr<PromptData> d =
      LoadPrompts(dir.Write("ok.jsonl", "{\"prompt_ids\": [2147483647]}\n"), nullptr, o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->prompts[0].ids.back(), 2147483647);
}

}  // namespace
}  // namespace zerofit::data
