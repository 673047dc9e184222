// The fused RMSNorm, SwiGLU and rotary embedding (worker/torch/model/fused_kernels.h over kernels/) against
// oracles; the rotary embedding, which has no sums, bit for bit against the plain graph.
//
// fp32: against float64 evaluations of the same formulas, with bounds that follow from the computation (a sum
// of n terms is off by at most n u of the sum of their magnitudes, u = 2^-24; each further operation adds a
// few u). bf16: against the plain autograd graphs, which round to bf16 at the same points; the fused and the
// plain fp32 intermediates differ by the fp32 bounds, and where that moves a value across a bf16 rounding
// boundary the rounded values differ by one bf16 ulp (at most 2^-7 of the magnitude) per rounding.
//
// The CPU cases run the host references (FusedKernels::kEverywhere); the Gpu* cases (the gpu label, skipped
// without a device) run the same checks on cuda:0, where the CUDA kernels run, plus their determinism.
#include "worker/torch/model/fused_kernels.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/float_bounds.h"
#include "tests/support/tiny_llama_config.h"
#include "tests/worker/torch/tracked_bytes.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/model/swiglu.h"

namespace zerofit::worker {
namespace {

const double kU = std::ldexp(1.0, -24);       // fp32 unit roundoff
const double kBf16Ulp = std::ldexp(1.0, -7);  // a bf16 ulp, relative to the value's magnitude, at most
constexpr double kEps = 1e-6;

torch::Tensor Leaf(std::vector<int64_t> shape, torch::Dtype dtype, torch::Device device, int seed) {
  torch::manual_seed(seed);
  return torch::randn(shape).to(device, dtype).requires_grad_(true);
}

torch::Tensor PlainRmsNorm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  torch::Tensor h = x.to(torch::kFloat32);
  h = h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return w * h.to(x.scalar_type());
}

torch::Tensor D(const torch::Tensor& t) { return t.detach().to(torch::kCPU, torch::kFloat64); }

// Every element of `got` within bound[i] of want[i] (all on the CPU as float64).
void ExpectWithin(const torch::Tensor& got, const torch::Tensor& want, const torch::Tensor& bound,
                  const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  const torch::Tensor excess = (D(got) - want).abs() - bound;
  const int64_t worst = excess.argmax().item<int64_t>();
  EXPECT_LE(excess.max().item<double>(), 0.0)
      << what << ": element " << worst << " is " << D(got).flatten()[worst].item<double>() << ", want "
      << want.flatten()[worst].item<double>() << " within " << bound.flatten()[worst].item<double>();
}

// The RMSNorm's values in float64 from the (rounded) inputs, and the magnitudes the bounds scale with.
struct NormOracle {
  torch::Tensor y, dx, dw;  // exact, from x, w, dy
  torch::Tensor y_scale, dx_scale, dw_scale;
};

NormOracle NormInFloat64(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& dy) {
  const torch::Tensor xd = D(x), wd = D(w), dyd = D(dy);
  const double h = static_cast<double>(xd.size(-1));
  const torch::Tensor r = torch::rsqrt(xd.pow(2).mean(-1, true) + kEps);
  const torch::Tensor n = xd * r;
  const torch::Tensor dn = dyd * wd;
  NormOracle o;
  o.y = wd * n;
  o.dx = dn * r - xd * r.pow(3) * (dn * xd).sum(-1, true) / h;
  o.dw = (dyd * n).reshape({-1, xd.size(-1)}).sum(0);
  o.y_scale = o.y.abs();
  o.dx_scale = dn.abs() * r + xd.abs() * r.pow(3) * (dn * xd).abs().sum(-1, true) / h;
  o.dw_scale = (dyd * n).abs().reshape({-1, xd.size(-1)}).sum(0);
  return o;
}

// fp32 bounds: r is off by (H/2 + 4) u relative (the sum of squares, the division, the square root);
// y = w (x r) adds two roundings; dx = dn r + k x, with k = c (-r^3 / H) and c = sum(dn x) off by H u of
// sum|dn x|; dw sums rows products of n (off like r).
void CheckNormFp32(torch::Device device, std::vector<int64_t> shape, int seed) {
  const int64_t h = shape.back();
  const torch::Tensor x = Leaf(shape, torch::kFloat32, device, seed);
  const torch::Tensor w = Leaf({h}, torch::kFloat32, device, seed + 1);
  const torch::Tensor dy = Leaf(shape, torch::kFloat32, device, seed + 2).detach();
  const torch::Tensor y = FusedRmsNorm(x, w, kEps);
  y.backward(dy);
  const NormOracle o = NormInFloat64(x, w, dy);
  const double hd = static_cast<double>(h), rows = static_cast<double>(x.numel() / h);
  ExpectWithin(y, o.y, (hd + 16) * kU * o.y_scale, "fp32 output");
  ExpectWithin(x.grad(), o.dx, (3 * hd + 32) * kU * o.dx_scale, "fp32 input gradient");
  ExpectWithin(w.grad(), o.dw, (rows + hd + 16) * kU * o.dw_scale, "fp32 weight gradient");
}

// bf16, against the plain graph: dn = round(dy w) is the same in both; r and c differ by the fp32 bounds
// above; each of the plain graph's roundings may then land one ulp apart (n, y; dx; each of dw's terms and
// its sum).
void CheckNormBf16(torch::Device device, std::vector<int64_t> shape, int seed) {
  const int64_t h = shape.back();
  const torch::Tensor x = Leaf(shape, torch::kBFloat16, device, seed);
  const torch::Tensor w = Leaf({h}, torch::kBFloat16, device, seed + 1);
  const torch::Tensor dy = Leaf(shape, torch::kBFloat16, device, seed + 2).detach();
  const torch::Tensor x2 = x.detach().clone().requires_grad_(true);
  const torch::Tensor w2 = w.detach().clone().requires_grad_(true);
  const torch::Tensor y = FusedRmsNorm(x, w, kEps);
  y.backward(dy);
  const torch::Tensor y_plain = PlainRmsNorm(x2, w2, kEps);
  y_plain.backward(dy);
  const NormOracle o = NormInFloat64(x, w, dy);
  const double hd = static_cast<double>(h), rows = static_cast<double>(x.numel() / h);
  ExpectWithin(y, D(y_plain), 2 * kBf16Ulp * (1 + kBf16Ulp) * o.y_scale, "bf16 output");
  const torch::Tensor fp32_dx = (3 * hd + 32) * kU * o.dx_scale;
  ExpectWithin(x.grad(), D(x2.grad()), fp32_dx + kBf16Ulp * (D(x2.grad()).abs() + fp32_dx),
               "bf16 input gradient");
  ExpectWithin(
      w.grad(), D(w2.grad()),
      (2 * kBf16Ulp + (rows + 16) * kU) * (1 + kBf16Ulp) * o.dw_scale + kBf16Ulp * D(w2.grad()).abs(),
      "bf16 weight gradient");
}

struct GluOracle {
  torch::Tensor out, d_gate, d_up;
  torch::Tensor out_scale, d_gate_scale, d_up_scale;
};

GluOracle GluInFloat64(const torch::Tensor& gate, const torch::Tensor& up, const torch::Tensor& grad) {
  const torch::Tensor g = D(gate), u = D(up), d = D(grad);
  const torch::Tensor s = torch::sigmoid(g);
  GluOracle o;
  o.out = g * s * u;
  o.d_up = d * g * s;
  o.d_gate = d * u * s * (1 + g * (1 - s));
  o.out_scale = o.out.abs();
  o.d_up_scale = o.d_up.abs();
  o.d_gate_scale = (d * u).abs() * s * (1 + 2 * g.abs());
  return o;
}

// fp32: the exponential is off by at most 2 u (CUDA's expf; glibc's and Sleef's by 1), each further
// operation by one rounding: 8 u for the product and d_up; d_gate's factor 1 + g (1 - s) cancels near
// g = -1.28, so its bound scales with |ds| s (1 + 2|g|), 16 u.
void CheckGluFp32(torch::Device device, std::vector<int64_t> shape, int seed) {
  const torch::Tensor g = Leaf(shape, torch::kFloat32, device, seed) * 3;  // the exponential's whole range
  const torch::Tensor gate = g.detach().requires_grad_(true);
  const torch::Tensor up = Leaf(shape, torch::kFloat32, device, seed + 1);
  const torch::Tensor grad = Leaf(shape, torch::kFloat32, device, seed + 2).detach();
  const torch::Tensor out = SwiGlu(gate, up, /*fused=*/true);
  out.backward(grad);
  const GluOracle o = GluInFloat64(gate, up, grad);
  ExpectWithin(out, o.out, 8 * kU * o.out_scale, "fp32 product");
  ExpectWithin(up.grad(), o.d_up, 8 * kU * o.d_up_scale, "fp32 up gradient");
  ExpectWithin(gate.grad(), o.d_gate, 16 * kU * o.d_gate_scale, "fp32 gate gradient");
}

// bf16, against the plain graph: silu(gate) and the products round at the same points; an fp32 difference of
// a few u moves a rounded value by at most one ulp, twice along each output's path.
void CheckGluBf16(torch::Device device, std::vector<int64_t> shape, int seed) {
  const torch::Tensor gate = Leaf(shape, torch::kBFloat16, device, seed);
  const torch::Tensor up = Leaf(shape, torch::kBFloat16, device, seed + 1);
  const torch::Tensor grad = Leaf(shape, torch::kBFloat16, device, seed + 2).detach();
  const torch::Tensor gate2 = gate.detach().clone().requires_grad_(true);
  const torch::Tensor up2 = up.detach().clone().requires_grad_(true);
  const torch::Tensor out = SwiGlu(gate, up, /*fused=*/true);
  out.backward(grad);
  const torch::Tensor out_plain = torch::silu(gate2) * up2;
  out_plain.backward(grad);
  const GluOracle o = GluInFloat64(gate, up, grad);
  const double two_ulps = 2 * kBf16Ulp * (1 + kBf16Ulp);
  ExpectWithin(out, D(out_plain), two_ulps * o.out_scale, "bf16 product");
  ExpectWithin(up.grad(), D(up2.grad()), two_ulps * o.d_up_scale, "bf16 up gradient");
  ExpectWithin(gate.grad(), D(gate2.grad()), two_ulps * o.d_gate_scale, "bf16 gate gradient");
}

const torch::Device kCpu(torch::kCPU);

// The rotary embedding fused and plain (q * cos + rotate_half(q) * sin on the heads-forward view), with one
// angle table or each row its own positions (decoding's [batch, 1, seq, head_dim]): no sums and no
// transcendental functions, so outputs and input gradients are equal bit for bit.
void CheckRopeIsThePlainGraph(torch::Device device, torch::Dtype dtype, bool per_row) {
  const core::HfModelConfig c = test_support::TinyLlamaConfig("llama");
  const int64_t b = 3, t = 7, heads = 4, d = c.head_dim;
  const torch::Tensor x = Leaf({b, t, heads, d}, dtype, device, 50);
  const torch::Tensor x2 = x.detach().clone().requires_grad_(true);
  const auto [cos_table, sin_table] = RotaryCosSin(c, 3 * t, device);
  torch::Tensor cos = cos_table.to(dtype), sin = sin_table.to(dtype);
  if (per_row) {  // row r at positions 2r .. 2r + t - 1 (a batch of decoding rows, left-padded differently)
    const torch::Tensor rows =
        (torch::arange(t).unsqueeze(0) + 2 * torch::arange(b).unsqueeze(1)).reshape(-1);
    cos = cos.index_select(0, rows.to(device)).view({b, 1, t, d});
    sin = sin.index_select(0, rows.to(device)).view({b, 1, t, d});
  } else {
    cos = cos.slice(0, 0, t);
    sin = sin.slice(0, 0, t);
  }
  const torch::Tensor dy = torch::randn({b, heads, t, d}).to(device, dtype);
  const torch::Tensor y = FusedRope(x, cos, sin).transpose(1, 2);
  y.backward(dy);
  const torch::Tensor xt = x2.transpose(1, 2);
  const torch::Tensor y_plain = xt * cos + RotateHalf(xt) * sin;
  y_plain.backward(dy);
  const std::string what = std::string(c10::toString(dtype)) + (per_row ? ", per-row angles" : ", one table");
  EXPECT_TRUE(torch::equal(y, y_plain))
      << what << ": max |diff| " << (y - y_plain).abs().max().item<double>();
  EXPECT_TRUE(torch::equal(x.grad(), x2.grad()))
      << what << ": max |diff| " << (x.grad() - x2.grad()).abs().max().item<double>();
}

TEST(FusedKernelsTest, TheNormMatchesFloat64InFp32) {
  CheckNormFp32(kCpu, {3, 5, 64}, 1);
  CheckNormFp32(kCpu, {4, 300, 320}, 4);  // more rows than the CUDA backward's blocks
}

TEST(FusedKernelsTest, TheNormMatchesThePlainGraphInBf16) {
  CheckNormBf16(kCpu, {3, 5, 64}, 7);
  CheckNormBf16(kCpu, {4, 300, 320}, 10);
}

TEST(FusedKernelsTest, SwiGluMatchesFloat64InFp32) { CheckGluFp32(kCpu, {4, 9, 176}, 13); }

TEST(FusedKernelsTest, SwiGluMatchesThePlainGraphInBf16) { CheckGluBf16(kCpu, {4, 9, 176}, 16); }

TEST(FusedKernelsTest, TheRotaryEmbeddingIsThePlainGraphsBitForBit) {
  for (torch::Dtype dtype : {torch::kFloat32, torch::kBFloat16})
    for (bool per_row : {false, true}) CheckRopeIsThePlainGraph(kCpu, dtype, per_row);
}

TEST(FusedKernelsTest, TheRotaryEmbeddingKeepsOnlyItsAnglesAndRefusesAnglesOfAnotherShape) {
  const torch::Tensor x = Leaf({2, 5, 4, 16}, torch::kFloat32, kCpu, 51);
  const torch::Tensor cos = torch::rand({5, 16}), sin = torch::rand({5, 16});
  torch::AutoGradMode grad(true);
  EXPECT_EQ(KeptBytes([&] { return FusedRope(x, cos, sin); }), 0);  // cos and sin are the caller's
  EXPECT_THROW(FusedRope(x, torch::rand({6, 16}), torch::rand({6, 16})), c10::Error);
  EXPECT_THROW(FusedRope(x, torch::rand({2, 4, 5, 16}), torch::rand({2, 4, 5, 16})), c10::Error);
  EXPECT_THROW(FusedRope(x.transpose(1, 2), cos, sin), c10::Error);
  EXPECT_THROW(FusedRmsNorm(torch::rand({2, 8}, torch::kFloat64), torch::rand({8}, torch::kFloat64), kEps),
               c10::Error);
}

TEST(FusedKernelsTest, AFrozenWeightGetsNoGradientAndWithoutGradNothingIsRecorded) {
  const torch::Tensor x = Leaf({2, 3, 16}, torch::kFloat32, kCpu, 19);
  const torch::Tensor w = torch::rand({16}) + 0.5;
  FusedRmsNorm(x, w, kEps).sum().backward();
  EXPECT_TRUE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
  torch::NoGradGuard no_grad;
  const torch::Tensor y = FusedRmsNorm(x, w, kEps);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_FALSE(SwiGlu(x, x, /*fused=*/true).requires_grad());
}

// What autograd keeps: the norm its input, its weight and one fp32 per row (the inputs are not counted);
// SwiGLU gate and up only. The forward and backward peak no higher than the lean pieces'.
TEST(FusedKernelsTest, TheNodesKeepTheirInputsAndOneFloatARowAndPeakNoHigherThanTheLeanPieces) {
  for (torch::Dtype dtype : {torch::kFloat32, torch::kBFloat16}) {
    const int64_t rows = 6 * 32, h = 256;
    const torch::Tensor x = Leaf({6, 32, h}, dtype, kCpu, 20), w = Leaf({h}, dtype, kCpu, 21);
    torch::AutoGradMode grad(true);
    EXPECT_EQ(KeptBytes([&] { return FusedRmsNorm(x, w, kEps); }), 4 * rows) << c10::toString(dtype);
    const torch::Tensor g = Leaf({6, 32, 352}, dtype, kCpu, 22), u = Leaf({6, 32, 352}, dtype, kCpu, 23);
    EXPECT_EQ(KeptBytes([&] { return SwiGlu(g, u, /*fused=*/true); }), 0) << c10::toString(dtype);

    RmsNorm lean(h, kEps);
    lean->to(dtype);
    const torch::Tensor dy = torch::randn({6, 32, h}).to(dtype);
    const int64_t fused_norm = ForwardBackwardPeakBytes([&] { return FusedRmsNorm(x, w, kEps); }, dy);
    EXPECT_LE(fused_norm, ForwardBackwardPeakBytes([&] { return lean(x); }, dy)) << c10::toString(dtype);
    const torch::Tensor dg = torch::randn({6, 32, 352}).to(dtype);
    EXPECT_LE(ForwardBackwardPeakBytes([&] { return SwiGlu(g, u, true); }, dg),
              ForwardBackwardPeakBytes([&] { return SwiGlu(g, u, false); }, dg))
        << c10::toString(dtype);
  }
}

// SwiGluThenDown releases the fused product after down has run and recomputes it with the same kernel: the
// gradients are the fused SwiGlu's, bit for bit.
TEST(FusedKernelsTest, SwiGluThenDownRecomputesTheFusedProductBitForBit) {
  const torch::Tensor g = Leaf({3, 9, 40}, torch::kBFloat16, kCpu, 24),
                      u = Leaf({3, 9, 40}, torch::kBFloat16, kCpu, 25);
  const torch::Tensor d = Leaf({16, 40}, torch::kBFloat16, kCpu, 26);
  const torch::Tensor g2 = g.detach().clone().requires_grad_(true),
                      u2 = u.detach().clone().requires_grad_(true);
  const torch::Tensor d2 = d.detach().clone().requires_grad_(true);
  const torch::Tensor dy = torch::randn({3, 9, 16}).to(torch::kBFloat16);
  auto down = [](const torch::Tensor& w) {
    return [w](const torch::Tensor& p) { return torch::nn::functional::linear(p, w); };
  };
  SwiGluThenDown(g, u, down(d), /*fused=*/true).backward(dy);
  torch::nn::functional::linear(SwiGlu(g2, u2, /*fused=*/true), d2).backward(dy);
  EXPECT_TRUE(torch::equal(g.grad(), g2.grad()));
  EXPECT_TRUE(torch::equal(u.grad(), u2.grad()));
  EXPECT_TRUE(torch::equal(d.grad(), d2.grad()));
}

TEST(FusedKernelsTest, AModeIsParsedByNameAndABadOneNamesTheField) {
  EXPECT_EQ(*ParseFusedKernels("off", "model.fused_kernels"), FusedKernels::kOff);
  EXPECT_EQ(*ParseFusedKernels("cuda", "f"), FusedKernels::kCuda);
  EXPECT_EQ(*ParseFusedKernels("everywhere", "f"), FusedKernels::kEverywhere);
  const absl::StatusOr<FusedKernels> bad = ParseFusedKernels("triton", "model.fused_kernels");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("model.fused_kernels: 'triton'"), std::string::npos) << bad.status();
}

TEST(FusedKernelsTest, CudaModeLeavesCpuTensorsToThePlainPieces) {
  const torch::Tensor a = torch::randn({2, 4}), b = torch::randn({2, 4});
  EXPECT_FALSE(FusedKernelsTake(FusedKernels::kCuda, a, b));
  EXPECT_TRUE(FusedKernelsTake(FusedKernels::kEverywhere, a, b));
  EXPECT_FALSE(FusedKernelsTake(FusedKernels::kEverywhere, a, b.to(torch::kBFloat16)));
  EXPECT_FALSE(FusedKernelsTake(FusedKernels::kEverywhere, a.to(torch::kFloat64), b.to(torch::kFloat64)));
  EXPECT_FALSE(FusedKernelsTake(FusedKernels::kOff, a, b));
}

// A whole fp32 model with the fused pieces against the plain one. Each is within
// test_support::Float32ForwardBound of the exact values (the backward runs the transposed reductions of the
// same layers), so they are within twice that of each other.
LlamaModel MakeModel(FusedKernels fused, bool checkpointing) {
  LlamaOptions o;
  o.fused_kernels = fused;
  o.activation_checkpointing = checkpointing;
  return LlamaModel(test_support::TinyLlamaConfig("llama"), o);
}

void CopyParameters(LlamaModel& from, LlamaModel& to) {
  torch::NoGradGuard no_grad;
  auto src = from->named_parameters();
  for (auto& item : to->named_parameters()) item.value().copy_(src[item.key()]);
}

torch::Tensor RunModel(LlamaModel& m, const torch::Tensor& ids, const torch::Tensor& weights) {
  torch::Tensor out = m->TokenLogProbs(ids);
  (out * weights).sum().backward();
  return out.detach();
}

TEST(FusedKernelsTest, AFusedModelMatchesThePlainModel) {
  LlamaModel plain = MakeModel(FusedKernels::kOff, false);
  LlamaModel fused = MakeModel(FusedKernels::kEverywhere, false);
  CopyParameters(plain, fused);
  torch::manual_seed(27);
  const int64_t t = 11;
  const torch::Tensor ids = torch::randint(50, {2, t}, torch::kLong);
  const torch::Tensor weights = torch::randn({2, t - 1});
  const torch::Tensor want = RunModel(plain, ids, weights);
  const torch::Tensor got = RunModel(fused, ids, weights);
  const core::HfModelConfig c = test_support::TinyLlamaConfig("llama");
  EXPECT_LE((got - want).abs().max().item<double>(),
            2 * test_support::Float32ForwardBound(c, t, want.abs().max().item<double>()));
  auto pp = plain->named_parameters();
  for (auto& item : fused->named_parameters()) {
    const torch::Tensor& g = item.value().grad();
    const torch::Tensor& g_plain = pp[item.key()].grad();
    ASSERT_TRUE(g.defined() && g_plain.defined()) << item.key();
    EXPECT_LE((g - g_plain).abs().max().item<double>(),
              2 * test_support::Float32ForwardBound(c, t, g_plain.abs().max().item<double>()))
        << item.key();
  }
}

// The fused kernels' sums run in a fixed order, so a checkpointed layer recomputes the same bits: the
// gradients equal those without checkpointing exactly.
TEST(FusedKernelsTest, CheckpointingAFusedModelGivesTheSameGradients) {
  LlamaModel plain = MakeModel(FusedKernels::kEverywhere, false);
  LlamaModel ckpt = MakeModel(FusedKernels::kEverywhere, true);
  CopyParameters(plain, ckpt);
  torch::manual_seed(28);
  const torch::Tensor ids = torch::randint(50, {2, 9}, torch::kLong);
  const torch::Tensor weights = torch::randn({2, 8});
  EXPECT_TRUE(torch::equal(RunModel(plain, ids, weights), RunModel(ckpt, ids, weights)));
  auto pp = plain->named_parameters();
  for (auto& item : ckpt->named_parameters())
    EXPECT_TRUE(torch::equal(item.value().grad(), pp[item.key()].grad())) << item.key();
}

// On cuda:0, the CUDA kernels under the same checks, with shapes that exercise their block strides: rows
// beyond the backward's 1024 blocks, a width that is not a multiple of the 256 threads, a Llama-7B width.
TEST(FusedKernelsGpuTest, GpuTheCudaKernelsMeetTheSameBounds) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU visible to a CUDA LibTorch";
  const torch::Device cuda(torch::kCUDA, 0);
  ASSERT_TRUE(FusedKernelsTake(FusedKernels::kCuda, torch::ones({1}, cuda), torch::ones({1}, cuda)))
      << "a CUDA LibTorch build without the CUDA kernels";
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{3, 5, 64}, {4, 300, 2112}, {2, 8, 4096}}) {
    CheckNormFp32(cuda, shape, 31);
    CheckNormBf16(cuda, shape, 34);
  }
  CheckGluFp32(cuda, {4, 300, 5504}, 37);
  CheckGluBf16(cuda, {4, 300, 5504}, 40);
  for (torch::Dtype dtype : {torch::kFloat32, torch::kBFloat16})
    for (bool per_row : {false, true}) CheckRopeIsThePlainGraph(cuda, dtype, per_row);
}

// Two backward passes on the same inputs give the same bits (fixed-order sums, no atomics).
TEST(FusedKernelsGpuTest, GpuTheNormIsDeterministic) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU visible to a CUDA LibTorch";
  const torch::Device cuda(torch::kCUDA, 0);
  const torch::Tensor x = Leaf({4, 300, 2112}, torch::kBFloat16, cuda, 43);
  const torch::Tensor w = Leaf({2112}, torch::kBFloat16, cuda, 44);
  const torch::Tensor dy = torch::randn({4, 300, 2112}).to(cuda, torch::kBFloat16);
  std::vector<torch::Tensor> dx, dw;
  for (int run = 0; run < 2; ++run) {
    x.mutable_grad() = torch::Tensor();
    w.mutable_grad() = torch::Tensor();
    FusedRmsNorm(x, w, kEps).backward(dy);
    dx.push_back(x.grad().clone());
    dw.push_back(w.grad().clone());
  }
  EXPECT_TRUE(torch::equal(dx[0], dx[1]));
  EXPECT_TRUE(torch::equal(dw[0], dw[1]));
}

}  // namespace
}  // namespace zerofit::worker
