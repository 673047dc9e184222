#include "worker/torch/model/swiglu.h"

#include <torch/csrc/autograd/custom_function.h>

namespace zerofit::worker {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class SwiGluFunction : public torch::autograd::Function<SwiGluFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& gate, const torch::Tensor& up) {
    ctx->save_for_backward({gate, up});
    return torch::silu(gate) * up;
  }

  // Plain autograd: the product's backward gives d silu = grad * up and d up = grad * silu(gate), silu's
  // backward at::silu_backward(d silu, gate). The same operations, two of them in place (silu(gate) becomes
  // d up, d silu becomes d gate: element-wise, so the same bits), so that at most the incoming gradient and
  // two new intermediate-wide tensors are alive, where plain autograd holds silu(gate) and three.
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& gate = saved[0];
    const torch::Tensor& up = saved[1];
    const torch::Tensor& grad = grad_outputs[0];
    torch::Tensor d_gate, d_up;
    if (ctx->needs_input_grad(1)) d_up = torch::silu(gate).mul_(grad);
    if (ctx->needs_input_grad(0)) {
      d_gate = grad * up;
      at::silu_backward_out(d_gate, d_gate, gate);
    }
    return {d_gate, d_up};
  }
};

}  // namespace

torch::Tensor SwiGlu(const torch::Tensor& gate, const torch::Tensor& up) {
  if (!torch::GradMode::is_enabled() || !(gate.requires_grad() || up.requires_grad()))
    return torch::silu(gate) * up;
  return SwiGluFunction::apply(gate, up);
}

}  // namespace zerofit::worker
