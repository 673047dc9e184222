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
  GrpoRows slice = MakeGrpoRows(prompts, completions, advantages, 1, 3, /*pad=*/0, false, cpu);
  EXPECT_EQ(slice.count, 2);
  EXPECT_EQ(slice.from, 1);  // column 1 predicts token 2, the first completion token after a 2-token prompt
  EXPECT_TRUE(torch::equal(slice.tokens, torch::tensor({1, 5, 9, 9, 9, 1, 5, 2, 0, 0}).view({2, 5})));
  EXPECT_EQ(Rows(slice.mask), (std::vector<std::vector<float>>{{1, 1, 1}, {1, 0, 0}}));
  EXPECT_TRUE(torch::equal(slice.advantages, torch::tensor({0.5f, -0.5f})));

  GrpoRows all = MakeGrpoRows(prompts, completions, advantages, 0, 3, 0, false, cpu);
  EXPECT_EQ(all.from, 1);  // the shortest prompt decides
  EXPECT_EQ(Rows(all.mask), (std::vector<std::vector<float>>{{0, 1, 1}, {1, 1, 1}, {1, 0, 0}}));
  GrpoRows masked = MakeGrpoRows(prompts, completions, advantages, 0, 3, 0, /*mask_truncated=*/true, cpu);
  EXPECT_TRUE(torch::equal(masked.tokens, all.tokens));
  EXPECT_EQ(Rows(masked.mask), (std::vector<std::vector<float>>{{0, 1, 1}, {0, 0, 0}, {1, 0, 0}}));
  EXPECT_TRUE(torch::equal(masked.advantages, all.advantages));  // its reward still shaped its group's
}

}  // namespace
}  // namespace zerofit::worker
