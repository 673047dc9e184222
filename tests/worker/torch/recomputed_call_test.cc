// The decoder layer's lean pieces: the RMSNorm (RecomputedCall, worker/torch/model/activation_checkpoint.h)
// and SwiGLU's silu(gate) * up (SwiGlu, swiglu.h) give the gradients of the plain autograd graph bit for bit
// (the same operations in the same order), and the graph keeps only the pieces' inputs, measured with the
// tracking allocator: nothing beyond the input for a norm (against at least 6 bytes an element in bf16, 4 in
// fp32) and silu(gate) less for SwiGLU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "tests/worker/torch/tracked_bytes.h"
#include "worker/torch/model/activation_checkpoint.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/model/swiglu.h"

namespace zerofit::worker {
namespace {

// The RMSNorm as Hugging Face's LlamaRMSNorm writes it, in plain autograd: what RmsNormImpl recomputes.
torch::Tensor PlainRmsNorm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  torch::Tensor h = x.to(torch::kFloat32);
  h = h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return w * h.to(x.scalar_type());
}

torch::Tensor PlainSwiGlu(const torch::Tensor& gate, const torch::Tensor& up) {
  return torch::silu(gate) * up;
}

torch::Tensor Leaf(std::vector<int64_t> shape, torch::Dtype dtype, int seed) {
  torch::manual_seed(seed);
  return torch::randn(shape).to(dtype).requires_grad_(true);
}

void ExpectBitwise(const torch::Tensor& a, const torch::Tensor& b, const char* what) {
  ASSERT_TRUE(a.defined() && b.defined()) << what;
  EXPECT_TRUE(torch::equal(a, b)) << what << ": max |diff| " << (a - b).abs().max().item<double>();
}

class RecomputedCallTest : public ::testing::TestWithParam<torch::Dtype> {};

TEST_P(RecomputedCallTest, TheNormsGradientsAreThePlainGraphsBitForBit) {
  const torch::Dtype dtype = GetParam();
  RmsNorm norm(64, 1e-6);
  norm->to(dtype);
  {
    torch::NoGradGuard no_grad;
    norm->weight.copy_(torch::rand({64}) + 0.5);
  }
  const torch::Tensor x = Leaf({3, 5, 64}, dtype, 1);
  const torch::Tensor dy = torch::randn({3, 5, 64}).to(dtype);
  const torch::Tensor x2 = x.detach().clone().requires_grad_(true);
  const torch::Tensor w2 = norm->weight.detach().clone().requires_grad_(true);

  torch::Tensor y = norm(x);
  y.backward(dy);
  torch::Tensor y_plain = PlainRmsNorm(x2, w2, 1e-6);
  y_plain.backward(dy);
  ExpectBitwise(y, y_plain, "output");
  ExpectBitwise(x.grad(), x2.grad(), "input gradient");
  ExpectBitwise(norm->weight.grad(), w2.grad(), "weight gradient");
}

TEST_P(RecomputedCallTest, SwiGlusGradientsAreThePlainGraphsBitForBit) {
  const torch::Dtype dtype = GetParam();
  const torch::Tensor g = Leaf({4, 7, 96}, dtype, 2), u = Leaf({4, 7, 96}, dtype, 3);
  const torch::Tensor g2 = g.detach().clone().requires_grad_(true),
                      u2 = u.detach().clone().requires_grad_(true);
  const torch::Tensor dy = torch::randn({4, 7, 96}).to(dtype);
  torch::Tensor y = SwiGlu(g, u);
  y.backward(dy);
  torch::Tensor y_plain = PlainSwiGlu(g2, u2);
  y_plain.backward(dy);
  ExpectBitwise(y, y_plain, "output");
  ExpectBitwise(g.grad(), g2.grad(), "gate gradient");
  ExpectBitwise(u.grad(), u2.grad(), "up gradient");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RecomputedCallTest, ::testing::Values(torch::kFloat32, torch::kBFloat16),
                         [](const ::testing::TestParamInfo<torch::Dtype>& info) {
                           return info.param == torch::kFloat32 ? std::string("fp32") : std::string("bf16");
                         });

TEST(RecomputedCallMemoryTest, TheNormKeepsNothingButItsInput) {
  for (torch::Dtype dtype : {torch::kFloat32, torch::kBFloat16}) {
    const int64_t rows = 6 * 32, h = 256;
    const torch::Tensor x = Leaf({6, 32, h}, dtype, 4);
    const torch::Tensor w = Leaf({h}, dtype, 5);
    RmsNorm norm(h, 1e-6);
    norm->to(dtype);
    torch::AutoGradMode grad(true);
    const int64_t plain = KeptBytes([&] { return PlainRmsNorm(x, w, 1e-6); });
    const int64_t lean = KeptBytes([&] { return norm(x); });
    // Plain bf16: the fp32 upcast (4 B) and the normalised value's bf16 copy that the weight's product keeps
    // (2 B), and in LibTorch 1.x the fp32 square too; fp32: the normalised value (x's upcast is x itself).
    const int64_t elements = rows * h;
    EXPECT_GE(plain, (dtype == torch::kBFloat16 ? 6 : 4) * elements) << c10::toString(dtype);
    EXPECT_EQ(lean, 0) << c10::toString(dtype);
  }
}

TEST(RecomputedCallMemoryTest, SwiGluKeepsGateAndUpOnly) {
  for (torch::Dtype dtype : {torch::kFloat32, torch::kBFloat16}) {
    const torch::Tensor g = Leaf({6, 32, 352}, dtype, 6), u = Leaf({6, 32, 352}, dtype, 7);
    torch::AutoGradMode grad(true);
    const int64_t silu_bytes = g.numel() * g.element_size();
    // Plain: silu(gate), which the product keeps beside up; gate and up are the inputs.
    EXPECT_EQ(KeptBytes([&] { return PlainSwiGlu(g, u); }), silu_bytes) << c10::toString(dtype);
    EXPECT_EQ(KeptBytes([&] { return SwiGlu(g, u); }), 0) << c10::toString(dtype);
  }
}

TEST(RecomputedCallMemoryTest, SwiGluPeaksLowerThanThePlainGraph) {
  for (torch::Dtype dtype : {torch::kFloat32, torch::kBFloat16}) {
    const torch::Tensor dy = torch::randn({6, 32, 352}).to(dtype);
    torch::AutoGradMode grad(true);
    const torch::Tensor g = Leaf({6, 32, 352}, dtype, 6), u = Leaf({6, 32, 352}, dtype, 7);
    const int64_t plain = ForwardBackwardPeakBytes([&] { return PlainSwiGlu(g, u); }, dy);
    const torch::Tensor g2 = Leaf({6, 32, 352}, dtype, 6), u2 = Leaf({6, 32, 352}, dtype, 7);
    const int64_t lean = ForwardBackwardPeakBytes([&] { return SwiGlu(g2, u2); }, dy);
    // Plain: gate's and up's gradients, the incoming one, silu(gate), d silu and the output (6 tensors of
    // [6, 32, 352]); SwiGlu: one less.
    const int64_t tensor = g.numel() * g.element_size();
    EXPECT_EQ(plain - lean, tensor) << c10::toString(dtype) << ": plain " << plain << ", SwiGlu " << lean;
  }
}

torch::Tensor PlainMlpTail(const torch::Tensor& gate, const torch::Tensor& up, const torch::Tensor& w) {
  return torch::linear(PlainSwiGlu(gate, up), w);
}

torch::Tensor LeanMlpTail(const torch::Tensor& gate, const torch::Tensor& up, const torch::Tensor& w) {
  return SwiGluThenDown(gate, up, [&w](const torch::Tensor& p) { return torch::linear(p, w); });
}

TEST_P(RecomputedCallTest, SwiGluThenDownGivesThePlainGradientsBitForBit) {
  const torch::Dtype dtype = GetParam();
  const torch::Tensor g = Leaf({3, 9, 96}, dtype, 12), u = Leaf({3, 9, 96}, dtype, 13);
  const torch::Tensor w = Leaf({40, 96}, dtype, 14);
  const torch::Tensor g2 = g.detach().clone().requires_grad_(true),
                      u2 = u.detach().clone().requires_grad_(true);
  const torch::Tensor w2 = w.detach().clone().requires_grad_(true);
  const torch::Tensor dy = torch::randn({3, 9, 40}).to(dtype);
  torch::Tensor y = LeanMlpTail(g, u, w);
  y.backward(dy);
  torch::Tensor y_plain = PlainMlpTail(g2, u2, w2);
  y_plain.backward(dy);
  ExpectBitwise(y, y_plain, "output");
  ExpectBitwise(g.grad(), g2.grad(), "gate gradient");
  ExpectBitwise(u.grad(), u2.grad(), "up gradient");
  ExpectBitwise(w.grad(), w2.grad(), "down weight gradient");
}

TEST(RecomputedCallMemoryTest, TheMlpKeepsGateAndUpOnlyAndPeaksNoHigher) {
  for (torch::Dtype dtype : {torch::kFloat32, torch::kBFloat16}) {
    const torch::Tensor g = Leaf({6, 32, 352}, dtype, 15), u = Leaf({6, 32, 352}, dtype, 16);
    const torch::Tensor w = Leaf({64, 352}, dtype, 17);
    const int64_t tensor = g.numel() * g.element_size();
    torch::AutoGradMode grad(true);
    // Plain: silu(gate) and the product (down's input).
    EXPECT_EQ(KeptBytes([&] { return PlainMlpTail(g, u, w); }), 2 * tensor) << c10::toString(dtype);
    EXPECT_EQ(KeptBytes([&] { return LeanMlpTail(g, u, w); }), 0) << c10::toString(dtype);
    const torch::Tensor dy = torch::randn({6, 32, 64}).to(dtype);
    const int64_t plain = ForwardBackwardPeakBytes([&] { return PlainMlpTail(g, u, w); }, dy);
    const int64_t lean = ForwardBackwardPeakBytes([&] { return LeanMlpTail(g, u, w); }, dy);
    EXPECT_LE(lean, plain) << c10::toString(dtype);
  }
}

// On a GPU (the gpu label; skipped without one): the norm, SwiGlu and SwiGluThenDown in bf16 on cuda:0
// against the plain graphs, bit for bit (the same CUDA kernels and cuBLAS calls in the same order), and the
// product's bytes released after the forward.
TEST(RecomputedCallGpuTest, GpuTheLeanPiecesGiveThePlainGradientsOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU visible to a CUDA LibTorch";
  const torch::Device cuda(torch::kCUDA, 0);
  auto leaf = [&](std::vector<int64_t> shape, int seed) {
    torch::manual_seed(seed);
    return torch::randn(shape).to(cuda, torch::kBFloat16).requires_grad_(true);
  };
  const torch::Tensor x = leaf({4, 64, 256}, 31), w = leaf({256}, 32), g = leaf({4, 64, 704}, 33),
                      u = leaf({4, 64, 704}, 34), d = leaf({256, 704}, 35);
  const torch::Tensor dy = torch::randn({4, 64, 256}).to(cuda, torch::kBFloat16);
  auto copies = [](std::vector<torch::Tensor> ts) {
    for (torch::Tensor& t : ts) t = t.detach().clone().requires_grad_(true);
    return ts;
  };
  std::vector<torch::Tensor> plain = copies({x, w, g, u, d});
  RmsNorm norm(256, 1e-6);
  norm->to(cuda, torch::kBFloat16);
  {
    torch::NoGradGuard no_grad;
    norm->weight.copy_(w);
  }
  (norm(x) * dy).sum().backward();
  (PlainRmsNorm(plain[0], plain[1], 1e-6) * dy).sum().backward();
  ExpectBitwise(x.grad(), plain[0].grad(), "norm input gradient");
  ExpectBitwise(norm->weight.grad(), plain[1].grad(), "norm weight gradient");
  (LeanMlpTail(g, u, d) * dy).sum().backward();
  (PlainMlpTail(plain[2], plain[3], plain[4]) * dy).sum().backward();
  ExpectBitwise(g.grad(), plain[2].grad(), "gate gradient");
  ExpectBitwise(u.grad(), plain[3].grad(), "up gradient");
  ExpectBitwise(d.grad(), plain[4].grad(), "down weight gradient");
}

TEST(RecomputedCallMemoryTest, WithoutGradNothingIsRecordedAndTheValueIsTheSame) {
  const torch::Tensor g = Leaf({2, 3, 8}, torch::kFloat32, 8), u = Leaf({2, 3, 8}, torch::kFloat32, 9);
  torch::NoGradGuard no_grad;
  const torch::Tensor y = SwiGlu(g, u);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(torch::equal(y, PlainSwiGlu(g, u)));
}

TEST(RecomputedCallMemoryTest, AnInputWithoutGradGetsNoGradientAndAParameterMustRequireOne) {
  const torch::Tensor g = Leaf({2, 3, 8}, torch::kFloat32, 10);
  const torch::Tensor u = torch::randn({2, 3, 8});
  SwiGlu(g, u).sum().backward();
  EXPECT_TRUE(g.grad().defined());
  EXPECT_FALSE(u.grad().defined());
  EXPECT_THROW(RecomputedCall([](const std::vector<torch::Tensor>& in) { return in[0] * 2; }, {g}, {u}),
               c10::Error);
  RmsNorm norm(8, 1e-6);
  norm->weight.requires_grad_(false);
  norm(g).sum().backward();
  EXPECT_FALSE(norm->weight.grad().defined());
}

}  // namespace
}  // namespace zerofit::worker
