// The fused model kernels of kernels/ (RMSNorm, SwiGLU, the rotary embedding) on LibTorch tensors.
//
// A CUDA tensor runs the CUDA kernel on its device's current stream (so the launches are captured by a CUDA
// graph like any LibTorch op); a CPU tensor runs the host reference, which computes the same arithmetic. The
// model takes the fused path on CUDA tensors (FusedKernels::kCuda, the default); tests take it on the CPU too
// (kEverywhere), which checks these autograd nodes against the plain graphs where CI runs.
//
// What they replace, per token and layer: the plain RMSNorm's six to seven element-wise kernels forward and
// about ten backward (with their fp32 intermediates), SwiGLU's two forward and three backward, and the
// rotary embedding's five for q and five for k each way; each a pass over memory. Memory: an RMSNorm node
// keeps its input, its weight and one fp32 per row; a SwiGLU node gate and up, as the lean pieces do; a
// rotary node the angle tables (docs/planning.md, "Fused RMSNorm, SwiGLU and rotary embedding on a GPU").
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace zerofit::worker {

enum class FusedKernels {
  kCuda,        // on CUDA tensors of a LibTorch built with CUDA; elsewhere the plain or lean pieces
  kOff,         // never: the plain or lean pieces everywhere
  kEverywhere,  // on CPU tensors too, through the host references (slow: tests)
};

absl::StatusOr<FusedKernels> ParseFusedKernels(const std::string& text, const std::string& field);
const char* FusedKernelsName(FusedKernels mode);

// Whether `mode` runs the fused kernels on a and b: both on one device the mode covers, of one dtype the
// kernels take (fp32, bf16, fp16).
bool FusedKernelsTake(FusedKernels mode, const torch::Tensor& a, const torch::Tensor& b);

// transformers' LlamaRMSNorm over x's last dimension (w: [x.size(-1)], x's dtype), as one autograd node that
// keeps x, w and the rows' fp32 reciprocal RMS; its backward is one pass (kernels/rms_norm.h).
torch::Tensor FusedRmsNorm(const torch::Tensor& x, const torch::Tensor& w, double eps);

// silu(gate) * up in one pass, outside autograd (gate and up: one shape, one dtype).
torch::Tensor FusedSwiGluProduct(const torch::Tensor& gate, const torch::Tensor& up);

// The gradients of silu(gate) * up given the product's gradient, in one pass: {d_gate, d_up}, each undefined
// where not wanted.
std::pair<torch::Tensor, torch::Tensor> FusedSwiGluGrads(const torch::Tensor& grad, const torch::Tensor& gate,
                                                         const torch::Tensor& up, bool want_gate,
                                                         bool want_up);

// Llama's rotary embedding, x * cos + rotate_half(x) * sin, of x [batch, seq, heads, head_dim] (contiguous:
// the projection's output viewed by heads, before they move forward) with cos and sin in x's dtype, either
// [seq, head_dim] (one table for every row) or [batch or 1, 1, seq, head_dim] (each row its own positions, as
// decoding builds them). The plain graph's values bit for bit (kernels/rope.h), as one autograd node that
// keeps only the angles. Returns [batch, seq, heads, head_dim].
torch::Tensor FusedRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace zerofit::worker
