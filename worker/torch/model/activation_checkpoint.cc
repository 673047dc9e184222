#include "worker/torch/model/activation_checkpoint.h"

#include <ATen/core/Generator.h>
#include <torch/csrc/autograd/custom_function.h>

#include <mutex>
#include <utility>

namespace zerofit::worker {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What backward needs besides the saved inputs: the function and, for a checkpointed block, the RNG state at
// the original call. Held in the autograd context as a capsule (ctx->saved_data only takes IValues).
struct CheckpointState : torch::CustomClassHolder {
  RecomputedFn fn;
  std::vector<torch::Tensor> params;
  bool fork_rng = true;
  torch::Tensor cpu_rng;
  bool has_device_rng = false;
  c10::Device device = c10::Device(c10::kCPU);
  torch::Tensor device_rng;
};

torch::Tensor GetRngState(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void SetRngState(at::Generator gen, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// Puts the generators into the state saved at the original call and restores the current state on exit
// (also when the recomputation throws), like torch.random.fork_rng.
class ForkedRng {
 public:
  explicit ForkedRng(const CheckpointState& s)
      : cpu_(at::globalContext().defaultGenerator(c10::Device(c10::kCPU))) {
    cpu_stash_ = GetRngState(cpu_);
    SetRngState(cpu_, s.cpu_rng);
    if (s.has_device_rng) {
      device_ = at::globalContext().defaultGenerator(s.device);
      device_stash_ = GetRngState(device_);
      SetRngState(device_, s.device_rng);
    }
  }
  ~ForkedRng() {
    SetRngState(cpu_, cpu_stash_);
    if (device_stash_.defined()) SetRngState(device_, device_stash_);
  }
  ForkedRng(const ForkedRng&) = delete;
  ForkedRng& operator=(const ForkedRng&) = delete;

 private:
  at::Generator cpu_;
  torch::Tensor cpu_stash_;
  at::Generator device_;
  torch::Tensor device_stash_;
};

void SaveRngState(CheckpointState& state, const torch::Tensor& input) {
  state.cpu_rng = GetRngState(at::globalContext().defaultGenerator(c10::Device(c10::kCPU)));
  // CUDA is the one accelerator zerofit trains on; other devices have no default generator (meta, where
  // tests/worker/torch/device_clean_test.cc runs checkpointed layers, has none and draws nothing).
  if (input.device().is_cuda()) {
    state.has_device_rng = true;
    state.device = input.device();
    state.device_rng = GetRngState(at::globalContext().defaultGenerator(input.device()));
  }
}

// fn(inputs) under the RNG state of the original call (a checkpointed block) or as it is (a recomputed
// piece).
torch::Tensor Recompute(const CheckpointState& state, const std::vector<torch::Tensor>& inputs) {
  torch::AutoGradMode enable_grad(true);
  if (!state.fork_rng) return state.fn(inputs);
  ForkedRng rng(state);
  return state.fn(inputs);
}

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  // Autograd sees every tensor of `inputs` and of `params` as inputs of this node; `state` is not a tensor.
  static torch::Tensor forward(AutogradContext* ctx, torch::TensorList inputs, torch::TensorList params,
                               const c10::intrusive_ptr<CheckpointState>& state) {
    // Runs under no-grad (Function::apply sets it): no intermediate activation is kept.
    if (state->fork_rng) SaveRngState(*state, inputs[0]);
    ctx->save_for_backward(inputs.vec());
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    return state->fn(inputs.vec());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto state = c10::static_intrusive_pointer_cast<CheckpointState>(ctx->saved_data["state"].toCapsule());
    std::vector<torch::Tensor> inputs = ctx->get_saved_variables();
    const size_t n_in = inputs.size(), n = state->params.size();
    // Gradient slots: each input, each parameter, and an undefined one for the (non-tensor) state argument.
    variable_list grads(n_in + n + 1);

    std::vector<torch::Tensor> wrt;
    std::vector<size_t> slot;
    for (size_t i = 0; i < n_in; ++i) {
      inputs[i] = inputs[i].detach();
      if (!ctx->needs_input_grad(i)) continue;
      inputs[i].requires_grad_(true);
      wrt.push_back(inputs[i]);
      slot.push_back(i);
    }
    for (size_t i = 0; i < n; ++i) {
      if (!ctx->needs_input_grad(n_in + i)) continue;
      wrt.push_back(state->params[i]);
      slot.push_back(n_in + i);
    }
    if (wrt.empty()) return grads;

    const torch::Tensor y = Recompute(*state, inputs);
    if (!y.requires_grad()) return grads;  // fn did not use anything that needs a gradient
    variable_list computed = torch::autograd::grad({y}, wrt, {grad_outputs[0]}, /*retain_graph=*/false,
                                                   /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t k = 0; k < computed.size(); ++k) grads[slot[k]] = std::move(computed[k]);
    return grads;
  }
};

torch::Tensor Call(RecomputedFn fn, const std::vector<torch::Tensor>& inputs,
                   const std::vector<torch::Tensor>& params, bool fork_rng, const char* who) {
  bool any_requires_grad = false;
  for (const torch::Tensor& x : inputs) any_requires_grad = any_requires_grad || x.requires_grad();
  for (const torch::Tensor& p : params) {
    TORCH_CHECK(p.requires_grad(), who, ": every parameter passed must require grad");
    any_requires_grad = true;
  }
  if (!torch::GradMode::is_enabled() || !any_requires_grad) return fn(inputs);
  auto state = c10::make_intrusive<CheckpointState>();
  state->fn = std::move(fn);
  state->params = params;
  state->fork_rng = fork_rng;
  return CheckpointFunction::apply(torch::TensorList(inputs), torch::TensorList(state->params), state);
}

}  // namespace

torch::Tensor CheckpointedCall(CheckpointedFn fn, const torch::Tensor& input,
                               const std::vector<torch::Tensor>& params) {
  return Call([fn = std::move(fn)](const std::vector<torch::Tensor>& in) { return fn(in[0]); }, {input},
              params,
              /*fork_rng=*/true, "CheckpointedCall");
}

torch::Tensor RecomputedCall(RecomputedFn fn, const std::vector<torch::Tensor>& inputs,
                             const std::vector<torch::Tensor>& params) {
  TORCH_CHECK(!inputs.empty(), "RecomputedCall: no input");
  return Call(std::move(fn), inputs, params, /*fork_rng=*/false, "RecomputedCall");
}

}  // namespace zerofit::worker
