// The scalar CPU AdamW is the oracle for every other AdamW in zerofit; it is itself checked against
// torch::optim::AdamW (LibTorch) here.
#include "optim/cpu_adamw.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

namespace zerofit::optim {
namespace {

TEST(CpuAdamWTest, MatchesTorchAdamWOverManySteps) {
  torch::manual_seed(7);
  for (int64_t n : {1, 17, 1000, 4099}) {
    for (float wd : {0.0f, 0.05f}) {
      torch::Tensor p = torch::randn({n}).requires_grad_(true);
      std::vector<float> mine(p.data_ptr<float>(), p.data_ptr<float>() + n), m(n), v(n);
      AdamWHyper h;
      h.lr = 3e-3f;
      h.weight_decay = wd;
      torch::optim::AdamW opt(
          {p}, torch::optim::AdamWOptions(h.lr).betas({h.beta1, h.beta2}).eps(h.eps).weight_decay(wd));
      for (int step = 1; step <= 30; ++step) {
        torch::Tensor g = torch::randn({n}) * (step % 3 == 0 ? 1e-3 : 1.0);
        p.mutable_grad() = g.clone();
        opt.step();
        CpuAdamWScalar(mine.data(), g.data_ptr<float>(), m.data(), v.data(), n, h, step, 1.0f);
      }
      const float* want = p.data_ptr<float>();
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(mine[i], want[i], 1e-6f * std::max(1.0f, std::fabs(want[i]))) << "n=" << n << " i=" << i;
      }
    }
  }
}

TEST(CpuAdamWTest, GradScaleAndLowPrecisionCopy) {
  const size_t n = 5;
  std::vector<float> a = {1, -2, 3, -4, 5}, b = a, ma(n), va(n), mb(n), vb(n);
  std::vector<float> g = {0.5, 1, -1, 2, -0.25}, g4(n);
  for (size_t i = 0; i < n; ++i) g4[i] = g[i] * 4;
  std::vector<uint16_t> bf(n);
  AdamWHyper h;
  CpuAdamWScalar(a.data(), g.data(), ma.data(), va.data(), n, h, 1, 1.0f);
  CpuAdamWScalar(b.data(), g4.data(), mb.data(), vb.data(), n, h, 1, 0.25f, bf.data(),
                 core::DType::kBFloat16);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(a[i], b[i]);
    EXPECT_EQ(bf[i], core::FloatToBf16(b[i]));
  }
}

}  // namespace
}  // namespace zerofit::optim
