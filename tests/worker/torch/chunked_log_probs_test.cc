// ChunkedTokenLogProbs against a float64 computation of the same inputs (values and gradients w.r.t. hidden,
// weight and bias, fp32 and bf16, chunk sizes that divide N, that do not, 1, and larger than N), LlamaModel's
// TokenLogProbs against its full-logits path through every parameter, and the memory of a backward measured
// with the tracking allocator: one chunk of logits at a time, never [N, V] fp32.
//
// Tolerances follow from the computation, for any summation order (issue 29), first order in the unit
// roundoff, with a factor 2 for the second-order terms:
//  - a logit is a dot product of H terms plus a bias: error <= ua (H + 1) S + uo |logit|, S = sum |h w| +
//  |b|,
//    ua the unit of the GEMM's accumulation and uo that of its output dtype;
//  - the fp32 logsumexp over V entries adds (V + 4) uf plus uf |lse| for the exp, the sum and the log, so a
//    value is off by at most Ev = 2 Elogit + uf (V + 4 + 3 |lse|) (target logit and logsumexp both move);
//  - softmax moves by p Ev per entry, so grad_logits by |g| p Ev; the backward casts grad_logits to the
//    parameter dtype (uo) and reduces K terms (V for hidden, N for the weight, ua (K + 1)), rounding its
//    output (uo): error <= Ev (|g| P) |X| + (3 uo + ua (K + 2)) |G| |X|, all products taken in float64
//    from the reference (P softmax, G the exact grad_logits, X the other operand).
// float32: uo = ua = 2^-24. bf16: uo = 2^-8 and ua = 2^-24: every bf16 GEMM in LibTorch accumulates in fp32
// (ATen's CPU gemm in float opmath, oneDNN, cuBLAS); the bf16 inputs are small dyadic numbers whose logits
// are exact in bf16 whatever the order, so Elogit = 0 there.
#include "worker/torch/model/chunked_log_probs.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>

#include "tests/support/float_bounds.h"
#include "tests/support/tiny_llama_config.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/train/tracking_allocator.h"

namespace zerofit::worker {
namespace {

constexpr int64_t kN = 12, kH = 24, kV = 37;

struct Units {
  double uo, ua;
  bool exact_logits;
};

Units UnitsFor(torch::Dtype d) {
  const double uf = std::ldexp(1.0, -24);
  if (d == torch::kFloat32) return {uf, uf, false};
  return {std::ldexp(1.0, -8), uf, true};
}

struct Inputs {
  torch::Tensor hidden, weight, bias, targets, g;  // g: the upstream gradient, [N] fp32
};

// fp32: Gaussian. bf16: hidden from {-2..2}/4 and weight, bias from {-2..2}/16, so every partial sum of a
// logit is a multiple of 1/64 of magnitude <= 24/16 + 1/8 = 104/64: at most 7 significant bits, exact in
// bf16 (8) and fp32 in any order.
Inputs MakeInputs(torch::Dtype d, bool with_bias, uint64_t seed) {
  torch::manual_seed(seed);
  Inputs in;
  if (d == torch::kFloat32) {
    in.hidden = torch::randn({kN, kH});
    in.weight = 0.3 * torch::randn({kV, kH});
    in.bias = with_bias ? 0.5 * torch::randn({kV}) : torch::Tensor();
  } else {
    in.hidden = torch::randint(-2, 3, {kN, kH}).to(torch::kFloat32) / 4;
    in.weight = torch::randint(-2, 3, {kV, kH}).to(torch::kFloat32) / 16;
    in.bias = with_bias ? torch::randint(-2, 3, {kV}).to(torch::kFloat32) / 16 : torch::Tensor();
  }
  in.hidden = in.hidden.to(d).requires_grad_(true);
  in.weight = in.weight.to(d).requires_grad_(true);
  if (with_bias) in.bias = in.bias.to(d).requires_grad_(true);
  in.targets = torch::randint(0, kV, {kN}, torch::kLong);
  in.g = torch::randn({kN});
  return in;
}

// The float64 reference and the magnitudes the bounds need.
struct Reference {
  torch::Tensor out, grad_hidden, grad_weight, grad_bias;
  torch::Tensor err_out, err_hidden, err_weight, err_bias;  // elementwise bounds
};

Reference Float64Reference(const Inputs& in, Units u) {
  const int64_t kN = in.hidden.size(0), kH = in.hidden.size(1), kV = in.weight.size(0);
  torch::Tensor h = in.hidden.detach().to(torch::kDouble), w = in.weight.detach().to(torch::kDouble);
  torch::Tensor b =
      in.bias.defined() ? in.bias.detach().to(torch::kDouble) : torch::zeros({kV}, torch::kDouble);
  torch::Tensor logits = torch::mm(h, w.t()) + b;
  torch::Tensor lse = torch::logsumexp(logits, {1});
  torch::Tensor p = torch::exp(logits - lse.unsqueeze(1));
  torch::Tensor g = in.g.to(torch::kDouble);
  torch::Tensor onehot = torch::zeros({kN, kV}, torch::kDouble).scatter_(1, in.targets.unsqueeze(1), 1.0);
  torch::Tensor grad_logits = g.unsqueeze(1) * (onehot - p);
  Reference r;
  r.out = logits.gather(1, in.targets.unsqueeze(1)).squeeze(1) - lse;
  r.grad_hidden = torch::mm(grad_logits, w);
  r.grad_weight = torch::mm(grad_logits.t(), h);
  r.grad_bias = grad_logits.sum(0);
  const double uf = std::ldexp(1.0, -24);
  torch::Tensor s = torch::mm(h.abs(), w.abs().t()) + b.abs();
  torch::Tensor e_logit = u.exact_logits ? torch::zeros_like(s) : u.ua * (kH + 1) * s + u.uo * logits.abs();
  torch::Tensor e_v = 2 * std::get<0>(e_logit.max(1)) + uf * (kV + 4 + 3 * lse.abs());  // [N]
  r.err_out = 2 * e_v;
  torch::Tensor gp = g.abs().unsqueeze(1) * p * e_v.unsqueeze(1);  // |g| p Ev, [N, V]
  torch::Tensor ga = grad_logits.abs();
  r.err_hidden = 2 * (torch::mm(gp, w.abs()) + (3 * u.uo + u.ua * (kV + 2)) * torch::mm(ga, w.abs()));
  r.err_weight = 2 * (torch::mm(gp.t(), h.abs()) + (3 * u.uo + u.ua * (kN + 2)) * torch::mm(ga.t(), h.abs()));
  r.err_bias = 2 * (gp.sum(0) + (3 * u.uo + uf * (kN + 2)) * ga.sum(0));
  return r;
}

void ExpectWithin(const torch::Tensor& got, const torch::Tensor& want, const torch::Tensor& bound,
                  const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  torch::Tensor err = (got.to(torch::kDouble) - want).abs();
  torch::Tensor excess = err - bound;
  const int64_t worst = excess.reshape({-1}).argmax().item<int64_t>();
  EXPECT_LE(excess.reshape({-1})[worst].item<double>(), 0.0)
      << what << ": element " << worst << " off by " << err.reshape({-1})[worst].item<double>() << ", bound "
      << bound.reshape({-1})[worst].item<double>();
}

using Fn = torch::Tensor (*)(const Inputs&, int64_t);

torch::Tensor Chunked(const Inputs& in, int64_t chunk) {
  return ChunkedTokenLogProbs(in.hidden, in.weight, in.bias, in.targets, chunk);
}
torch::Tensor Full(const Inputs& in, int64_t) {
  return FullLogitsTokenLogProbs(in.hidden, in.weight, in.bias, in.targets);
}

void CheckAgainstFloat64(torch::Dtype d, bool with_bias, int64_t chunk, Fn fn, const std::string& name) {
  Inputs in = MakeInputs(d, with_bias, 7 + chunk);
  const Reference ref = Float64Reference(in, UnitsFor(d));
  torch::Tensor out = fn(in, chunk);
  EXPECT_EQ(out.scalar_type(), torch::kFloat32);
  ExpectWithin(out.detach(), ref.out, ref.err_out, name + " values");
  (out * in.g).sum().backward();
  ExpectWithin(in.hidden.grad(), ref.grad_hidden, ref.err_hidden, name + " grad hidden");
  ExpectWithin(in.weight.grad(), ref.grad_weight, ref.err_weight, name + " grad weight");
  EXPECT_EQ(in.hidden.grad().scalar_type(), d);
  EXPECT_EQ(in.weight.grad().scalar_type(), d);
  if (with_bias) ExpectWithin(in.bias.grad(), ref.grad_bias, ref.err_bias, name + " grad bias");
}

class ChunkedLogProbsTest : public ::testing::TestWithParam<std::tuple<torch::Dtype, bool>> {};

TEST_P(ChunkedLogProbsTest, ValuesAndGradientsMatchFloat64ForEveryChunking) {
  const auto [dtype, bias] = GetParam();
  // 4 divides N = 12, 5 does not, 1 is one row per chunk, 100 > N is one chunk; 0 is the default.
  for (int64_t chunk : {4, 5, 1, 100, 0}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    CheckAgainstFloat64(dtype, bias, chunk, Chunked, "chunked");
  }
  // The oracle meets the same bound: the two paths compute the same quantity.
  CheckAgainstFloat64(dtype, bias, 3, Full, "full logits");
}

INSTANTIATE_TEST_SUITE_P(DtypesAndBias, ChunkedLogProbsTest,
                         ::testing::Combine(::testing::Values(torch::kFloat32, torch::kBFloat16),
                                            ::testing::Bool()));

TEST(ChunkedLogProbs, FrozenInputsGetNoGradient) {
  Inputs in = MakeInputs(torch::kFloat32, false, 3);
  in.weight.requires_grad_(false);  // a frozen head (LoRA) or a tied embedding under no training
  ChunkedTokenLogProbs(in.hidden, in.weight, in.bias, in.targets, 5).sum().backward();
  EXPECT_TRUE(in.hidden.grad().defined());
  EXPECT_FALSE(in.weight.grad().defined());
  // Under no-grad (the reference model) nothing is recorded at all.
  torch::NoGradGuard no_grad;
  Inputs ref = MakeInputs(torch::kFloat32, false, 4);
  EXPECT_FALSE(ChunkedTokenLogProbs(ref.hidden, ref.weight, ref.bias, ref.targets, 5).requires_grad());
}

// The top entry's log-probability (SFT's token accuracy): the full logits' largest log_softmax within the
// values' bound, without gradient, and exactly equal to the target's where the target is the full logits'
// argmax (by more than the rounding bound), for every chunking.
TEST(ChunkedLogProbs, TheTopEntryEqualsTheTargetExactlyWhereTheTargetIsTheArgmax) {
  for (int64_t chunk : {4, 5, 100}) {
    Inputs in = MakeInputs(torch::kFloat32, true, 11);
    torch::Tensor full;
    {
      torch::NoGradGuard no_grad;
      full = torch::log_softmax(torch::linear(in.hidden, in.weight, in.bias).to(torch::kFloat32), -1);
    }
    const torch::Tensor argmax = full.argmax(-1);
    torch::Tensor targets = in.targets.clone();
    for (int64_t i = 0; i < targets.size(0); i += 2) targets[i] = argmax[i];  // even rows: the argmax
    torch::Tensor top;
    torch::Tensor out = ChunkedTokenLogProbs(in.hidden, in.weight, in.bias, targets, chunk, &top);
    ASSERT_TRUE(top.defined());
    EXPECT_FALSE(top.requires_grad());
    EXPECT_TRUE(out.requires_grad());
    const Reference ref = Float64Reference(in, UnitsFor(torch::kFloat32));
    ExpectWithin(top, std::get<0>(full.to(torch::kDouble).max(-1)), ref.err_out, "top entry");
    // Rows whose two largest logits lie closer than the rounding bound could rank either first: skipped.
    const torch::Tensor two = std::get<0>(full.to(torch::kDouble).topk(2, -1));
    int64_t checked = 0;
    for (int64_t i = 0; i < targets.size(0); ++i) {
      if ((two[i][0] - two[i][1]).item<double>() <= 2 * ref.err_out[i].item<double>()) continue;
      const bool is_argmax = targets[i].item<int64_t>() == argmax[i].item<int64_t>();
      EXPECT_EQ(out[i].item<float>() == top[i].item<float>(), is_argmax) << "chunk " << chunk << " row " << i;
      ++checked;
    }
    EXPECT_GE(checked, targets.size(0) / 2) << "too few rows with a clear first entry to test anything";
    out.sum().backward();  // the second output changes nothing of the gradient's way
    EXPECT_TRUE(in.hidden.grad().defined());
  }
}

TEST(ChunkedLogProbs, DefaultChunkHoldsAQuarterGibOfFp32Logits) {
  EXPECT_EQ(DefaultLogProbChunkRows(128256), (int64_t{256} << 20) / (4 * 128256));
  EXPECT_EQ(DefaultLogProbChunkRows(int64_t{1} << 40), 1);
}

TEST(ChunkedLogProbs, RejectsMismatchedShapes) {
  Inputs in = MakeInputs(torch::kFloat32, false, 5);
  EXPECT_THROW(ChunkedTokenLogProbs(in.hidden, in.weight.t(), in.bias, in.targets, 4), c10::Error);
  EXPECT_THROW(ChunkedTokenLogProbs(in.hidden, in.weight, in.bias, in.targets.narrow(0, 0, 3), 4),
               c10::Error);
  EXPECT_THROW(ChunkedTokenLogProbs(in.hidden, in.weight, in.bias, in.targets, -1), c10::Error);
}

// Every parameter's gradient through the whole model, tied (qwen2) and untied (llama) heads, with a chunk
// that does not divide the 3 x 6 predicted rows. Values: both paths read the same hidden states (the same
// backbone ops), so they differ only by the head's bound (err_out of each, computed on those hidden states).
// Gradients: each path's float32 gradient is within the forward's path bound (Float32ForwardBound: the
// reductions on the longest path, which the backward walks again) of the exact one, once for the forward and
// once for the backward, relative to the tensor's largest gradient; so the paths differ by at most twice
// that. A missing or misrouted gradient (the tied weight's head part, say) is off by O(1).
void CheckModelAgainstFullLogits(const std::string& type) {
  const core::HfModelConfig config = test_support::TinyLlamaConfig(type);
  LlamaOptions options;
  options.log_prob_chunk_rows = 5;
  LlamaModel a(config, options), b(config, options);
  torch::manual_seed(11);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : a->parameters()) p.copy_(0.2 * torch::randn(p.sizes()));
    auto pa = a->named_parameters();
    for (auto& item : b->named_parameters()) item.value().copy_(pa[item.key()]);
  }
  torch::Tensor ids = torch::randint(config.vocab_size, {3, 7}, torch::kLong);
  torch::Tensor g = torch::randn({3, 6});
  torch::Tensor chunked = a->TokenLogProbs(ids), full = b->TokenLogProbsFullLogits(ids);
  Inputs in;
  in.hidden = a->Hidden(ids).slice(1, 0, 6).reshape({-1, config.hidden_size}).detach();
  in.weight = (a->lm_head ? a->lm_head->weight : a->model->embed_tokens->weight).detach();
  in.targets = ids.slice(1, 1).reshape({-1});
  in.g = g.reshape({-1});
  const Reference ref = Float64Reference(in, UnitsFor(torch::kFloat32));
  ExpectWithin(chunked.detach().reshape({-1}), full.detach().to(torch::kDouble).reshape({-1}),
               2 * ref.err_out, type + " values");
  (chunked * g).sum().backward();
  (full * g).sum().backward();
  auto pb = b->named_parameters();
  for (auto& item : a->named_parameters()) {
    const torch::Tensor ga = item.value().grad(), gb = pb[item.key()].grad();
    ASSERT_TRUE(ga.defined() && gb.defined()) << item.key();
    const double max_grad = gb.abs().max().item<double>();
    const double tol = 4 * test_support::Float32ForwardBound(config, 7, max_grad);
    EXPECT_LE((ga - gb).abs().max().item<double>(), tol) << type << " " << item.key();
  }
}

TEST(ChunkedLogProbs, LlamaTokenLogProbsMatchTheFullLogitsPathThroughEveryParameter) {
  CheckModelAgainstFullLogits("llama");  // untied lm_head
  CheckModelAgainstFullLogits("qwen2");  // tied: the embedding gets the head's gradient too
}

// bf16 model: values only. The head's bound holds on the bf16 hidden states both paths share; a float32
// bound on the backbone's gradients has no bf16 counterpart below 100% (the path has hundreds of
// reductions at 2^-8), so bf16 gradients are checked at the function level above.
TEST(ChunkedLogProbs, Bf16LlamaTokenLogProbsMatchTheFullLogitsPath) {
  const core::HfModelConfig config = test_support::TinyLlamaConfig("llama");
  LlamaOptions options;
  options.dtype = torch::kBFloat16;
  options.log_prob_chunk_rows = 4;
  LlamaModel model(config, options);
  torch::Tensor ids = torch::randint(config.vocab_size, {3, 7}, torch::kLong);
  torch::Tensor chunked = model->TokenLogProbs(ids), full = model->TokenLogProbsFullLogits(ids);
  Inputs in;
  in.hidden = model->Hidden(ids).slice(1, 0, 6).reshape({-1, config.hidden_size}).detach();
  in.weight = model->lm_head->weight.detach();
  in.targets = ids.slice(1, 1).reshape({-1});
  in.g = torch::ones({18});
  Units u = UnitsFor(torch::kBFloat16);
  u.exact_logits = false;  // real hidden states: the logits round to bf16
  const Reference ref = Float64Reference(in, u);
  ExpectWithin(chunked.detach().reshape({-1}), full.detach().to(torch::kDouble).reshape({-1}),
               2 * ref.err_out, "bf16 values");
}

// A tiny Llama (untied head, chunks of 5 rows) and [3, 7] random ids, both from `seed`.
std::pair<LlamaModel, torch::Tensor> TinyModelAndIds(uint64_t seed) {
  const core::HfModelConfig config = test_support::TinyLlamaConfig("llama");
  LlamaOptions options;
  options.log_prob_chunk_rows = 5;
  LlamaModel model(config, options);
  torch::manual_seed(seed);
  return {model, torch::randint(config.vocab_size, {3, 7}, torch::kLong)};
}

// The head's inputs at positions [from, T-1) of `ids` ([3, 7]) through `model`'s untied head: the hidden
// states divided by `temperature` as TokenLogProbs divides them, unit output gradients.
Inputs HeadInputsOf(LlamaModel& model, const torch::Tensor& ids, int64_t from, double temperature = 1.0) {
  Inputs in;
  torch::Tensor hidden = model->Hidden(ids).slice(1, from, 6);
  if (temperature != 1.0) hidden = hidden / temperature;
  in.hidden = hidden.reshape({-1, hidden.size(2)});
  in.weight = model->lm_head->weight.detach();
  in.targets = ids.slice(1, from + 1).reshape({-1});
  in.g = torch::ones({3 * (6 - from)});
  return in;
}

// TokenLogProbs(ids, from): the head over positions [from, T-1) only (DPO's prompts skipped) gives those
// columns of the whole sequence's log-probs, within the head's bound on the hidden states both share, for a
// window that starts at 0, inside a chunk and at the last position; a window outside [0, T-2] is refused.
TEST(ChunkedLogProbs, AWindowFromAPositionGivesThoseColumnsOfTheWholeSequence) {
  auto [model, ids] = TinyModelAndIds(12);
  torch::NoGradGuard no_grad;
  const torch::Tensor full = model->TokenLogProbsFullLogits(ids).to(torch::kDouble);
  for (int64_t from : {0, 2, 5}) {
    const torch::Tensor window = model->TokenLogProbs(ids, from);
    ASSERT_EQ(window.sizes(), (std::vector<int64_t>{3, 6 - from})) << "from " << from;
    const Reference ref = Float64Reference(HeadInputsOf(model, ids, from), UnitsFor(torch::kFloat32));
    ExpectWithin(window.reshape({-1}), full.slice(1, from).reshape({-1}), 2 * ref.err_out,
                 "from " + std::to_string(from));
  }
  EXPECT_THROW(model->TokenLogProbs(ids, 6), c10::Error);
  EXPECT_THROW(model->TokenLogProbs(ids, -1), c10::Error);
}

// TokenLogProbs(ids, from, nullptr, T): the log-probs of softmax(logits / T) (GRPO scores the distribution
// its rollouts sampled from, as TRL's trainer), against the float64 head on the hidden states divided by T
// as the model divides them; T = 1 is the plain path, bit for bit, and another T moves every value.
TEST(ChunkedLogProbs, ATemperatureScoresTheTemperedDistribution) {
  auto [model, ids] = TinyModelAndIds(13);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(model->TokenLogProbs(ids, 1, nullptr, 1.0), model->TokenLogProbs(ids, 1)));
  for (double t : {0.7, 2.0}) {
    const torch::Tensor tempered = model->TokenLogProbs(ids, 1, nullptr, t);
    const Reference ref = Float64Reference(HeadInputsOf(model, ids, 1, t), UnitsFor(torch::kFloat32));
    ExpectWithin(tempered.reshape({-1}), ref.out, 2 * ref.err_out, "T " + std::to_string(t));
    EXPECT_GT((tempered - model->TokenLogProbs(ids, 1)).abs().min().item<double>(), 0) << "T " << t;
  }
  EXPECT_THROW(model->TokenLogProbs(ids, 0, nullptr, 0.0), c10::Error);
}

// The backward's memory, counted by the tracking allocator (every CPU tensor byte LibTorch allocates): with a
// chunk of N/4 rows the growth over what the forward left must stay within the gradients it returns
// (hidden [N, H] and weight [V, H], fp32) plus ONE chunk of fp32 logits (recomputed, turned into its
// gradient in place; fp32 needs no casts) plus small [rows]/[V] vectors. That bound is below the [N, V] fp32
// logits the full path allocates, so any full-size buffer fails the test. The forward holds the chunk's
// logits and logsumexp's [rows, V] temporary: at most three chunks, again below [N, V].
TEST(ChunkedLogProbs, BackwardNeverHoldsTheFullFp32Logits) {
  constexpr int64_t n = 256, h = 16, v = 8192, rows = n / 4;
  TrackingAllocator allocator;
  ScopedTrackingAllocator scope(&allocator);
  torch::manual_seed(2);
  torch::Tensor hidden = torch::randn({n, h}).requires_grad_(true);
  torch::Tensor weight = torch::randn({v, h}).requires_grad_(true);
  torch::Tensor targets = torch::randint(0, v, {n}, torch::kLong);
  const int64_t full_bytes = 4 * n * v, chunk_bytes = 4 * rows * v, small = 64 << 10;
  allocator.ResetPeak();
  const int64_t before_forward = allocator.live_bytes();
  torch::Tensor loss = ChunkedTokenLogProbs(hidden, weight, torch::Tensor(), targets, rows).sum();
  const int64_t forward_peak = allocator.peak_bytes() - before_forward;
  allocator.ResetPeak();
  const int64_t before_backward = allocator.live_bytes();
  loss.backward();
  const int64_t backward_peak = allocator.peak_bytes() - before_backward;
  const int64_t backward_bound = 4 * (n * h + v * h) + chunk_bytes + small;
  ASSERT_LT(backward_bound, full_bytes);
  ASSERT_LT(3 * chunk_bytes + small, full_bytes);
  std::printf("forward peak %lld B, backward peak %lld B (bound %lld B); full fp32 logits %lld B\n",
              static_cast<long long>(forward_peak), static_cast<long long>(backward_peak),
              static_cast<long long>(backward_bound), static_cast<long long>(full_bytes));
  EXPECT_LE(backward_peak, backward_bound);
  EXPECT_LE(forward_peak, 3 * chunk_bytes + small);
  EXPECT_TRUE(weight.grad().defined());
}

}  // namespace
}  // namespace zerofit::worker
