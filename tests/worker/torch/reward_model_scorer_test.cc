// A reward model as a GRPO reward source: an exported reward-model directory loaded by RewardModelScorer
// scores sequences of different lengths in padded batches as the model itself scores each one alone
// (within the float32 forward's rounding bound, tests/support/float_bounds.h: a wrong read-out position or a
// pad leaking into the score moves it by far more); a causal LM or a foreign token id is refused by name.
#include "worker/torch/train/reward_model_scorer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/support/float_bounds.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_llama_config.h"

namespace zerofit::worker {
namespace {

using test_support::TempDir;
using test_support::TinyLlamaConfig;

core::HfModelConfig RewardConfig() {
  core::HfModelConfig c = TinyLlamaConfig();
  c.pad_token_id = 0;
  c.num_labels = 1;
  return c;
}

// A reward model with random weights (the score head included), exported as zerofit_train_prefs does.
LlamaModel ExportRewardModel(const std::string& dir) {
  torch::manual_seed(5);
  LlamaOptions o;
  o.reward_head = true;
  LlamaModel rm(RewardConfig(), o);
  {
    torch::NoGradGuard no_grad;
    for (torch::Tensor& p : rm->parameters()) p.normal_(0.0, 0.2);
  }
  EXPECT_TRUE(rm->ExportHf(dir, RewardConfig()).ok());
  return rm;
}

TEST(RewardModelScorerTest, BatchedScoresEqualEachSequenceScoredAlone) {
  TempDir dir;
  ExportRewardModel(dir.path());
  auto scorer = RewardModelScorer::Load(dir.path(), torch::kCPU);
  ASSERT_TRUE(scorer.ok()) << scorer.status();
  const std::vector<std::vector<int32_t>> seqs = {
      {5, 6, 7}, {9, 1, 2, 3, 4, 8}, {11}, {3, 3, 3, 3}, {49, 48}};
  auto batched = (*scorer)->Score(seqs, /*batch=*/3);
  ASSERT_TRUE(batched.ok()) << batched.status();
  ASSERT_EQ(batched->size(), seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    auto alone = (*scorer)->Score({seqs[i]}, 1);
    ASSERT_TRUE(alone.ok());
    const double bound = test_support::Float32ForwardBound(RewardConfig(), 6, std::abs((*alone)[0]));
    EXPECT_NEAR((*batched)[i], (*alone)[0], bound) << i;
  }
  EXPECT_NE((*batched)[0], (*batched)[1]) << "different sequences, different scores";
  EXPECT_GT((*scorer)->parameter_bytes(), 0);
}

TEST(RewardModelScorerTest, ACausalLmOrAForeignTokenIsRefusedByName) {
  TempDir lm_dir, rm_dir;
  LlamaModel lm(TinyLlamaConfig());
  ASSERT_TRUE(lm->ExportHf(lm_dir.path(), TinyLlamaConfig()).ok());
  auto lm_scorer = RewardModelScorer::Load(lm_dir.path(), torch::kCPU);
  ASSERT_FALSE(lm_scorer.ok());
  EXPECT_NE(lm_scorer.status().message().find("not a one-label reward model"), std::string::npos)
      << lm_scorer.status();
  ExportRewardModel(rm_dir.path());
  auto scorer = RewardModelScorer::Load(rm_dir.path(), torch::kCPU);
  ASSERT_TRUE(scorer.ok()) << scorer.status();
  auto foreign = (*scorer)->Score({{1, 2}, {3, 50}});
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(
      foreign.status().message().find("sequence 1 holds token id 50 outside the reward model's vocabulary"),
      std::string::npos)
      << foreign.status();
  EXPECT_FALSE(RewardModelScorer::Load("/nonexistent/rm", torch::kCPU).ok());
}

}  // namespace
}  // namespace zerofit::worker
