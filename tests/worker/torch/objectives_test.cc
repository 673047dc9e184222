// The preference losses against values computed by hand from their definitions.
#include "worker/torch/train/objectives.h"

#include <gtest/gtest.h>

#include <cmath>

namespace zerofit::worker {
namespace {

double LogSigmoid(double x) { return -std::log1p(std::exp(-x)); }

TEST(ObjectivesTest, BradleyTerryLossAccuracyAndMargin) {
  torch::Tensor c = torch::tensor({2.0f, -1.0f, 0.5f}, torch::requires_grad());
  torch::Tensor r = torch::tensor({1.0f, 0.0f, 0.5f});
  LossOutput out = BradleyTerryLoss(c, r);
  const double want = -(LogSigmoid(1.0) + LogSigmoid(-1.0) + LogSigmoid(0.0));
  EXPECT_NEAR(out.loss_sum.item<double>(), want, 1e-6);
  EXPECT_NEAR(out.metrics.loss_sum, want, 1e-6);
  EXPECT_EQ(out.metrics.correct, 1);  // only the first pair strictly prefers chosen
  EXPECT_NEAR(out.metrics.margin_sum, 0.0, 1e-6);
  EXPECT_EQ(out.metrics.pairs, 3);
  out.loss_sum.backward();
  // d/dc of -log sigmoid(c - r) = -(1 - sigmoid(c - r)).
  EXPECT_NEAR(c.grad()[0].item<double>(), -(1.0 - 1.0 / (1.0 + std::exp(-1.0))), 1e-6);
}

TEST(ObjectivesTest, DpoSigmoidWithLabelSmoothingAndIpo) {
  torch::Tensor pc = torch::tensor({-3.0f, -5.0f}, torch::requires_grad());
  torch::Tensor pr = torch::tensor({-4.0f, -4.0f});
  torch::Tensor rc = torch::tensor({-3.5f, -5.0f});
  torch::Tensor rr = torch::tensor({-3.5f, -4.5f});
  // h = (pc - pr) - (rc - rr) = {1 - 0, -1 - (-0.5)} = {1, -0.5}
  DpoOptions o;
  o.beta = 0.5;
  o.label_smoothing = 0.1;
  LossOutput s = DpoLoss(pc, pr, rc, rr, o);
  const double want =
      -(0.9 * LogSigmoid(0.5) + 0.1 * LogSigmoid(-0.5)) - (0.9 * LogSigmoid(-0.25) + 0.1 * LogSigmoid(0.25));
  EXPECT_NEAR(s.loss_sum.item<double>(), want, 1e-6);
  EXPECT_EQ(s.metrics.correct, 1);
  EXPECT_NEAR(s.metrics.margin_sum, 0.5 * (1 - 0.5), 1e-6);
  o.loss = DpoOptions::Loss::kIpo;
  LossOutput ipo = DpoLoss(pc, pr, rc, rr, o);
  EXPECT_NEAR(ipo.loss_sum.item<double>(), std::pow(1 - 1.0, 2) + std::pow(-0.5 - 1.0, 2), 1e-6);
  EXPECT_FALSE(ParseDpoLoss("hinge").ok());
}

TEST(ObjectivesTest, ResponseLogProbsSumOnlyTheResponseTokens) {
  // Two sequences of length 5 and 4 (padded to 5); responses start at 3 and 2.
  torch::Tensor lp = torch::tensor({{1.0f, 2.0f, 4.0f, 8.0f}, {16.0f, 32.0f, 64.0f, 128.0f}});
  torch::Tensor start = torch::tensor({3, 2}, torch::kLong);
  torch::Tensor len = torch::tensor({5, 4}, torch::kLong);
  torch::Tensor got = ResponseLogProbs(lp, start, len);
  // seq 0: positions 3,4 -> indices 2,3 -> 4 + 8; seq 1: positions 2,3 -> indices 1,2 -> 32 + 64.
  EXPECT_EQ(got[0].item<float>(), 12.0f);
  EXPECT_EQ(got[1].item<float>(), 96.0f);
}

}  // namespace
}  // namespace zerofit::worker
