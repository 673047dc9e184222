#include "worker/torch/model/activation_checkpoint.h"

#include <ATen/core/Generator.h>
#include <torch/csrc/autograd/custom_function.h>

#include <mutex>
#include <utility>

namespace zerofit::worker {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What backward needs besides the saved input: the function and the RNG state at the original call. Held in
// the autograd context as a capsule (ctx->saved_data only takes IValues).
struct CheckpointState : torch::CustomClassHolder {
  CheckpointedFn fn;
  std::vector<torch::Tensor> params;
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

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  // Autograd sees `input` and every tensor of `params` as inputs of this node; `state` is not a tensor.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input, torch::TensorList params,
                               const c10::intrusive_ptr<CheckpointState>& state) {
    // Runs under no-grad (Function::apply sets it): no intermediate activation is kept.
    state->cpu_rng = GetRngState(at::globalContext().defaultGenerator(c10::Device(c10::kCPU)));
    // CUDA is the one accelerator zerofit trains on; other devices have no default generator (meta, where
    // tests/worker/torch/device_clean_test.cc runs checkpointed layers, has none and draws nothing).
    if (input.device().is_cuda()) {
      state->has_device_rng = true;
      state->device = input.device();
      state->device_rng = GetRngState(at::globalContext().defaultGenerator(input.device()));
    }
    ctx->save_for_backward({input});
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    return state->fn(input);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto state = c10::static_intrusive_pointer_cast<CheckpointState>(ctx->saved_data["state"].toCapsule());
    const torch::Tensor saved_input = ctx->get_saved_variables()[0];
    const size_t n = state->params.size();
    // Gradient slots: input, each parameter, and an undefined one for the (non-tensor) state argument.
    variable_list grads(n + 2);

    std::vector<torch::Tensor> wrt;
    std::vector<size_t> slot;
    torch::Tensor x = saved_input.detach();
    if (ctx->needs_input_grad(0)) {
      x.requires_grad_(true);
      wrt.push_back(x);
      slot.push_back(0);
    }
    for (size_t i = 0; i < n; ++i) {
      if (!ctx->needs_input_grad(i + 1)) continue;
      wrt.push_back(state->params[i]);
      slot.push_back(i + 1);
    }
    if (wrt.empty()) return grads;

    torch::Tensor y;
    {
      ForkedRng rng(*state);
      torch::AutoGradMode enable_grad(true);
      y = state->fn(x);
    }
    if (!y.requires_grad()) return grads;  // fn did not use anything that needs a gradient
    variable_list computed = torch::autograd::grad({y}, wrt, {grad_outputs[0]}, /*retain_graph=*/false,
                                                   /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t k = 0; k < computed.size(); ++k) grads[slot[k]] = std::move(computed[k]);
    return grads;
  }
};

}  // namespace

torch::Tensor CheckpointedCall(CheckpointedFn fn, const torch::Tensor& input,
                               const std::vector<torch::Tensor>& params) {
  bool any_requires_grad = input.requires_grad();
  for (const torch::Tensor& p : params) {
    TORCH_CHECK(p.requires_grad(), "CheckpointedCall: every parameter passed must require grad");
    any_requires_grad = true;
  }
  if (!torch::GradMode::is_enabled() || !any_requires_grad) return fn(input);
  auto state = c10::make_intrusive<CheckpointState>();
  state->fn = std::move(fn);
  state->params = params;
  return CheckpointFunction::apply(input, torch::TensorList(state->params), state);
}

}  // namespace zerofit::worker
