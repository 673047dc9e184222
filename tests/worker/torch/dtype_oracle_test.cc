// core/dtype.h conversions against LibTorch's own fp32 -> bf16 / fp16 casts.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/dtype.h"

namespace zerofit::core {
namespace {

TEST(DTypeOracleTest, MatchesTorchCasts) {
  torch::manual_seed(3);
  torch::Tensor x = torch::cat({torch::randn({20000}) * 100, torch::randn({20000}) * 1e-6,
                                torch::randn({20000}) * 7e4, torch::rand({20000}) * 6e-5});
  torch::Tensor bf = x.to(torch::kBFloat16).contiguous();
  torch::Tensor hf = x.to(torch::kFloat16).contiguous();
  const float* xs = x.data_ptr<float>();
  const uint16_t* bfs = reinterpret_cast<const uint16_t*>(bf.data_ptr());
  const uint16_t* hfs = reinterpret_cast<const uint16_t*>(hf.data_ptr());
  for (int64_t i = 0; i < x.numel(); ++i) {
    ASSERT_EQ(FloatToBf16(xs[i]), bfs[i]) << xs[i];
    ASSERT_EQ(FloatToFp16(xs[i]), hfs[i]) << xs[i];
  }
}

}  // namespace
}  // namespace zerofit::core
