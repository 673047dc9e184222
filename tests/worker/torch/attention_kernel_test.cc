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
#include <type_traits>
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

// The float64 reference of one row and elementwise bounds on each kernel's distance from it.
struct Reference {
  torch::Tensor out;           // [1, H, T, D]
  torch::Tensor manual_bound;  // [1, H, T, D]: |ManualAttention - out| may not exceed it
  torch::Tensor sdpa_bound;    // the same for SdpaAttention with the backend it runs
};

// Rounding-error bounds with u = 2^-8, bf16's unit roundoff (8 significand bits: one rounding moves a value
// by at most 2^-8 of it), and f = 2^-24, fp32's. First order, times 1.1 for the neglected second-order terms
// (every relative perturbation below stays under 0.05 at these sizes, so they are under 5% of the bound). Per
// query i, key j: s = scale q_i.k_j, A = scale sum_d |q_id k_jd| >= |s|, p the exact softmax weights, o =
// sum_j p_j v_j.
//  - Score error delta_j. Manual: the GEMM's output rounded to bf16 and again after `* scale`: 2 u |s|, plus
//    fp32 accumulation over head_dim, (D + 1) f A. Fused SDPA kernels (flash, memory-efficient, cuDNN) keep
//    scores in fp32: (D + 1) f A. SDPA's math kernel pre-scales q and k by sqrt(scale) in bf16 and rounds the
//    product (before 2.5, or where it does not upcast): 3 u A + (D + 1) f A.
//  - Softmax turns score errors into weight errors |dp_j| <= p_j (|delta_j| + sum_k p_k |delta_k|), which
//    move o_d by at most sum_j p_j |delta_j| |v_jd| + (sum_k p_k |delta_k|) sum_j p_j |v_jd|.
//  - The weights rounded to bf16 for the product with V (manual always; fused kernels feed bf16 tensor cores
//    too): u sum_j p_j |v_jd|; fp32 accumulation over T keys and online-softmax rescaling: T f sum_j p_j
//    |v_jd|; the output rounded to bf16: u |o_d|.
// The count of bf16 roundings does not grow with head_dim or T; only the fp32 accumulation terms do. The two
// kernels differ by at most the sum of their bounds. A wrong mask, head mapping or scale moves outputs by
// about |v| / sqrt(keys attended), ten times these bounds or more at these sizes. Checked on the CPU with an
// emulation of both kernels (bf16 tensors, fp32 GEMM accumulation as cuBLAS here), T 200, head_dim 64, before
// the factor 1.1: the largest errors reached 0.57 (manual) and 0.72 (fused) of the bound; a sliding window of
// 48 left out or added moved outputs by 39 to 68 times it. (ManualAttention itself through LibTorch 1.13's
// CPU bf16 GEMM, which this test never runs, reached 0.94, as if that GEMM rounded inside its sums.)
Reference MakeReference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& masked, double scale, bool sdpa_math) {
  const double u = std::ldexp(1.0, -8), f = std::ldexp(1.0, -24);
  const torch::Tensor q64 = q.cpu().to(torch::kFloat64)[0], k64 = k.cpu().to(torch::kFloat64)[0],
                      v64 = v.cpu().to(torch::kFloat64)[0], m = masked.cpu();
  const int64_t heads = q.size(1), n_rep = heads / k.size(1), t = q.size(2);
  const double d = static_cast<double>(q.size(3));
  std::vector<torch::Tensor> outs, manual, sdpa;
  for (int64_t h = 0; h < heads; ++h) {
    const torch::Tensor qh = q64[h], kh = k64[h / n_rep], vh = v64[h / n_rep], va = vh.abs();
    const torch::Tensor s = torch::matmul(qh, kh.t()) * scale;
    const torch::Tensor a = torch::matmul(qh.abs(), kh.abs().t()) * scale;
    const torch::Tensor p = torch::softmax(s.masked_fill(m, -std::numeric_limits<double>::infinity()), -1);
    const torch::Tensor o = torch::matmul(p, vh), pv = torch::matmul(p, va);
    auto bound = [&](const torch::Tensor& delta) {
      const torch::Tensor pd = p * delta;
      return 1.1 *
             (torch::matmul(pd, va) + pd.sum(-1, /*keepdim=*/true) * pv + (u + t * f) * pv + u * o.abs());
    };
    outs.push_back(o);
    manual.push_back(bound(2 * u * s.abs() + (d + 1) * f * a));
    sdpa.push_back(bound(((sdpa_math ? 3 * u : 0) + (d + 1) * f) * a));
  }
  return {torch::stack(outs).unsqueeze(0), torch::stack(manual).unsqueeze(0),
          torch::stack(sdpa).unsqueeze(0)};
}

// Largest |got - want| / bound (<= 1 passes) and largest |got - want|.
std::pair<double, double> Excess(const torch::Tensor& got, const torch::Tensor& want,
                                 const torch::Tensor& bound) {
  const torch::Tensor diff = (got - want).abs();
  // Exact agreement passes where the bound is 0 too (a query that sees one key whose v is 0).
  const torch::Tensor ratio = torch::where(diff == 0, torch::zeros_like(diff), diff / bound);
  return {ratio.max().item<double>(), diff.max().item<double>()};
}

// The bounds assume that cuBLAS accumulates bf16 GEMMs in fp32, without the reduced-precision split-K
// reductions that LibTorch allows by default (the fused kernels always accumulate in fp32); restored after.
// Whether the setting allows reduced-precision reductions: a bool in older releases (1.13, 2.6), an enum with
// split-K as a second choice in newer ones (2.11), whose reduced-precision value is the one that allows it.
inline bool AllowsReducedPrecision(bool allowed) { return allowed; }
template <typename Option, typename = std::enable_if_t<std::is_enum<Option>::value>>
bool AllowsReducedPrecision(Option option) {
  return option == Option::AllowReducedPrecisionWithSplitK;
}

class Bf16FullPrecisionReduction {
 public:
  Bf16FullPrecisionReduction()
      : saved_(AllowsReducedPrecision(at::globalContext().allowBF16ReductionCuBLAS())) {
    at::globalContext().setAllowBF16ReductionCuBLAS(false);
  }
  ~Bf16FullPrecisionReduction() { at::globalContext().setAllowBF16ReductionCuBLAS(saved_); }

 private:
  bool saved_;
};

void CompareOnGpu(const Case& c) {
  const Bf16FullPrecisionReduction full_precision;
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
    EXPECT_TRUE(torch::isfinite(manual[b]).all().item<bool>());
    // The reference sees the row's real tokens only, as if it were unpadded: what padding must not change.
    auto real_of = [&](const torch::Tensor& x) { return x.slice(0, b, b + 1).slice(2, 0, real); };
    const Reference r = MakeReference(real_of(q), real_of(k), real_of(v),
                                      mask.masked.slice(0, 0, real).slice(1, 0, real), scale, backend == 0);
    const auto [sdpa_x, sdpa_d] = Excess(real_of(sdpa), r.out, r.sdpa_bound);
    const auto [manual_x, manual_d] = Excess(real_of(manual), r.out, r.manual_bound);
    const auto [pair_x, pair_d] = Excess(real_of(sdpa), real_of(manual), r.sdpa_bound + r.manual_bound);
    std::printf(
        "row %lld: max |sdpa-ref| %.3g (%.2f of bound), |manual-ref| %.3g (%.2f), |sdpa-manual| %.3g "
        "(%.2f)\n",
        static_cast<long long>(b), sdpa_d, sdpa_x, manual_d, manual_x, pair_d, pair_x);
    EXPECT_LE(sdpa_x, 1.0);
    EXPECT_LE(manual_x, 1.0);
    EXPECT_LE(pair_x, 1.0);
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
