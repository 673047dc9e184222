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
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace zerofit::worker {

using CheckpointedFn = std::function<torch::Tensor(const torch::Tensor&)>;

torch::Tensor CheckpointedCall(CheckpointedFn fn, const torch::Tensor& input,
                               const std::vector<torch::Tensor>& params);

}  // namespace zerofit::worker
