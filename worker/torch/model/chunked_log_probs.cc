#include "worker/torch/model/chunked_log_probs.h"

#include <algorithm>

namespace zerofit::worker {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One chunk's logits in the parameter dtype (as linear() computes them), then upcast: the softmax and the
// log-probabilities are fp32 whatever the parameter dtype, as the full-logits path does.
torch::Tensor ChunkLogitsF32(const torch::Tensor& h, const torch::Tensor& weight, const torch::Tensor& bias) {
  torch::Tensor logits = bias.defined() ? torch::addmm(bias, h, weight.t()) : torch::mm(h, weight.t());
  return logits.to(torch::kFloat32);
}

// log(sum(exp(row))) of each row, shifted by the row's max as torch::logsumexp does, and that max. Written
// out because LibTorch 1.13's logsumexp calls abs(), which has no kernel for the meta device that
// device_clean_test runs the trainers on; the logits here are finite (a finite head of finite hidden
// states), so no row is -inf.
struct RowStats {
  torch::Tensor lse, max;  // [rows] fp32
};
RowStats RowLogSumExp(const torch::Tensor& logits) {
  const torch::Tensor max = logits.amax({1}, /*keepdim=*/true);
  torch::Tensor lse = (logits - max).exp_().sum({1}).log_().add_(max.squeeze(1));
  return RowStats{std::move(lse), max.squeeze(1)};
}

void CheckInputs(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                 const torch::Tensor& targets, int64_t chunk_rows) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
              "ChunkedTokenLogProbs: hidden must be [N, H] and weight [V, H], got ", hidden.sizes(), " and ",
              weight.sizes());
  TORCH_CHECK(hidden.is_floating_point() && hidden.scalar_type() == weight.scalar_type(),
              "ChunkedTokenLogProbs: hidden and weight must share one floating dtype, got ",
              hidden.scalar_type(), " and ", weight.scalar_type());
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0) &&
                                  bias.scalar_type() == weight.scalar_type()),
              "ChunkedTokenLogProbs: bias must be [V] in the weight's dtype");
  TORCH_CHECK(
      targets.dim() == 1 && targets.size(0) == hidden.size(0) && targets.scalar_type() == torch::kInt64,
      "ChunkedTokenLogProbs: targets must be [N] int64, got ", targets.sizes(), " ", targets.scalar_type());
  TORCH_CHECK(chunk_rows >= 0, "ChunkedTokenLogProbs: chunk_rows must be >= 0, got ", chunk_rows);
}

// Gradient buffers of the backward. The weight's (and bias's) gradient sums over every chunk: in fp32, then
// cast once to the parameter dtype, so a bf16 weight's gradient is not rounded once per chunk. An fp32
// weight accumulates straight into its own gradient tensor (no second [V, H] buffer), and so does any weight
// when all rows form one chunk: its one GEMM is the gradient, with no fp32 [V, H] accumulator (4 B x V x H,
// 2 GiB at 128k x 4096, which short sequences would otherwise pay for on top of their logits).
struct HeadGrads {
  torch::Tensor hidden, weight, bias;  // each undefined where its input needs no gradient
};

// acc += x, acc fp32 and x [V, H] in the parameter dtype, in slices of rows. On the CPU a mixed-dtype add_
// first converts its operand to fp32 (TensorIterator makes a copy; CUDA converts inside the kernel), so
// slices bound that temporary to kChunkLogitsBytes instead of a second fp32 [V, H].
void AddInSlices(torch::Tensor& acc, const torch::Tensor& x) {
  const int64_t rows = std::max<int64_t>(1, kChunkLogitsBytes / (4 * std::max<int64_t>(x.size(1), 1)));
  for (int64_t r = 0; r < x.size(0); r += rows) {
    const int64_t k = std::min(rows, x.size(0) - r);
    acc.narrow(0, r, k).add_(x.narrow(0, r, k));
  }
}

class ChunkedLogProbsFunction : public torch::autograd::Function<ChunkedLogProbsFunction> {
 public:
  // Autograd edges: 0 hidden, 1 weight, 2 bias when present (an optional: LibTorch 1.13 rejects an undefined
  // tensor as a Function input, and an absent optional takes no edge), then targets. Outputs: log p(target)
  // and, not differentiable, log p of each row's most likely entry (max - logsumexp, from the same fp32
  // logits, so the two are equal exactly when the target's logit is the row's largest).
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& hidden, const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias_opt, const torch::Tensor& targets,
                               int64_t chunk_rows) {
    const torch::Tensor bias = bias_opt.has_value() ? *bias_opt : torch::Tensor();
    const int64_t n = hidden.size(0);
    torch::Tensor out = torch::empty({n}, hidden.options().dtype(torch::kFloat32));
    torch::Tensor top = torch::empty({n}, hidden.options().dtype(torch::kFloat32));
    torch::Tensor lse = torch::empty({n}, hidden.options().dtype(torch::kFloat32));
    for (int64_t r = 0; r < n; r += chunk_rows) {
      const int64_t rows = std::min(chunk_rows, n - r);
      torch::Tensor logits = ChunkLogitsF32(hidden.narrow(0, r, rows), weight, bias);
      const RowStats stats = RowLogSumExp(logits);
      torch::Tensor target = logits.gather(1, targets.narrow(0, r, rows).unsqueeze(1)).squeeze(1);
      out.narrow(0, r, rows).copy_(target - stats.lse);
      top.narrow(0, r, rows).copy_(stats.max - stats.lse);
      lse.narrow(0, r, rows).copy_(stats.lse);
    }
    ctx->save_for_backward({hidden, weight, bias, targets, lse});
    ctx->saved_data["chunk_rows"] = chunk_rows;
    ctx->mark_non_differentiable({top});
    return {out, top};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &hidden = saved[0], &weight = saved[1], &bias = saved[2], &targets = saved[3];
    const torch::Tensor& lse = saved[4];
    const int64_t chunk_rows = ctx->saved_data["chunk_rows"].toInt();
    HeadGrads g;
    if (ctx->needs_input_grad(0)) g.hidden = torch::empty(hidden.sizes(), hidden.options());
    const int64_t n = hidden.size(0);
    const bool fp32 = weight.scalar_type() == torch::kFloat32, one_chunk = n <= chunk_rows;
    const torch::TensorOptions acc = weight.options().dtype(torch::kFloat32);
    const bool weight_grad = ctx->needs_input_grad(1);
    if (weight_grad && (fp32 || !one_chunk)) g.weight = torch::zeros(weight.sizes(), acc);
    if (bias.defined() && ctx->needs_input_grad(2)) g.bias = torch::zeros(bias.sizes(), acc);
    const torch::Tensor& go = grad_out[0];  // [N] fp32 (materialised: zeros if the output had no gradient);
                                            // grad_out[1], the top entry's, is not differentiable
    for (int64_t r = 0; r < n; r += chunk_rows) {
      const int64_t rows = std::min(chunk_rows, n - r);
      const torch::Tensor h = hidden.narrow(0, r, rows);
      const torch::Tensor gc = go.narrow(0, r, rows).unsqueeze(1);
      // d logp / d logits = onehot(target) - softmax; softmax from the saved logsumexp, in place in the
      // chunk's fp32 logits (the only [rows, V] fp32 buffer of the step).
      torch::Tensor grad_logits = ChunkLogitsF32(h, weight, bias);
      grad_logits.sub_(lse.narrow(0, r, rows).unsqueeze(1)).exp_().mul_(-gc);
      grad_logits.scatter_add_(1, targets.narrow(0, r, rows).unsqueeze(1), gc);
      if (g.bias.defined()) g.bias.add_(grad_logits.sum(0));
      // The matmuls run in the parameter dtype, as linear()'s backward does after the fp32 -> dtype cast.
      torch::Tensor gl = grad_logits.to(weight.scalar_type());
      if (g.hidden.defined()) {
        torch::Tensor out = g.hidden.narrow(0, r, rows);  // contiguous: a run of whole rows
        torch::mm_out(out, gl, weight);
      }
      if (weight_grad && fp32) g.weight.addmm_(gl.t(), h);
      if (weight_grad && !fp32 && one_chunk) g.weight = torch::mm(gl.t(), h);
      if (weight_grad && !fp32 && !one_chunk) {
        torch::Tensor product = torch::mm(gl.t(), h);  // the dtype's GEMM (fast), summed over chunks in fp32
        grad_logits.reset();  // the chunk's buffers go before the add's temporaries come
        gl.reset();
        AddInSlices(g.weight, product);
      }
    }
    if (weight_grad && !fp32 && !one_chunk) g.weight = g.weight.to(weight.scalar_type());
    if (g.bias.defined()) g.bias = g.bias.to(bias.scalar_type());
    return {g.hidden, g.weight, g.bias, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

// 256 MiB of fp32 logits per chunk. The backward holds about three chunk-sized buffers at once (the logits
// in the parameter dtype, the fp32 logits turned in place into their gradient, and its cast back), so the
// head's transient stays under 1 GiB whatever the batch; a full [N, V] fp32 tensor for 8 sequences of 4096
// tokens at a 128k vocabulary is 16 GiB. At 128k entries a chunk is 523 rows: a GEMM that tall still runs
// the tensor cores at full rate, so the recompute costs flops (one extra logits GEMM) and not efficiency.
// Small vocabularies get all rows in one chunk and pay no loop at all.
int64_t DefaultLogProbChunkRows(int64_t vocab) {
  return std::max<int64_t>(1, kChunkLogitsBytes / (4 * std::max<int64_t>(vocab, 1)));
}

torch::Tensor ChunkedTokenLogProbs(const torch::Tensor& hidden, const torch::Tensor& weight,
                                   const torch::Tensor& bias, const torch::Tensor& targets,
                                   int64_t chunk_rows, torch::Tensor* top_logp) {
  CheckInputs(hidden, weight, bias, targets, chunk_rows);
  const int64_t rows = chunk_rows > 0 ? chunk_rows : DefaultLogProbChunkRows(weight.size(0));
  const c10::optional<torch::Tensor> bias_opt =
      bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt;
  variable_list out =
      ChunkedLogProbsFunction::apply(hidden, weight, bias_opt, targets, std::max<int64_t>(rows, 1));
  if (top_logp != nullptr) *top_logp = out[1];
  return out[0];
}

torch::Tensor FullLogitsTokenLogProbs(const torch::Tensor& hidden, const torch::Tensor& weight,
                                      const torch::Tensor& bias, const torch::Tensor& targets) {
  torch::Tensor logits = torch::linear(hidden, weight, bias);
  torch::Tensor logp = torch::log_softmax(logits.to(torch::kFloat32), -1);
  return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1);
}

}  // namespace zerofit::worker
