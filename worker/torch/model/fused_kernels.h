// The fused model kernels of kernels/ (RMSNorm, SwiGLU) on LibTorch tensors.
//
// A CUDA tensor runs the CUDA kernel on its device's current stream (so the launches are captured by a CUDA
// graph like any LibTorch op); a CPU tensor runs the host reference, which computes the same arithmetic. The
// model takes the fused path on CUDA tensors (FusedKernels::kCuda, the default); tests take it on the CPU too
// (kEverywhere), which checks these autograd nodes against the plain graphs where CI runs.
//
// What they replace, per token and layer: the plain RMSNorm's six to seven element-wise kernels forward and
// about ten backward (with their fp32 intermediates), and SwiGLU's two forward and three backward, each a
// pass over memory. Memory: an RMSNorm node keeps its input, its weight and one fp32 per row; a SwiGLU node
// keeps gate and up, as the lean pieces do (docs/planning.md, "Fused RMSNorm and SwiGLU on a GPU").
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

}  // namespace zerofit::worker
