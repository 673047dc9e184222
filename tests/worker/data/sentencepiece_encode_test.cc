// spm_bridge::Processor::Encode (issue 29): SentencePiece's own ids, in time linear in the text.
// SentencePiece without byte fallback merges a run of unknown characters into one unk in O(run^2); the bridge
// encodes with a byte-fallback twin of the model and collapses each run of byte ids into one unk instead.
#include <time.h>

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/worker/data/test_support.h"
#include "worker/data/sentencepiece_bridge.h"
#include "worker/data/sentencepiece_tokenizer.h"
#include "worker/data/tokenizer_trainer.h"

namespace zerofit::data {
namespace {

using testing::ScopedTempDir;

struct ModelSpec {
  const char* name;
  const char* corpus;  // "arith": equations as zerofit_make_arith_prefs writes them; "english": sentences
  const char* model_type;
  const char* normalization_rule;
  bool add_dummy_prefix;
};

// The arithmetic example's settings (examples/make_arith_prefs.cc: identity, no dummy prefix, digits split)
// and Llama/T5-like ones with merges, NFKC and a dummy prefix, for both model types.
constexpr ModelSpec kModels[] = {
    {"arith_bpe", "arith", "bpe", "identity", false},
    {"arith_unigram", "arith", "unigram", "identity", false},
    {"english_bpe_nfkc", "english", "bpe", "nmt_nfkc", true},
    {"english_unigram_nfkc", "english", "unigram", "nmt_nfkc", true},
    {"english_bpe_identity", "english", "bpe", "identity", false},
};

std::string Corpus(const std::string& kind) {
  std::string corpus;
  std::mt19937 rng(29);
  if (kind == "arith") {
    for (int i = 0; i < 300; ++i) {
      const int a = static_cast<int>(rng() % 1000), b = static_cast<int>(rng() % 1000);
      corpus += std::to_string(a) + "+" + std::to_string(b) + "=" + std::to_string(a + b) + "\n";
    }
    return corpus;
  }
  const char* words[] = {"the",     "cat",  "sat",   "on",    "a",   "mat", "and", "then", "ran", "to",
                         "another", "room", "where", "there", "was", "no",  "one", "at",   "all", "tonight"};
  for (int i = 0; i < 400; ++i) {
    for (int w = 0; w < 8; ++w) corpus += std::string(w ? " " : "") + words[rng() % std::size(words)];
    corpus += ".\n";
  }
  return corpus;
}

std::string Train(const ScopedTempDir& dir, const ModelSpec& spec) {
  TokenizerTrainOptions o;
  o.corpus_path = dir.Write(std::string(spec.name) + ".txt", Corpus(spec.corpus));
  o.model_path = dir.File(std::string(spec.name) + ".model");
  o.model_type = spec.model_type;
  o.normalization_rule = spec.normalization_rule;
  o.add_dummy_prefix = spec.add_dummy_prefix;
  o.vocab_size = std::string(spec.corpus) == "arith" ? 64 : 120;
  if (std::string(spec.corpus) == "arith") o.required_chars = "0123456789+=";
  const absl::Status s = TrainSentencePieceTokenizer(o);
  EXPECT_TRUE(s.ok()) << spec.name << ": " << s;
  return o.model_path;
}

std::unique_ptr<spm_bridge::Processor> Load(const std::string& path) {
  std::string error;
  std::unique_ptr<spm_bridge::Processor> p = spm_bridge::Processor::Load(path, &error);
  EXPECT_NE(p, nullptr) << path << ": " << error;
  return p;
}

// Random text from units the models know (digits, words, spaces) and do not (letters outside the corpus,
// CJK, emoji, NFKC-folded and combining characters, tabs, an invalid UTF-8 byte), each repeated 1-40 times
// so that unknown runs of every length and every neighbour occur.
std::string RandomText(std::mt19937& rng) {
  static const char* const kUnits[] = {"1",
                                       "7",
                                       "+",
                                       "=",
                                       " ",
                                       "  ",
                                       "the",
                                       "cat ",
                                       "x",
                                       "Q",
                                       "\xe4\xb8\xad",
                                       "\xf0\x9f\xa4\x97",
                                       "\xef\xbc\xa1" /* fullwidth A */,
                                       "\xef\xac\x81" /* fi ligature */,
                                       "e\xcc\x81" /* e + combining acute */,
                                       "\t",
                                       "\n",
                                       "\xff",
                                       "\xe2\x96\x81" /* the metaspace itself */,
                                       "<0x41>",
                                       "<unk>"};
  std::string text;
  const int units = static_cast<int>(rng() % 60);
  for (int u = 0; u < units; ++u) {
    const char* unit = kUnits[rng() % std::size(kUnits)];
    const int repeat = rng() % 4 == 0 ? 1 + static_cast<int>(rng() % 40) : 1;
    for (int r = 0; r < repeat; ++r) text += unit;
  }
  return text;
}

// The exactness claim: Encode gives SentencePiece's own ids (ReferenceEncode), on every model kind, for
// inputs where the reference is still fast (runs of a few thousand characters at most).
TEST(SentencePieceEncodeTest, EqualsSentencePiecesOwnEncoding) {
  ScopedTempDir dir;
  std::mt19937 rng(20261126);
  for (const ModelSpec& spec : kModels) {
    std::unique_ptr<spm_bridge::Processor> p = Load(Train(dir, spec));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(p->linear_encode()) << spec.name;
    std::vector<std::string> texts = {"",
                                      " ",
                                      "a",
                                      "aa",
                                      " a ",
                                      "1+1=2",
                                      "1 a 1",
                                      "\xff\xfe",
                                      std::string(5000, 'a'),
                                      std::string(3000, 'z') + "12" + std::string(9, 'Q')};
    for (int n = 0; n < 400; ++n) texts.push_back(RandomText(rng));
    int with_unknown = 0;
    for (const std::string& text : texts) {
      std::vector<int> got, want;
      std::string error;
      ASSERT_TRUE(p->Encode(text, &got, &error)) << error;
      ASSERT_TRUE(p->ReferenceEncode(text, &want, &error)) << error;
      ASSERT_EQ(got, want) << spec.name << ": '" << text << "'";
      with_unknown += std::count(want.begin(), want.end(), p->unk_id()) > 0;
    }
    EXPECT_GT(with_unknown, 100) << spec.name << ": the inputs must exercise unknown runs";
  }
}

// A model that already falls back to bytes (Mistral's and Llama's) is encoded by the library as is.
TEST(SentencePieceEncodeTest, ByteFallbackModelIsEncodedAsIs) {
  ScopedTempDir dir;
  TokenizerTrainOptions o;
  o.corpus_path = dir.Write("c.txt", Corpus("english"));
  o.model_path = dir.File("bf.model");
  o.vocab_size = 400;
  o.byte_fallback = true;
  ASSERT_TRUE(TrainSentencePieceTokenizer(o).ok());
  std::unique_ptr<spm_bridge::Processor> p = Load(o.model_path);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->linear_encode());
  std::vector<int> got, want;
  std::string error;
  const std::string text = "the cat \xe4\xb8\xad\xe4\xb8\xad sat QQ";
  ASSERT_TRUE(p->Encode(text, &got, &error)) << error;
  ASSERT_TRUE(p->ReferenceEncode(text, &want, &error)) << error;
  EXPECT_EQ(got, want);
  EXPECT_EQ(std::count(got.begin(), got.end(), p->unk_id()), 0);
}

// CPU time of the calling thread: unlike wall time it does not grow when the shared machine is busy.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Issue 29: a preference line whose prompt is a long run of one character hung zerofit_sentencepiece_ids with
// the arithmetic example's model: 1M characters took 18 s and more (quadratic: 100k 0.16 s, 300k 1.3 s). A
// megabyte of unknown characters (one ASCII letter, letters between spaces, a CJK character) must encode
// into one unk well under the bound, in the best of up to three runs' thread CPU time (about 0.3-0.9 s
// each here, whatever the load); the quadratic code needs a minute and more for each.
TEST(SentencePieceEncodeTest, OneMegabyteRunsAreLinear) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "timing bound; not run in sanitizer builds";
#endif
  ScopedTempDir dir;
  auto bpe = SentencePieceTokenizer::Load(Train(dir, kModels[0]));
  auto unigram = SentencePieceTokenizer::Load(Train(dir, kModels[1]));
  ASSERT_TRUE(bpe.ok()) << bpe.status();
  ASSERT_TRUE(unigram.ok()) << unigram.status();
  const std::pair<const SentencePieceTokenizer*, std::string> cases[] = {
      {bpe->get(), "a"}, {bpe->get(), "x y "}, {unigram->get(), "\xe4\xb8\xad"}};
  for (const auto& [tok, unit] : cases) {
    std::string text;
    while (text.size() < (1u << 20)) text += unit;
    double best = 1e9;
    // Up to three runs; one over twice the bound is no load spike and is not retried.
    for (int attempt = 0; attempt == 0 || (attempt < 3 && best >= 3.0 && best < 6.0); ++attempt) {
      const double start = ThreadCpuSeconds();
      absl::StatusOr<std::vector<int32_t>> ids = tok->Encode(text);
      best = std::min(best, ThreadCpuSeconds() - start);
      ASSERT_TRUE(ids.ok()) << ids.status();
      EXPECT_EQ(*ids, std::vector<int32_t>{tok->unk_id()}) << "one run of unknowns is one unk";
    }
    EXPECT_LT(best, 3.0) << tok->path() << ": 1 MiB of '" << unit << "' took " << best << " s of CPU";
  }
}

}  // namespace
}  // namespace zerofit::data
