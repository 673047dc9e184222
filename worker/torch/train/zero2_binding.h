// Binds any torch::nn::Module to a ZeRO-2 optimizer: its parameters become views into the optimizer's flat
// parameter buffer, and autograd reports each finished gradient to the optimizer, which reduce-scatters a
// bucket as soon as it is complete while backward goes on.
//
// The gradient hook is a post-hook on each parameter's AccumulateGrad node (the mechanism of c10d's DDP
// Reducer): it fires after autograd has written the micro-batch's gradient, so
//  - kReduceScatterEveryMicroBatch: the hook copies param.grad into the bucket's staging buffer and drops it,
//    so no full gradient buffer ever exists;
//  - kReduceOncePerStep: param.grad is itself a view into the flat gradient buffer and autograd accumulates
//    into it in place across micro-batches; the hook only counts readiness on the last micro-batch.
//
// This is the torch adapter: the only place besides models that includes LibTorch. Exceptions from LibTorch
// are turned into absl::Status here.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "sharding/zero2_optimizer.h"

namespace zerofit::worker {

class Zero2Binding {
 public:
  // Returns true if the named parameter gets weight decay. The default decays everything, like a single
  // torch::optim::AdamW parameter group.
  using DecayPredicate = std::function<bool(const std::string& name, const torch::Tensor& param)>;

  // Every trainable parameter of `module` must be contiguous, of options.param_dtype, and on the device of
  // `devices.device` (the CPU for the host and test devices, cuda:<index> for CUDA). The module must
  // outlive the binding; the binding must outlive any use of the module's parameters (they live in the
  // optimizer's buffers). Parameters are broadcast from rank 0. Without devices.offload_updater, offload
  // (options.offload.enabled) uses offload::OffloadShardUpdater.
  //
  // On CUDA, LibTorch computes on the legacy default stream, which is the device's compute_stream(): the
  // gradient copies the hooks enqueue there follow the kernels that produced the gradients, and the
  // reduce-scatter waits for that stream with an event (no host synchronisation).
  static absl::StatusOr<std::unique_ptr<Zero2Binding>> Bind(torch::nn::Module& module,
                                                            const sharding::Zero2Options& options,
                                                            comm::Communicator* comm,
                                                            DecayPredicate decay = nullptr,
                                                            sharding::Zero2Devices devices = {});
  ~Zero2Binding();
  Zero2Binding(const Zero2Binding&) = delete;
  Zero2Binding& operator=(const Zero2Binding&) = delete;

  // One micro-batch: backward of `loss_sum` (the SUM of per-unit losses on this rank) times the loss scale,
  // with bucket reduce-scatters overlapping it. `units` is how many samples/tokens loss_sum adds up.
  absl::Status Backward(const torch::Tensor& loss_sum, bool last_of_step, double units);
  absl::StatusOr<sharding::StepResult> Step(float learning_rate, double min_units = 0.0) {
    return optimizer_->Step(learning_rate, min_units);
  }

  sharding::Zero2Optimizer& optimizer() { return *optimizer_; }
  const std::vector<std::string>& names() const { return names_; }

  // Called by the autograd post-hook of parameter i. Public for the hook object only.
  void OnAccumulated(size_t i);

 private:
  Zero2Binding() = default;
  void AttachGradViews();
  // Lets go of the gradients the engine has copied into their buckets (on the test device: into held_).
  void ReleaseCopiedGradients();
  // After the micro-batch (or a failed backward): lets go of every gradient.
  void DropGradients();

  std::unique_ptr<sharding::Zero2Optimizer> optimizer_;
  std::vector<torch::Tensor> params_;
  std::vector<std::string> names_;
  std::vector<torch::Tensor> grad_views_;  // kReduceOncePerStep only
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  std::mutex mu_;             // autograd may run hooks on device threads
  absl::Status hook_status_;  // first failure inside a hook during the current backward
  // The test device: the engine's compute stream copies a gradient into its bucket later, on a thread of its
  // own, while LibTorch's CPU allocator would reuse a freed tensor at once (a GPU's caching allocator orders
  // the free after the stream's work). Its gradients are held until the micro-batch's reduce-scatters, which
  // the copies precede, have run.
  bool hold_gradients_ = false;
  std::vector<torch::Tensor> held_;
  // kReduceScatterEveryMicroBatch: each parameter's gradient, from its hook until the engine has copied it.
  std::vector<torch::Tensor> offered_;
};

}  // namespace zerofit::worker
