// Token log-probabilities of a linear LM head without materialising the [N, vocab] fp32 logits, in forward
// or backward (the idea of Liger-Kernel's fused linear cross-entropy, here as a LibTorch autograd Function).
//
// log p(target_n) = (h_n W^T + b)[target_n] - logsumexp_v (h_n W^T + b)[v], logits in the parameter dtype
// upcast to fp32 before the softmax, exactly as the full-logits path
// (log_softmax(linear(h, W, b).to(float32)).gather(target)) computes them.
//
// Memory: forward keeps only its inputs (hidden, weight, bias, targets: no copies) and the per-row
// logsumexp (fp32 [N]); backward recomputes one chunk of rows at a time. Peak transient memory is a few
// [chunk_rows, V] buffers and the gradients themselves, plus, for a non-fp32 weight that requires grad and
// rows spanning several chunks, an fp32 [V, H] accumulator of the weight gradient and one [V, H] product per
// chunk in the parameter dtype (see chunked_log_probs.cc). Costs one extra logits GEMM (the recompute).
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace zerofit::worker {

// Default row chunk for a vocabulary of `vocab` entries: the largest row count whose fp32 logits fit in
// kChunkLogitsBytes, at least 1.
int64_t DefaultLogProbChunkRows(int64_t vocab);

// The fp32 bytes one chunk's logits may take (256 MiB; the reason is in chunked_log_probs.cc).
inline constexpr int64_t kChunkLogitsBytes = int64_t{256} << 20;

// hidden [N, H] and weight [V, H] in the same floating dtype and device; bias undefined or [V] in that
// dtype; targets [N] int64 in [0, V). Returns [N] fp32 log p(targets). chunk_rows > 0, or 0 for
// DefaultLogProbChunkRows(V). Differentiable w.r.t. hidden, weight and bias (each only when it requires
// grad); the weight's gradient reaches it through autograd's ordinary AccumulateGrad, so gradient hooks on
// it fire as for any other parameter. Throws c10::Error on bad shapes or dtypes. `top_logp` (optional)
// receives [N] fp32 log p of each row's most likely entry, without gradient: the result equals it exactly
// where the target is that entry (SFT's token accuracy, TRL's mean_token_accuracy).
torch::Tensor ChunkedTokenLogProbs(const torch::Tensor& hidden, const torch::Tensor& weight,
                                   const torch::Tensor& bias, const torch::Tensor& targets,
                                   int64_t chunk_rows = 0, torch::Tensor* top_logp = nullptr);

// The oracle: the same quantity through the full [N, V] logits (what LlamaModel computed before chunking).
torch::Tensor FullLogitsTokenLogProbs(const torch::Tensor& hidden, const torch::Tensor& weight,
                                      const torch::Tensor& bias, const torch::Tensor& targets);

}  // namespace zerofit::worker
