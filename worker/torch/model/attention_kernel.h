// The attention kernel of LlamaAttention: softmax(q k^T * scale + mask) v over [batch, heads, T, head_dim],
// either written out in tensor ops (ManualAttention, Hugging Face's eager attention) or through LibTorch's
// fused scaled-dot-product attention (SdpaAttention: flash, memory-efficient or cuDNN kernels on a GPU, which
// never materialise the [B, heads, T, T] scores).
//
// LibTorch versions: at::scaled_dot_product_attention is public from 2.0 on, its `scale` argument from 2.1,
// `enable_gqa` from 2.5. Debian 12's LibTorch 1.13 (this project's CPU CI) has only a private
// _scaled_dot_product_attention with another signature: there ZEROFIT_HAVE_SDPA is 0, SdpaAttention does not
// exist and only the manual kernel runs. zerofit uses SDPA from 2.1 on, where the scale can be passed.
#pragma once

#include <torch/torch.h>
#include <torch/version.h>

#include <string>

#include "absl/status/statusor.h"

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define ZEROFIT_HAVE_SDPA 1
#else
#define ZEROFIT_HAVE_SDPA 0
#endif

namespace zerofit::worker {

// Which kernel runs; kAuto is SDPA where this LibTorch has it (ZEROFIT_HAVE_SDPA), else manual.
enum class AttentionKernel { kAuto, kManual, kSdpa };

// "auto", "manual", "sdpa"; InvalidArgument naming the choices otherwise.
absl::StatusOr<AttentionKernel> ParseAttentionKernel(const std::string& name);
const char* AttentionKernelName(AttentionKernel kernel);
// kAuto resolved for this build. FailedPrecondition for kSdpa on a LibTorch without SDPA (the message names
// this build's version and the alternatives).
absl::StatusOr<AttentionKernel> ResolveAttentionKernel(AttentionKernel requested);

// The keys each query may attend to, for a sequence of T positions (the same for every row of a batch).
struct AttentionMask {
  // [T, T] bool, true where query i may NOT attend to key j (masked_fill's convention). Always causal
  // (true above the diagonal), never masks the diagonal, so every query attends to at least itself.
  torch::Tensor masked;
  // `masked` is exactly the causal mask (no sliding window shorter than T): a kernel may apply its own
  // causal masking instead of reading `masked`.
  bool causal_only = true;
};

// q [B, H, T, D]; k, v [B, H_kv, T, D] with H a multiple of H_kv: kv head g serves query heads
// [g * H / H_kv, (g + 1) * H / H_kv) (grouped-query attention, Hugging Face's repeat_kv). All in one dtype.
// Returns [B, H, T, D] in that dtype. Scores q k^T * scale in the input dtype, softmax in fp32 cast back:
// what Hugging Face's eager attention computes, bit for bit the kernel LlamaAttention always had.
torch::Tensor ManualAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const AttentionMask& mask, double scale);

// The manual kernel with a per-row mask, for incremental decoding over a KV cache (llama_decode.cc): q
// [B, H, Tq, D]; k, v [B, H_kv, Tk, D]; `masked` bool, broadcastable to [B, H, Tq, Tk], true where a query
// may NOT attend to a key; every query must keep at least one key. The same operations as ManualAttention.
torch::Tensor ManualAttentionMasked(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const torch::Tensor& masked, double scale);

// One query per row over every slot of a KV cache (the fixed-shape decode step, static_decode.h): q
// [B, H, 1, D]; k, v [B, H_kv, S, D]; `masked` bool [B, 1, 1, S], true where the row may NOT attend to a
// slot (at least one slot kept per row). The query heads of each kv head are grouped into the matmuls' rows
// ([B, H_kv, H / H_kv, D] against [B, H_kv, D, S]), so the repeated K/V of ManualAttentionMasked are never
// materialised: the same dot products and the same fp32 softmax, in other matmul batches. Returns
// [B, H, 1, D] in q's dtype.
torch::Tensor GroupedDecodeAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const torch::Tensor& masked, double scale);

#if ZEROFIT_HAVE_SDPA
// The same contract through at::scaled_dot_product_attention. Causal-only masks go in as is_causal without
// an attn_mask, which keeps the flash and cuDNN kernels eligible; a sliding window goes in as a boolean
// attn_mask in SDPA's convention (true = may attend), which leaves the memory-efficient or math kernel.
torch::Tensor SdpaAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const AttentionMask& mask, double scale);

// The backend SdpaAttention would run for these inputs (at::_fused_sdp_choice, which SDPA itself consults),
// as 2.6's ATen/SDPBackend.h numbers them: error -1, math 0, flash 1, efficient 2, cudnn 3, overrideable 4
// (older releases number the backends they have the same way); and its name.
int64_t SdpaBackendFor(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const AttentionMask& mask, double scale);
const char* SdpaBackendName(int64_t backend);
#endif

// Runs `kernel` (already resolved: kManual or kSdpa).
torch::Tensor RunAttention(AttentionKernel kernel, const torch::Tensor& q, const torch::Tensor& k,
                           const torch::Tensor& v, const AttentionMask& mask, double scale);

}  // namespace zerofit::worker
