// Activation checkpointing (gradient checkpointing, Chen et al. 2016) for one block of a network.
//
// CheckpointedCall(fn, input, params) returns fn(input), but computed under no-grad: the autograd graph
// holds a single node that saves only `input` and the RNG state at the call. In backward that node restores
// the RNG state (so dropout draws the same masks), re-runs fn(input) with grad enabled, backpropagates the
// incoming gradient through the recomputed graph and returns the gradients for `input` and for `params`.
//
// `params` are inputs of the node, so their gradients leave it along ordinary graph edges and land in each
// parameter's AccumulateGrad node exactly as without checkpointing: post-hooks on AccumulateGrad (zerofit's
// ZeRO-2 bucketing hooks, DDP's reducer) fire once per parameter, and the gradients are bitwise identical to
// the uncheckpointed ones because the recomputation executes the same operations in the same order.
//
// Contract on fn: its result may depend on tensors that require grad only through `input` and `params`
// (tensors it captures must not require grad: they would silently get no gradient), and it must be
// deterministic given the RNG state. Every parameter in `params` must require grad; the ones fn does not use
// get no gradient. Without grad mode, or when nothing requires grad, fn is simply called.
// RNG: the CPU generator is saved and restored, and the default generator of input's device when that is
// a CUDA device. fn is kept alive by the graph until backward (or until the graph is freed).
// Backward through the node does not build a graph of its own: double backward (create_graph) through a
// checkpointed block is not supported. A retained graph (retain_graph) recomputes fn on every backward.
// Throws c10::Error / std::exception like any autograd call; callers in worker/torch turn that into Status.
//
// RecomputedCall(fn, inputs, params) is the same node for a small deterministic piece of a layer (an RMSNorm,
// SwiGLU's silu(gate) * up): several inputs, and no RNG state taken or restored (fn must draw nothing). It
// keeps what backward needs smaller than autograd would: the inputs instead of the piece's intermediates
// (an RMSNorm keeps its bf16 input instead of an fp32 upcast and a normalised copy), at the cost of running
// the piece's element-wise forward a second time in backward. Gradients are bitwise those without it.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace zerofit::worker {

using CheckpointedFn = std::function<torch::Tensor(const torch::Tensor&)>;

torch::Tensor CheckpointedCall(CheckpointedFn fn, const torch::Tensor& input,
                               const std::vector<torch::Tensor>& params);

using RecomputedFn = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

// `params`: the tensors fn captures that require grad (each must); captured tensors that do not (rotary
// tables, masks) need not be listed.
torch::Tensor RecomputedCall(RecomputedFn fn, const std::vector<torch::Tensor>& inputs,
                             const std::vector<torch::Tensor>& params);

}  // namespace zerofit::worker
