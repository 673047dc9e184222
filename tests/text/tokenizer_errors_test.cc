// Error paths of TokenizerJson::FromJson: every refusal names the JSON path of what it refuses.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "text/hf/tokenizer_json.h"

namespace zerofit::text {
namespace {

// A minimal valid byte-level BPE tokenizer.json with `pre_tokenizer` and `merges` substituted.
std::string MakeJson(const std::string& pre_tokenizer, const std::string& merges = R"(["a b"])") {
  return R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
    "normalizer": null, "pre_tokenizer": )" +
         pre_tokenizer + R"(, "post_processor": null, "decoder": null,
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "vocab": {"a": 0, "b": 1, "ab": 2},
              "merges": )" +
         merges + "}}";
}

std::string ErrorOf(const std::string& json) {
  absl::StatusOr<std::unique_ptr<TokenizerJson>> t = TokenizerJson::FromJson(json);
  return t.ok() ? "ok" : std::string(t.status().message());
}

TEST(TokenizerErrorsTest, MinimalTokenizerWorks) {
  absl::StatusOr<std::unique_ptr<TokenizerJson>> t = TokenizerJson::FromJson(MakeJson("null"));
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<std::vector<int32_t>> ids = (*t)->Encode("abab", true);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{2, 2}));
  EXPECT_EQ((*t)->vocab_size(), 3);
  EXPECT_EQ((*t)->TokenToId("ab"), 2);
  EXPECT_EQ((*t)->IdToToken(1), "b");
  EXPECT_FALSE((*t)->Decode({7}, false).ok());
  EXPECT_FALSE((*t)->Encode("\xff", false).ok());
}

TEST(TokenizerErrorsTest, UnsupportedTypeNamesItsPath) {
  const std::string json = MakeJson(R"({"type": "Sequence", "pretokenizers": [
      {"type": "ByteLevel", "add_prefix_space": false}, {"type": "Whitespace2"}]})");
  EXPECT_EQ(ErrorOf(json),
            R"(tokenizer.json: pre_tokenizer.pretokenizers[1].type: unsupported "Whitespace2")");
}

TEST(TokenizerErrorsTest, UnsupportedModelAndOptions) {
  std::string json = MakeJson("null");
  json.replace(json.find(R"("type": "BPE")"), 13, R"("type": "Unigram")");
  EXPECT_EQ(ErrorOf(json), R"(tokenizer.json: model.type: unsupported "Unigram")");
  std::string truncated = MakeJson("null");
  truncated.replace(truncated.find(R"("truncation": null)"), 18, R"("truncation": {"max_length": 5})");
  EXPECT_EQ(ErrorOf(truncated), "tokenizer.json: truncation: unsupported (only null)");
  EXPECT_EQ(ErrorOf(MakeJson(R"({"type": "Split", "pattern": {"Regex": "("}, "behavior": "Isolated"})"))
                .rfind("tokenizer.json: pre_tokenizer.pattern.Regex: regex", 0),
            0u);
  EXPECT_EQ(ErrorOf(MakeJson(R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways"})")),
            R"(tokenizer.json: pre_tokenizer.behavior: unsupported "Sideways")");
}

TEST(TokenizerErrorsTest, MalformedJson) {
  const std::string error = ErrorOf(R"({"model": {"type": "BPE",)");
  EXPECT_EQ(error.rfind("tokenizer.json: malformed JSON", 0), 0u) << error;
  EXPECT_EQ(ErrorOf("[1, 2]"), "tokenizer.json: expected an object");
}

TEST(TokenizerErrorsTest, BadMerges) {
  EXPECT_EQ(ErrorOf(MakeJson("null", R"(["a b c"])")),
            R"(tokenizer.json: model.merges[0]: bad merge "a b c" (expected "left right"))");
  EXPECT_EQ(ErrorOf(MakeJson("null", R"(["a b", "a z"])")),
            R"(tokenizer.json: model.merges[1]: merge token "z" is not in the vocabulary)");
  EXPECT_EQ(ErrorOf(MakeJson("null", R"([["b", "a"]])")),
            R"(tokenizer.json: model.merges[0]: merged token "ba" is not in the vocabulary)");
  EXPECT_EQ(ErrorOf(MakeJson("null", R"([["a"]])")),
            R"(tokenizer.json: model.merges[0]: bad merge (expected "left right" or ["left", "right"]))");
  // Pair merges (tokenizers >= 0.20) load like strings.
  EXPECT_EQ(ErrorOf(MakeJson("null", R"([["a", "b"]])")), "ok");
}

TEST(TokenizerErrorsTest, NestingTooDeep) {
  std::string deep = MakeJson("null");
  deep.insert(deep.size() - 1, R"(, "extra": )" + std::string(100, '[') + std::string(100, ']'));
  EXPECT_EQ(ErrorOf(deep), "tokenizer.json: JSON nesting deeper than 64 levels");
  TokenizerJsonLimits small;
  small.max_file_bytes = 10;
  absl::StatusOr<std::unique_ptr<TokenizerJson>> t =
      TokenizerJson::FromJson(MakeJson("null"), "x.json", small);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("exceeds the limit of 10"), std::string::npos);
}

TEST(TokenizerErrorsTest, MissingFile) {
  EXPECT_EQ(TokenizerJson::FromFile("/nonexistent/tokenizer.json").status().code(),
            absl::StatusCode::kNotFound);
}

// Deterministic mutation fuzzing of the loader (the repo has no libFuzzer setup): flipped, dropped and
// inserted bytes must give a tokenizer or an error, never a crash, a hang or an exception.
TEST(TokenizerErrorsTest, MutatedFilesAreRefusedCleanly) {
  const std::string seed = MakeJson(R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern":
      {"Regex": "\\s+|\\p{L}+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel",
      "add_prefix_space": false}]})");
  std::mt19937 rng(7);
  const char inserts[] = "[]{}\",:0-9e\\ ";
  int loaded = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string json = seed;
    for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0; --edits) {
      const size_t at = rng() % json.size();
      switch (rng() % 3) {
        case 0:
          json[at] = static_cast<char>(rng());
          break;
        case 1:
          json.erase(at, 1 + rng() % 4);
          break;
        default:
          json.insert(at, 1, inserts[rng() % (sizeof(inserts) - 1)]);
      }
      if (json.empty()) json = "{";
    }
    absl::StatusOr<std::unique_ptr<TokenizerJson>> t = TokenizerJson::FromJson(json);
    if (t.ok()) {
      ++loaded;
      EXPECT_TRUE((*t)->Encode("ab ba\xC3\xA9", true).ok());
    } else {
      EXPECT_FALSE(t.status().message().empty());
    }
  }
  EXPECT_GT(loaded, 0);  // some mutations (inside strings) stay valid
}

}  // namespace
}  // namespace zerofit::text
