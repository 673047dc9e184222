// GRPO's rollout scoring (worker/torch/train/rollout_scorer.h): each completion is decoded once, whatever the
// number of answer sources that read it, EOS stripped; sources are weighted and summed; a reward model that
// cannot be loaded is reported under the spec's field, rewards[i].path.
#include "worker/torch/train/rollout_scorer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace zerofit::worker {
namespace {

// Id k decodes to the character '0' + k (ids 0-9 are digits, 10 is '=', 11 the EOS and decodes to nothing);
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

TEST(RolloutScorerTest, EachCompletionIsDecodedOnceForEveryAnswerSource) {
  auto tok = std::make_shared<CountingTokenizer>();
  const std::vector<RewardSourceOptions> sources = {Answer("exact", rewards::AnswerRule::kExact, 1.0),
                                                    Answer("last", rewards::AnswerRule::kLastNumber, 0.5)};
  absl::StatusOr<std::unique_ptr<RolloutScorer>> scorer =
      RolloutScorer::Create(sources, tok, {11}, 12, torch::Device(torch::kCPU));
  ASSERT_TRUE(scorer.ok()) << scorer.status();
  data::Prompt p;
  p.ids = {1, 10};
  p.answer = "42";
  const std::vector<const data::Prompt*> prompts = {&p, &p, &p};
  // "42" + EOS: both match; "1=42": only the last number matches; "7": neither.
  const std::vector<Completion> completions = {{{4, 2, 11}, false}, {{1, 10, 4, 2}, true}, {{7}, true}};
  absl::StatusOr<ScoredRollout> scored = (*scorer)->Score(prompts, completions);
  ASSERT_TRUE(scored.ok()) << scored.status();
  EXPECT_EQ(tok->decodes.load(), 3);
  EXPECT_EQ(scored->sum.total, (std::vector<double>{1.5, 0.5, 0.0}));
  EXPECT_EQ(scored->correct, (std::vector<double>{1.0, 0.0, 0.0}));  // the first answer source's matches
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

}  // namespace
}  // namespace zerofit::worker
