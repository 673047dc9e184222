// GRPO's objective against a float64 transcription of TRL's GRPOTrainer loss written as plain loops: group
// advantages, the clipped token loss with the k3 KL, each normalisation's sum and units, the clipped-token
// count, and the gradient with respect to the policy's log-probs (written out by hand: -ratio A on tokens
// the clip leaves alone, 0 on clipped ones, beta (1 - exp(ref - logp)) from the KL).
#include "worker/torch/train/grpo_objective.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace zerofit::worker {
namespace {

struct Case {
  torch::Tensor logp, old_logp, ref_logp, mask, adv;  // float64
};

// Four completions of lengths 5, 3, 6 and 1 in a [4, 6] batch; ratios up to exp(+-0.5), past the clip range.
Case MakeCase(uint64_t seed) {
  torch::manual_seed(seed);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  Case c;
  c.old_logp = -torch::rand({4, 6}, f64) * 3.0 - 0.05;
  c.logp = (c.old_logp + (torch::rand({4, 6}, f64) - 0.5)).clamp_max(-1e-3).requires_grad_(true);
  c.ref_logp = c.old_logp + (torch::rand({4, 6}, f64) - 0.5) * 0.4;
  c.mask = torch::zeros({4, 6}, f64);
  const int64_t lengths[] = {5, 3, 6, 1};
  for (int64_t i = 0; i < 4; ++i) c.mask[i].narrow(0, 0, lengths[i]).fill_(1.0);
  c.adv = torch::tensor({1.3, -0.7, 0.4, -1.1}, f64);
  return c;
}

double At(const torch::Tensor& t, int64_t i, int64_t j) { return t[i][j].item<double>(); }

struct Oracle {
  double loss_sum = 0, units = 0, kl_sum = 0, clipped = 0, tokens = 0;
  std::vector<std::vector<double>> grad;  // d loss_sum / d logp
};

// The mean log-ratio of completion i's tokens (GSPO's sequence-level log importance weight).
double MeanLogRatio(const Case& c, int64_t i) {
  double sum = 0, n = 0;
  for (int64_t j = 0; j < c.logp.size(1); ++j) {
    if (At(c.mask, i, j) == 0) continue;
    sum += At(c.logp.detach(), i, j) - At(c.old_logp, i, j);
    n += 1;
  }
  return sum / std::max(n, 1.0);
}

// policy_mask (top_entropy_quantile): 0/1 per token, multiplying the policy term alone (token ratios only).
Oracle Reference(const Case& c, const GrpoOptions& o, const torch::Tensor& policy_mask = torch::Tensor()) {
  const int64_t b = c.logp.size(0), t = c.logp.size(1);
  Oracle r;
  r.grad.assign(b, std::vector<double>(t, 0.0));
  for (int64_t i = 0; i < b; ++i) {
    double seq = 0, n = 0;
    std::vector<double> g(t, 0.0);
    const double a = c.adv[i].item<double>();
    for (int64_t j = 0; j < t; ++j) {
      if (At(c.mask, i, j) == 0) continue;
      const double lp = At(c.logp.detach(), i, j);
      // GSPO: the sequence's ratio on every token; its derivative with respect to each of the n tokens'
      // log-probs is ratio / n, and the n tokens' terms add up to ratio again.
      const double ratio = std::exp(o.sequence_ratio ? MeanLogRatio(c, i) : lp - At(c.old_logp, i, j));
      const double capped = o.delta ? std::min(ratio, *o.delta) : ratio;
      const double clamped = std::clamp(ratio, 1 - o.epsilon_low, 1 + o.epsilon_high);
      // No gradient when the term the min picks is constant in the ratio.
      const bool picked_clamped = clamped * a < capped * a;
      const bool outside = ratio < 1 - o.epsilon_low || ratio > 1 + o.epsilon_high;
      const bool clipped = picked_clamped ? outside : (o.delta && ratio > *o.delta);
      const double keep = policy_mask.defined() ? At(policy_mask, i, j) : 1.0;
      double loss = -std::min(capped * a, clamped * a) * keep;
      g[j] = clipped ? 0.0 : -ratio * a * keep;
      if (o.term == GrpoPolicyTerm::kCispo) {  // -sg(min(r, eps_high)) A logp
        const double w = std::min(ratio, o.epsilon_high);
        loss = -w * a * lp * keep;
        g[j] = -w * a * keep;
      } else if (o.term == GrpoPolicyTerm::kSapo) {  // -(4 / tau) s(tau (r - 1)) A
        const double tau = a > 0 ? o.sapo_temperature_pos : o.sapo_temperature_neg;
        const double s = 1 / (1 + std::exp(-tau * (ratio - 1)));
        loss = -4 / tau * s * a * keep;
        g[j] = -4 * s * (1 - s) * ratio * a * keep;
      }
      const bool flagged = o.term == GrpoPolicyTerm::kClipped ? clipped
                           : o.term == GrpoPolicyTerm::kCispo ? ratio > o.epsilon_high
                                                              : false;
      if (o.beta > 0) {
        const double d = At(c.ref_logp, i, j) - lp;
        const double k3 = std::exp(d) - d - 1;
        // use_bias_correction_kl (token ratios): r k3, whose derivative is r (1 - e^d) + r k3.
        const double w = o.bias_correction_kl ? ratio : 1.0;
        loss += o.beta * k3 * w;
        g[j] += o.beta * ((1 - std::exp(d)) * w + (o.bias_correction_kl ? k3 * ratio : 0.0));
        r.kl_sum += k3 * w;
      }
      r.clipped += flagged;
      seq += loss;
      n += 1;
    }
    r.tokens += n;
    const double w = o.norm == GrpoLossNorm::kSequenceMean ? 1.0 / std::max(n, 1.0) : 1.0;
    r.loss_sum += seq * w;
    for (int64_t j = 0; j < t; ++j) r.grad[i][j] = g[j] * w;
  }
  r.units = o.norm == GrpoLossNorm::kSequenceMean ? static_cast<double>(b)
            : o.norm == GrpoLossNorm::kTokenMean  ? r.tokens
                                                  : static_cast<double>(b * o.max_new_tokens);
  return r;
}

// A float64 sum of ~20 terms of size ~1: a few hundred ulps at most.
constexpr double kTol = 1e-12;

TEST(GrpoObjectiveTest, LossUnitsAndGradientEqualTheFloat64TranscriptionForEveryNormalisation) {
  for (GrpoLossNorm norm :
       {GrpoLossNorm::kSequenceMean, GrpoLossNorm::kTokenMean, GrpoLossNorm::kConstantLength}) {
    for (double beta : {0.0, 0.04}) {
      SCOPED_TRACE(std::string(GrpoLossNormName(norm)) + " beta " + std::to_string(beta));
      const Case c = MakeCase(7);
      GrpoOptions o;
      o.norm = norm;
      o.beta = beta;
      o.epsilon_high = 0.28;  // DAPO's clip-higher: asymmetric
      o.max_new_tokens = 6;
      auto loss =
          GrpoPolicyLoss(c.logp, c.old_logp, beta > 0 ? c.ref_logp : torch::Tensor(), c.mask, c.adv, o);
      ASSERT_TRUE(loss.ok()) << loss.status();
      const Oracle want = Reference(c, o);
      EXPECT_NEAR(loss->loss_sum.item<double>(), want.loss_sum, kTol);
      EXPECT_EQ(loss->units, want.units);
      EXPECT_NEAR(loss->kl_sum.item<double>(), want.kl_sum, kTol);
      EXPECT_EQ(loss->clipped_tokens.item<double>(), want.clipped);
      EXPECT_EQ(loss->tokens.item<double>(), 15.0);
      EXPECT_GT(want.clipped, 0) << "the case must exercise the clip";
      EXPECT_LT(want.clipped, 15) << "and leave tokens unclipped";
      const torch::Tensor grad = torch::autograd::grad({loss->loss_sum}, {c.logp})[0];
      for (int64_t i = 0; i < 4; ++i) {
        for (int64_t j = 0; j < 6; ++j) EXPECT_NEAR(At(grad, i, j), want.grad[i][j], kTol) << i << "," << j;
      }
    }
  }
}

// TRL's loss_type cispo (the importance weight capped at epsilon_high and held constant, times the log-prob;
// dapo's token mean) and sapo (the soft gate with its two temperatures; grpo's sequence mean), with and
// without the KL term, against the transcription; cispo counts the tokens whose weight was capped.
TEST(GrpoObjectiveTest, CispoAndSapoEqualTheFloat64Transcription) {
  for (const char* type : {"cispo", "sapo"}) {
    for (double beta : {0.0, 0.04}) {
      SCOPED_TRACE(std::string(type) + " beta " + std::to_string(beta));
      const Case c = MakeCase(13);
      GrpoOptions o;
      o.norm = *ParseGrpoLossNorm(type);
      o.term = *ParseGrpoPolicyTerm(type);
      o.beta = beta;
      o.epsilon_high = 1.2;  // CISPO's cap: below the case's largest ratios
      auto loss = GrpoPolicyLoss(c.logp, c.old_logp, c.ref_logp, c.mask, c.adv, o);
      ASSERT_TRUE(loss.ok()) << loss.status();
      const Oracle want = Reference(c, o);
      EXPECT_NEAR(loss->loss_sum.item<double>(), want.loss_sum, kTol);
      EXPECT_EQ(loss->units, want.units);
      EXPECT_EQ(loss->clipped_tokens.item<double>(), want.clipped);
      if (o.term == GrpoPolicyTerm::kCispo) {
        EXPECT_EQ(o.norm, GrpoLossNorm::kTokenMean);
        EXPECT_GT(want.clipped, 0) << "the case must cap some weights";
      } else {
        EXPECT_EQ(o.norm, GrpoLossNorm::kSequenceMean);
      }
      const torch::Tensor grad = torch::autograd::grad({loss->loss_sum}, {c.logp})[0];
      for (int64_t i = 0; i < 4; ++i) {
        for (int64_t j = 0; j < 6; ++j) EXPECT_NEAR(At(grad, i, j), want.grad[i][j], kTol) << i << "," << j;
      }
    }
  }
  EXPECT_EQ(*ParseGrpoPolicyTerm("dapo"), GrpoPolicyTerm::kClipped);
  EXPECT_FALSE(ParseGrpoPolicyTerm("bnpo").ok());
  GrpoOptions capped_sapo;
  capped_sapo.term = GrpoPolicyTerm::kSapo;
  capped_sapo.delta = 2.0;
  const Case c = MakeCase(13);
  EXPECT_FALSE(GrpoPolicyLoss(c.logp, c.old_logp, c.ref_logp, c.mask, c.adv, capped_sapo).ok());
}

// TRL's use_bias_correction_kl: the k3 term times the (token) importance ratio, with the ratio's gradient,
// against the transcription; the KL metric is the corrected one, as TRL's.
TEST(GrpoObjectiveTest, BiasCorrectedKlIsTheRatioTimesK3) {
  for (GrpoLossNorm norm : {GrpoLossNorm::kSequenceMean, GrpoLossNorm::kTokenMean}) {
    SCOPED_TRACE(GrpoLossNormName(norm));
    const Case c = MakeCase(17);
    GrpoOptions o;
    o.norm = norm;
    o.beta = 0.3;
    o.bias_correction_kl = true;
    auto loss = GrpoPolicyLoss(c.logp, c.old_logp, c.ref_logp, c.mask, c.adv, o);
    ASSERT_TRUE(loss.ok()) << loss.status();
    const Oracle want = Reference(c, o);
    GrpoOptions plain = o;
    plain.bias_correction_kl = false;
    EXPECT_GT(std::fabs(want.kl_sum - Reference(c, plain).kl_sum), 1e3 * kTol)
        << "the ratios must differ from 1";
    EXPECT_NEAR(loss->loss_sum.item<double>(), want.loss_sum, kTol);
    EXPECT_NEAR(loss->kl_sum.item<double>(), want.kl_sum, kTol);
    const torch::Tensor grad = torch::autograd::grad({loss->loss_sum}, {c.logp})[0];
    for (int64_t i = 0; i < 4; ++i) {
      for (int64_t j = 0; j < 6; ++j) EXPECT_NEAR(At(grad, i, j), want.grad[i][j], kTol) << i << "," << j;
    }
  }
}

// top_entropy_quantile's policy mask drops the policy term of the tokens it leaves out and nothing else: the
// KL term, the units and the token count stay, for every normalisation, against the transcription.
TEST(GrpoObjectiveTest, ThePolicyMaskDropsThePolicyTermAlone) {
  for (GrpoLossNorm norm :
       {GrpoLossNorm::kSequenceMean, GrpoLossNorm::kTokenMean, GrpoLossNorm::kConstantLength}) {
    SCOPED_TRACE(GrpoLossNormName(norm));
    const Case c = MakeCase(11);
    GrpoOptions o;
    o.norm = norm;
    o.beta = 0.04;
    o.max_new_tokens = 6;
    const torch::Tensor keep = (torch::arange(24, torch::kFloat64).view({4, 6}).remainder(3) != 1)
                                   .to(torch::kFloat64);  // two tokens in three
    auto loss = GrpoPolicyLoss(c.logp, c.old_logp, c.ref_logp, c.mask, c.adv, o, keep);
    ASSERT_TRUE(loss.ok()) << loss.status();
    const Oracle want = Reference(c, o, keep), all = Reference(c, o);
    EXPECT_NEAR(loss->loss_sum.item<double>(), want.loss_sum, kTol);
    EXPECT_GT(std::fabs(want.loss_sum - all.loss_sum), 1e3 * kTol) << "the mask must change the loss";
    EXPECT_EQ(loss->units, all.units);
    EXPECT_NEAR(loss->kl_sum.item<double>(), all.kl_sum, kTol);
    EXPECT_EQ(loss->tokens.item<double>(), 15.0);
    const torch::Tensor grad = torch::autograd::grad({loss->loss_sum}, {c.logp})[0];
    for (int64_t i = 0; i < 4; ++i) {
      for (int64_t j = 0; j < 6; ++j) EXPECT_NEAR(At(grad, i, j), want.grad[i][j], kTol) << i << "," << j;
    }
  }
  const Case c = MakeCase(11);
  auto bad = GrpoPolicyLoss(c.logp, c.old_logp, c.ref_logp, c.mask, c.adv, GrpoOptions{},
                            torch::ones({4, 5}, torch::kFloat64));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("policy_mask must have logp's shape"), std::string::npos);
}

// GSPO (importance_sampling_level sequence) and two-sided clipping (delta), alone and together, against the
// same transcription. Tight clip ranges (GSPO's own are ~3e-4) so that some sequences are clipped whole.
TEST(GrpoObjectiveTest, SequenceRatiosAndTheDeltaCapEqualTheFloat64Transcription) {
  for (bool sequence : {false, true}) {
    // The caps bite in this case: a token ratio of 1.15 under a negative advantage (token level), the first
    // completion's sequence ratio of 1.23 above the cap and the clip range (sequence level).
    for (double delta : {0.0, sequence ? 1.05 : 1.1}) {
      SCOPED_TRACE(std::string(sequence ? "sequence" : "token") + " delta " + std::to_string(delta));
      const Case c = MakeCase(7);
      GrpoOptions o;
      o.norm = GrpoLossNorm::kSequenceMean;
      o.beta = 0.04;
      o.sequence_ratio = sequence;
      if (delta > 0) o.delta = delta;
      if (sequence) o.epsilon_low = 0.05, o.epsilon_high = 0.08;
      auto loss = GrpoPolicyLoss(c.logp, c.old_logp, c.ref_logp, c.mask, c.adv, o);
      ASSERT_TRUE(loss.ok()) << loss.status();
      const Oracle want = Reference(c, o);
      EXPECT_NEAR(loss->loss_sum.item<double>(), want.loss_sum, kTol);
      EXPECT_EQ(loss->clipped_tokens.item<double>(), want.clipped);
      const torch::Tensor grad = torch::autograd::grad({loss->loss_sum}, {c.logp})[0];
      for (int64_t i = 0; i < 4; ++i) {
        for (int64_t j = 0; j < 6; ++j) EXPECT_NEAR(At(grad, i, j), want.grad[i][j], kTol) << i << "," << j;
      }
      EXPECT_GT(want.clipped, 0) << "the case must exercise the clip";
      EXPECT_LT(want.clipped, 15) << "and leave tokens unclipped";
      if (delta > 0) {  // the cap must change something, or the case would not test it
        GrpoOptions uncapped = o;
        uncapped.delta.reset();
        EXPECT_NE(Reference(c, uncapped).loss_sum, want.loss_sum);
      }
    }
  }
  GrpoOptions bad;
  bad.delta = 1.0;
  const Case c = MakeCase(7);
  EXPECT_FALSE(GrpoPolicyLoss(c.logp, c.old_logp, c.ref_logp, c.mask, c.adv, bad).ok());
}

TEST(GrpoObjectiveTest, Float32StaysWithinABoundFromItsRounding) {
  const Case c = MakeCase(11);
  GrpoOptions o;
  o.beta = 0.04;
  auto loss = GrpoPolicyLoss(c.logp.detach().to(torch::kFloat32), c.old_logp.to(torch::kFloat32),
                             c.ref_logp.to(torch::kFloat32), c.mask.to(torch::kFloat32),
                             c.adv.to(torch::kFloat32), o);
  ASSERT_TRUE(loss.ok()) << loss.status();
  // Inputs rounded to fp32 (relative 2^-24, amplified by exp's argument ~3 and the clip/KL terms ~1 each),
  // then ~10 operations a token and a sum of 15 tokens: 64 ulps of the summed magnitudes is a safe ceiling.
  const Oracle want = Reference(c, o);
  const double magnitude = 15.0 * 3.0;
  EXPECT_NEAR(loss->loss_sum.item<double>(), want.loss_sum,
              64 * std::numeric_limits<float>::epsilon() * magnitude);
}

TEST(GrpoObjectiveTest, AdvantagesAreGroupCentredAndScaledByTheBesselStd) {
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor rewards =
      torch::tensor({1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0, 0.5, 3.0, -1.0, 0.0}, f64);
  GrpoOptions o;
  auto a = GroupAdvantages(rewards, 4, o);
  ASSERT_TRUE(a.ok()) << a.status();
  for (int64_t g = 0; g < 3; ++g) {
    double mean = 0, var = 0;
    for (int64_t k = 0; k < 4; ++k) mean += rewards[g * 4 + k].item<double>() / 4;
    for (int64_t k = 0; k < 4; ++k) var += std::pow(rewards[g * 4 + k].item<double>() - mean, 2) / 3;
    for (int64_t k = 0; k < 4; ++k) {
      const double want = (rewards[g * 4 + k].item<double>() - mean) / (std::sqrt(var) + o.std_eps);
      EXPECT_NEAR((*a)[g * 4 + k].item<double>(), want, 1e-12) << g << "," << k;
    }
  }
  EXPECT_EQ((*a).narrow(0, 4, 4).abs().max().item<double>(), 0.0) << "equal rewards: no signal, no NaN";
  o.scale = RewardScale::kNone;  // Dr. GRPO: centred only
  auto centred = GroupAdvantages(rewards, 4, o);
  ASSERT_TRUE(centred.ok());
  EXPECT_NEAR((*centred)[0].item<double>(), 0.5, 1e-15);
  EXPECT_FALSE(GroupAdvantages(rewards, 5, o).ok()) << "5 does not divide 12";
}

// scale_rewards batch: each group centred on its own mean, every advantage divided by one standard deviation
// (the whole batch's, BatchStd from the squared deviations about the batch mean), against float64 loops.
TEST(GrpoObjectiveTest, BatchScaledAdvantagesDivideByTheBatchStd) {
  const std::vector<double> r = {1, 0, 0, 1, 2.5, 2.5, 2.5, 2.5, 0.3, 0.1, 0.7, 0.2};
  double mean = 0, dev = 0;
  for (double x : r) mean += x / 12;
  for (double x : r) dev += (x - mean) * (x - mean);
  const double stdev = BatchStd(dev, 12);
  EXPECT_NEAR(stdev, std::sqrt(dev / 11), 1e-15);
  GrpoOptions o;
  o.scale = RewardScale::kBatch;
  const torch::Tensor rewards = torch::tensor(r, torch::kFloat64);
  EXPECT_FALSE(GroupAdvantages(rewards, 4, o).ok()) << "batch needs the batch's std";
  auto a = GroupAdvantages(rewards, 4, o, stdev);
  ASSERT_TRUE(a.ok()) << a.status();
  for (int64_t g = 0; g < 3; ++g) {
    double group_mean = 0;
    for (int64_t k = 0; k < 4; ++k) group_mean += r[g * 4 + k] / 4;
    for (int64_t k = 0; k < 4; ++k) {
      EXPECT_NEAR((*a)[g * 4 + k].item<double>(), (r[g * 4 + k] - group_mean) / (stdev + o.std_eps), 1e-14);
    }
  }
  EXPECT_EQ(BatchStd(5.0, 1), 0.0);
  for (const char* name : {"group", "batch", "none"})
    EXPECT_EQ(RewardScaleName(*ParseRewardScale(name)), std::string(name));
  EXPECT_EQ(*ParseRewardScale("true"), RewardScale::kGroup);
  EXPECT_EQ(*ParseRewardScale("false"), RewardScale::kNone);
  EXPECT_FALSE(ParseRewardScale("yes").ok());
}

// TRL's RLOOTrainer loss, transcribed: completion i's ratio r_i = exp(sum over its tokens of (logp -
// old_logp)), its loss -min(r_i A_i, clamp(r_i) A_i), the mean over completions; the gradient -r_i A_i on
// each of its tokens unless the clamped term is picked outside the range; no KL term in the loss (it is in
// the reward), the KL metric the first-order sum of old_logp - ref_logp.
TEST(GrpoObjectiveTest, RlooEqualsTheFloat64TranscriptionOfTrlsRlooLoss) {
  Case c = MakeCase(11);
  // Summed log-ratios of a few tokens: shrink the per-token ratios so that some completions stay inside.
  c.logp = (c.old_logp + (c.logp.detach() - c.old_logp) * 0.4).requires_grad_(true);
  GrpoOptions o;
  o.rloo = true;
  o.beta = 0.05;
  const int64_t b = 4, t = 6;
  double loss_sum = 0, clipped = 0, kl = 0;
  std::vector<std::vector<double>> grad(b, std::vector<double>(t, 0.0));
  for (int64_t i = 0; i < b; ++i) {
    double log_ratio = 0, n = 0;
    for (int64_t j = 0; j < t; ++j) {
      if (At(c.mask, i, j) == 0) continue;
      log_ratio += At(c.logp.detach(), i, j) - At(c.old_logp, i, j);
      kl += At(c.old_logp, i, j) - At(c.ref_logp, i, j);
      n += 1;
    }
    const double a = c.adv[i].item<double>(), r = std::exp(log_ratio);
    const double clamped = std::clamp(r, 1 - o.epsilon_low, 1 + o.epsilon_high);
    const bool cut = clamped * a < r * a && (r < 1 - o.epsilon_low || r > 1 + o.epsilon_high);
    loss_sum += -std::min(r * a, clamped * a);
    clipped += cut ? n : 0;
    for (int64_t j = 0; j < t; ++j) grad[i][j] = At(c.mask, i, j) == 0 || cut ? 0.0 : -r * a;
  }
  auto loss = GrpoPolicyLoss(c.logp, c.old_logp, c.ref_logp, c.mask, c.adv, o);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(loss->loss_sum.item<double>(), loss_sum, kTol);
  EXPECT_EQ(loss->units, 4.0) << "a mean over completions";
  EXPECT_NEAR(loss->kl_sum.item<double>(), kl, kTol);
  EXPECT_EQ(loss->clipped_tokens.item<double>(), clipped);
  EXPECT_GT(clipped, 0) << "the case must exercise the clip";
  EXPECT_LT(clipped, 15) << "and leave completions unclipped";
  const torch::Tensor g = torch::autograd::grad({loss->loss_sum}, {c.logp})[0];
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t j = 0; j < t; ++j) EXPECT_NEAR(At(g, i, j), grad[i][j], kTol) << i << "," << j;
  }
  // The loss does not depend on beta: RLOO's KL is a reward penalty.
  GrpoOptions no_kl = o;
  no_kl.beta = 0;
  auto plain = GrpoPolicyLoss(c.logp, c.old_logp, torch::Tensor(), c.mask, c.adv, no_kl);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->loss_sum.item<double>(), loss->loss_sum.item<double>());
  // GRPO's options that assume a per-token ratio or KL term are refused with rloo.
  GrpoOptions gspo = o;
  gspo.sequence_ratio = true;
  EXPECT_FALSE(GrpoPolicyLoss(c.logp, c.old_logp, c.ref_logp, c.mask, c.adv, gspo).ok());
}

// RLOO's advantages: R_i minus the mean of its group's other rewards; and its KL-penalised reward.
TEST(GrpoObjectiveTest, LeaveOneOutAdvantagesAndKlPenalisedRewardsByHand) {
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  auto a = LeaveOneOutAdvantages(torch::tensor({0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0}, f64), 4);
  ASSERT_TRUE(a.ok()) << a.status();
  const double want[] = {-2.0 / 3, 2.0 / 3, -2.0 / 3, 2.0 / 3, 1.0, -1.0 / 3, -1.0 / 3, -1.0 / 3};
  for (int64_t i = 0; i < 8; ++i) EXPECT_NEAR((*a)[i].item<double>(), want[i], 1e-15) << i;
  // G/(G-1) times the group-centred advantage, so each group's still sum to 0.
  EXPECT_NEAR(a->sum().item<double>(), 0.0, 1e-15);
  auto one = LeaveOneOutAdvantages(torch::tensor({3.0, 5.0}, f64), 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->abs().sum().item<double>(), 0.0) << "a group of one has no baseline to beat";
  EXPECT_FALSE(LeaveOneOutAdvantages(torch::tensor({1.0, 2.0, 3.0}, f64), 2).ok());
  // reward - beta x sum over the completion's tokens of (old - ref), padding excluded.
  const torch::Tensor old_logp = torch::tensor({{-1.0, -2.0, -9.0}, {-0.5, -0.5, -0.5}}, f64);
  const torch::Tensor ref_logp = torch::tensor({{-1.5, -1.0, 0.0}, {-0.25, -1.0, -0.5}}, f64);
  const torch::Tensor mask = torch::tensor({{1.0, 1.0, 0.0}, {1.0, 1.0, 1.0}}, f64);
  const torch::Tensor r = KlPenalizedRewards(torch::tensor({1.0, 0.0}, f64), 0.1, old_logp, ref_logp, mask);
  EXPECT_NEAR(r[0].item<double>(), 1.0 - 0.1 * (0.5 - 1.0), 1e-15);
  EXPECT_NEAR(r[1].item<double>(), 0.0 - 0.1 * (-0.25 + 0.5 + 0.0), 1e-15);
}

TEST(GrpoObjectiveTest, BadInputsAreErrorsNamingTheArgument) {
  const Case c = MakeCase(3);
  GrpoOptions o;
  auto message = [](const absl::StatusOr<GrpoLoss>& r) { return std::string(r.status().message()); };
  EXPECT_NE(
      message(GrpoPolicyLoss(c.logp, c.old_logp.narrow(1, 0, 5), {}, c.mask, c.adv, o)).find("old_logp"),
      std::string::npos);
  o.beta = 0.1;
  EXPECT_NE(message(GrpoPolicyLoss(c.logp, c.old_logp, {}, c.mask, c.adv, o)).find("ref_logp"),
            std::string::npos);
  o.beta = 0;
  o.norm = GrpoLossNorm::kConstantLength;
  EXPECT_NE(message(GrpoPolicyLoss(c.logp, c.old_logp, {}, c.mask, c.adv, o)).find("max_new_tokens"),
            std::string::npos);
  EXPECT_FALSE(ParseGrpoLossNorm("bnpo").ok());
  for (const char* name : {"grpo", "dapo", "dr_grpo"}) {
    auto parsed = ParseGrpoLossNorm(name);
    ASSERT_TRUE(parsed.ok());
    EXPECT_STREQ(GrpoLossNormName(*parsed), name);
  }
}

}  // namespace
}  // namespace zerofit::worker
