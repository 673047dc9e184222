// LlamaModel against an independent reference forward (plain float64 tensor ops written from Hugging Face's
// formulas), activation checkpointing against the plain graph (bitwise), LoRA, GQA, reward scores and the
// safetensors import/export, all on tiny configs (hidden 32, 2 layers, 4 heads, 2 kv heads, vocab 50).
#include "worker/torch/model/llama_model.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "comm/local/local_communicator.h"
#include "core/hf_config.h"
#include "core/safetensors.h"
#include "tests/support/float_bounds.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_llama_config.h"
#include "worker/torch/train/zero2_binding.h"

namespace zerofit::worker {
namespace {

using zerofit::test_support::Float32ForwardBound;
using zerofit::test_support::TempDir;

using Params = std::map<std::string, torch::Tensor>;

constexpr double kPi = 3.141592653589793;

core::HfModelConfig TinyConfig(const std::string& model_type = "llama") {
  return test_support::TinyLlamaConfig(model_type);
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Larger-than-init random weights, so attention patterns, norms and biases all matter.
void Randomize(torch::nn::Module& m, uint64_t seed, bool lora_b = true) {
  torch::manual_seed(seed);
  torch::NoGradGuard no_grad;
  for (auto& item : m.named_parameters()) {
    torch::Tensor p = item.value();
    if (EndsWith(item.key(), "norm.weight")) {
      p.copy_(1 + 0.2 * torch::randn(p.sizes()));
    } else if (EndsWith(item.key(), ".lora_B")) {
      if (lora_b) p.copy_(0.1 * torch::randn(p.sizes()));
    } else {
      p.copy_(0.2 * torch::randn(p.sizes()));
    }
  }
}

void CopyParams(torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  auto src = from.named_parameters();
  for (auto& item : to.named_parameters()) item.value().copy_(src[item.key()]);
}

Params DoubleParams(torch::nn::Module& m) {
  Params p;
  for (auto& item : m.named_parameters()) p[item.key()] = item.value().detach().to(torch::kFloat64);
  return p;
}

// ---- Reference forward: float64, per batch row and head, scalar rotary, from the HF formulas. ----

std::vector<double> RefInvFreq(const core::HfModelConfig& c, int64_t seq_len) {
  const int64_t d = c.head_dim;
  const std::string type = c.rope_scaling ? c.rope_scaling->type : "";
  double base = c.rope_theta;
  if (type == "dynamic" && seq_len > c.max_position_embeddings) {
    const double f = c.rope_scaling->factor;
    base *= std::pow(f * seq_len / c.max_position_embeddings - (f - 1), d / (d - 2.0));
  }
  std::vector<double> inv(d / 2);
  for (int64_t i = 0; i < d / 2; ++i) {
    double freq = 1.0 / std::pow(base, 2.0 * i / d);
    if (type == "linear") freq /= c.rope_scaling->factor;
    if (type == "llama3") {  // Meta's apply_scaling, written as a loop
      const core::RopeScaling& r = *c.rope_scaling;
      const double old_len = static_cast<double>(r.original_max_position_embeddings);
      const double wavelen = 2 * kPi / freq;
      if (wavelen < old_len / r.high_freq_factor) {
        // high frequency: unchanged
      } else if (wavelen > old_len / r.low_freq_factor) {
        freq /= r.factor;
      } else {
        const double smooth =
            (old_len / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
        freq = (1 - smooth) * freq / r.factor + smooth * freq;
      }
    }
    inv[i] = freq;
  }
  return inv;
}

// x [T, d]: pairs (i, i + d/2) rotated by angle t * inv[i].
torch::Tensor RefRope(const torch::Tensor& x, const std::vector<double>& inv) {
  const int64_t t_len = x.size(0), half = x.size(1) / 2;
  torch::Tensor out = x.clone();
  auto a = x.accessor<double, 2>();
  auto o = out.accessor<double, 2>();
  for (int64_t t = 0; t < t_len; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = t * inv[i], c = std::cos(angle), s = std::sin(angle);
      o[t][i] = a[t][i] * c - a[t][i + half] * s;
      o[t][i + half] = a[t][i + half] * c + a[t][i] * s;
    }
  }
  return out;
}

torch::Tensor RefNorm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  return x / torch::sqrt(x.pow(2).mean(-1, true) + eps) * w;
}

torch::Tensor RefLinear(const torch::Tensor& x, Params& p, const std::string& name) {
  torch::Tensor y = torch::matmul(x, p.at(name + ".weight").t());
  if (p.count(name + ".bias")) y = y + p.at(name + ".bias");
  return y;
}

torch::Tensor RefHidden(const core::HfModelConfig& c, Params& p, const torch::Tensor& ids) {
  const int64_t b_len = ids.size(0), t_len = ids.size(1), d = c.head_dim, nh = c.num_attention_heads;
  const int64_t group = nh / c.num_key_value_heads;
  const std::vector<double> inv = RefInvFreq(c, t_len);
  torch::Tensor x = p.at("model.embed_tokens.weight").index_select(0, ids.flatten()).view({b_len, t_len, -1});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    torch::Tensor h = RefNorm(x, p.at(pre + "input_layernorm.weight"), c.rms_norm_eps);
    torch::Tensor q = RefLinear(h, p, pre + "self_attn.q_proj");
    torch::Tensor k = RefLinear(h, p, pre + "self_attn.k_proj");
    torch::Tensor v = RefLinear(h, p, pre + "self_attn.v_proj");
    torch::Tensor attn = torch::zeros({b_len, t_len, nh * d}, torch::kFloat64);
    for (int64_t b = 0; b < b_len; ++b) {
      for (int64_t head = 0; head < nh; ++head) {
        const int64_t g = head / group;  // the kv head this query head reads
        torch::Tensor qh = RefRope(q[b].slice(1, head * d, (head + 1) * d).contiguous(), inv);
        torch::Tensor kh = RefRope(k[b].slice(1, g * d, (g + 1) * d).contiguous(), inv);
        torch::Tensor vh = v[b].slice(1, g * d, (g + 1) * d);
        torch::Tensor s = qh.mm(kh.t()) / std::sqrt(static_cast<double>(d));
        auto sa = s.accessor<double, 2>();
        for (int64_t i = 0; i < t_len; ++i)
          for (int64_t j = 0; j < t_len; ++j)
            if (j > i || (c.sliding_window && j <= i - *c.sliding_window)) sa[i][j] = -INFINITY;
        torch::Tensor e = torch::exp(s - std::get<0>(s.max(-1, true)));
        attn[b].slice(1, head * d, (head + 1) * d).copy_((e / e.sum(-1, true)).mm(vh));
      }
    }
    x = x + RefLinear(attn, p, pre + "self_attn.o_proj");
    h = RefNorm(x, p.at(pre + "post_attention_layernorm.weight"), c.rms_norm_eps);
    torch::Tensor gate = RefLinear(h, p, pre + "mlp.gate_proj");
    torch::Tensor act = gate / (1 + torch::exp(-gate)) * RefLinear(h, p, pre + "mlp.up_proj");
    x = x + RefLinear(act, p, pre + "mlp.down_proj");
  }
  return RefNorm(x, p.at("model.norm.weight"), c.rms_norm_eps);
}

torch::Tensor RefLogits(const core::HfModelConfig& c, Params& p, const torch::Tensor& ids) {
  const torch::Tensor& head =
      p.count("lm_head.weight") ? p.at("lm_head.weight") : p.at("model.embed_tokens.weight");
  return torch::matmul(RefHidden(c, p, ids), head.t());
}

// ---- tests ----

struct Variant {
  std::string name;
  core::HfModelConfig config;
  int64_t seq_len;
};

std::vector<Variant> Variants() {
  std::vector<Variant> v;
  v.push_back({"llama_untied", TinyConfig("llama"), 12});
  v.push_back({"qwen2_bias_tied", TinyConfig("qwen2"), 12});
  core::HfModelConfig llama3 = TinyConfig("llama");
  llama3.rope_theta = 500000.0;
  llama3.rope_scaling = core::RopeScaling{"llama3", 8.0, 1.0, 4.0, 8192};
  v.push_back({"llama3_rope", llama3, 12});
  core::HfModelConfig linear = TinyConfig("llama");
  linear.rope_scaling = core::RopeScaling{"linear", 4.0};
  v.push_back({"linear_rope", linear, 12});
  core::HfModelConfig dynamic = TinyConfig("llama");
  dynamic.max_position_embeddings = 8;  // shorter than the sequence: NTK rescaling active
  dynamic.rope_scaling = core::RopeScaling{"dynamic", 2.0};
  v.push_back({"dynamic_rope", dynamic, 12});
  core::HfModelConfig llama_bias = TinyConfig("llama");
  llama_bias.attention_bias = true;  // Llama: q, k, v and o all get a bias
  v.push_back({"llama_attention_bias", llama_bias, 12});
  core::HfModelConfig mistral = TinyConfig("mistral");
  mistral.sliding_window = 5;
  v.push_back({"mistral_sliding_window", mistral, 12});
  return v;
}

TEST(LlamaModelTest, Llama3RopeTestConfigCoversAllThreeFrequencyBands) {
  const Variant llama3 = Variants()[2];
  int high = 0, medium = 0, low = 0;
  for (int64_t i = 0; i < 4; ++i) {
    const double wavelen = 2 * kPi * std::pow(llama3.config.rope_theta, 2.0 * i / 8);
    if (wavelen < 8192 / 4.0)
      ++high;
    else if (wavelen > 8192 / 1.0)
      ++low;
    else
      ++medium;
  }
  EXPECT_GT(high, 0);
  EXPECT_GT(medium, 0);
  EXPECT_GT(low, 0);
}

// Every attention kernel this LibTorch has: manual on 1.13; also SDPA (CPU, fp32 throughout) on 2.1+.
std::vector<AttentionKernel> Kernels() {
  if (ZEROFIT_HAVE_SDPA) return {AttentionKernel::kManual, AttentionKernel::kSdpa};
  return {AttentionKernel::kManual};
}

TEST(LlamaModelTest, LogitsMatchAnIndependentFloat64Reference) {
  for (const Variant& v : Variants()) {
    for (AttentionKernel kernel : Kernels()) {
      SCOPED_TRACE(v.name + " attention " + AttentionKernelName(kernel));
      LlamaOptions options;
      options.attention = kernel;
      LlamaModel model(v.config, options);
      Randomize(*model, 1);
      model->eval();
      torch::manual_seed(2);
      torch::Tensor ids = torch::randint(v.config.vocab_size, {2, v.seq_len}, torch::kLong);
      torch::Tensor logits = model->Logits(ids);
      ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, v.seq_len, 50}));
      ASSERT_EQ(logits.scalar_type(), torch::kFloat32);
      Params p = DoubleParams(*model);
      torch::Tensor ref = RefLogits(v.config, p, ids);
      const double max_ref = ref.abs().max().item<double>();
      EXPECT_GT(max_ref, 0.5) << "reference is not trivially small";
      const double f32_diff = (logits.to(torch::kFloat64) - ref).abs().max().item<double>();
      EXPECT_LE(f32_diff, Float32ForwardBound(v.config, v.seq_len, max_ref));
    }
  }
}

TEST(LlamaModelTest, RopeScalingChangesTheOutput) {
  // Guards the reference test against a scaling type that silently does nothing.
  torch::Tensor ids = torch::randint(50, {1, 12}, torch::kLong);
  torch::NoGradGuard no_grad;
  for (const Variant& v : Variants()) {
    if (!v.config.rope_scaling) continue;
    SCOPED_TRACE(v.name);
    core::HfModelConfig plain = v.config;
    plain.rope_scaling.reset();
    LlamaModel a(v.config), b(plain);
    Randomize(*a, 3);
    CopyParams(*a, *b);
    EXPECT_FALSE(torch::allclose(a->Logits(ids), b->Logits(ids), 1e-4, 1e-4));
  }
}

TEST(LlamaModelTest, ParameterNamesAreHuggingFaces) {
  LlamaModel llama(TinyConfig("llama"));
  auto names = llama->named_parameters();
  for (const char* n :
       {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
        "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight",
        "model.layers.0.self_attn.o_proj.weight", "model.layers.1.mlp.gate_proj.weight",
        "model.layers.1.mlp.up_proj.weight", "model.layers.1.mlp.down_proj.weight",
        "model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
        "model.norm.weight", "lm_head.weight"})
    EXPECT_TRUE(names.contains(n)) << n;
  EXPECT_EQ(names.size(), 1u + 2 * 9 + 1 + 1);
  EXPECT_EQ(names["model.layers.0.self_attn.k_proj.weight"].sizes(), (std::vector<int64_t>{16, 32}));

  LlamaModel qwen(TinyConfig("qwen2"));
  auto qn = qwen->named_parameters();
  EXPECT_FALSE(qn.contains("lm_head.weight")) << "tied";
  EXPECT_TRUE(qn.contains("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_TRUE(qn.contains("model.layers.0.self_attn.v_proj.bias"));
  EXPECT_FALSE(qn.contains("model.layers.0.self_attn.o_proj.bias")) << "Qwen2's o_proj has no bias";

  LlamaOptions reward;
  reward.reward_head = true;
  LlamaModel rm(TinyConfig("llama"), reward);
  auto rn = rm->named_parameters();
  EXPECT_TRUE(rn.contains("score.weight"));
  EXPECT_EQ(rn["score.weight"].sizes(), (std::vector<int64_t>{1, 32}));
  EXPECT_FALSE(rn.contains("lm_head.weight"));
}

TEST(LlamaModelTest, GroupedQueryAttentionEqualsMhaWithDuplicatedKvHeads) {
  core::HfModelConfig gqa_config = TinyConfig("llama");
  core::HfModelConfig mha_config = gqa_config;
  mha_config.num_key_value_heads = 4;
  LlamaModel gqa(gqa_config), mha(mha_config);
  Randomize(*gqa, 4);
  {
    torch::NoGradGuard no_grad;
    auto src = gqa->named_parameters();
    for (auto& item : mha->named_parameters()) {
      torch::Tensor w = src[item.key()];
      if (EndsWith(item.key(), "k_proj.weight") || EndsWith(item.key(), "v_proj.weight")) {
        // kv head g serves query heads 2g and 2g+1: duplicate each head's rows in place.
        w = w.view({2, 8, 32}).repeat_interleave(2, 0).reshape({32, 32});
      }
      item.value().copy_(w);
    }
  }
  torch::Tensor ids = torch::randint(50, {2, 9}, torch::kLong);
  torch::NoGradGuard no_grad;
  // In float64: the two models run different GEMM shapes (4 KV heads against 2 repeated), so BLAS may sum
  // in different orders. In float32 that alone differed by 1.8e-6 with OpenBLAS's Haswell kernels on an AMD
  // EPYC (issue 29); in float64 the same reordering is bounded by about (reduction length 32 x 2 layers x
  // |logits| < 10) x 2^-53 ~ 1e-13, while a wrong head mapping moves logits by O(0.1).
  gqa->to(torch::kDouble);
  mha->to(torch::kDouble);
  torch::Tensor a = gqa->Logits(ids), b = mha->Logits(ids);
  ASSERT_EQ(a.scalar_type(), torch::kDouble);
  EXPECT_LT(a.abs().max().item<double>(), 10.0);
  EXPECT_TRUE(torch::allclose(a, b, 0.0, 1e-11)) << (a - b).abs().max().item<double>();
}

TEST(LlamaModelTest, TokenLogProbsAreNextTokenLogSoftmax) {
  LlamaModel model(TinyConfig("llama"));
  Randomize(*model, 5);
  torch::Tensor ids = torch::randint(50, {2, 7}, torch::kLong);
  torch::Tensor lp = model->TokenLogProbs(ids);
  ASSERT_EQ(lp.sizes(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(lp.scalar_type(), torch::kFloat32);
  // The reference: float64 log-softmax of the float32 logits. The float32 result may differ by the logits'
  // own forward bound (another evaluation) plus log-softmax's rounding over the vocabulary (a sum of V
  // exponentials, each within 4 ulp, and three more operations), relative to the magnitudes involved.
  torch::Tensor logits = model->Logits(ids).detach().to(torch::kFloat64);
  const core::HfModelConfig config = TinyConfig("llama");
  const double max_logit = logits.abs().max().item<double>();
  const double tol = Float32ForwardBound(config, 7, max_logit) +
                     (config.vocab_size + 8) * std::ldexp(1.0, -24) * (3 * max_logit + std::log(50.0));
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t t = 0; t < 6; ++t) {
      const double expected =
          torch::log_softmax(logits[b][t], -1)[ids[b][t + 1].item<int64_t>()].item<double>();
      EXPECT_NEAR(lp[b][t].item<double>(), expected, tol);
    }
  }
  lp.sum().backward();
  EXPECT_TRUE(model->named_parameters()["model.embed_tokens.weight"].grad().defined());
}

TEST(LlamaModelTest, ScoresReadTheLastRealTokenAndIgnorePadding) {
  LlamaOptions o;
  o.reward_head = true;
  LlamaModel rm(TinyConfig("qwen2"), o);
  Randomize(*rm, 6);
  rm->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor ids = torch::randint(50, {3, 10}, torch::kLong);
  torch::Tensor lengths = torch::tensor({10, 4, 1}, torch::kLong);
  torch::Tensor s = rm->Scores(ids, lengths);
  ASSERT_EQ(s.sizes(), (std::vector<int64_t>{3}));
  torch::Tensor h = rm->Hidden(ids);
  const int64_t len[] = {10, 4, 1};
  for (int64_t b = 0; b < 3; ++b) {
    const torch::Tensor hb = h[b][len[b] - 1].to(torch::kFloat64),
                        w = rm->score->weight[0].to(torch::kFloat64);
    // A float32 dot product over hidden_size terms against the float64 one: n u sum|h_i w_i|, and
    // sum|h_i w_i| <= |h| |w|; plus the rounding of the result.
    const double tol = (32 + 1) * std::ldexp(1.0, -24) * (hb.norm().item<double>() * w.norm().item<double>());
    EXPECT_NEAR(s[b].item<double>(), torch::dot(hb, w).item<double>(), tol) << b;
  }
  // Different padding (right of each length) leaves the scores alone: attention is causal.
  torch::Tensor other = ids.clone();
  other[1].slice(0, 4).fill_(0);
  other[2].slice(0, 1).fill_(7);
  // The same GEMM shapes and the same values at every position a score depends on: only float32 rounding
  // may differ (none does with any BLAS seen), bounded by the forward bound.
  const double max_s = s.abs().max().item<double>();
  EXPECT_LE((rm->Scores(other, lengths) - s).abs().max().item<double>(),
            Float32ForwardBound(TinyConfig("qwen2"), 10, max_s));
  EXPECT_THROW(rm->Scores(ids, torch::tensor({11, 1, 1}, torch::kLong)), c10::Error);
  EXPECT_THROW(rm->Scores(ids, torch::tensor({0, 1, 1}, torch::kLong)), c10::Error);
}

LlamaOptions LoraOptions(double dropout = 0.0) {
  LlamaOptions o;
  o.lora.rank = 4;
  o.lora.alpha = 8;
  o.lora.dropout = dropout;
  o.lora.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return o;
}

// Plain and checkpointed models with identical weights give identical logits and identical gradients. The
// plain model keeps the plain RMSNorm and SwiGLU graphs, which is what a checkpointed layer recomputes (the
// lean ones sum a norm's fp32 input gradients in another order; recomputed_call_test compares them).
void ExpectCheckpointingIsExact(const core::HfModelConfig& config, LlamaOptions options, bool train_mode) {
  options.activation_checkpointing = false;
  options.lean_pieces = false;
  LlamaModel plain(config, options);
  options.activation_checkpointing = true;
  LlamaModel ckpt(config, options);
  Randomize(*plain, 8);
  CopyParams(*plain, *ckpt);
  plain->train(train_mode);
  ckpt->train(train_mode);
  torch::manual_seed(9);
  torch::Tensor ids = torch::randint(config.vocab_size, {2, 11}, torch::kLong);
  torch::Tensor weights = torch::randn({2, 10});
  auto run = [&](LlamaModel& m) {
    torch::manual_seed(10);  // same dropout masks in both models
    torch::Tensor out =
        options.reward_head ? m->Scores(ids, torch::tensor({11, 6}, torch::kLong)) : m->TokenLogProbs(ids);
    torch::Tensor loss =
        options.reward_head ? (out * torch::tensor({1.0f, -2.0f})).sum() : (out * weights).sum();
    loss.backward();
    return out.detach();
  };
  torch::Tensor a = run(plain), b = run(ckpt);
  EXPECT_TRUE(torch::equal(a, b));
  auto pp = plain->named_parameters();
  size_t with_grad = 0;
  for (auto& item : ckpt->named_parameters()) {
    const torch::Tensor& g_ckpt = item.value().grad();
    const torch::Tensor& g_plain = pp[item.key()].grad();
    ASSERT_EQ(g_ckpt.defined(), g_plain.defined()) << item.key();
    if (!g_plain.defined()) continue;
    ++with_grad;
    EXPECT_TRUE(torch::equal(g_ckpt, g_plain)) << item.key();
  }
  EXPECT_GT(with_grad, 0u);
}

TEST(LlamaModelTest, CheckpointingGivesIdenticalLogitsAndGradients) {
  SCOPED_TRACE("full fine-tuning");
  ExpectCheckpointingIsExact(TinyConfig("llama"), LlamaOptions{}, /*train_mode=*/true);
}

// The lean RMSNorm and SwiGLU (the default) against the plain graphs in a whole model: the same logits bit
// for bit, and the gradients up to the order in which a norm input's fp32 contributions (residual, norm) are
// summed. Each reordered sum of two or three terms differs by at most 2 ulp of the largest; carried back
// through two layers of this tiny model it stays far under 1e-5 of a tensor's largest gradient
// (recomputed_call_test shows the pieces bitwise equal).
TEST(LlamaModelTest, LeanPiecesGiveThePlainGradients) {
  LlamaOptions o;
  o.lean_pieces = false;
  LlamaModel plain(TinyConfig("llama"), o);
  o.lean_pieces = true;
  LlamaModel lean(TinyConfig("llama"), o);
  Randomize(*plain, 21);
  CopyParams(*plain, *lean);
  torch::manual_seed(22);
  const torch::Tensor ids = torch::randint(50, {2, 11}, torch::kLong);
  const torch::Tensor weights = torch::randn({2, 10});
  auto run = [&](LlamaModel& m) {
    torch::Tensor out = m->TokenLogProbs(ids);
    (out * weights).sum().backward();
    return out.detach();
  };
  EXPECT_TRUE(torch::equal(run(plain), run(lean)));
  auto pp = plain->named_parameters();
  for (auto& item : lean->named_parameters()) {
    const torch::Tensor& g = item.value().grad();
    const torch::Tensor& want = pp[item.key()].grad();
    ASSERT_TRUE(g.defined() && want.defined()) << item.key();
    const double scale = want.abs().max().item<double>();
    EXPECT_LE((g - want).abs().max().item<double>(), 1e-5 * scale) << item.key();
  }
}

TEST(LlamaModelTest, CheckpointingGivesIdenticalGradientsWithLoraAndDropout) {
  // LoRA dropout in training mode: the recomputation must replay the same RNG draws.
  ExpectCheckpointingIsExact(TinyConfig("qwen2"), LoraOptions(/*dropout=*/0.25), /*train_mode=*/true);
}

TEST(LlamaModelTest, CheckpointingGivesIdenticalGradientsForALoraRewardModel) {
  LlamaOptions o = LoraOptions();
  o.reward_head = true;
  ExpectCheckpointingIsExact(TinyConfig("llama"), o, /*train_mode=*/false);
}

TEST(LlamaModelTest, CheckpointedLoraTrainsIdenticallyUnderZero2) {
  // The ZeRO-2 binding's hooks sit on each parameter's AccumulateGrad node: with checkpointing they must
  // still fire once per parameter, and one optimizer step must land on the same weights.
  LlamaOptions o = LoraOptions();
  o.lean_pieces = false;  // the graphs a checkpointed layer recomputes (ExpectCheckpointingIsExact)
  LlamaModel plain(TinyConfig("llama"), o);
  o.activation_checkpointing = true;
  LlamaModel ckpt(TinyConfig("llama"), o);
  Randomize(*plain, 11);
  CopyParams(*plain, *ckpt);
  torch::Tensor ids = torch::randint(50, {2, 8}, torch::kLong);
  comm::LocalCommunicator comm_a, comm_b;
  sharding::Zero2Options zo;
  zo.bucket_bytes = 1024;  // several buckets, reduced while backward goes on
  auto ba = Zero2Binding::Bind(*plain, zo, &comm_a);
  auto bb = Zero2Binding::Bind(*ckpt, zo, &comm_b);
  ASSERT_TRUE(ba.ok()) << ba.status();
  ASSERT_TRUE(bb.ok()) << bb.status();
  EXPECT_EQ((*ba)->names().size(), 2u * 7 * 2) << "only the LoRA matrices train";
  ASSERT_TRUE((*ba)->Backward(-plain->TokenLogProbs(ids).sum(), true, 14).ok());
  absl::Status s = (*bb)->Backward(-ckpt->TokenLogProbs(ids).sum(), true, 14);
  ASSERT_TRUE(s.ok()) << s;
  auto ra = (*ba)->Step(1e-3f);
  auto rb = (*bb)->Step(1e-3f);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra->grad_norm, rb->grad_norm);
  auto pp = plain->named_parameters();
  for (auto& item : ckpt->named_parameters())
    EXPECT_TRUE(torch::equal(item.value(), pp[item.key()])) << item.key();
}

TEST(LlamaModelTest, LoraFreezesTheBaseAndStartsAsTheBaseModel) {
  LlamaOptions o = LoraOptions();
  o.lora.target_modules = {"q_proj", "v_proj", "down_proj"};
  LlamaModel base(TinyConfig("llama"));
  LlamaModel lora(TinyConfig("llama"), o);
  Randomize(*base, 12);
  {
    torch::NoGradGuard no_grad;
    auto src = base->named_parameters();
    for (auto& item : lora->named_parameters())
      if (src.contains(item.key())) item.value().copy_(src[item.key()]);
  }
  torch::Tensor ids = torch::randint(50, {2, 9}, torch::kLong);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(lora->Logits(ids), base->Logits(ids))) << "B = 0 at init";
  size_t adapters = 0;
  for (auto& item : lora->named_parameters()) {
    const bool is_lora = EndsWith(item.key(), ".lora_A") || EndsWith(item.key(), ".lora_B");
    EXPECT_EQ(item.value().requires_grad(), is_lora) << item.key();
    adapters += is_lora;
  }
  EXPECT_EQ(adapters, 2u * 3 * 2);
  auto names = lora->named_parameters();
  EXPECT_EQ(names["model.layers.0.self_attn.q_proj.lora_A"].sizes(), (std::vector<int64_t>{4, 32}));
  EXPECT_EQ(names["model.layers.0.self_attn.v_proj.lora_B"].sizes(), (std::vector<int64_t>{16, 4}));
  EXPECT_EQ(names["model.layers.1.mlp.down_proj.lora_A"].sizes(), (std::vector<int64_t>{4, 64}));
  EXPECT_FALSE(names.contains("model.layers.0.self_attn.k_proj.lora_A"));
  const double bound = 1.0 / std::sqrt(32.0);  // PEFT's kaiming_uniform(a=sqrt(5)) on [r, in]
  EXPECT_LE(names["model.layers.0.self_attn.q_proj.lora_A"].abs().max().item<double>(), bound);
  EXPECT_EQ(names["model.layers.0.self_attn.q_proj.lora_B"].abs().max().item<double>(), 0.0);

  LlamaOptions ro = LoraOptions();
  ro.reward_head = true;
  LlamaModel rm(TinyConfig("llama"), ro);
  for (auto& item : rm->named_parameters()) {
    const bool trainable =
        EndsWith(item.key(), ".lora_A") || EndsWith(item.key(), ".lora_B") || item.key() == "score.weight";
    EXPECT_EQ(item.value().requires_grad(), trainable) << item.key();
  }
}

core::SafetensorsModel OpenOrDie(const std::string& path) {
  auto m = core::SafetensorsModel::Open(path);
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(*m);
}

TEST(LlamaModelTest, MergedLoraExportReproducesTheAdaptedModel) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  LlamaModel lora(TinyConfig("qwen2"), LoraOptions(/*dropout=*/0.1));
  Randomize(*lora, 13);  // also perturbs lora_B
  lora->eval();
  torch::Tensor ids = torch::randint(50, {2, 9}, torch::kLong);
  torch::NoGradGuard no_grad;
  torch::Tensor unmerged = lora->Logits(ids);
  ASSERT_TRUE(lora->ExportHf(dir.path(), TinyConfig("qwen2")).ok());

  LlamaModel plain(TinyConfig("qwen2"));
  ASSERT_TRUE(plain->LoadWeights(OpenOrDie(dir.path())).ok());
  torch::Tensor merged = plain->Logits(ids);
  // Two float32 evaluations of one function (W + s B A folded, or x W + s (x A) B): each within the float32
  // forward bound of the exact value, so within twice that of each other.
  const double bound = 2 * Float32ForwardBound(TinyConfig("qwen2"), 9, unmerged.abs().max().item<double>());
  EXPECT_LE((merged - unmerged).abs().max().item<double>(), bound);
  EXPECT_FALSE(torch::allclose(merged, LlamaModel(TinyConfig("qwen2"))->Logits(ids), 1e-3, 1e-3));

  lora->MergeLora();  // in place: same outputs, adapters reset
  EXPECT_LE((lora->Logits(ids) - unmerged).abs().max().item<double>(), bound);
  EXPECT_EQ(lora->named_parameters()["model.layers.0.mlp.up_proj.lora_B"].abs().max().item<double>(), 0.0);

  auto config = core::LoadHfConfig(dir.path() + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "Qwen2ForCausalLM");
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_EQ(config->torch_dtype, "float32");
}

TEST(LlamaModelTest, SafetensorsRoundTripIsBitExact) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  LlamaModel model(TinyConfig("llama"));
  Randomize(*model, 14);
  ASSERT_TRUE(model->ExportHf(dir.path(), TinyConfig("llama")).ok());
  core::SafetensorsModel st = OpenOrDie(dir.path());
  EXPECT_FALSE(st.Find("model.layers.0.self_attn.q_proj.lora_A"));
  LlamaModel fresh(TinyConfig("llama"));
  LlamaLoadReport report;
  ASSERT_TRUE(fresh->LoadWeights(st, &report).ok());
  EXPECT_TRUE(report.ignored.empty());
  auto src = model->named_parameters();
  for (auto& item : fresh->named_parameters())
    EXPECT_TRUE(torch::equal(item.value(), src[item.key()])) << item.key();
  auto config = core::LoadHfConfig(dir.path() + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "LlamaForCausalLM");
  EXPECT_EQ(config->num_key_value_heads, 2);

  // F32 checkpoint into a bf16 model: converted on load.
  LlamaOptions bf16;
  bf16.dtype = torch::kBFloat16;
  LlamaModel half(TinyConfig("llama"), bf16);
  ASSERT_TRUE(half->LoadWeights(st).ok());
  for (auto& item : half->named_parameters()) {
    EXPECT_EQ(item.value().scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::equal(item.value(), src[item.key()].to(torch::kBFloat16))) << item.key();
  }
  // ... and a bf16 export round-trips bit-exactly too.
  TempDir dir2;
  ASSERT_TRUE(half->ExportHf(dir2.path(), TinyConfig("llama")).ok());
  core::SafetensorsModel st2 = OpenOrDie(dir2.path());
  EXPECT_EQ(st2.Find("model.norm.weight")->dtype, core::StDType::kBF16);
  LlamaModel half2(TinyConfig("llama"), bf16);
  ASSERT_TRUE(half2->LoadWeights(st2).ok());
  auto hp = half->named_parameters();
  for (auto& item : half2->named_parameters()) EXPECT_TRUE(torch::equal(item.value(), hp[item.key()]));
  EXPECT_EQ(half2->Logits(torch::randint(50, {1, 5}, torch::kLong)).scalar_type(), torch::kBFloat16);
}

TEST(LlamaModelTest, RewardModelExportAndLoadingFromACausalLm) {
  TempDir lm_dir, rm_dir;
  LlamaModel lm(TinyConfig("llama"));
  Randomize(*lm, 15);
  ASSERT_TRUE(lm->ExportHf(lm_dir.path(), TinyConfig("llama")).ok());

  LlamaOptions o;
  o.reward_head = true;
  LlamaModel rm(TinyConfig("llama"), o);
  LlamaLoadReport report;
  absl::Status s = rm->LoadWeights(OpenOrDie(lm_dir.path()), &report);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(report.ignored, std::vector<std::string>{"lm_head.weight"});
  EXPECT_TRUE(report.score_head_initialized);
  EXPECT_TRUE(
      torch::equal(rm->named_parameters()["model.norm.weight"], lm->named_parameters()["model.norm.weight"]));

  ASSERT_TRUE(rm->ExportHf(rm_dir.path(), TinyConfig("llama")).ok());
  auto config = core::LoadHfConfig(rm_dir.path() + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "LlamaForSequenceClassification");
  EXPECT_EQ(config->num_labels, 1);
  LlamaModel rm2(TinyConfig("llama"), o);
  LlamaLoadReport report2;
  ASSERT_TRUE(rm2->LoadWeights(OpenOrDie(rm_dir.path()), &report2).ok());
  EXPECT_FALSE(report2.score_head_initialized);
  EXPECT_TRUE(torch::equal(rm2->score->weight, rm->score->weight));
}

// A fresh reward head is drawn from N(0, 1/hidden_size), so that its first scores are of unit scale on
// unit-RMS hidden states whatever the width (transformers' N(0, 0.02) left a 64-wide arithmetic reward
// model at 50% for most of its run; llama_model.cc). Bounds: h * (sample variance) of h = 32 weights is a
// chi-square with 32 degrees of freedom over 32, inside [0.25, 2.5] with probability above 1 - 1e-5;
// N(0, 0.02) gives 0.0128.
TEST(LlamaModelTest, AFreshRewardHeadScoresAtUnitScale) {
  torch::manual_seed(3);
  LlamaOptions o;
  o.reward_head = true;
  LlamaModel rm(TinyConfig("llama"), o);
  const torch::Tensor w = rm->score->weight.to(torch::kFloat64);
  const int64_t h = TinyConfig("llama").hidden_size;
  ASSERT_EQ(w.numel(), h);
  const double scaled_variance = w.pow(2).mean().item<double>() * static_cast<double>(h);
  EXPECT_GT(scaled_variance, 0.25);
  EXPECT_LT(scaled_variance, 2.5);
}

// Writes `tensors` (name -> tensor) as a safetensors file at `path`.
void WriteFile(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  std::vector<torch::Tensor> keep;
  std::vector<core::StTensorToWrite> out;
  for (const auto& [name, t] : tensors) {
    keep.push_back(t.contiguous());
    core::StDType dt = t.scalar_type() == torch::kFloat32 ? core::StDType::kF32 : core::StDType::kI64;
    out.push_back({name, dt, keep.back().sizes().vec(), keep.back().data_ptr()});
  }
  ASSERT_TRUE(core::WriteSafetensors(path, out).ok());
}

TEST(LlamaModelTest, LoadWeightsNamesTheOffendingTensor) {
  TempDir dir;
  LlamaModel model(TinyConfig("llama"));
  const std::vector<std::pair<std::string, torch::Tensor>> good = model->HfStateDict();
  LlamaModel target(TinyConfig("llama"));
  const torch::Tensor before = target->named_parameters()["model.layers.0.self_attn.q_proj.weight"].clone();
  auto load = [&](std::vector<std::pair<std::string, torch::Tensor>> tensors) {
    const std::string path = dir.path() + "/case.safetensors";
    WriteFile(path, tensors);
    return target->LoadWeights(OpenOrDie(path));
  };

  auto missing = good;
  missing.erase(missing.begin() + 5);
  absl::Status s = load(missing);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("'" + good[5].first + "'"), std::string::npos) << s;

  auto wrong_shape = good;
  for (auto& [name, t] : wrong_shape)
    if (name == "model.norm.weight") t = torch::zeros({31});
  s = load(wrong_shape);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("'model.norm.weight'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("[31]"), std::string::npos) << s;
  EXPECT_NE(s.message().find("[32]"), std::string::npos) << s;

  auto wrong_dtype = good;
  for (auto& [name, t] : wrong_dtype)
    if (name == "model.norm.weight") t = torch::zeros({32}, torch::kLong);
  s = load(wrong_dtype);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("'model.norm.weight'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("I64"), std::string::npos) << s;

  auto extra = good;
  extra.emplace_back("model.layers.0.self_attn.extra_proj.weight", torch::zeros({2}));
  s = load(extra);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("model.layers.0.self_attn.extra_proj.weight"), std::string::npos) << s;

  EXPECT_TRUE(torch::equal(target->named_parameters()["model.layers.0.self_attn.q_proj.weight"], before))
      << "a rejected checkpoint leaves the model untouched";

  auto rotary = good;
  rotary.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", torch::zeros({4}));
  s = load(rotary);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LlamaModelTest, InvalidConfigsAndOptionsAreErrorsNamingTheField) {
  core::HfModelConfig c = TinyConfig("llama");
  c.num_key_value_heads = 3;
  auto m = MakeLlamaModel(c);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("num_key_value_heads"), std::string::npos) << m.status();

  LlamaOptions o;
  o.lora.rank = 2;
  o.lora.target_modules = {"qkv"};
  m = MakeLlamaModel(TinyConfig("llama"), o);
  EXPECT_NE(m.status().message().find("'qkv'"), std::string::npos) << m.status();

  c = TinyConfig("llama");
  c.rope_scaling = core::RopeScaling{"yarn", 4.0};
  m = MakeLlamaModel(c);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented) << m.status();

  EXPECT_TRUE(MakeLlamaModel(TinyConfig("qwen2")).ok());
  LlamaModel model(TinyConfig("llama"));
  core::HfModelConfig other = TinyConfig("llama");
  other.intermediate_size = 128;
  absl::Status s = model->ExportHf(TempDir().path(), other);
  EXPECT_NE(s.message().find("intermediate_size"), std::string::npos) << s;
}

}  // namespace
}  // namespace zerofit::worker
