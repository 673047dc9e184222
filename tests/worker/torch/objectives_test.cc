// The preference losses against values computed by hand from their definitions.
#include "worker/torch/train/objectives.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "tests/support/tiny_llama_config.h"
#include "worker/data/preference_dataset.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/train/micro_batch_loss.h"
#include "worker/torch/train/pair_tensors.h"
#include "worker/torch/train/reference_model.h"

namespace zerofit::worker {
namespace {

double LogSigmoid(double x) { return -std::log1p(std::exp(-x)); }

// The losses run in float32 (objectives.cc: so that bf16 models get a float32 loss). A bound on the float32
// error of a sum of n terms, each from an elementwise exp/log (vectorised libm: at most 4 ulp) and a few
// arithmetic operations: (8 + n) units of 2^-24 times the sum of the magnitudes of the terms. It follows from
// the computation, whatever kernels the CPU picks; a wrong formula misses by far more (0.05 or worse here).
double Float32Bound(std::initializer_list<double> terms) {
  double magnitude = 0;
  for (double t : terms) magnitude += std::fabs(t);
  return (8.0 + static_cast<double>(terms.size())) * std::ldexp(1.0, -24) * std::max(1.0, magnitude);
}

TEST(ObjectivesTest, BradleyTerryLossAccuracyAndMargin) {
  torch::Tensor c = torch::tensor({2.0f, -1.0f, 0.5f}, torch::requires_grad());
  torch::Tensor r = torch::tensor({1.0f, 0.0f, 0.5f});
  LossOutput out = BradleyTerryLoss(c, r);
  const double want = -(LogSigmoid(1.0) + LogSigmoid(-1.0) + LogSigmoid(0.0));
  const double tol = Float32Bound({LogSigmoid(1.0), LogSigmoid(-1.0), LogSigmoid(0.0)});
  EXPECT_NEAR(out.loss_sum.item<double>(), want, tol);
  const PairMetrics m = ReadPairMetrics(out.metrics);
  EXPECT_NEAR(m.loss_sum, want, tol);
  EXPECT_EQ(m.correct, 1);  // only the first pair strictly prefers chosen
  EXPECT_NEAR(m.margin_sum, 0.0, Float32Bound({1.0, -1.0, 0.0}));
  EXPECT_EQ(m.pairs, 3);
  EXPECT_EQ(out.pairs, 3);
  EXPECT_EQ(m.chosen_sum, 1.5);
  EXPECT_EQ(m.rejected_sum, 1.5);
  EXPECT_EQ(m.response_tokens, 0);
  EXPECT_EQ(m.sequence_tokens, 0);
  out.loss_sum.backward();
  // d/dc of -log sigmoid(c - r) = -(1 - sigmoid(c - r)).
  EXPECT_NEAR(c.grad()[0].item<double>(), -(1.0 - 1.0 / (1.0 + std::exp(-1.0))), Float32Bound({1.0}));
}

// TRL's margin column (Llama 2's margin loss): -log sigmoid(c - r - m); accuracy and margin read the scores.
TEST(ObjectivesTest, BradleyTerryLossWithMargins) {
  torch::Tensor c = torch::tensor({2.0f, -1.0f, 0.5f}, torch::requires_grad());
  torch::Tensor r = torch::tensor({1.0f, 0.0f, 0.5f});
  torch::Tensor m = torch::tensor({3.0f, 0.0f, -0.5f});
  LossOutput out = BradleyTerryLoss(c, r, m);
  const double want = -(LogSigmoid(1.0 - 3.0) + LogSigmoid(-1.0) + LogSigmoid(0.5));
  const double tol = Float32Bound({LogSigmoid(-2.0), LogSigmoid(-1.0), LogSigmoid(0.5), 3.0, 0.5});
  EXPECT_NEAR(out.loss_sum.item<double>(), want, tol);
  const PairMetrics metrics = ReadPairMetrics(out.metrics);
  EXPECT_EQ(metrics.correct, 1) << "the scores decide, not the margins";
  EXPECT_NEAR(metrics.margin_sum, 0.0, Float32Bound({1.0, -1.0, 0.0}));
  out.loss_sum.backward();
  // d/dc of -log sigmoid(c - r - m) = -(1 - sigmoid(c - r - m)), at c - r - m = -2.
  EXPECT_NEAR(c.grad()[0].item<double>(), -(1.0 - 1.0 / (1.0 + std::exp(2.0))), Float32Bound({1.0}));
  // Zero margins are no margins.
  const double none = BradleyTerryLoss(c, r).loss_sum.item<double>();
  EXPECT_EQ(BradleyTerryLoss(c, r, torch::zeros({3})).loss_sum.item<double>(), none);
}

// TRL's center_rewards_coefficient: + coefficient (c + r)^2 per pair; the metrics are unchanged.
TEST(ObjectivesTest, BradleyTerryLossCentringTerm) {
  torch::Tensor c = torch::tensor({2.0f, -1.0f, 0.5f}, torch::requires_grad());
  torch::Tensor r = torch::tensor({1.0f, 0.0f, 0.5f});
  LossOutput out = BradleyTerryLoss(c, r, torch::Tensor(), 0.01);
  const double bt = -(LogSigmoid(1.0) + LogSigmoid(-1.0) + LogSigmoid(0.0));
  const double centre = 0.01 * (9.0 + 1.0 + 1.0);
  EXPECT_NEAR(out.loss_sum.item<double>(), bt + centre,
              Float32Bound({LogSigmoid(1.0), LogSigmoid(-1.0), LogSigmoid(0.0), 0.09, 0.01, 0.01}));
  const PairMetrics m = ReadPairMetrics(out.metrics);
  EXPECT_EQ(m.correct, 1);
  out.loss_sum.backward();
  // d/dc: -(1 - sigmoid(c - r)) + 2 x 0.01 x (c + r), at c - r = 1, c + r = 3.
  EXPECT_NEAR(c.grad()[0].item<double>(), -(1.0 - 1.0 / (1.0 + std::exp(-1.0))) + 0.06,
              Float32Bound({1.0, 0.06}));
}

// Two pairs' sequence log-probabilities under the policy (chosen pc, rejected pr) and the reference (rc, rr):
// h = (pc - pr) - (rc - rr) = {1 - 0, -1 - (-0.5)} = {1, -0.5}. Only pc takes a gradient.
struct DpoInputs {
  torch::Tensor pc = torch::tensor({-3.0f, -5.0f}, torch::requires_grad());
  torch::Tensor pr = torch::tensor({-4.0f, -4.0f});
  torch::Tensor rc = torch::tensor({-3.5f, -5.0f});
  torch::Tensor rr = torch::tensor({-3.5f, -4.5f});
};

TEST(ObjectivesTest, DpoSigmoidWithLabelSmoothingAndIpo) {
  const DpoInputs in;
  const torch::Tensor &pc = in.pc, &pr = in.pr, &rc = in.rc, &rr = in.rr;
  DpoOptions o;
  o.beta = 0.5;
  o.label_smoothing = 0.1;
  LossOutput s = DpoLoss(pc, pr, rc, rr, o);
  const double want =
      -(0.9 * LogSigmoid(0.5) + 0.1 * LogSigmoid(-0.5)) - (0.9 * LogSigmoid(-0.25) + 0.1 * LogSigmoid(0.25));
  // Terms of magnitude below 1 each (four log-sigmoids, weights 0.9 and 0.1), h from 4 inputs below 6.
  const double tol = Float32Bound({1, 1, 1, 1, 6, 6});
  EXPECT_NEAR(s.loss_sum.item<double>(), want, tol);
  const PairMetrics m = ReadPairMetrics(s.metrics);
  EXPECT_EQ(m.correct, 1);
  EXPECT_NEAR(m.margin_sum, 0.5 * (1 - 0.5), tol);
  EXPECT_NEAR(m.loss_sum, want, tol);
  EXPECT_EQ(m.pairs, 2);
  // Implicit rewards beta * (policy - reference): chosen {0.25, 0}, rejected {-0.25, 0.25}.
  EXPECT_NEAR(m.chosen_sum, 0.25, tol);
  EXPECT_NEAR(m.rejected_sum, 0.0, tol);
  o.loss = DpoOptions::Loss::kIpo;
  LossOutput ipo = DpoLoss(pc, pr, rc, rr, o);
  EXPECT_NEAR(ipo.loss_sum.item<double>(), std::pow(1 - 1.0, 2) + std::pow(-0.5 - 1.0, 2),
              Float32Bound({0.0, 2.25, 6, 6}));
}

// TRL's hinge (SLiC) and robust (rDPO) losses on DpoInputs' h = {1, -0.5}, against float64.
TEST(ObjectivesTest, DpoHingeAndRobust) {
  const DpoInputs in;
  const torch::Tensor &pc = in.pc, &pr = in.pr, &rc = in.rc, &rr = in.rr;
  DpoOptions o;
  o.beta = 0.5;
  ASSERT_EQ(*ParseDpoLoss("hinge"), DpoOptions::Loss::kHinge);
  ASSERT_EQ(*ParseDpoLoss("robust"), DpoOptions::Loss::kRobust);
  o.loss = DpoOptions::Loss::kHinge;
  LossOutput hinge = DpoLoss(pc, pr, rc, rr, o);
  // max(0, 1 - 0.5 h): 0.5 and 1.25; h from 4 inputs below 6.
  EXPECT_NEAR(hinge.loss_sum.item<double>(), 0.5 + 1.25, Float32Bound({0.5, 1.25, 6, 6}));
  hinge.loss_sum.backward();
  // d/dpc of 1 - beta h, where the hinge is active: -beta for each pair.
  EXPECT_NEAR(pc.grad()[0].item<double>(), -0.5, Float32Bound({0.5}));
  EXPECT_NEAR(pc.grad()[1].item<double>(), -0.5, Float32Bound({0.5}));
  pc.mutable_grad().zero_();
  o.loss = DpoOptions::Loss::kRobust;
  o.label_smoothing = 0.1;
  LossOutput robust = DpoLoss(pc, pr, rc, rr, o);
  auto term = [](double z) { return (-0.9 * LogSigmoid(z) + 0.1 * LogSigmoid(-z)) / 0.8; };
  EXPECT_NEAR(robust.loss_sum.item<double>(), term(0.5) + term(-0.25),
              Float32Bound({1, 1, 1, 1, 6, 6}) / 0.8);
  o.label_smoothing = 0;  // without flipped labels, rDPO is DPO
  o.loss = DpoOptions::Loss::kRobust;
  const double r0 = DpoLoss(pc, pr, rc, rr, o).loss_sum.item<double>();
  o.loss = DpoOptions::Loss::kSigmoid;
  EXPECT_EQ(r0, DpoLoss(pc, pr, rc, rr, o).loss_sum.item<double>());
}

// TRL's other pairwise DPO losses on DpoInputs: c = pc - rc = {0.5, 0}, r = pr - rr = {-0.5, 0.5}, h = {1,
// -0.5}, beta 0.5, against float64 transcriptions; apo_zero's gradient written out (-beta s'(beta c) per
// pair).
TEST(ObjectivesTest, DpoPairLossesOfTrl) {
  const DpoInputs in;
  const torch::Tensor &pc = in.pc, &pr = in.pr, &rc = in.rc, &rr = in.rr;
  const double beta = 0.5, c[] = {0.5, 0}, r[] = {-0.5, 0.5};
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  auto sum = [&](auto per_pair) { return per_pair(c[0], r[0]) + per_pair(c[1], r[1]); };
  const double e = 1e-3;  // exo_pair's epsilon without label smoothing, as TRL
  const struct {
    const char* name;
    double want;
  } cases[] = {
      {"exo_pair", sum([&](double cc, double rr_) {
         const double z = beta * (cc - rr_);
         return sig(z) * (LogSigmoid(z) - std::log(1 - e)) + sig(-z) * (LogSigmoid(-z) - std::log(e));
       })},
      {"nca_pair", sum([&](double cc, double rr_) {
         return -LogSigmoid(beta * cc) - 0.5 * LogSigmoid(-beta * cc) - 0.5 * LogSigmoid(-beta * rr_);
       })},
      {"sppo_hard", sum([&](double cc, double rr_) { return std::pow(cc - 1, 2) + std::pow(rr_ + 1, 2); })},
      {"apo_zero", sum([&](double cc, double rr_) { return 1 - sig(beta * cc) + sig(beta * rr_); })},
      {"apo_down", sum([&](double cc, double rr_) { return sig(beta * cc) + 1 - sig(beta * (cc - rr_)); })},
  };
  for (const auto& k : cases) {
    DpoOptions o;
    o.beta = beta;
    ASSERT_TRUE(ParseDpoLoss(k.name).ok()) << k.name;
    o.loss = *ParseDpoLoss(k.name);
    EXPECT_FALSE(DpoLossIsPerToken(o.loss)) << k.name;
    const LossOutput out = DpoLoss(pc, pr, rc, rr, o);
    // Terms below 10 each (exo's log e is 6.9), from inputs below 6.
    EXPECT_NEAR(out.loss_sum.item<double>(), k.want, Float32Bound({10, 10, 10, 10, 6, 6})) << k.name;
    EXPECT_EQ(ReadPairMetrics(out.metrics).correct, 1) << k.name;  // h > 0 for the first pair
  }
  DpoOptions apo;
  apo.beta = beta;
  apo.loss = DpoOptions::Loss::kApoZero;
  DpoLoss(pc, pr, rc, rr, apo).loss_sum.backward();
  for (int i = 0; i < 2; ++i) {
    const double s = sig(beta * c[i]);
    EXPECT_NEAR(pc.grad()[i].item<double>(), -beta * s * (1 - s), Float32Bound({1})) << i;
  }
  EXPECT_TRUE(DpoLossIsPerToken(DpoOptions::Loss::kIpo));
  EXPECT_FALSE(ParseDpoLoss("bco_pair").ok());
}

// DiscoPOP (TRL's loss_type discopop): with z = beta h, -log s(z) (1 - s(z / tau)) + e^-z s(z / tau), as
// TRL's transcription in float64; far below 0 (h = -1000) TRL's e^-z overflows float32 and meets s(z / tau)
// = 0 (a NaN) where zerofit's form gives the logistic term's 500 and a finite gradient.
TEST(ObjectivesTest, DiscopopBlendsTheLogisticAndExponentialLosses) {
  const DpoInputs in;
  DpoOptions o;
  o.loss = *ParseDpoLoss("discopop");
  o.beta = 0.5;
  o.discopop_tau = 0.05;
  const LossOutput out = DpoLoss(in.pc, in.pr, in.rc, in.rr, o);
  auto trl = [&](double h) {
    const double z = o.beta * h, m = 1 / (1 + std::exp(-z / o.discopop_tau));
    return -LogSigmoid(z) * (1 - m) + std::exp(-z) * m;
  };
  const double want = trl(1.0) + trl(-0.5);  // h = (pc - rc) - (pr - rr) = {1, -0.5}
  EXPECT_NEAR(out.loss_sum.item<double>(), want, Float32Bound({trl(1.0), trl(-0.5), 10, 5}));
  torch::Tensor far = torch::tensor({-1000.0f}, torch::requires_grad());
  const LossOutput edge = DpoLoss(far, torch::zeros({1}), torch::zeros({1}), torch::zeros({1}), o);
  EXPECT_NEAR(edge.loss_sum.item<double>(), 500.0, Float32Bound({500}));
  edge.loss_sum.backward();
  EXPECT_NEAR(far.grad()[0].item<double>(), -0.5, Float32Bound({1})) << "beta x d(-log s(z))/dz at z -500";
}

// SimPO (TRL's CPOTrainer loss_type simpo): reference-free, -(1 - ls) log s(beta h - gamma) - ls log
// s(-(beta h - gamma)) with h = pc - pr, the reference tensors undefined (MicroBatchLoss passes none).
TEST(ObjectivesTest, SimpoIsReferenceFree) {
  const DpoInputs in;
  DpoOptions o;
  o.loss = *ParseDpoLoss("simpo");
  o.beta = 2.0;
  o.simpo_gamma = 0.5;
  o.label_smoothing = 0.1;
  EXPECT_FALSE(DpoNeedsReference(o));
  EXPECT_TRUE(DpoNeedsReference(DpoOptions{}));
  DpoOptions cpo;  // TRL's DPOConfig.reference_free: any loss against a reference of log-probs 0
  cpo.reference_free = true;
  EXPECT_FALSE(DpoNeedsReference(cpo));
  EXPECT_TRUE(DpoLossIsPerToken(o.loss));
  const LossOutput out = DpoLoss(in.pc, in.pr, torch::Tensor(), torch::Tensor(), o);
  auto term = [](double z) { return -0.9 * LogSigmoid(z) - 0.1 * LogSigmoid(-z); };
  const double want = term(2.0 * (-3 + 4) - 0.5) + term(2.0 * (-5 + 4) - 0.5);  // h = {1, -1}
  EXPECT_NEAR(out.loss_sum.item<double>(), want, Float32Bound({3, 3, 3, 3, 6, 6}));
  const PairMetrics m = ReadPairMetrics(out.metrics);
  EXPECT_EQ(m.correct, 1);
  EXPECT_NEAR(m.chosen_sum, 2.0 * (-3 - 5), Float32Bound({16}));  // beta x the policy's own log-probs
}

// Two pairs whose responses differ in length, the longer once the chosen (3 and 6 tokens) and once the
// rejected one (5 and 2).
std::vector<data::PreferencePair> UnequalPairs() {
  std::vector<data::PreferencePair> pairs(2);
  pairs[0].prompt = {1, 5, 9};
  pairs[0].chosen = {11, 12, 13};
  pairs[0].rejected = {14, 15, 16, 17, 18, 19};
  pairs[1].prompt = {1, 7};
  pairs[1].chosen = {20, 21, 22, 23, 24};
  pairs[1].rejected = {25, 26};
  return pairs;
}

// IPO as TRL computes it: each response's log-probs averaged over its tokens (DPOTrainer divides by the
// response's length for loss_type ipo), for policy and reference alike. Two pairs whose responses differ in
// length, through MicroBatchLoss, against the same token log-probs reduced in float64.
TEST(ObjectivesTest, IpoComparesMeanLogProbsPerResponseTokenAsTrl) {
  const core::HfModelConfig config = test_support::TinyLlamaConfig();
  torch::manual_seed(5);
  LlamaModel policy(config, LlamaOptions{});
  torch::manual_seed(6);
  LlamaModel reference_model(config, LlamaOptions{});
  const std::vector<data::PreferencePair> pairs = UnequalPairs();
  const PairTensors b = MakePairTensors(pairs, {0, 1}, BatchFormat{}).value();
  PreferenceTrainOptions o;
  o.task = PreferenceTrainOptions::Task::kDpo;
  o.dpo.loss = DpoOptions::Loss::kIpo;
  o.dpo.beta = 0.5;
  torch::Tensor ref_tokens;
  {
    torch::NoGradGuard no_grad;
    ref_tokens = reference_model->TokenLogProbs(b.tokens, b.head_from).to(torch::kDouble);
  }
  absl::StatusOr<std::unique_ptr<ReferenceModel>> reference =
      ReferenceModel::Create(reference_model, ReferenceStrategy::kResident);
  ASSERT_TRUE(reference.ok()) << reference.status();
  const LossOutput out = MicroBatchLoss(policy, reference->get(), o, b).value();
  const torch::Tensor pol_tokens = policy->TokenLogProbs(b.tokens, b.head_from).detach().to(torch::kDouble);
  // Row k: [chosen of pair 0, chosen of pair 1, rejected of pair 0, rejected of pair 1]; mean over its
  // response.
  auto logp = [&](const torch::Tensor& t, int64_t row, bool per_token) {
    const int64_t start = b.starts[row].item<int64_t>(), end = b.lengths[row].item<int64_t>();
    double sum = 0;
    for (int64_t p = start; p < end; ++p) sum += t[row][p - 1 - b.head_from].item<double>();
    return per_token ? sum / static_cast<double>(end - start) : sum;
  };
  auto ipo = [&](bool per_token, double* magnitude) {
    double loss = 0;
    for (int64_t i = 0; i < 2; ++i) {
      const double h = (logp(pol_tokens, i, per_token) - logp(pol_tokens, 2 + i, per_token)) -
                       (logp(ref_tokens, i, per_token) - logp(ref_tokens, 2 + i, per_token));
      loss += std::pow(h - 1.0, 2);  // 1 / (2 beta)
      if (magnitude != nullptr) *magnitude += std::pow(std::fabs(h) + 1.0, 2);
    }
    return loss;
  };
  double magnitude = 0;
  const double want = ipo(/*per_token=*/true, &magnitude);
  // float32 sums of at most 6 token log-probs below 10 each, then four divisions and the square.
  const double tol = Float32Bound({magnitude, 60, 60, 60, 60});
  EXPECT_NEAR(out.loss_sum.item<double>(), want, tol);
  EXPECT_GT(std::fabs(ipo(/*per_token=*/false, nullptr) - want), 100 * tol) << "sums would be told apart";

  // SimPO through the same path: no reference model (none is passed), the policy's means per token.
  o.dpo.loss = DpoOptions::Loss::kSimpo;
  o.dpo.beta = 2.0;
  const LossOutput simpo = MicroBatchLoss(policy, nullptr, o, b).value();
  double simpo_want = 0;
  for (int64_t i = 0; i < 2; ++i) {
    const double z = 2.0 * (logp(pol_tokens, i, true) - logp(pol_tokens, 2 + i, true)) - o.dpo.simpo_gamma;
    simpo_want += -LogSigmoid(z);
  }
  EXPECT_NEAR(simpo.loss_sum.item<double>(), simpo_want, Float32Bound({10, 10, 60, 60, 60, 60}));
}

// ORPO (TRL's ORPOTrainer): -beta log s(log odds(e^c) - log odds(e^r)) with c, r the policy's mean
// log-probs per token and log odds(p) = log p - log(1 - p), against float64; its gradient by hand; a
// response of probability 1 (c = 0, where log(1 - e^c) is -inf) gives a finite loss and gradient.
TEST(ObjectivesTest, OrpoIsBetaTimesTheLogOddsRatio) {
  DpoOptions o;
  o.loss = *ParseDpoLoss("orpo");
  o.beta = 0.25;
  EXPECT_FALSE(DpoNeedsReference(o));
  EXPECT_TRUE(DpoLossIsPerToken(o.loss));
  EXPECT_EQ(DpoNllWeight(o), 1.0) << "ORPO's loss is the NLL minus the odds-ratio term";
  o.rpo_alpha = 0.3;
  EXPECT_EQ(DpoNllWeight(o), 1.0);
  const std::vector<double> c = {-0.3, -2.0, -0.01}, r = {-1.2, -0.5, -0.02};
  torch::Tensor pc = torch::tensor(std::vector<float>(c.begin(), c.end()), torch::requires_grad());
  const torch::Tensor pr = torch::tensor(std::vector<float>(r.begin(), r.end()));
  LossOutput out = DpoLoss(pc, pr, torch::Tensor(), torch::Tensor(), o);
  auto log_odds = [](double x) { return x - std::log(-std::expm1(x)); };
  double want = 0, magnitude = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const double l = log_odds(c[i]) - log_odds(r[i]);
    want += -o.beta * LogSigmoid(l);
    magnitude += std::fabs(log_odds(c[i])) + std::fabs(log_odds(r[i])) + 1;
  }
  // float32 inputs rounded (2^-24 relative each), then a few elementwise exp/log per pair.
  EXPECT_NEAR(out.loss_sum.item<double>(), want, Float32Bound({magnitude, 6}));
  const PairMetrics m = ReadPairMetrics(out.metrics);
  EXPECT_EQ(m.correct, 2)
      << "accuracy compares c > r (pairs 0 and 2), TRL's chosen_rewards > rejected_rewards";
  EXPECT_NEAR(m.chosen_sum, o.beta * (c[0] + c[1] + c[2]), Float32Bound({3}));
  out.loss_sum.backward();
  for (size_t i = 0; i < c.size(); ++i) {
    // d/dc of -beta log s(L) = -beta (1 - s(L)) dL/dc, dL/dc = 1 / (1 - e^c).
    const double l = log_odds(c[i]) - log_odds(r[i]);
    const double grad = -o.beta * (1 - 1 / (1 + std::exp(-l))) / -std::expm1(c[i]);
    // 1 / (1 - e^c) is 100 at c = -0.01: the float32 rounding of c moves it by that times 2^-24 relative.
    EXPECT_NEAR(pc.grad()[i].item<double>(), grad, Float32Bound({100 * std::fabs(grad), 1})) << i;
  }
  torch::Tensor certain = torch::tensor({0.0f, -1.0f}, torch::requires_grad());
  LossOutput edge = DpoLoss(certain, torch::tensor({-1.0f, 0.0f}), torch::Tensor(), torch::Tensor(), o);
  edge.loss_sum.backward();
  EXPECT_TRUE(std::isfinite(edge.loss_sum.item<double>()));
  EXPECT_TRUE(torch::isfinite(certain.grad()).all().item<bool>()) << certain.grad();
}

// A weighted NLL of the chosen responses (rpo_alpha; ORPO's) is a mean per chosen token of the whole step,
// whatever the micro-batches: two micro-batches of pairs whose chosen responses differ in length give the
// gradient of one batch of all four (BackwardLoss with the step's totals), and the step's value against
// float64 sums of the same token log-probs; normalising each micro-batch by its own tokens, as TRL does per
// micro-batch, moves the gradient far more than the rounding.
TEST(ObjectivesTest, TheNllTermIsAMeanPerChosenTokenOfTheWholeStep) {
  const core::HfModelConfig config = test_support::TinyLlamaConfig();
  torch::manual_seed(7);
  LlamaModel policy(config, LlamaOptions{});
  std::vector<data::PreferencePair> pairs(4);
  const std::vector<std::vector<int32_t>> chosen = {{11}, {12, 13, 14, 15, 16, 17, 18}, {20, 21}, {22}};
  for (int i = 0; i < 4; ++i) {
    pairs[i].prompt = {1, 5 + i, 9};
    pairs[i].chosen = chosen[i];
    pairs[i].rejected = {30 + i, 31};
  }
  PreferenceTrainOptions o;
  o.task = PreferenceTrainOptions::Task::kDpo;
  o.dpo.reference_free = true;  // CPO: sigmoid against log-probs 0, plus the NLL
  o.dpo.rpo_alpha = 0.7;
  const double w = DpoNllWeight(o.dpo), step_pairs = 4, step_tokens = 1 + 7 + 2 + 1;
  auto gradient = [&](const std::vector<std::vector<uint64_t>>& split, bool own_totals, double* value) {
    policy->zero_grad();
    PairMetrics sum;
    for (const std::vector<uint64_t>& ids : split) {
      const PairTensors b = MakePairTensors(pairs, ids, BatchFormat{}).value();
      const LossOutput out = MicroBatchLoss(policy, nullptr, o, b).value();
      EXPECT_EQ(out.nll_tokens, static_cast<double>(b.scored_tokens));
      const double p = own_totals ? static_cast<double>(ids.size()) : step_pairs;
      BackwardLoss(out, w, p, own_totals ? out.nll_tokens : step_tokens).backward();
      sum += ReadPairMetrics(out.metrics);
    }
    if (value != nullptr) *value = MeanLoss(sum, false);
    std::vector<torch::Tensor> g;
    for (const torch::Tensor& t : policy->parameters()) g.push_back(t.grad().flatten().to(torch::kDouble));
    return torch::cat(g);
  };
  double whole_value = 0, split_value = 0;
  const torch::Tensor whole = gradient({{0, 1, 2, 3}}, false, &whole_value);
  const torch::Tensor split = gradient({{0, 1}, {2, 3}}, false, &split_value);
  const torch::Tensor per_micro = gradient({{0, 1}, {2, 3}}, true, nullptr);
  // float32 rounding through the tiny model's forward and backward (a few hundred operations per value at
  // 2^-24 each, batches padded to other lengths) stays below 1e-4 of the gradient's scale; normalising per
  // micro-batch weighs the two micro-batches' NLL 0.25 and 0.67 per pair where the step's is 0.36.
  const double scale = whole.abs().max().item<double>();
  EXPECT_LT((whole - split).abs().max().item<double>(), 1e-4 * scale);
  EXPECT_GT((whole - per_micro).abs().max().item<double>(), 1e-2 * scale);
  EXPECT_NEAR(whole_value, split_value, 1e-4 * std::fabs(whole_value));

  // The value: mean over pairs of -log s(c - r) (beta 0.1, reference 0) plus w x NLL per chosen token.
  const PairTensors b = MakePairTensors(pairs, {0, 1, 2, 3}, BatchFormat{}).value();
  torch::Tensor t;
  {
    torch::NoGradGuard no_grad;
    t = policy->TokenLogProbs(b.tokens, b.head_from).to(torch::kDouble);
  }
  auto logp = [&](int64_t row) {
    double s = 0;
    for (int64_t p = b.starts[row].item<int64_t>(); p < b.lengths[row].item<int64_t>(); ++p)
      s += t[row][p - 1 - b.head_from].item<double>();
    return s;
  };
  double pref = 0, nll = 0;
  for (int64_t i = 0; i < 4; ++i) {
    pref += -LogSigmoid(0.1 * (logp(i) - logp(4 + i)));
    nll += -logp(i);
  }
  const double want = pref / step_pairs + w * nll / step_tokens;
  EXPECT_NEAR(whole_value, want, Float32Bound({pref, nll, 40}));
}

// LD-DPO (TRL's ld_alpha): the policy's log-prob of each response is its first m tokens' plus alpha times
// the rest's, m the shorter response of its pair; the reference's stays the plain sum. Two pairs whose
// longer response is once the chosen and once the rejected one, through MicroBatchLoss, against float64 loops
// over the same token log-probs.
TEST(ObjectivesTest, LdDpoWeighsThePolicysTokensPastTheShorterResponse) {
  const core::HfModelConfig config = test_support::TinyLlamaConfig();
  torch::manual_seed(21);
  LlamaModel policy(config, LlamaOptions{});
  torch::manual_seed(22);
  LlamaModel reference_model(config, LlamaOptions{});
  const std::vector<data::PreferencePair> pairs = UnequalPairs();
  const PairTensors b = MakePairTensors(pairs, {0, 1}, BatchFormat{}).value();
  PreferenceTrainOptions o;
  o.task = PreferenceTrainOptions::Task::kDpo;
  o.dpo.beta = 0.5;
  o.dpo.ld_alpha = 0.3;
  torch::Tensor ref_tokens, pol_tokens;
  {
    torch::NoGradGuard no_grad;
    ref_tokens = reference_model->TokenLogProbs(b.tokens, b.head_from).to(torch::kDouble);
    pol_tokens = policy->TokenLogProbs(b.tokens, b.head_from).to(torch::kDouble);
  }
  absl::StatusOr<std::unique_ptr<ReferenceModel>> reference =
      ReferenceModel::Create(reference_model, ReferenceStrategy::kResident);
  ASSERT_TRUE(reference.ok()) << reference.status();
  const LossOutput out = MicroBatchLoss(policy, reference->get(), o, b).value();
  // Row k: [chosen 0, chosen 1, rejected 0, rejected 1]; `shared` tokens at weight 1, the rest at alpha.
  auto logp = [&](const torch::Tensor& t, int64_t row, int64_t shared, double alpha) {
    const int64_t start = b.starts[row].item<int64_t>(), end = b.lengths[row].item<int64_t>();
    double sum = 0;
    for (int64_t p = start; p < end; ++p)
      sum += (p - start < shared ? 1.0 : alpha) * t[row][p - 1 - b.head_from].item<double>();
    return sum;
  };
  const int64_t shared[] = {3, 2};
  double want = 0, plain = 0;
  for (int64_t i = 0; i < 2; ++i) {
    auto loss = [&](double alpha) {
      const double h = (logp(pol_tokens, i, shared[i], alpha) - logp(pol_tokens, 2 + i, shared[i], alpha)) -
                       (logp(ref_tokens, i, 99, 1.0) - logp(ref_tokens, 2 + i, 99, 1.0));
      return -LogSigmoid(0.5 * h);
    };
    want += loss(0.3);
    plain += loss(1.0);
  }
  // float32 sums of at most 6 token log-probs below 10 each, then the sigmoid loss.
  const double tol = Float32Bound({60, 60, 60, 60, want});
  EXPECT_NEAR(out.loss_sum.item<double>(), want, tol);
  EXPECT_GT(std::fabs(plain - want), 100 * tol) << "plain sums would be told apart";
  const torch::Tensor direct = LengthDesensitizedLogProbs(pol_tokens, b.starts, b.lengths, b.head_from, 0.3);
  for (int64_t row = 0; row < 4; ++row) {
    EXPECT_NEAR(direct[row].item<double>(), logp(pol_tokens, row, shared[row % 2], 0.3), 1e-12) << row;
  }
}

TEST(ObjectivesTest, SftNegativeLogLikelihoodOfTheCompletions) {
  torch::Tensor pc = torch::tensor({-3.0f, -5.0f}, torch::requires_grad());
  LossOutput out = SftLoss(pc, torch::tensor({3, 4}, torch::kLong));
  EXPECT_EQ(out.loss_sum.item<double>(), 8.0);
  EXPECT_EQ(out.pairs, 2);
  const PairMetrics m = ReadPairMetrics(out.metrics);
  EXPECT_EQ(m.loss_sum, 8.0);
  EXPECT_EQ(m.correct, 0) << "a completion has nothing to be ranked against";
  EXPECT_EQ(m.margin_sum, 0.0);
  EXPECT_EQ(m.pairs, 2);
  EXPECT_EQ(m.chosen_sum, -8.0);
  EXPECT_EQ(m.rejected_sum, 0.0);
  EXPECT_EQ(m.response_tokens, 7);
  out.loss_sum.backward();
  EXPECT_EQ(pc.grad()[0].item<float>(), -1.0f);
}

// SFT's token accuracy (TRL's mean_token_accuracy) through MicroBatchLoss: the scored tokens the model ranks
// first, against the full logits' argmax. The completions are written from the model's own predictions, its
// first choice at every other position, so about half are hits; a position whose two best logits lie
// within 1e-4 could rank either way between the two paths' roundings and may count either way.
TEST(ObjectivesTest, SftTokenAccuracyCountsTheScoredTokensTheModelRanksFirst) {
  torch::manual_seed(3);
  LlamaModel model(test_support::TinyLlamaConfig(), LlamaOptions{});
  std::vector<data::PreferencePair> examples(2);
  for (int e = 0; e < 2; ++e) {
    std::vector<int64_t> ids = {1, 5 + e, 9};
    for (int k = 0; k < 6; ++k) {
      torch::NoGradGuard no_grad;
      const int64_t best = model->Logits(torch::tensor(ids).unsqueeze(0))[0][-1].argmax().item<int64_t>();
      ids.push_back(k % 2 == 0 ? best : (best + 1) % 50);
    }
    examples[e].prompt.assign(ids.begin(), ids.begin() + 3);
    examples[e].chosen.assign(ids.begin() + 3, ids.end());
    examples[e].source_line = e + 1;
  }
  examples[1].chosen_scored = {1, 1, 0, 0, 1, 1};  // assistant_only_loss: two tokens unscored
  BatchFormat sft;
  sft.rows = data::PairRows::kChosenOnly;
  const PairTensors b = MakePairTensors(examples, {0, 1}, sft).value();
  PreferenceTrainOptions o;
  o.task = PreferenceTrainOptions::Task::kSft;
  const LossOutput out = MicroBatchLoss(model, nullptr, o, b).value();
  const PairMetrics m = ReadPairMetrics(out.metrics);
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->Logits(b.tokens).to(torch::kDouble);  // [2, 9, V]
  const torch::Tensor two = std::get<0>(logits.topk(2, -1));
  const std::vector<std::vector<uint8_t>> scored = {std::vector<uint8_t>(6, 1), examples[1].chosen_scored};
  int64_t hits = 0, ambiguous = 0, tokens = 0;
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t t = 3; t < 9; ++t) {  // sequence position t, predicted at t - 1
      if (!scored[r][t - 3]) continue;
      ++tokens;
      hits += logits[r][t - 1].argmax().item<int64_t>() == b.tokens[r][t].item<int64_t>();
      ambiguous += (two[r][t - 1][0] - two[r][t - 1][1]).item<double>() < 1e-4;
    }
  }
  EXPECT_EQ(m.response_tokens, tokens);
  EXPECT_LE(std::abs(hits - 5), ambiguous)
      << "the written hits: positions 3, 5, 7 of example 0, 3 and 7 of 1";
  EXPECT_LE(std::abs(m.correct - static_cast<double>(hits)), static_cast<double>(ambiguous));
  EXPECT_NEAR(SftTokenAccuracy(m), m.correct / tokens, 1e-12);
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
  EXPECT_EQ(m.nll_sum, 16);
  EXPECT_EQ(m.nll_term_sum, 18);
  // The host array (what SumOverRanks all-reduces) has the tensor's order, and reads back unchanged.
  const std::array<double, pair_metric::kCount> values = PairMetricValues(m);
  for (int64_t i = 0; i < pair_metric::kCount; ++i) EXPECT_EQ(values[i], 2.0 * i) << i;
  EXPECT_EQ(PairMetricValues(PairMetricsOf(values)), values);
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
  // The head skipped the positions before `from` (TokenLogProbs(ids, from)): the columns left are
  // positions from, from + 1, ...; from = min(start) - 1 = 1 loses no response token.
  torch::Tensor window = ResponseLogProbs(lp.slice(1, 1), start, len, /*from=*/1);
  EXPECT_EQ(window[0].item<float>(), 12.0f);
  EXPECT_EQ(window[1].item<float>(), 96.0f);
  // ... and a later one drops exactly the positions before it (seq 1's position 2 -> index 1: 32).
  EXPECT_EQ(ResponseLogProbs(lp.slice(1, 2), start, len, /*from=*/2)[1].item<float>(), 64.0f);
}

// With `scored` (an SFT batch under assistant_only_loss) only the flagged positions count, whatever the
// window the head computed.
TEST(ObjectivesTest, ResponseLogProbsReadTheScoredPositionsAlone) {
  torch::Tensor lp = torch::tensor({{1.0f, 2.0f, 4.0f, 8.0f}, {16.0f, 32.0f, 64.0f, 128.0f}});
  torch::Tensor start = torch::tensor({2, 1}, torch::kLong);
  torch::Tensor len = torch::tensor({5, 4}, torch::kLong);
  // Sequence positions 0..4; seq 0 scores 2 and 4 (indices 1, 3), seq 1 scores 1 and 3 (indices 0, 2).
  torch::Tensor scored = torch::tensor({{0, 0, 1, 0, 1}, {0, 1, 0, 1, 0}}, torch::kBool);
  torch::Tensor got = ResponseLogProbs(lp, start, len, 0, scored);
  EXPECT_EQ(got[0].item<float>(), 2.0f + 8.0f);
  EXPECT_EQ(got[1].item<float>(), 16.0f + 64.0f);
  torch::Tensor window =
      ResponseLogProbs(lp.slice(1, 1), start, len, /*from=*/1, scored.slice(0, 0, 1).expand({2, 5}));
  EXPECT_EQ(window[0].item<float>(), 10.0f);
  EXPECT_EQ(window[1].item<float>(), 32.0f + 128.0f) << "the same flags, read from column from + 1";
}

// The batch's head_from: the first position whose next-token log-probability a response needs (min over
// rows of the response start, minus 1), known on the host; 0 where a prompt is only BOS.
TEST(PairTensorsTest, HeadFromIsTheEarliestResponseStartMinusOne) {
  data::PreferenceDataOptions o;
  o.max_length = 0;
  const int32_t bos = 1, eos = 2;
  std::vector<data::PreferencePair> pairs = {
      data::AssemblePreferencePair({5, 6, 7, 8}, {9, 10}, {11}, bos, eos, o, 1),   // starts 5 and 5
      data::AssemblePreferencePair({12, 13}, {14}, {15, 16, 17}, bos, eos, o, 2),  // starts 3 and 3
  };
  auto both = MakePairTensors(pairs, {0, 1}, BatchFormat{});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->starts.min().item<int64_t>(), 3);
  EXPECT_EQ(both->head_from, 2);
  auto first = MakePairTensors(pairs, {0}, BatchFormat{});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->head_from, 4);
  pairs.push_back(data::AssemblePreferencePair({}, {18}, {19}, bos, eos, o, 3));  // [BOS] only: start 1
  auto bare = MakePairTensors(pairs, {2, 0}, BatchFormat{});
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->head_from, 0);
}

// An SFT batch's scored flags reach its tensors as [rows, T] bool; no other batch has them.
TEST(PairTensorsTest, ScoredFlagsReachAnSftBatchThatHasThem) {
  data::PreferenceDataOptions o;
  o.max_length = 0;
  o.sft = true;
  std::vector<data::PreferencePair> examples = {
      data::AssemblePreferencePair({5}, {9, 10, 11}, {}, 1, 2, o, 1, {1, 0, 1}),  // + EOS, scored as 11
      data::AssemblePreferencePair({12}, {14}, {}, 1, 2, o, 2),
  };
  ASSERT_EQ(examples[0].chosen_scored, (std::vector<uint8_t>{1, 0, 1, 1}));
  BatchFormat sft;
  sft.rows = data::PairRows::kChosenOnly;
  auto t = MakePairTensors(examples, {0, 1}, sft);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE(t->scored.defined());
  EXPECT_EQ(t->scored.scalar_type(), torch::kBool);
  EXPECT_TRUE(
      torch::equal(t->scored.to(torch::kLong), torch::tensor({{0, 0, 1, 0, 1, 1}, {0, 0, 1, 1, 0, 0}})));
  EXPECT_FALSE(MakePairTensors(examples, {1}, sft)->scored.defined());
}

// A reward model's batch carries its pairs' margins, in batch order, when any is not 0; no other batch does.
TEST(PairTensorsTest, MarginsReachARewardBatchWhenThePairsHaveThem) {
  data::PreferenceDataOptions o;
  o.max_length = 0;
  std::vector<data::PreferencePair> pairs = {
      data::AssemblePreferencePair({5}, {9, 10}, {11}, 1, 2, o, 1),
      data::AssemblePreferencePair({12}, {14}, {15}, 1, 2, o, 2),
  };
  BatchFormat reward;
  reward.reward_readout = true;
  auto none = MakePairTensors(pairs, {0, 1}, reward);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->margins.defined());
  pairs[1].margin = 1.5;
  auto some = MakePairTensors(pairs, {1, 0}, reward);
  ASSERT_TRUE(some.ok()) << some.status();
  ASSERT_TRUE(some->margins.defined());
  EXPECT_EQ(some->margins[0].item<float>(), 1.5f);
  EXPECT_EQ(some->margins[1].item<float>(), 0.0f);
  EXPECT_FALSE(MakePairTensors(pairs, {1, 0}, BatchFormat{})->margins.defined()) << "DPO has no use for them";
}

}  // namespace
}  // namespace zerofit::worker
