// SwiGLU's gating, silu(gate) * up, as one autograd node that keeps only gate and up.
//
// Plain autograd keeps gate (for silu's backward), silu(gate) and up (for the product's): three
// intermediate-wide tensors a token. This node keeps two and recomputes silu(gate) in backward, one
// element-wise pass. Its backward runs the operations plain autograd runs, in an order that never holds more
// than plain autograd's backward does (the incoming gradient and three intermediate-wide tensors), so the
// gradients are bitwise the plain graph's (tests/worker/torch/recomputed_call_test.cc checks both).
#pragma once

#include <torch/torch.h>

#include <functional>

namespace zerofit::worker {

// gate and up: same shape and dtype. Without grad mode, or when neither requires grad, simply
// silu(gate) * up. `fused`: the product and its gradients in one pass each (fused_kernels.h; the caller
// checks FusedKernelsTake).
torch::Tensor SwiGlu(const torch::Tensor& gate, const torch::Tensor& up, bool fused = false);

// down(SwiGlu(gate, up)), where `down` is the MLP's down projection (a linear layer, whatever it saves for
// backward). Autograd would keep the product as down's input; here the product's bytes are released once down
// has run, and recomputed (silu(gate) * up, the same bits) by a hook on the output's gradient, which runs
// before any node of down's backward. So the MLP keeps gate and up only: one intermediate-wide tensor less a
// token and layer. `down` must use the product only as the input of nodes that belong to it (a linear, a
// LoRA linear): nothing else may read the product between the forward and that hook.
torch::Tensor SwiGluThenDown(const torch::Tensor& gate, const torch::Tensor& up,
                             const std::function<torch::Tensor(const torch::Tensor&)>& down,
                             bool fused = false);

}  // namespace zerofit::worker
