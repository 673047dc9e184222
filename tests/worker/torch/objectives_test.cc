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
  const PairMetrics m = ReadPairMetrics(out.metrics);
  EXPECT_NEAR(m.loss_sum, want, 1e-6);
  EXPECT_EQ(m.correct, 1);  // only the first pair strictly prefers chosen
  EXPECT_NEAR(m.margin_sum, 0.0, 1e-6);
  EXPECT_EQ(m.pairs, 3);
  EXPECT_EQ(out.pairs, 3);
  EXPECT_EQ(m.chosen_sum, 1.5);
  EXPECT_EQ(m.rejected_sum, 1.5);
  EXPECT_EQ(m.response_tokens, 0);
  EXPECT_EQ(m.sequence_tokens, 0);
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
  const PairMetrics m = ReadPairMetrics(s.metrics);
  EXPECT_EQ(m.correct, 1);
  EXPECT_NEAR(m.margin_sum, 0.5 * (1 - 0.5), 1e-6);
  EXPECT_NEAR(m.loss_sum, want, 1e-6);
  EXPECT_EQ(m.pairs, 2);
  // Implicit rewards beta * (policy - reference): chosen {0.25, 0}, rejected {-0.25, 0.25}.
  EXPECT_NEAR(m.chosen_sum, 0.25, 1e-6);
  EXPECT_NEAR(m.rejected_sum, 0.0, 1e-6);
  o.loss = DpoOptions::Loss::kIpo;
  LossOutput ipo = DpoLoss(pc, pr, rc, rr, o);
  EXPECT_NEAR(ipo.loss_sum.item<double>(), std::pow(1 - 1.0, 2) + std::pow(-0.5 - 1.0, 2), 1e-6);
  EXPECT_FALSE(ParseDpoLoss("hinge").ok());
}

TEST(ObjectivesTest, SftNegativeLogLikelihoodOfTheChosenResponses) {
  torch::Tensor pc = torch::tensor({-3.0f, -5.0f}, torch::requires_grad());
  torch::Tensor pr = torch::tensor({-4.0f, -4.0f});
  LossOutput out = SftLoss(pc, pr, torch::tensor({3, 4}, torch::kLong));
  EXPECT_EQ(out.loss_sum.item<double>(), 8.0);
  const PairMetrics m = ReadPairMetrics(out.metrics);
  EXPECT_EQ(m.loss_sum, 8.0);
  EXPECT_EQ(m.correct, 1);
  EXPECT_EQ(m.margin_sum, 0.0);
  EXPECT_EQ(m.pairs, 2);
  EXPECT_EQ(m.chosen_sum, -8.0);
  EXPECT_EQ(m.rejected_sum, -8.0);
  EXPECT_EQ(m.response_tokens, 7);
  out.loss_sum.backward();
  EXPECT_EQ(pc.grad()[0].item<float>(), -1.0f);
}

TEST(ObjectivesTest, MetricsTensorsSumAndReadInFieldOrder) {
  torch::Tensor sum = ZeroPairMetrics(torch::kCPU);
  EXPECT_EQ(sum.scalar_type(), torch::kFloat64);
  sum += torch::arange(pair_metric::kCount, torch::kFloat64);
  sum += torch::arange(pair_metric::kCount, torch::kFloat64);
  const PairMetrics m = ReadPairMetrics(sum);
  EXPECT_EQ(m.loss_sum, 0);
  EXPECT_EQ(m.correct, 2);
  EXPECT_EQ(m.margin_sum, 4);
  EXPECT_EQ(m.pairs, 6);
  EXPECT_EQ(m.chosen_sum, 8);
  EXPECT_EQ(m.rejected_sum, 10);
  EXPECT_EQ(m.response_tokens, 12);
  EXPECT_EQ(m.sequence_tokens, 14);
  EXPECT_THROW(ReadPairMetrics(torch::zeros({3}, torch::kFloat64)), c10::Error);
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
