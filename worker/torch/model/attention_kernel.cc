#include "worker/torch/model/attention_kernel.h"

#include <limits>

#include "absl/strings/str_cat.h"

// enable_gqa (K/V with fewer heads than Q, without copying them) is part of the C++ signature from 2.5 on.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
#define ZEROFIT_SDPA_HAS_GQA 1
#else
#define ZEROFIT_SDPA_HAS_GQA 0
#endif

namespace zerofit::worker {
namespace {

// Hugging Face's repeat_kv: [B, H_kv, T, D] -> [B, H_kv * n_rep, T, D], kv head g serving query heads
// g * n_rep ... g * n_rep + n_rep - 1.
torch::Tensor RepeatKv(const torch::Tensor& x, int64_t n_rep) {
  if (n_rep == 1) return x;
  const int64_t b = x.size(0), h_kv = x.size(1), t = x.size(2), d = x.size(3);
  return x.unsqueeze(2).expand({b, h_kv, n_rep, t, d}).reshape({b, h_kv * n_rep, t, d});
}

void CheckShapes(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                 const AttentionMask& mask) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.sizes() == k.sizes(),
              "attention: q must be [B, H, T, D] and k, v [B, H_kv, T, D], got ", q.sizes(), ", ", k.sizes(),
              ", ", v.sizes());
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "attention: kv heads (", k.size(1),
              ") must divide query heads (", q.size(1), ")");
  const int64_t t = q.size(2);
  TORCH_CHECK(mask.masked.dim() == 2 && mask.masked.size(0) == t && mask.masked.size(1) == t,
              "attention: mask must be [T, T] with T = ", t, ", got ", mask.masked.sizes());
}

}  // namespace

absl::StatusOr<AttentionKernel> ParseAttentionKernel(const std::string& name) {
  if (name == "auto") return AttentionKernel::kAuto;
  if (name == "manual") return AttentionKernel::kManual;
  if (name == "sdpa") return AttentionKernel::kSdpa;
  return absl::InvalidArgumentError(
      absl::StrCat("attention kernel '", name, "' is not one of auto, manual, sdpa"));
}

const char* AttentionKernelName(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::kAuto:
      return "auto";
    case AttentionKernel::kManual:
      return "manual";
    default:
      return "sdpa";
  }
}

absl::StatusOr<AttentionKernel> ResolveAttentionKernel(AttentionKernel requested) {
  if (requested == AttentionKernel::kManual) return requested;
  if (ZEROFIT_HAVE_SDPA) return AttentionKernel::kSdpa;
  if (requested == AttentionKernel::kAuto) return AttentionKernel::kManual;
  return absl::FailedPreconditionError(
      absl::StrCat("attention kernel 'sdpa' needs LibTorch 2.1 or later (scaled_dot_product_attention with a "
                   "scale); this build uses LibTorch ",
                   TORCH_VERSION, ": choose 'auto' or 'manual'"));
}

torch::Tensor ManualAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const AttentionMask& mask, double scale) {
  CheckShapes(q, k, v, mask);
  const int64_t n_rep = q.size(1) / k.size(1);
  const torch::Tensor keys = RepeatKv(k, n_rep), values = RepeatKv(v, n_rep);
  torch::Tensor scores = torch::matmul(q, keys.transpose(2, 3)) * scale;
  scores = scores.masked_fill(mask.masked, -std::numeric_limits<double>::infinity());
  torch::Tensor probs = torch::softmax(scores, -1, torch::kFloat32).to(q.scalar_type());
  return torch::matmul(probs, values);
}

torch::Tensor ManualAttentionMasked(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const torch::Tensor& masked, double scale) {
  TORCH_CHECK(
      q.dim() == 4 && k.dim() == 4 && v.sizes() == k.sizes() && k.size(1) > 0 && q.size(1) % k.size(1) == 0,
      "attention: q must be [B, H, Tq, D] and k, v [B, H_kv, Tk, D], got ", q.sizes(), ", ", k.sizes(), ", ",
      v.sizes());
  const int64_t n_rep = q.size(1) / k.size(1);
  const torch::Tensor keys = RepeatKv(k, n_rep), values = RepeatKv(v, n_rep);
  torch::Tensor scores = torch::matmul(q, keys.transpose(2, 3)) * scale;
  scores = scores.masked_fill(masked, -std::numeric_limits<double>::infinity());
  torch::Tensor probs = torch::softmax(scores, -1, torch::kFloat32).to(q.scalar_type());
  return torch::matmul(probs, values);
}

torch::Tensor GroupedDecodeAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const torch::Tensor& masked, double scale) {
  TORCH_CHECK(q.dim() == 4 && q.size(2) == 1 && k.dim() == 4 && v.sizes() == k.sizes() && k.size(1) > 0 &&
                  q.size(1) % k.size(1) == 0 && q.size(0) == k.size(0) && q.size(3) == k.size(3),
              "decode attention: q must be [B, H, 1, D] and k, v [B, H_kv, S, D], got ", q.sizes(), ", ",
              k.sizes(), ", ", v.sizes());
  const int64_t b = q.size(0), heads = q.size(1), kv_heads = k.size(1), d = q.size(3);
  const torch::Tensor grouped = q.reshape({b, kv_heads, heads / kv_heads, d});
  torch::Tensor scores = torch::matmul(grouped, k.transpose(2, 3)) * scale;  // [B, H_kv, H / H_kv, S]
  scores = scores.masked_fill(masked, -std::numeric_limits<double>::infinity());
  const torch::Tensor probs = torch::softmax(scores, -1, torch::kFloat32).to(q.scalar_type());
  return torch::matmul(probs, v).reshape({b, heads, 1, d});
}

#if ZEROFIT_HAVE_SDPA
namespace {

// The arguments SdpaAttention hands to SDPA, shared with SdpaBackendFor so that the reported backend is the
// one that runs.
struct SdpaArgs {
  torch::Tensor k, v;
  c10::optional<torch::Tensor> attn_mask;
  bool is_causal = false;
  bool enable_gqa = false;
};

SdpaArgs MakeSdpaArgs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                      const AttentionMask& mask) {
  CheckShapes(q, k, v, mask);
  const int64_t n_rep = q.size(1) / k.size(1);
  SdpaArgs a;
  // Causal only: SDPA's own causal masking, no attn_mask, so flash and cuDNN stay eligible. Rows are
  // right-padded and the model applies no padding mask on either path (llama_model.h): a padding position
  // attends causally to the real tokens before it and to earlier padding, so its output is finite and is
  // exactly what the manual kernel computes there. Callers never read it (Scores reads a real token;
  // TokenLogProbs' positions t <= length - 2 are real; ResponseLogProbs multiplies the others by 0, which
  // is why they must be finite). Left padding never reaches the model: positions are 0..T-1 on every row.
  a.is_causal = mask.causal_only;
  // Otherwise (Mistral's sliding window) a boolean attn_mask in SDPA's convention, true = may attend, the
  // complement of masked_fill's. It holds the causal part too: SDPA refuses is_causal with an attn_mask.
  if (!mask.causal_only) a.attn_mask = mask.masked.logical_not();
  // GQA without materialising repeated K/V where SDPA takes it (2.5+), and only on the causal path: as
  // 2.5/2.6's sdp_utils.cpp reads, the flash and math kernels accept enable_gqa but the memory-efficient
  // kernel, which a masked call needs, does not; expanded K/V keep it eligible. (Not yet observed on a GPU:
  // attention_kernel_test's Gpu cases print the backend each case gets.)
  a.enable_gqa = ZEROFIT_SDPA_HAS_GQA && n_rep > 1 && mask.causal_only;
  a.k = a.enable_gqa ? k : RepeatKv(k, n_rep);
  a.v = a.enable_gqa ? v : RepeatKv(v, n_rep);
  return a;
}

}  // namespace

torch::Tensor SdpaAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const AttentionMask& mask, double scale) {
  const SdpaArgs a = MakeSdpaArgs(q, k, v, mask);
#if ZEROFIT_SDPA_HAS_GQA
  return at::scaled_dot_product_attention(q, a.k, a.v, a.attn_mask, /*dropout_p=*/0.0, a.is_causal, scale,
                                          a.enable_gqa);
#else
  return at::scaled_dot_product_attention(q, a.k, a.v, a.attn_mask, /*dropout_p=*/0.0, a.is_causal, scale);
#endif
}

int64_t SdpaBackendFor(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const AttentionMask& mask, double scale) {
  const SdpaArgs a = MakeSdpaArgs(q, k, v, mask);
#if ZEROFIT_SDPA_HAS_GQA
  return at::_fused_sdp_choice(q, a.k, a.v, a.attn_mask, /*dropout_p=*/0.0, a.is_causal, scale, a.enable_gqa);
#else
  return at::_fused_sdp_choice(q, a.k, a.v, a.attn_mask, /*dropout_p=*/0.0, a.is_causal, scale);
#endif
}

const char* SdpaBackendName(int64_t backend) {
  switch (backend) {
    case 0:
      return "math";
    case 1:
      return "flash_attention";
    case 2:
      return "efficient_attention";
    case 3:
      return "cudnn_attention";
    case 4:
      return "overrideable";
    default:
      return "error";
  }
}
#endif  // ZEROFIT_HAVE_SDPA

torch::Tensor RunAttention(AttentionKernel kernel, const torch::Tensor& q, const torch::Tensor& k,
                           const torch::Tensor& v, const AttentionMask& mask, double scale) {
#if ZEROFIT_HAVE_SDPA
  if (kernel == AttentionKernel::kSdpa) return SdpaAttention(q, k, v, mask, scale);
#endif
  TORCH_CHECK(kernel == AttentionKernel::kManual, "attention kernel '", AttentionKernelName(kernel),
              "' is not available in this build (LibTorch ", TORCH_VERSION, ")");
  return ManualAttention(q, k, v, mask, scale);
}

}  // namespace zerofit::worker
