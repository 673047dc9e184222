// Behaviour of individual tokenizer.json features on small hand-written files (the golden tests cover the
// five real tokenizers): ignore_merges, byte_fallback + unk fusing, Split behaviours, added-token flags,
// and EncodeBatch on a thread pool.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "nlohmann/json.hpp"
#include "text/hf/batch_encode.h"
#include "text/hf/byte_level.h"
#include "text/hf/tokenizer_json.h"
#include "text/regex.h"

namespace zerofit::text {
namespace {

using Ids = std::vector<int32_t>;

std::unique_ptr<TokenizerJson> Make(const std::string& json) {
  absl::StatusOr<std::unique_ptr<TokenizerJson>> t = TokenizerJson::FromJson(json);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

Ids Encode(const TokenizerJson& t, const std::string& text, bool add_special = false) {
  absl::StatusOr<Ids> ids = t.Encode(text, add_special);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : Ids{};
}

// vocab: a=0 b=1 c=2 ab=3 abc=4 bc=5 <unk>=6 <0x78>=7 (the byte 'x') _=8
std::string Model(const std::string& extra) {
  return R"({"type": "BPE", "unk_token": "<unk>", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "bc": 5,
             "<unk>": 6, "<0x78>": 7, "_": 8}, "merges": [["b", "c"], ["a", "b"], ["ab", "c"]])" +
         extra + "}";
}

std::string File(const std::string& model, const std::string& pre_tokenizer = "null",
                 const std::string& added = "[]") {
  return R"({"added_tokens": )" + added + R"(, "normalizer": null, "pre_tokenizer": )" + pre_tokenizer +
         R"(, "post_processor": null, "decoder": null, "model": )" + model + "}";
}

TEST(TokenizerFeaturesTest, MergesFollowRanks) {
  auto t = Make(File(Model("")));
  ASSERT_NE(t, nullptr);
  // "bc" has rank 0, so "abc" = a + bc, and (a, bc) has no merge.
  EXPECT_EQ(Encode(*t, "abc"), (Ids{0, 5}));
  EXPECT_EQ(Encode(*t, "ab"), (Ids{3}));
}

TEST(TokenizerFeaturesTest, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  auto t = Make(File(Model(R"(, "ignore_merges": true)")));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Encode(*t, "abc"), (Ids{4}));
  EXPECT_EQ(Encode(*t, "abcb"), (Ids{0, 5, 1}));
}

TEST(TokenizerFeaturesTest, UnknownCharactersFuseOrFallBackToBytes) {
  auto fused = Make(File(Model(R"(, "fuse_unk": true)")));
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(Encode(*fused, "a??b"), (Ids{0, 6, 1}));
  auto unfused = Make(File(Model("")));
  EXPECT_EQ(Encode(*unfused, "a??b"), (Ids{0, 6, 6, 1}));
  auto fallback = Make(File(Model(R"(, "byte_fallback": true, "fuse_unk": true)")));
  EXPECT_EQ(Encode(*fallback, "axy"), (Ids{0, 7, 6}));  // 'x' has a byte token, 'y' does not
  auto no_unk = Make(File(R"({"type": "BPE", "vocab": {"a": 0}, "merges": []})"));
  EXPECT_EQ(Encode(*no_unk, "a?a"), (Ids{0, 0}));  // no unk token: HF drops the character
}

TEST(TokenizerFeaturesTest, SplitBehaviours) {
  auto split = [](const std::string& behavior, bool invert) {
    return File(Model(""), R"({"type": "Split", "pattern": {"String": "_"}, "behavior": ")" + behavior +
                               R"(", "invert": )" + (invert ? "true" : "false") + "}");
  };
  // "ab_c": with "_" isolated "ab" "_" "c"; removed "ab" "c"; merged with previous "ab_" -> a b _ ...
  EXPECT_EQ(Encode(*Make(split("Isolated", false)), "ab_c"), (Ids{3, 8, 2}));
  EXPECT_EQ(Encode(*Make(split("Removed", false)), "ab_c"), (Ids{3, 2}));
  EXPECT_EQ(Encode(*Make(split("MergedWithPrevious", false)), "ab_c"), (Ids{3, 8, 2}));
  EXPECT_EQ(Encode(*Make(split("MergedWithNext", false)), "ab_bc"), (Ids{3, 8, 5}));
  // Inverted: the pattern marks what to keep; Removed then drops everything but "_".
  EXPECT_EQ(Encode(*Make(split("Removed", true)), "ab_c"), (Ids{8}));
}

TEST(TokenizerFeaturesTest, AddedTokenFlags) {
  const std::string added = R"([
      {"id": 9, "content": "<x>", "single_word": false, "lstrip": true, "rstrip": true, "normalized": false,
       "special": true},
      {"id": 10, "content": "ab", "single_word": true, "lstrip": false, "rstrip": false, "normalized": false,
       "special": false}])";
  auto t = Make(File(Model(R"(, "fuse_unk": true)"), "null", added));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Encode(*t, "a <x> b"), (Ids{0, 9, 1}));  // lstrip/rstrip swallow the spaces
  EXPECT_EQ(Encode(*t, "ab c"), (Ids{3, 6, 2}));     // a whole word; "ab" keeps the model's id, as in HF
  EXPECT_EQ(Encode(*t, "abc"), (Ids{0, 5}));         // inside a word: not the added token
  EXPECT_EQ(*t->Decode({0, 9, 1}, true), "a b");
  EXPECT_EQ(*t->Decode({0, 9, 1}, false), "a <x> b");
  EXPECT_EQ(t->TokenToId("<x>"), 9);  // the next id after the 9-entry model vocabulary
  EXPECT_EQ(t->vocab_size(), 10);
}

TEST(TokenizerFeaturesTest, EncodeBatchMatchesEncode) {
  auto t = Make(File(Model("")));
  ASSERT_NE(t, nullptr);
  std::vector<std::string> texts;
  for (int i = 0; i < 100; ++i) texts.push_back(std::string(i % 7, 'a') + "bc" + std::string(i % 3, 'b'));
  std::vector<std::string_view> views(texts.begin(), texts.end());
  core::ThreadPool pool(4);
  absl::StatusOr<std::vector<Ids>> batch = EncodeBatch(*t, views, false, pool);
  ASSERT_TRUE(batch.ok()) << batch.status();
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ((*batch)[i], Encode(*t, texts[i])) << texts[i];
  views.push_back("\xff");
  absl::StatusOr<std::vector<Ids>> bad = EncodeBatch(*t, views, false, pool);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "text 100: text is not valid UTF-8");
}

// Hugging Face runs these patterns on Oniguruma, whose \s is Unicode White_Space (with U+0085, which
// PCRE2's \s lacks); the translation keeps that meaning inside and outside classes.
TEST(TokenizerFeaturesTest, RegexWhitespaceIsOnigurumas) {
  auto spans = [](const std::string& pattern, const std::string& text) {
    absl::StatusOr<std::unique_ptr<Regex>> regex = Regex::Compile(pattern);
    EXPECT_TRUE(regex.ok()) << regex.status();
    std::vector<std::pair<size_t, size_t>> out;
    EXPECT_TRUE((*regex)->FindAll(text, &out).ok());
    return out;
  };
  using Spans = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(spans(R"(\s+)",
                  "a\xC2\x85\xE3\x80\x80"
                  "b"),
            (Spans{{1, 6}}));                                                      // U+0085 U+3000
  EXPECT_EQ(spans(R"([^\s\p{L}]+)", "a\xC2\x85!?b"), (Spans{{3, 5}}));             // class with \s inside
  EXPECT_EQ(spans(R"(\s+(?!\S)|\s+)", "a   b"), (Spans{{1, 3}, {3, 4}}));          // GPT-2's look-ahead
  EXPECT_EQ(spans(R"(\p{N})", "x\xD9\xA3\xEF\xBC\x95"), (Spans{{1, 3}, {3, 6}}));  // Arabic-Indic, fullwidth
  EXPECT_FALSE(Regex::Compile("(").ok());
}

// Normalizers against the Rust library: a byte-level model without merges (id = byte) shows the normalized
// bytes. Expected strings were produced by npm `tokenizers` 0.23.2 with the same files.
TEST(TokenizerFeaturesTest, NormalizersMatchRust) {
  const std::vector<std::string> kInputs = {
      "\xC3\x85ngstr\xC3\xB6m \xEF\xAC\x81 \xE2\x91\xA0\xE2\x91\xA1",
      "  \xC4\xB0STANBUL \xCE\xA3\xCE\x91\xCE\xA3 Stra\xC3\x9F"
      "e  ",
      "e\xCC\x81 \xC2\xA0x\xE3\x80\x80 ",
      "\xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93 \xE2\x84\x8C"};
  const std::vector<std::pair<std::string, std::vector<std::string>>> kExpected = {
      {"NFD",
       {"A\xCC\x8Angstro\xCC\x88m \xEF\xAC\x81 \xE2\x91\xA0\xE2\x91\xA1",
        "  I\xCC\x87STANBUL \xCE\xA3\xCE\x91\xCE\xA3 Stra\xC3\x9F"
        "e  ",
        "e\xCC\x81 \xC2\xA0x\xE3\x80\x80 ",
        "\xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93 \xE2\x84\x8C"}},
      {"NFKC",
       {"\xC3\x85ngstr\xC3\xB6m fi 12",
        "  \xC4\xB0STANBUL \xCE\xA3\xCE\x91\xCE\xA3 Stra\xC3\x9F"
        "e  ",
        "\xC3\xA9  x  ", "ABC123 H"}},
      {"NFKD",
       {"A\xCC\x8Angstro\xCC\x88m fi 12",
        "  I\xCC\x87STANBUL \xCE\xA3\xCE\x91\xCE\xA3 Stra\xC3\x9F"
        "e  ",
        "e\xCC\x81  x  ", "ABC123 H"}},
      {"Lowercase",
       {"\xC3\xA5ngstr\xC3\xB6m \xEF\xAC\x81 \xE2\x91\xA0\xE2\x91\xA1",
        "  i\xCC\x87stanbul \xCF\x83\xCE\xB1\xCF\x83 stra\xC3\x9F"
        "e  ",
        "e\xCC\x81 \xC2\xA0x\xE3\x80\x80 ",
        "\xEF\xBD\x81\xEF\xBD\x82\xEF\xBD\x83\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93 \xE2\x84\x8C"}},
      {"Strip",
       {"\xC3\x85ngstr\xC3\xB6m \xEF\xAC\x81 \xE2\x91\xA0\xE2\x91\xA1",
        "\xC4\xB0STANBUL \xCE\xA3\xCE\x91\xCE\xA3 Stra\xC3\x9F"
        "e",
        "e\xCC\x81 \xC2\xA0x",
        "\xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93 \xE2\x84\x8C"}},
      {"ReplaceRegex",
       {"\xC3\x85ngstr\xC3\xB6m_\xEF\xAC\x81_\xE2\x91\xA0\xE2\x91\xA1",
        "_\xC4\xB0STANBUL_\xCE\xA3\xCE\x91\xCE\xA3_Stra\xC3\x9F"
        "e_",
        "e\xCC\x81_x_",
        "\xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93_\xE2\x84\x8C"}},
  };
  nlohmann::json vocab = nlohmann::json::object();
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::Get();
  for (int b = 0; b < 256; ++b) vocab[std::string(alphabet.Glyph(static_cast<uint8_t>(b)))] = b;
  for (const auto& [type, outputs] : kExpected) {
    nlohmann::json normalizer = {{"type", type}};
    if (type == "Strip") normalizer = {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}};
    if (type == "ReplaceRegex") {
      normalizer = {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", "_"}};
    }
    const nlohmann::json file = {
        {"added_tokens", nlohmann::json::array()},
        {"normalizer", normalizer},
        {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
    auto t = Make(file.dump());
    ASSERT_NE(t, nullptr);
    for (size_t i = 0; i < kInputs.size(); ++i) {
      std::string bytes;
      for (const int32_t id : Encode(*t, kInputs[i])) bytes.push_back(static_cast<char>(id));
      EXPECT_EQ(bytes, outputs[i]) << type << " on input " << i;
    }
  }
}

}  // namespace
}  // namespace zerofit::text
