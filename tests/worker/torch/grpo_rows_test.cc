// A GRPO micro-batch's rows (worker/torch/train/grpo_rows.h): prompt + completion right-padded, the mask on
// the log-prob columns that predict completion tokens, and TRL's mask_truncated_completions, which leaves a
// completion that ran to max_new_tokens without an EOS out of the loss.
#include "worker/torch/train/grpo_rows.h"

#include <gtest/gtest.h>

#include <vector>

namespace zerofit::worker {
namespace {

std::vector<std::vector<float>> Rows(const torch::Tensor& t) {
  std::vector<std::vector<float>> out;
  for (int64_t i = 0; i < t.size(0); ++i) {
    out.emplace_back();
    for (int64_t j = 0; j < t.size(1); ++j) out.back().push_back(t[i][j].item<float>());
  }
  return out;
}

TEST(GrpoRowsTest, TheMaskCoversCompletionTokensAndLeavesTruncatedOnesOutWhenAsked) {
  data::Prompt short_prompt, long_prompt;
  short_prompt.ids = {1, 5};
  long_prompt.ids = {1, 6, 7};
  const std::vector<const data::Prompt*> prompts = {&long_prompt, &short_prompt, &short_prompt};
  std::vector<Completion> completions(3);
  completions[0].tokens = {8, 2};  // ended by EOS (2)
  completions[1].tokens = {9, 9, 9};
  completions[1].hit_max_new_tokens = true;  // max_new_tokens 3 without an EOS
  completions[2].tokens = {2};
  const std::vector<double> advantages = {0.0, 0.5, -0.5};
  const torch::Device cpu(torch::kCPU);

  // Completions 1 and 2 (a slice), then all three.
  const GrpoRowFormat plain;  // pad 0, nothing masked
  GrpoRows slice = MakeGrpoRows(prompts, completions, advantages, 1, 3, plain, cpu);
  EXPECT_EQ(slice.count, 2);
  EXPECT_EQ(slice.from, 1);  // column 1 predicts token 2, the first completion token after a 2-token prompt
  EXPECT_TRUE(torch::equal(slice.tokens, torch::tensor({1, 5, 9, 9, 9, 1, 5, 2, 0, 0}).view({2, 5})));
  EXPECT_EQ(Rows(slice.mask), (std::vector<std::vector<float>>{{1, 1, 1}, {1, 0, 0}}));
  EXPECT_TRUE(torch::equal(slice.advantages, torch::tensor({0.5f, -0.5f})));

  GrpoRows all = MakeGrpoRows(prompts, completions, advantages, 0, 3, plain, cpu);
  EXPECT_FALSE(all.policy_mask.defined()) << "no entropy threshold, no policy mask";
  EXPECT_EQ(all.from, 1);  // the shortest prompt decides
  EXPECT_EQ(Rows(all.mask), (std::vector<std::vector<float>>{{0, 1, 1}, {1, 1, 1}, {1, 0, 0}}));
  GrpoRowFormat truncated;
  truncated.mask_truncated = true;
  GrpoRows masked = MakeGrpoRows(prompts, completions, advantages, 0, 3, truncated, cpu);
  EXPECT_TRUE(torch::equal(masked.tokens, all.tokens));
  EXPECT_EQ(Rows(masked.mask), (std::vector<std::vector<float>>{{0, 1, 1}, {0, 0, 0}, {1, 0, 0}}));
  EXPECT_TRUE(torch::equal(masked.advantages, all.advantages));  // its reward still shaped its group's
}

// top_entropy_quantile: the policy mask keeps the scored tokens whose sampling entropy is at least the
// threshold (equal included, as TRL's >=), on the mask's columns; a masked truncated completion keeps none.
TEST(GrpoRowsTest, ThePolicyMaskKeepsTheTokensAtOrAboveTheEntropyThreshold) {
  data::Prompt short_prompt, long_prompt;
  short_prompt.ids = {1, 5};
  long_prompt.ids = {1, 6, 7};
  const std::vector<const data::Prompt*> prompts = {&long_prompt, &short_prompt, &short_prompt};
  std::vector<Completion> completions(3);
  completions[0].tokens = {8, 2};
  completions[0].entropies = {0.9f, 0.1f};
  completions[1].tokens = {9, 9, 9};
  completions[1].entropies = {0.5f, 1.5f, 0.2f};
  completions[1].hit_max_new_tokens = true;
  completions[2].tokens = {2};
  completions[2].entropies = {0.5f};
  const std::vector<double> advantages = {0.0, 0.5, -0.5};
  GrpoRowFormat format;
  format.entropy_threshold = 0.5;
  GrpoRows rows = MakeGrpoRows(prompts, completions, advantages, 0, 3, format, torch::Device(torch::kCPU));
  ASSERT_TRUE(rows.policy_mask.defined());
  EXPECT_EQ(Rows(rows.policy_mask), (std::vector<std::vector<float>>{{0, 1, 0}, {1, 1, 0}, {1, 0, 0}}));
  EXPECT_EQ(Rows(rows.mask), (std::vector<std::vector<float>>{{0, 1, 1}, {1, 1, 1}, {1, 0, 0}}));
  format.mask_truncated = true;
  GrpoRows masked = MakeGrpoRows(prompts, completions, advantages, 0, 3, format, torch::Device(torch::kCPU));
  EXPECT_EQ(Rows(masked.policy_mask), (std::vector<std::vector<float>>{{0, 1, 0}, {0, 0, 0}, {1, 0, 0}}));
}

}  // namespace
}  // namespace zerofit::worker
