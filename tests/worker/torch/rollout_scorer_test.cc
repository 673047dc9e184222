// GRPO's rollout scoring (worker/torch/train/rollout_scorer.h): each completion is decoded once, whatever the
// number of answer sources that read it, EOS stripped; sources are weighted and summed; a reward model that
// cannot be loaded is reported under the spec's field, rewards[i].path.
#include "worker/torch/train/rollout_scorer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/status_macros.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_llama_config.h"
#include "tests/worker/data/char_model_dir.h"
#include "worker/data/hf_tokenizer.h"

namespace zerofit::worker {
namespace {

// Id k decodes to the character '0' + k (ids 0-9 are digits, 10 is ':', 11 the EOS and decodes to nothing);
// counts its Decode calls.
class CountingTokenizer : public data::Tokenizer {
 public:
  absl::StatusOr<std::vector<int32_t>> Encode(const std::string&) const override {
    return absl::UnimplementedError("not needed");
  }
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids) const override {
    ++decodes;
    std::string text;
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab_size()) return absl::InvalidArgumentError("id out of range");
      if (id != eos_id()) text.push_back(static_cast<char>('0' + id));
    }
    return text;
  }
  int32_t bos_id() const override { return -1; }
  int32_t eos_id() const override { return 11; }
  int32_t pad_id() const override { return 11; }
  int32_t vocab_size() const override { return 12; }

  mutable std::atomic<int> decodes{0};
};

RewardSourceOptions Answer(const std::string& name, rewards::AnswerRule rule, double weight) {
  RewardSourceOptions s;
  s.name = name;
  s.weight = weight;
  s.answer.rule = rule;
  return s;
}

// `completions` of the prompt "1:" whose answer is "42", scored by `sources` (EOS 11) decoding with `tok`.
absl::StatusOr<ScoredRollout> ScoreAgainst42(const std::vector<RewardSourceOptions>& sources,
                                             std::shared_ptr<CountingTokenizer> tok,
                                             const std::vector<Completion>& completions) {
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<RolloutScorer> scorer,
                      RolloutScorer::Create(sources, std::move(tok), {11}, 12, torch::Device(torch::kCPU)));
  data::Prompt p;
  p.ids = {1, 10};
  p.answer = "42";
  const std::vector<const data::Prompt*> prompts(completions.size(), &p);
  return scorer->Score(prompts, completions);
}

TEST(RolloutScorerTest, EachCompletionIsDecodedOnceForEveryAnswerSource) {
  auto tok = std::make_shared<CountingTokenizer>();
  const std::vector<RewardSourceOptions> sources = {Answer("exact", rewards::AnswerRule::kExact, 1.0),
                                                    Answer("last", rewards::AnswerRule::kLastNumber, 0.5)};
  // "42" + EOS: both match; "1:42": only the last number matches; "7": neither.
  const std::vector<Completion> completions = {
      {{4, 2, 11}, false, {}}, {{1, 10, 4, 2}, true, {}}, {{7}, true, {}}};
  absl::StatusOr<ScoredRollout> scored = ScoreAgainst42(sources, tok, completions);
  ASSERT_TRUE(scored.ok()) << scored.status();
  EXPECT_EQ(tok->decodes.load(), 3);
  EXPECT_EQ(scored->sum.total, (std::vector<double>{1.5, 0.5, 0.0}));
  EXPECT_EQ(scored->correct, (std::vector<double>{1.0, 0.0, 0.0}));  // the first answer source's matches
}

// A format source reads the same decoded text (no second decode) and scores it whatever the answer; it is no
// accuracy source. Without a tokenizer there is no text to read: refused by its field.
TEST(RolloutScorerTest, AFormatSourceScoresTheDecodedTextWhateverTheAnswer) {
  auto tok = std::make_shared<CountingTokenizer>();
  RewardSourceOptions format;
  format.kind = RewardSourceOptions::Kind::kFormat;
  format.name = "format";
  format.weight = 0.25;
  format.format.pattern = R"(\d+:\d+)";  // "<digits>:<digits>", the whole completion
  const std::vector<RewardSourceOptions> sources = {format,
                                                    Answer("exact", rewards::AnswerRule::kExact, 1.0)};
  // "1:42" + EOS: the format only; "42": the answer only; ":": neither.
  const std::vector<Completion> completions = {
      {{1, 10, 4, 2, 11}, false, {}}, {{4, 2}, true, {}}, {{10}, true, {}}};
  absl::StatusOr<ScoredRollout> scored = ScoreAgainst42(sources, tok, completions);
  ASSERT_TRUE(scored.ok()) << scored.status();
  EXPECT_EQ(tok->decodes.load(), 3);
  EXPECT_EQ(scored->sum.total, (std::vector<double>{0.25, 1.0, 0.0}));
  EXPECT_EQ(scored->correct, (std::vector<double>{0.0, 1.0, 0.0})) << "the answer source's matches";
  const absl::Status no_text =
      RolloutScorer::Create({format}, nullptr, {11}, 12, torch::Device(torch::kCPU)).status();
  EXPECT_NE(no_text.message().find("rewards[0]: a format reward reads text"), std::string::npos) << no_text;
  format.format.pattern = "(";
  const absl::Status bad =
      RolloutScorer::Create({format}, tok, {11}, 12, torch::Device(torch::kCPU)).status();
  EXPECT_NE(bad.message().find("rewards[0].pattern: "), std::string::npos) << bad;
}

TEST(RolloutScorerTest, ARewardModelThatCannotBeLoadedIsNamedByItsPathField) {
  RewardSourceOptions rm;
  rm.kind = RewardSourceOptions::Kind::kModel;
  rm.name = "rm";
  rm.model_dir = "/nonexistent/zerofit-reward-model";
  const std::vector<RewardSourceOptions> sources = {Answer("exact", rewards::AnswerRule::kExact, 1.0), rm};
  const absl::Status s = RolloutScorer::Create(sources, std::make_shared<CountingTokenizer>(), {11}, 12,
                                               torch::Device(torch::kCPU))
                             .status();
  EXPECT_NE(s.message().find("rewards[1].path: "), std::string::npos) << s;
}

// A reward model reads a chat prompt's completion as the chat template writes the assistant's reply (the
// form of its conversational training pairs, TRL's rendering for a GRPO reward model): the completion decoded
// without its EOS and rendered, so "5" + EOS after the char template's "assistant: " is read as "5\n". A text
// prompt's completion stays the policy's tokens, EOS included.
TEST(RolloutScorerTest, ARewardModelReadsAChatCompletionAsTheTemplateWritesTheReply) {
  test_support::TempDir model_dir, rm_dir;
  data::testing::WriteCharModelDir(model_dir.path());
  absl::StatusOr<std::unique_ptr<data::HfTokenizer>> loaded = data::HfTokenizer::Load(model_dir.path());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::shared_ptr<const data::Tokenizer> tok = std::move(*loaded);
  core::HfModelConfig c = test_support::TinyLlamaConfig();
  c.vocab_size = std::max<int64_t>(c.vocab_size, data::testing::CharModelVocabSize());
  c.pad_token_id = 0;
  c.num_labels = 1;
  torch::manual_seed(5);
  LlamaOptions lo;
  lo.reward_head = true;
  LlamaModel rm(c, lo);
  {
    torch::NoGradGuard no_grad;
    for (torch::Tensor& p : rm->parameters()) p.normal_(0.0, 0.2);
  }
  ASSERT_TRUE(rm->ExportHf(rm_dir.path(), c).ok());
  RewardSourceOptions source;
  source.kind = RewardSourceOptions::Kind::kModel;
  source.name = "rm";
  source.model_dir = rm_dir.path();
  absl::StatusOr<std::unique_ptr<RolloutScorer>> scorer =
      RolloutScorer::Create({source}, tok, {data::testing::kCharEos}, data::testing::CharModelVocabSize(),
                            torch::Device(torch::kCPU));
  ASSERT_TRUE(scorer.ok()) << scorer.status();

  auto ids = [](const std::string& text) {
    std::vector<int32_t> out;
    for (int32_t id : data::testing::CharIds(text)) out.push_back(id);
    return out;
  };
  data::Prompt chat;
  chat.messages_json = R"([{"role": "user", "content": "2+3="}])";
  chat.ids = {data::testing::kCharBos};
  for (int32_t id : ids("user: 2+3=\nassistant: ")) chat.ids.push_back(id);
  data::Prompt text;
  text.ids = {data::testing::kCharBos};
  for (int32_t id : ids("2+3=")) text.ids.push_back(id);
  const Completion five{{ids("5")[0], data::testing::kCharEos}, false, {}};
  absl::StatusOr<ScoredRollout> scored = (*scorer)->Score({&chat, &text}, {five, five});
  ASSERT_TRUE(scored.ok()) << scored.status();

  absl::StatusOr<std::unique_ptr<RewardModelScorer>> direct =
      RewardModelScorer::Load(rm_dir.path(), torch::kCPU);
  ASSERT_TRUE(direct.ok()) << direct.status();
  std::vector<int32_t> chat_seq = chat.ids, text_seq = text.ids;
  for (int32_t id : ids("5\n")) chat_seq.push_back(id);  // the template's reply, no EOS
  text_seq.push_back(ids("5")[0]);
  text_seq.push_back(data::testing::kCharEos);
  // The same two sequences in one batch, as the scorer's call: the same computation, so the same bits.
  absl::StatusOr<std::vector<double>> want = (*direct)->Score({chat_seq, text_seq});
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(scored->sum.total, *want);
  // Read as the policy's raw tokens instead ("5" + EOS), the chat completion would score otherwise.
  std::vector<int32_t> raw = chat.ids;
  raw.push_back(ids("5")[0]);
  raw.push_back(data::testing::kCharEos);
  absl::StatusOr<std::vector<double>> as_tokens = (*direct)->Score({raw, text_seq});
  ASSERT_TRUE(as_tokens.ok());
  EXPECT_NE((*as_tokens)[0], (*want)[0]);
}

}  // namespace
}  // namespace zerofit::worker
