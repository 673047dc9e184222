// The attention kernels (worker/torch/model/attention_kernel.h). On every build: the manual kernel is the
// kernel LlamaAttention had before the split, bit for bit, and asking for SDPA where LibTorch lacks it is an
// error, not a crash. On LibTorch 2.1+ with a CUDA device (the Gpu* cases, ctest label gpu; they skip
// otherwise): SDPA against the manual kernel in bf16 on cuda:0, both against a float64 CPU reference.
#include "worker/torch/model/attention_kernel.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "tests/support/tiny_llama_config.h"
#include "worker/torch/model/llama_model.h"

namespace zerofit::worker {
namespace {

// masked_fill's convention: true where query i may NOT attend key j. window 0: causal only.
AttentionMask Mask(int64_t t, int64_t window, torch::Device device = torch::kCPU) {
  torch::Tensor all = torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool).device(device));
  if (window == 0 || window >= t) return AttentionMask{all.triu(1), true};
  return AttentionMask{all.triu(1).logical_or(all.tril(-window)), false};
}

// The attention part of LlamaAttentionImpl::forward as it was before attention_kernel.{h,cc} (commit
// b49a864), transcribed: the refactored manual kernel must reproduce it bit for bit.
torch::Tensor FormerKernel(torch::Tensor q, torch::Tensor k, torch::Tensor v, const torch::Tensor& mask) {
  const int64_t b = q.size(0), num_heads = q.size(1), num_kv_heads = k.size(1), t = q.size(2),
                head_dim = q.size(3);
  const int64_t n_rep = num_heads / num_kv_heads;
  if (n_rep > 1) {
    k = k.unsqueeze(2).expand({b, num_kv_heads, n_rep, t, head_dim}).reshape({b, num_heads, t, head_dim});
    v = v.unsqueeze(2).expand({b, num_kv_heads, n_rep, t, head_dim}).reshape({b, num_heads, t, head_dim});
  }
  torch::Tensor scores = torch::matmul(q, k.transpose(2, 3)) * std::pow(static_cast<double>(head_dim), -0.5);
  scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
  torch::Tensor probs = torch::softmax(scores, -1, torch::kFloat32).to(q.scalar_type());
  return torch::matmul(probs, v);
}

TEST(AttentionKernelTest, ManualKernelIsTheFormerKernelBitForBit) {
  for (torch::Dtype dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (int64_t kv_heads : {4, 2, 1}) {
      for (int64_t window : {0, 3}) {
        SCOPED_TRACE(testing::Message()
                     << "dtype " << dtype << " kv_heads " << kv_heads << " window " << window);
        torch::manual_seed(7);
        const int64_t t = 9, d = 8;
        torch::Tensor q = torch::randn({2, 4, t, d}).to(dtype);
        torch::Tensor k = torch::randn({2, kv_heads, t, d}).to(dtype);
        torch::Tensor v = torch::randn({2, kv_heads, t, d}).to(dtype);
        const AttentionMask mask = Mask(t, window);
        EXPECT_EQ(mask.causal_only, window == 0);
        const torch::Tensor got = ManualAttention(q, k, v, mask, std::pow(static_cast<double>(d), -0.5));
        EXPECT_TRUE(torch::equal(got, FormerKernel(q, k, v, mask.masked)));
      }
    }
  }
}

TEST(AttentionKernelTest, ParsesAndNamesTheChoices) {
  for (const char* name : {"auto", "manual", "sdpa"}) {
    absl::StatusOr<AttentionKernel> k = ParseAttentionKernel(name);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_STREQ(AttentionKernelName(*k), name);
  }
  absl::StatusOr<AttentionKernel> bad = ParseAttentionKernel("flash");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("auto, manual, sdpa"), std::string::npos);
}

// Auto picks what the build has; sdpa on a LibTorch without SDPA (Debian 12's 1.13) is a Status from
// MakeLlamaModel and a c10::Error from the constructor, both naming the field and the version.
TEST(AttentionKernelTest, SdpaIsRefusedWithAClearErrorWhereLibTorchLacksIt) {
  const absl::StatusOr<AttentionKernel> automatic = ResolveAttentionKernel(AttentionKernel::kAuto);
  ASSERT_TRUE(automatic.ok());
  EXPECT_EQ(*automatic, ZEROFIT_HAVE_SDPA ? AttentionKernel::kSdpa : AttentionKernel::kManual);
  EXPECT_EQ(*ResolveAttentionKernel(AttentionKernel::kManual), AttentionKernel::kManual);
  LlamaOptions o;
  o.attention = AttentionKernel::kSdpa;
  const core::HfModelConfig config = test_support::TinyLlamaConfig("llama");
  absl::StatusOr<LlamaModel> model = MakeLlamaModel(config, o);
  if (ZEROFIT_HAVE_SDPA) {
    EXPECT_TRUE(model.ok()) << model.status();
    return;
  }
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(model.status().message());
  EXPECT_NE(message.find("LlamaOptions.attention"), std::string::npos) << message;
  EXPECT_NE(message.find(TORCH_VERSION), std::string::npos) << message;
  EXPECT_NE(message.find("'manual'"), std::string::npos) << message;
  EXPECT_THROW(LlamaModel(config, o), c10::Error);
}

// ---- GPU: SDPA against the manual kernel, bf16 on cuda:0 (LibTorch 2.1+ only). ----

#if ZEROFIT_HAVE_SDPA
#define ZEROFIT_SKIP_WITHOUT_SDPA_GPU()                                                     \
  do {                                                                                      \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible to LibTorch"; \
  } while (0)
#else
#define ZEROFIT_SKIP_WITHOUT_SDPA_GPU() \
  GTEST_SKIP() << "LibTorch " << TORCH_VERSION << " has no scaled_dot_product_attention (2.1+)"
#endif

#if ZEROFIT_HAVE_SDPA
struct Case {
  int64_t batch = 2, heads = 8, kv_heads = 8, t = 200, head_dim = 64, window = 0;
  std::vector<int64_t> lengths;  // right padding: real tokens per row; empty = all T real
};

// Float64 reference on the CPU from the bf16 inputs: one query head at a time, kv head h / n_rep, scores
// masked with -inf, exact softmax. Also returns S, the largest |score| a query may see.
torch::Tensor Reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& masked, double scale, double* max_score) {
  const torch::Tensor q64 = q.cpu().to(torch::kFloat64), k64 = k.cpu().to(torch::kFloat64),
                      v64 = v.cpu().to(torch::kFloat64), m = masked.cpu();
  const int64_t heads = q.size(1), n_rep = heads / k.size(1);
  std::vector<torch::Tensor> outs;
  *max_score = 0;
  for (int64_t h = 0; h < heads; ++h) {
    const torch::Tensor s = torch::matmul(q64.select(1, h), k64.select(1, h / n_rep).transpose(1, 2)) * scale;
    *max_score = std::max(*max_score, s.masked_fill(m, 0).abs().max().item<double>());
    const torch::Tensor p = torch::softmax(s.masked_fill(m, -std::numeric_limits<double>::infinity()), -1);
    outs.push_back(torch::matmul(p, v64.select(1, h / n_rep)));
  }
  return torch::stack(outs, 1);
}

// A bound on |o - o_ref| for either kernel, elementwise, from where each rounds (u = 2^-8, twice bf16's unit
// roundoff 2^-9, as margin for the roundings inside exp and the rescaling of online softmax):
//  - a score s = q.k * scale is rounded to bf16 at most three times (manual: the matmul output, then times
//    scale; SDPA's math kernel: q and k pre-scaled, then the product; flash/efficient/cuDNN keep it in fp32),
//    plus fp32 accumulation over head_dim: |ds| <= delta = 3 u S + D 2^-24 QK with QK >= sum_i |q_i k_i|
//    scale (Cauchy-Schwarz). Softmax moves each weight by at most p_j (exp(2 delta) - 1), so the output moves
//    by at most (exp(2 delta) - 1) V, V = max |v|;
//  - the weights are rounded to bf16 before the product with V (manual always, the fused kernels for their
//    tensor-core matmul): u V; the output is rounded once: u V; fp32 accumulation over T keys: T 2^-24 V.
// The number of roundings does not grow with head_dim or T, only the fp32 accumulation terms do. The two
// kernels then differ by at most twice the bound. A wrong mask, head mapping or scale moves outputs by O(V).
double KernelBound(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                   double max_score) {
  const double u = std::ldexp(1.0, -8), f32 = std::ldexp(1.0, -24);
  const double d = static_cast<double>(q.size(3)), t = static_cast<double>(q.size(2));
  const double qk = scale * q.to(torch::kFloat32).norm(2, -1).max().item<double>() *
                    k.to(torch::kFloat32).norm(2, -1).max().item<double>();
  const double delta = 3 * u * max_score + d * f32 * qk;
  const double vmax = v.to(torch::kFloat32).abs().max().item<double>();
  return vmax * (std::expm1(2 * delta) + 2 * u + t * f32);
}

void CompareOnGpu(const Case& c) {
  const torch::Device cuda(torch::kCUDA, 0);
  torch::manual_seed(11);
  const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16).device(cuda);
  torch::Tensor q = torch::randn({c.batch, c.heads, c.t, c.head_dim}, bf16);
  torch::Tensor k = torch::randn({c.batch, c.kv_heads, c.t, c.head_dim}, bf16);
  torch::Tensor v = torch::randn({c.batch, c.kv_heads, c.t, c.head_dim}, bf16);
  for (size_t b = 0; b < c.lengths.size(); ++b) {
    // Padding positions get large values: if they leaked into a real position, it would show.
    for (torch::Tensor* x : {&q, &k, &v}) x->select(0, b).slice(1, c.lengths[b]).fill_(30);
  }
  const AttentionMask mask = Mask(c.t, c.window, cuda);
  const double scale = std::pow(static_cast<double>(c.head_dim), -0.5);
  const int64_t backend = SdpaBackendFor(q, k, v, mask, scale);
  std::printf("SDPA backend: %s (%lld), causal_only %d, heads %lld/%lld, T %lld\n", SdpaBackendName(backend),
              static_cast<long long>(backend), mask.causal_only ? 1 : 0, static_cast<long long>(c.heads),
              static_cast<long long>(c.kv_heads), static_cast<long long>(c.t));
  const torch::Tensor sdpa = SdpaAttention(q, k, v, mask, scale).cpu().to(torch::kFloat64);
  const torch::Tensor manual = ManualAttention(q, k, v, mask, scale).cpu().to(torch::kFloat64);
  ASSERT_EQ(sdpa.sizes(), manual.sizes());
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t real = c.lengths.empty() ? c.t : c.lengths[b];
    SCOPED_TRACE(testing::Message() << "row " << b << " real positions " << real);
    // Padding positions are never read, but ResponseLogProbs multiplies them by 0: they must be finite.
    EXPECT_TRUE(torch::isfinite(sdpa[b]).all().item<bool>());
    // The reference sees the row's real tokens only, as if it were unpadded: what padding must not change.
    const torch::Tensor qb = q.slice(0, b, b + 1).slice(2, 0, real),
                        kb = k.slice(0, b, b + 1).slice(2, 0, real),
                        vb = v.slice(0, b, b + 1).slice(2, 0, real);
    double max_score = 0;
    const torch::Tensor r =
        Reference(qb, kb, vb, mask.masked.slice(0, 0, real).slice(1, 0, real), scale, &max_score)[0];
    const torch::Tensor s = sdpa[b].slice(1, 0, real), m = manual[b].slice(1, 0, real);
    const double bound = KernelBound(qb, kb, vb, scale, max_score);
    const double d_sdpa = (s - r).abs().max().item<double>(), d_manual = (m - r).abs().max().item<double>(),
                 d_pair = (s - m).abs().max().item<double>();
    std::printf("row %lld: |sdpa-ref| %.3g |manual-ref| %.3g |sdpa-manual| %.3g bound %.3g (S %.3g)\n",
                static_cast<long long>(b), d_sdpa, d_manual, d_pair, bound, max_score);
    EXPECT_LE(d_sdpa, bound);
    EXPECT_LE(d_manual, bound);
    EXPECT_LE(d_pair, 2 * bound);
  }
}
#endif

TEST(AttentionKernelTest, GpuSdpaMatchesManualCausal) {
  ZEROFIT_SKIP_WITHOUT_SDPA_GPU();
#if ZEROFIT_HAVE_SDPA
  CompareOnGpu(Case{});
#endif
}

TEST(AttentionKernelTest, GpuSdpaMatchesManualCausalWithRightPadding) {
  ZEROFIT_SKIP_WITHOUT_SDPA_GPU();
#if ZEROFIT_HAVE_SDPA
  Case c;
  c.lengths = {137, 200};
  CompareOnGpu(c);
#endif
}

TEST(AttentionKernelTest, GpuSdpaMatchesManualSlidingWindow) {
  ZEROFIT_SKIP_WITHOUT_SDPA_GPU();
#if ZEROFIT_HAVE_SDPA
  Case c;
  c.window = 48;  // Mistral-style: keys j <= i - 48 masked
  CompareOnGpu(c);
#endif
}

TEST(AttentionKernelTest, GpuSdpaMatchesManualGroupedQuery) {
  ZEROFIT_SKIP_WITHOUT_SDPA_GPU();
#if ZEROFIT_HAVE_SDPA
  Case c;
  c.kv_heads = 2;  // 4 query heads per kv head: enable_gqa on 2.5+
  CompareOnGpu(c);
  c.window = 48;  // GQA with a mask: K/V expanded
  CompareOnGpu(c);
#endif
}

}  // namespace
}  // namespace zerofit::worker
