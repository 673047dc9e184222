#include "worker/data/sentencepiece_tokenizer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/worker/data/test_support.h"
#include "worker/data/tokenizer_trainer.h"

namespace zerofit::data {
namespace {

using testing::ScopedTempDir;

// Trains a tiny tokenizer on `lines` (a few milliseconds).
std::string TrainTiny(const ScopedTempDir& dir, const std::string& lines, int32_t pad_id) {
  TokenizerTrainOptions o;
  o.corpus_path = dir.Write("corpus.txt", lines);
  o.model_path = dir.File("tok.model");
  o.pad_id = pad_id;
  if (pad_id < 0) {  // keep ids dense: unk 0, bos 1, eos 2
    o.unk_id = 0;
    o.bos_id = 1;
    o.eos_id = 2;
  }
  const absl::Status s = TrainSentencePieceTokenizer(o);
  EXPECT_TRUE(s.ok()) << s;
  return dir.File("tok.model");
}

TEST(SentencePieceTokenizerTest, RoundTripAndSpecialIds) {
  ScopedTempDir dir;
  auto tok = SentencePieceTokenizer::Load(TrainTiny(dir, "1+2=3\n40+5=45\n67+8=75\n9+0=9\n", 0));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->pad_id(), 0);
  EXPECT_EQ((*tok)->unk_id(), 1);
  EXPECT_EQ((*tok)->bos_id(), 2);
  EXPECT_EQ((*tok)->eos_id(), 3);
  EXPECT_EQ((*tok)->vocab_size(), 4 + 12);  // specials + 0-9 + =

  auto ids = (*tok)->Encode("98+76=174");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->size(), 9u);  // split_digits: one piece per character
  for (int32_t id : *ids) {
    EXPECT_GE(id, 4);
    EXPECT_LT(id, (*tok)->vocab_size());
  }
  std::vector<int32_t> with_specials = {(*tok)->bos_id()};
  with_specials.insert(with_specials.end(), ids->begin(), ids->end());
  with_specials.push_back((*tok)->eos_id());
  with_specials.push_back((*tok)->pad_id());
  auto text = (*tok)->Decode(with_specials);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "98+76=174");  // specials decode to nothing

  auto bad = (*tok)->Decode({4, 99});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("id 99 at position 1 is outside [0, 16)"), std::string::npos);
}

TEST(SentencePieceTokenizerTest, PadFallsBackToEos) {
  ScopedTempDir dir;
  auto tok = SentencePieceTokenizer::Load(TrainTiny(dir, "1+2=3\n4+5=9\n", -1));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->eos_id(), 2);
  EXPECT_EQ((*tok)->pad_id(), 2);
}

TEST(SentencePieceTokenizerTest, LoadErrorsNameTheFile) {
  ScopedTempDir dir;
  auto missing = SentencePieceTokenizer::Load(dir.File("absent.model"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("absent.model: tokenizer model not found"), std::string::npos);

  auto garbage = SentencePieceTokenizer::Load(dir.Write("garbage.model", "this is not a protobuf"));
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(garbage.status().message().find("garbage.model: not a SentencePiece model"), std::string::npos)
      << garbage.status();
}

TEST(TokenizerTrainerTest, ErrorsNameTheCorpus) {
  ScopedTempDir dir;
  TokenizerTrainOptions o;
  o.corpus_path = dir.File("no_corpus.txt");
  o.model_path = dir.File("tok.model");
  absl::Status s = TrainSentencePieceTokenizer(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("no_corpus.txt: tokenizer corpus not found"), std::string::npos);

  o.corpus_path = dir.Write("c.txt", "abc\n");
  o.vocab_size = 5;  // below the 4 specials + 3 characters, and the limit is hard
  o.hard_vocab_limit = true;
  s = TrainSentencePieceTokenizer(o);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("c.txt"), std::string::npos) << s;
}

}  // namespace
}  // namespace zerofit::data
