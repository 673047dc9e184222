// SwiGLU's gating, silu(gate) * up, as one autograd node that keeps only gate and up.
//
// Plain autograd keeps gate (for silu's backward), silu(gate) and up (for the product's): three
// intermediate-wide tensors a token. This node keeps two and recomputes silu(gate) in backward, one
// element-wise pass. Its backward runs the operations plain autograd runs, in an order that never holds more
// than plain autograd's backward does (the incoming gradient and three intermediate-wide tensors), so the
// gradients are bitwise the plain graph's (tests/worker/torch/recomputed_call_test.cc checks both).
#pragma once

#include <torch/torch.h>

namespace zerofit::worker {

// gate and up: same shape and dtype. Without grad mode, or when neither requires grad, simply
// silu(gate) * up.
torch::Tensor SwiGlu(const torch::Tensor& gate, const torch::Tensor& up);

}  // namespace zerofit::worker
