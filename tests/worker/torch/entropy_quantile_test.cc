// top_entropy_quantile's threshold (entropy_quantile.h): torch.quantile's linear interpolation, and the
// entropies that take part (a masked truncated completion's do not).
#include "worker/torch/train/entropy_quantile.h"

#include <gtest/gtest.h>

#include <vector>

namespace zerofit::worker {
namespace {

// torch.quantile's documented default (interpolation "linear"): with the values sorted, position q (n - 1)
// lies between ranks i and j = i + 1 and the quantile is v_i + (v_j - v_i) x (position - i); numpy.quantile's
// default ("linear") is the same rule. Worked by hand below.
TEST(EntropyQuantileTest, LinearQuantileIsTorchQuantilesDefault) {
  const std::vector<double> v = {0.9, 0.1, 0.5, 0.3};
  EXPECT_DOUBLE_EQ(LinearQuantile(v, 0.0), 0.1);
  EXPECT_DOUBLE_EQ(LinearQuantile(v, 1.0), 0.9);
  EXPECT_DOUBLE_EQ(LinearQuantile(v, 0.5), 0.4);   // between 0.3 and 0.5
  EXPECT_DOUBLE_EQ(LinearQuantile(v, 0.8), 0.66);  // position 2.4: 0.5 + 0.4 x (0.9 - 0.5)
  EXPECT_DOUBLE_EQ(LinearQuantile({2.5}, 0.3), 2.5);
  // TRL's case: ten tokens, top_entropy_quantile 0.2 (q 0.8) keeps the two largest (>= threshold).
  std::vector<double> ten;
  for (int i = 0; i < 10; ++i) ten.push_back(0.1 * i);
  const double threshold = LinearQuantile(ten, 0.8);
  int kept = 0;
  for (double e : ten) kept += e >= threshold;
  EXPECT_EQ(kept, 2) << threshold;
}

TEST(EntropyQuantileTest, ScoredEntropiesLeaveMaskedTruncatedCompletionsOut) {
  std::vector<Completion> c(2);
  c[0].tokens = {4, 2};
  c[0].entropies = {0.25f, 0.5f};
  c[1].tokens = {5, 5, 5};
  c[1].entropies = {1.0f, 2.0f, 4.0f};
  c[1].hit_max_new_tokens = true;
  EXPECT_EQ(ScoredEntropies(c, false), (std::vector<double>{0.25, 0.5, 1.0, 2.0, 4.0}));
  EXPECT_EQ(ScoredEntropies(c, true), (std::vector<double>{0.25, 0.5}));
}

}  // namespace
}  // namespace zerofit::worker
