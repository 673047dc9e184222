#include "worker/data/preference_dataset.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/worker/data/test_support.h"
#include "worker/data/data_report.h"

namespace zerofit::data {
namespace {

using testing::FakeTokenizer;
using testing::ScopedTempDir;
using Ids = std::vector<int32_t>;

constexpr int32_t kBos = 2;
constexpr int32_t kEos = 3;

std::vector<int32_t> Chars(const std::string& s) {
  std::vector<int32_t> ids;
  for (char c : s) ids.push_back(FakeTokenizer::Id(c));
  return ids;
}

// Pre-tokenized options: no tokenizer, so the special ids and the vocabulary come from the options.
PreferenceDataOptions IdOptions() {
  PreferenceDataOptions o;
  o.bos_id = kBos;
  o.eos_id = kEos;
  o.vocab_size = 50;
  return o;
}

TEST(PreferenceDatasetTest, LoadsTextLinesWithTokenizer) {
  ScopedTempDir dir;
  const std::string path =
      dir.Write("prefs.jsonl",
                "{\"prompt\": \"1+2=\", \"chosen\": \"3\", \"rejected\": \"4\", \"id\": 7}\n"
                "\n"
                "   \r\n"
                "{\"prompt\": \"\", \"chosen\": \"ab\", \"rejected\": \"c\"}\r\n");
  FakeTokenizer tok;
  PreferenceDataStats stats;
  auto pairs = LoadPreferenceJsonl(path, &tok, PreferenceDataOptions{}, &stats);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  ASSERT_EQ(pairs->size(), 2u);
  const PreferencePair& p = (*pairs)[0];
  Ids want_prompt = {kBos};
  for (int32_t id : Chars("1+2=")) want_prompt.push_back(id);
  EXPECT_EQ(p.prompt, want_prompt);
  EXPECT_EQ(p.chosen, (Ids{FakeTokenizer::Id('3'), kEos}));
  EXPECT_EQ(p.rejected, (Ids{FakeTokenizer::Id('4'), kEos}));
  EXPECT_EQ(p.source_line, 1u);
  // Blank lines (also "   \r") are skipped but counted; CRLF line ends are accepted; the prompt may be empty.
  EXPECT_EQ((*pairs)[1].source_line, 4u);
  EXPECT_EQ((*pairs)[1].prompt, (Ids{kBos}));
  EXPECT_EQ((*pairs)[1].chosen, (Ids{FakeTokenizer::Id('a'), FakeTokenizer::Id('b'), kEos}));
  EXPECT_EQ(stats.pairs, 2u);
  EXPECT_EQ(stats.prompts_truncated, 0u);
  EXPECT_EQ(stats.longest_sequence, 7u);
}

TEST(PreferenceDatasetTest, LoadsPretokenizedLinesWithoutTokenizer) {
  auto pairs = ParsePreferenceJsonl(
      "{\"prompt_ids\": [10, 11], \"chosen_ids\": [20], \"rejected_ids\": [30, 31]}\n"
      "{\"prompt_ids\": [], \"chosen_ids\": [49], \"rejected_ids\": [0]}\n",
      "ids.jsonl", nullptr, IdOptions());
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  ASSERT_EQ(pairs->size(), 2u);
  EXPECT_EQ((*pairs)[0].prompt, (Ids{kBos, 10, 11}));
  EXPECT_EQ((*pairs)[0].chosen, (Ids{20, kEos}));
  EXPECT_EQ((*pairs)[0].rejected, (Ids{30, 31, kEos}));
  EXPECT_EQ((*pairs)[1].prompt, (Ids{kBos}));
}

// TRL's margin column: a pair's required score gap, kept through truncation (the report's TruncatePair).
TEST(PreferenceDatasetTest, AMarginIsReadAndKeptThroughTruncation) {
  auto pairs = ParsePreferenceJsonl(
      "{\"prompt_ids\": [10, 11], \"chosen_ids\": [20, 21, 22], \"rejected_ids\": [30], \"margin\": 2.5}\n"
      "{\"prompt_ids\": [10], \"chosen_ids\": [20], \"rejected_ids\": [30], \"margin\": null}\n"
      "{\"prompt_ids\": [10], \"chosen_ids\": [20], \"rejected_ids\": [30], \"margin\": -1}\n",
      "m.jsonl", nullptr, IdOptions());
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ((*pairs)[0].margin, 2.5);
  EXPECT_EQ((*pairs)[1].margin, 0.0);
  EXPECT_EQ((*pairs)[2].margin, -1.0);
  PreferenceDataOptions limits = IdOptions();
  limits.max_length = 4;
  limits.max_prompt_length = 2;
  const PreferencePair cut = TruncatePair((*pairs)[0], kBos, kEos, limits);
  EXPECT_EQ(cut.chosen.size(), 2u);
  EXPECT_EQ(cut.margin, 2.5);
}

// An SFT example's scored flags (assistant_only_loss) follow its completion through the training loader's
// second truncation (the report's TruncatePair), which once rebuilt the example without them.
TEST(PreferenceDatasetTest, ScoredFlagsAreKeptThroughTruncation) {
  PreferenceDataOptions whole = IdOptions();
  whole.sft = true;
  whole.max_length = 0;
  const PreferencePair example =
      AssemblePreferencePair({10, 11}, {20, 21, 22, 23}, {}, kBos, kEos, whole, 1, {1, 0, 0, 1});
  ASSERT_EQ(example.chosen_scored, (std::vector<uint8_t>{1, 0, 0, 1, 1})) << "EOS, after a scored token";
  PreferenceDataOptions limits = whole;
  limits.max_length = 7;
  limits.max_prompt_length = 3;
  const PreferencePair cut = TruncatePair(example, kBos, kEos, limits);
  EXPECT_EQ(cut.chosen, (Ids{20, 21, 22, 23}));
  EXPECT_EQ(cut.chosen_scored, (std::vector<uint8_t>{1, 0, 0, 1}));
  EXPECT_EQ(TruncatePair(example, kBos, kEos, whole).chosen_scored, example.chosen_scored);
}

TEST(PreferenceDatasetTest, TextAndIdsLinesMayBeMixed) {
  FakeTokenizer tok;
  const std::string ids_line = "{\"prompt_ids\": [" + std::to_string(FakeTokenizer::Id('x')) +
                               "], \"chosen_ids\": [" + std::to_string(FakeTokenizer::Id('a')) +
                               "], \"rejected_ids\": [" + std::to_string(FakeTokenizer::Id('b')) + "]}";
  auto pairs = ParsePreferenceJsonl(R"({"prompt": "x", "chosen": "a", "rejected": "b"})"
                                    "\n" +
                                        ids_line,
                                    "mixed.jsonl", &tok, PreferenceDataOptions{});
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  ASSERT_EQ(pairs->size(), 2u);
  EXPECT_EQ((*pairs)[0].prompt, (*pairs)[1].prompt);
  EXPECT_EQ((*pairs)[0].chosen, (*pairs)[1].chosen);
  EXPECT_EQ((*pairs)[0].rejected, (*pairs)[1].rejected);
}

// Each malformed line is preceded by a good line and a blank line, so it is line 3 of the file.
struct BadLine {
  std::string line;
  bool with_tokenizer;
  std::string want;  // substring of the error message
};

TEST(PreferenceDatasetTest, MalformedLinesNameFileLineAndField) {
  const std::vector<BadLine> cases = {
      {R"({"prompt": "a", "chosen": 5, "rejected": "b"})", true,
       "bad.jsonl:3: field 'chosen': expected a string, got number"},
      {R"({"prompt": "a", "chosen": "b"})", true, "bad.jsonl:3: field 'rejected': missing"},
      {R"({"prompt": null, "chosen": "b", "rejected": "c"})", true,
       "bad.jsonl:3: field 'prompt': expected a string, got null"},
      {R"({"prompt": "a", "chosen": "", "rejected": "c"})", true,
       "bad.jsonl:3: field 'chosen': empty response"},
      {R"({"prompt": "a", "chosen": "b", "rejected": "é"})", true,
       "bad.jsonl:3: field 'rejected': tokenizer:"},
      {R"({"prompt": "a", "chosen": "b", )", true, "bad.jsonl:3: invalid JSON"},
      {R"(["a", "b", "c"])", true, "bad.jsonl:3: expected a JSON object, got array"},
      {R"({"prompt": "a", "chosen": "b", "rejected": "c"})", false,
       "bad.jsonl:3: field 'prompt': text needs a tokenizer"},
      {R"({"prompt_ids": [1], "chosen_ids": [1, 999], "rejected_ids": [2]})", false,
       "bad.jsonl:3: field 'chosen_ids': element 1: token id 999 is outside [0, 50)"},
      {R"({"prompt_ids": [-1], "chosen_ids": [1], "rejected_ids": [2]})", false,
       "bad.jsonl:3: field 'prompt_ids': element 0: token id -1 is outside [0, 50)"},
      {R"({"prompt_ids": [1], "chosen_ids": [1.5], "rejected_ids": [2]})", false,
       "bad.jsonl:3: field 'chosen_ids': element 0: expected an integer token id, got number 1.5"},
      {R"({"prompt_ids": "1 2", "chosen_ids": [1], "rejected_ids": [2]})", false,
       "bad.jsonl:3: field 'prompt_ids': expected an array of integers, got string"},
      {R"({"prompt_ids": [1], "chosen_ids": [1]})", false, "bad.jsonl:3: field 'rejected_ids': missing"},
      {R"({"prompt_ids": [1], "chosen_ids": [1], "rejected_ids": []})", false,
       "bad.jsonl:3: field 'rejected_ids': empty response"},
      {R"({"prompt": "a", "chosen": "b", "rejected": "c", "margin": "big"})", true,
       "bad.jsonl:3: field 'margin': expected a finite number, got \"big\""},
      {R"({"prompt": "a", "chosen": "b", "rejected": "c", "margin": 1e400})", true,
       "bad.jsonl:3: invalid JSON"},
      // 300,000 nested lists overflowed the stack while the parsed value was copied.
      {R"({"prompt": "a", "chosen": )" + std::string(300000, '[') + std::string(300000, ']') +
           R"(, "rejected": "b"})",
       true, "bad.jsonl:3: JSON nested deeper than 64 levels"},
  };
  FakeTokenizer tok;
  for (const BadLine& c : cases) {
    const std::string good = c.with_tokenizer
                                 ? R"({"prompt": "p", "chosen": "c", "rejected": "r"})"
                                 : R"({"prompt_ids": [5], "chosen_ids": [6], "rejected_ids": [7]})";
    const std::string contents = good + "\n\n" + c.line + "\n" + good + "\n";
    auto pairs = ParsePreferenceJsonl(contents, "bad.jsonl", c.with_tokenizer ? &tok : nullptr,
                                      c.with_tokenizer ? PreferenceDataOptions{} : IdOptions());
    ASSERT_FALSE(pairs.ok()) << c.line;
    EXPECT_EQ(pairs.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(pairs.status().message().find(c.want), std::string::npos)
        << "line: " << c.line << "\nerror: " << pairs.status().message() << "\nwanted: " << c.want;
  }
}

TEST(PreferenceDatasetTest, TokenIdsAreCheckedAgainstTheTokenizerVocabulary) {
  FakeTokenizer tok;  // vocab 99
  auto pairs = ParsePreferenceJsonl(R"({"prompt_ids": [1], "chosen_ids": [99], "rejected_ids": [2]})",
                                    "v.jsonl", &tok, PreferenceDataOptions{});
  ASSERT_FALSE(pairs.ok());
  EXPECT_NE(pairs.status().message().find(
                "v.jsonl:1: field 'chosen_ids': element 0: token id 99 is outside [0, 99)"),
            std::string::npos)
      << pairs.status();
}

TEST(PreferenceDatasetTest, FileErrors) {
  ScopedTempDir dir;
  auto missing = LoadPreferenceJsonl(dir.File("nope.jsonl"), nullptr, IdOptions());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.jsonl: cannot open"), std::string::npos);

  auto empty = LoadPreferenceJsonl(dir.Write("empty.jsonl", "\n\n"), nullptr, IdOptions());
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty.jsonl:2: no preference pairs"), std::string::npos);
}

TEST(PreferenceDatasetTest, OptionValidation) {
  FakeTokenizer tok;
  PreferenceDataOptions o;
  o.max_length = 8;
  o.max_prompt_length = 8;
  absl::Status s = ValidatePreferenceDataOptions(o, &tok);
  EXPECT_NE(s.message().find("max_prompt_length (8) must be less than max_length (8)"), std::string::npos)
      << s;

  PreferenceDataOptions with_ids = IdOptions();  // vocab_size 50, the tokenizer has 99
  s = ValidatePreferenceDataOptions(with_ids, &tok);
  EXPECT_NE(s.message().find("vocab_size 50 contradict the tokenizer's 2 / 3 / 99"), std::string::npos) << s;
  with_ids.vocab_size = tok.vocab_size();  // repeating the tokenizer's values is fine
  EXPECT_TRUE(ValidatePreferenceDataOptions(with_ids, &tok).ok());

  PreferenceDataOptions no_bos;  // no tokenizer, no bos_id, add_bos on
  s = ValidatePreferenceDataOptions(no_bos, nullptr);
  EXPECT_NE(s.message().find("add_bos needs a BOS id"), std::string::npos) << s;
  no_bos.add_bos = false;
  no_bos.eos_id = 3;
  EXPECT_TRUE(ValidatePreferenceDataOptions(no_bos, nullptr).ok());

  // The file loader reports option errors with the file name.
  auto pairs = ParsePreferenceJsonl("{}", "opts.jsonl", &tok, o);
  ASSERT_FALSE(pairs.ok());
  EXPECT_NE(pairs.status().message().find("opts.jsonl: max_prompt_length"), std::string::npos);
}

// --- Truncation rules (preference_dataset.h) on crafted examples: BOS = 1, EOS = 2. ---

PreferenceDataOptions Limits(int64_t max_length, int64_t max_prompt_length) {
  PreferenceDataOptions o;
  o.max_length = max_length;
  o.max_prompt_length = max_prompt_length;
  return o;
}

TEST(TruncationTest, FitsExactlyNoChange) {
  // 1 + 3 + 3 + 1 = 8 = max_length.
  PreferencePair p = AssemblePreferencePair({10, 11, 12}, {20, 21, 22}, {30}, 1, 2, Limits(8, 2), 5);
  EXPECT_EQ(p.prompt, (Ids{1, 10, 11, 12}));  // longer than max_prompt_length, but nothing is too long
  EXPECT_EQ(p.chosen, (Ids{20, 21, 22, 2}));
  EXPECT_EQ(p.rejected, (Ids{30, 2}));
  EXPECT_EQ(p.source_line, 5u);
}

TEST(TruncationTest, PromptCutFromTheLeftKeepingBos) {
  // 1 + 10 + 4 > 8: prompt part -> 4 tokens ([BOS] + the last 3), then the responses fit (budget 4).
  PreferencePair p = AssemblePreferencePair({10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, {20, 21}, {30, 31, 32},
                                            1, 2, Limits(8, 4), 1);
  EXPECT_EQ(p.prompt, (Ids{1, 17, 18, 19}));
  EXPECT_EQ(p.chosen, (Ids{20, 21, 2}));
  EXPECT_EQ(p.rejected, (Ids{30, 31, 32, 2}));
}

TEST(TruncationTest, ResponsesCutFromTheRightIndependentlyAndLoseEos) {
  // Prompt part 3 <= max_prompt_length: kept whole. Budget 6 - 3 = 3 tokens per response.
  PreferencePair p =
      AssemblePreferencePair({10, 11}, {20, 21, 22, 23, 24, 25, 26, 27, 28, 29}, {30}, 1, 2, Limits(6, 4), 1);
  EXPECT_EQ(p.prompt, (Ids{1, 10, 11}));
  EXPECT_EQ(p.chosen, (Ids{20, 21, 22}));  // cut: no EOS, the response did not end here
  EXPECT_EQ(p.rejected, (Ids{30, 2}));     // untouched: the two are truncated independently
  // Exactly one token too long: the EOS is what goes.
  PreferencePair q = AssemblePreferencePair({10, 11}, {20, 21, 22}, {30}, 1, 2, Limits(5, 4), 1);
  EXPECT_EQ(q.chosen, (Ids{20, 21}));
}

TEST(TruncationTest, BothPromptAndResponse) {
  // Prompt part 1 + 6 > 3 -> [BOS, 14, 15]; budget 6 - 3 = 3: chosen cut to 3, rejected keeps EOS.
  PreferencePair p =
      AssemblePreferencePair({10, 11, 12, 13, 14, 15}, {20, 21, 22, 23, 24}, {30, 31}, 1, 2, Limits(6, 3), 1);
  EXPECT_EQ(p.prompt, (Ids{1, 14, 15}));
  EXPECT_EQ(p.chosen, (Ids{20, 21, 22}));
  EXPECT_EQ(p.rejected, (Ids{30, 31, 2}));
}

// TRL appends eos_token to a text that does not already end with it: a response written with its EOS keeps
// one. Its truncation counts and the report's second truncation (TruncatePair) agree with that.
TEST(TruncationTest, AResponseThatEndsWithEosGetsNoSecond) {
  PreferenceDataOptions o = IdOptions();
  o.max_length = 0;
  PreferenceDataStats stats;
  auto pairs = ParsePreferenceJsonl(
      "{\"prompt_ids\": [5], \"chosen_ids\": [6, 7, " + std::to_string(kEos) + "], \"rejected_ids\": [8]}\n",
      "e.jsonl", nullptr, o, &stats);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ((*pairs)[0].chosen, (Ids{6, 7, kEos}));
  EXPECT_EQ((*pairs)[0].rejected, (Ids{8, kEos}));
  EXPECT_EQ(stats.responses_truncated, 0u);
  o.max_length = 4;  // [BOS 5] + 2: the chosen response loses its EOS, the rejected one fits
  o.max_prompt_length = 2;
  const PreferencePair cut = TruncatePair((*pairs)[0], kBos, kEos, o);
  EXPECT_EQ(cut.chosen, (Ids{6, 7}));
  EXPECT_EQ(cut.rejected, (Ids{8, kEos}));
  EXPECT_EQ(TruncatePair((*pairs)[0], kBos, kEos, IdOptions()).chosen, (Ids{6, 7, kEos}));
  PreferenceDataStats cut_stats;
  auto loaded_cut = ParsePreferenceJsonl(
      "{\"prompt_ids\": [5], \"chosen_ids\": [6, 7, " + std::to_string(kEos) + "], \"rejected_ids\": [8]}\n",
      "e.jsonl", nullptr, o, &cut_stats);
  ASSERT_TRUE(loaded_cut.ok()) << loaded_cut.status();
  EXPECT_EQ((*loaded_cut)[0].chosen, cut.chosen) << "loading with the limits cuts as TruncatePair does";
  EXPECT_EQ(cut_stats.responses_truncated, 1u);
}

TEST(TruncationTest, WithoutBosEosAndWithoutLimit) {
  PreferenceDataOptions o = Limits(4, 2);
  o.add_bos = false;
  o.add_eos = false;
  PreferencePair p = AssemblePreferencePair({10, 11, 12}, {20, 21, 22}, {30}, -1, -1, o, 1);
  EXPECT_EQ(p.prompt, (Ids{11, 12}));
  EXPECT_EQ(p.chosen, (Ids{20, 21}));
  EXPECT_EQ(p.rejected, (Ids{30}));

  PreferencePair unlimited = AssemblePreferencePair(Ids(300, 10), Ids(900, 20), {30}, 1, 2, Limits(0, 0), 1);
  EXPECT_EQ(unlimited.prompt.size(), 301u);
  EXPECT_EQ(unlimited.chosen.size(), 901u);
}

TEST(TruncationTest, LoaderAppliesRulesAndCountsThem) {
  PreferenceDataOptions o = IdOptions();
  o.max_length = 6;
  o.max_prompt_length = 3;
  PreferenceDataStats stats;
  auto pairs = ParsePreferenceJsonl(
      R"({"prompt_ids": [10, 11, 12, 13, 14, 15], "chosen_ids": [20, 21, 22, 23, 24], "rejected_ids": [30, 31]})"
      "\n"
      R"({"prompt_ids": [10], "chosen_ids": [20], "rejected_ids": [30]})",
      "t.jsonl", nullptr, o, &stats);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ((*pairs)[0].prompt, (Ids{kBos, 14, 15}));
  EXPECT_EQ((*pairs)[0].chosen, (Ids{20, 21, 22}));
  EXPECT_EQ((*pairs)[0].rejected, (Ids{30, 31, kEos}));
  EXPECT_EQ(stats.pairs, 2u);
  EXPECT_EQ(stats.prompts_truncated, 1u);
  EXPECT_EQ(stats.responses_truncated, 1u);
  EXPECT_EQ(stats.longest_sequence, 6u);
}

}  // namespace
}  // namespace zerofit::data
