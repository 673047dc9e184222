// SFT examples read with PreferenceDataOptions::sft: TRL's SFT dataset formats (text, prompt-completion,
// pre-tokenized) and preference pairs whose chosen response alone is kept; the chat formats are in
// hf_preference_test.cc (they need a real chat template).
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/worker/data/test_support.h"
#include "worker/data/data_report.h"
#include "worker/data/preference_dataset.h"

namespace zerofit::data::sft_test {
namespace {

using testing::FakeTokenizer;
using Ids = std::vector<int32_t>;

constexpr int32_t kBos = 2;
constexpr int32_t kEos = 3;

Ids Chars(const std::string& s) {
  Ids ids;
  for (char c : s) ids.push_back(FakeTokenizer::Id(c));
  return ids;
}

Ids Cat(Ids a, const Ids& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

PreferenceDataOptions SftOptions() {
  PreferenceDataOptions o;
  o.sft = true;
  o.max_length = 0;
  return o;
}

TEST(SftExampleTest, TrlFormatsAndPairLinesBecomeExamplesWithoutARejectedResponse) {
  FakeTokenizer tok;
  const std::string v = std::to_string(FakeTokenizer::Id('v'));
  auto examples = ParsePreferenceJsonl(
      "{\"text\": \"cat\"}\n"
      "{\"prompt\": \"1+2=\", \"completion\": \"3\"}\n"
      "{\"prompt_ids\": [" +
          v + "], \"completion_ids\": [" + v + ", " + v +
          "]}\n"
          "{\"completion_ids\": [" +
          v +
          "]}\n"
          "{\"prompt\": \"q\", \"chosen\": \"yes\", \"rejected\": \"no\"}\n",
      "sft.jsonl", &tok, SftOptions());
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ(examples->size(), 5u);
  const std::vector<PreferencePair>& e = *examples;
  // Language modeling: no prompt but BOS, so every token of the text is scored.
  EXPECT_EQ(e[0].prompt, Ids{kBos});
  EXPECT_EQ(e[0].chosen, Cat(Chars("cat"), {kEos}));
  // Prompt-completion: only the completion is scored.
  EXPECT_EQ(e[1].prompt, Cat({kBos}, Chars("1+2=")));
  EXPECT_EQ(e[1].chosen, Cat(Chars("3"), {kEos}));
  const int32_t id_v = FakeTokenizer::Id('v');
  EXPECT_EQ(e[2].prompt, (Ids{kBos, id_v}));
  EXPECT_EQ(e[2].chosen, (Ids{id_v, id_v, kEos}));
  EXPECT_EQ(e[3].prompt, Ids{kBos});
  // A pair's line: its chosen response is the completion.
  EXPECT_EQ(e[4].prompt, Cat({kBos}, Chars("q")));
  EXPECT_EQ(e[4].chosen, Cat(Chars("yes"), {kEos}));
  for (const PreferencePair& p : e) EXPECT_TRUE(p.rejected.empty()) << "line " << p.source_line;
  EXPECT_EQ(e[4].source_line, 5u);
}

// completion_only_loss false (TRL's SFTConfig): a prompt-completion example's prompt is scored too, so its
// tokens begin the completion; text lines are unchanged (they have no prompt).
TEST(SftExampleTest, WithoutCompletionOnlyLossThePromptIsScoredToo) {
  FakeTokenizer tok;
  PreferenceDataOptions o = SftOptions();
  o.completion_only_loss = false;
  auto examples = ParsePreferenceJsonl(
      "{\"prompt\": \"1+2=\", \"completion\": \"3\"}\n"
      "{\"text\": \"cat\"}\n"
      "{\"prompt\": \"q\", \"chosen\": \"yes\", \"rejected\": \"no\"}\n",
      "all.jsonl", &tok, o);
  ASSERT_TRUE(examples.ok()) << examples.status();
  EXPECT_EQ((*examples)[0].prompt, Ids{kBos});
  EXPECT_EQ((*examples)[0].chosen, Cat(Chars("1+2=3"), {kEos}));
  EXPECT_EQ((*examples)[1].prompt, Ids{kBos});
  EXPECT_EQ((*examples)[1].chosen, Cat(Chars("cat"), {kEos}));
  EXPECT_EQ((*examples)[2].chosen, Cat(Chars("qyes"), {kEos}));
  // Truncation then cuts the whole sequence from the right, as TRL's does.
  o.max_length = 4;
  o.max_prompt_length = 1;
  auto cut = ParsePreferenceJsonl("{\"prompt\": \"1+2=\", \"completion\": \"3\"}\n", "cut.jsonl", &tok, o);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ((*cut)[0].prompt, Ids{kBos});
  EXPECT_EQ((*cut)[0].chosen, Chars("1+2"));
}

TEST(SftExampleTest, TruncationLooksAtTheCompletionAlone) {
  FakeTokenizer tok;
  PreferenceDataOptions o = SftOptions();
  o.max_length = 6;
  o.max_prompt_length = 3;
  PreferenceDataStats stats;
  // The pair's 10-token rejected response would have forced its prompt down to 3 tokens; it is not kept.
  auto examples = ParsePreferenceJsonl(
      "{\"prompt\": \"abc\", \"chosen\": \"d\", \"rejected\": \"0123456789\"}\n"
      "{\"prompt\": \"abc\", \"completion\": \"defgh\"}\n",
      "cut.jsonl", &tok, o, &stats);
  ASSERT_TRUE(examples.ok()) << examples.status();
  EXPECT_EQ((*examples)[0].prompt, Cat({kBos}, Chars("abc")));
  EXPECT_EQ((*examples)[0].chosen, Cat(Chars("d"), {kEos}));
  // 1 + 3 + 6 > 6: the prompt keeps its last 2 tokens and BOS, the completion the 3 tokens left (no EOS).
  EXPECT_EQ((*examples)[1].prompt, Cat({kBos}, Chars("bc")));
  EXPECT_EQ((*examples)[1].chosen, Chars("def"));
  EXPECT_EQ(stats.prompts_truncated, 1u);
  EXPECT_EQ(stats.responses_truncated, 1u);
  EXPECT_EQ(stats.longest_sequence, 6u);
}

TEST(SftExampleTest, TheDataReportCountsExamplesAndLintsNoRejectedResponse) {
  FakeTokenizer tok;
  auto whole = ParsePreferenceJsonl("{\"prompt\": \"abc\", \"completion\": \"defgh\"}\n{\"text\": \"xy\"}\n",
                                    "r.jsonl", &tok, SftOptions());
  ASSERT_TRUE(whole.ok()) << whole.status();
  // An assistant-only example (its middle token unscored): 2 + 4 tokens, 3 scored (EOS as the token before).
  whole->push_back(
      AssemblePreferencePair(Chars("x"), Chars("pqr"), {}, kBos, kEos, SftOptions(), 3, {1, 0, 1}));
  PreferenceDataOptions limits = SftOptions();
  limits.max_length = 6;
  limits.max_prompt_length = 3;
  std::vector<PreferencePair> cut;
  const DataReport r = BuildDataReport(*whole, DataExpectations{kBos, kEos, 0, true}, limits, &cut);
  EXPECT_EQ(r.pairs, 3u);
  EXPECT_EQ(r.truncated_pairs, 1u);
  ASSERT_EQ(cut.size(), 3u);
  EXPECT_EQ(cut[0].chosen, Chars("def"));
  EXPECT_TRUE(cut[1].rejected.empty());
  for (const DataLint& l : r.lints) {
    EXPECT_EQ(l.name.find("rejected"), std::string::npos) << l.name;
    if (l.name.find("lose their EOS") != std::string::npos) {
      EXPECT_EQ(l.count, 1u) << "the completion only";
    }
  }
  // Scored after truncation: "def" of [BOS]bc|def (EOS cut), "xy" + EOS of [BOS]|xy, and p, r and EOS of
  // [BOS]x|pqr: 9 of 6 + 4 + 6 tokens.
  EXPECT_EQ(r.scored_tokens, 9u);
  EXPECT_EQ(r.tokens, 16u);
  const std::string text = FormatDataReport(r, "r.jsonl", false);
  EXPECT_NE(text.find("r.jsonl: 3 examples"), std::string::npos) << text;
  EXPECT_NE(text.find("scored by the loss: 9 of 16 tokens after truncation (56.2%)"), std::string::npos)
      << text;
  const std::string json = FormatDataReport(r, "r.jsonl", true);
  EXPECT_NE(json.find("\"examples\": 3"), std::string::npos) << json;
  EXPECT_NE(json.find("\"scored_tokens\": 9"), std::string::npos) << json;
}

TEST(SftExampleTest, BadLinesNameFileLineAndField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt": "a"})",
       "bad.jsonl:3: not an SFT example: expected \"text\", \"prompt\" + \"completion\""},
      {R"({"prompt": "a", "completion": ""})", "bad.jsonl:3: field 'completion': empty completion"},
      {R"({"completion": "b"})", "bad.jsonl:3: field 'prompt': missing"},
      {R"({"prompt": 7, "completion": "b"})", "bad.jsonl:3: field 'prompt': expected a string, got number"},
      {R"({"text": ""})", "bad.jsonl:3: field 'text': empty completion"},
      {R"({"text": ["a"]})", "bad.jsonl:3: field 'text': expected a string, got array"},
      {R"({"prompt_ids": [5]})", "bad.jsonl:3: field 'completion_ids': missing"},
      {R"({"completion_ids": [500]})",
       "bad.jsonl:3: field 'completion_ids': element 0: token id 500 is outside"},
      {R"({"completion_ids": []})", "bad.jsonl:3: field 'completion_ids': empty completion"},
      {R"({"messages": "hi"})", "bad.jsonl:3: field 'messages': expected a list of messages, got string"},
      {R"({"messages": []})", "bad.jsonl:3: field 'messages': no messages"},
      {R"({"messages": [{"content": "x"}]})", "bad.jsonl:3: field 'messages': message 0: expected an object"},
      {R"({"messages": [{"role": "user", "content": "x"}]})",
       "bad.jsonl:3: field 'messages': chat template:"},  // the fake tokenizer has none
      {R"({"prompt": [{"role": "user"}], "completion": [{"role": "assistant"}]})",
       "bad.jsonl:3: field 'prompt': chat template:"},
      {R"({"completion": [{"role": "assistant"}]})", "bad.jsonl:3: field 'prompt': missing"},
      {R"({"prompt": "a", "chosen": "b"})", "bad.jsonl:3: field 'rejected': missing"},
  };
  FakeTokenizer tok;
  for (const auto& [line, want] : cases) {
    const std::string good = R"({"prompt": "p", "completion": "c"})";
    auto got =
        ParsePreferenceJsonl(good + "\n\n" + line + "\n" + good + "\n", "bad.jsonl", &tok, SftOptions());
    ASSERT_FALSE(got.ok()) << line;
    EXPECT_NE(got.status().message().find(want), std::string::npos)
        << "line: " << line << "\nerror: " << got.status().message() << "\nwanted: " << want;
  }
  auto no_tokenizer = ParsePreferenceJsonl(R"({"text": "a"})", "t.jsonl", nullptr, [] {
    PreferenceDataOptions o = SftOptions();
    o.bos_id = kBos;
    o.eos_id = kEos;
    return o;
  }());
  ASSERT_FALSE(no_tokenizer.ok());
  EXPECT_NE(
      no_tokenizer.status().message().find(
          "t.jsonl:1: field 'text': text needs a tokenizer (pass one, or write prompt_ids/completion_ids)"),
      std::string::npos)
      << no_tokenizer.status();
  auto empty = ParsePreferenceJsonl("\n", "e.jsonl", &tok, SftOptions());
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no SFT examples"), std::string::npos) << empty.status();
}

TEST(SftExampleTest, RewardModelsAndDpoNameAnSftExampleAsSuch) {
  FakeTokenizer tok;
  for (const char* line : {R"({"prompt": "a", "completion": "b"})", R"({"text": "a"})",
                           R"({"messages": [{"role": "user", "content": "a"}]})"}) {
    auto got = ParsePreferenceJsonl(line, "p.jsonl", &tok, PreferenceDataOptions{});
    ASSERT_FALSE(got.ok()) << line;
    EXPECT_NE(got.status().message().find("p.jsonl:1: an SFT example (text, prompt/completion or messages), "
                                          "but reward models and DPO train on preference pairs"),
              std::string::npos)
        << got.status();
  }
}

}  // namespace
}  // namespace zerofit::data::sft_test
