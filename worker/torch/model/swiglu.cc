#include "worker/torch/model/swiglu.h"

#include <torch/csrc/autograd/custom_function.h>

#include "worker/torch/model/fused_kernels.h"

namespace zerofit::worker {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class SwiGluFunction : public torch::autograd::Function<SwiGluFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& gate, const torch::Tensor& up,
                               bool fused) {
    ctx->save_for_backward({gate, up});
    ctx->saved_data["fused"] = fused;
    return fused ? FusedSwiGluProduct(gate, up) : torch::silu(gate) * up;
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
    if (ctx->saved_data["fused"].toBool()) {
      auto [d_gate, d_up] =
          FusedSwiGluGrads(grad, gate, up, ctx->needs_input_grad(0), ctx->needs_input_grad(1));
      return {d_gate, d_up, torch::Tensor()};
    }
    torch::Tensor d_gate, d_up;
    if (ctx->needs_input_grad(1)) d_up = torch::silu(gate).mul_(grad);
    if (ctx->needs_input_grad(0)) {
      d_gate = grad * up;
      at::silu_backward_out(d_gate, d_gate, gate);
    }
    return {d_gate, d_up, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor SwiGlu(const torch::Tensor& gate, const torch::Tensor& up, bool fused) {
  if (!torch::GradMode::is_enabled() || !(gate.requires_grad() || up.requires_grad()))
    return fused ? FusedSwiGluProduct(gate, up) : torch::silu(gate) * up;
  return SwiGluFunction::apply(gate, up, fused);
}

torch::Tensor SwiGluThenDown(const torch::Tensor& gate, const torch::Tensor& up,
                             const std::function<torch::Tensor(const torch::Tensor&)>& down, bool fused) {
  torch::Tensor product = SwiGlu(gate, up, fused);
  torch::Tensor out = down(product);
  if (!torch::GradMode::is_enabled() || !out.requires_grad()) return out;
  // The storage the saved copies of the product share (autograd saves a shallow copy of the tensor).
  const c10::Storage storage = product.storage();
  const size_t nbytes = storage.nbytes();
  TORCH_CHECK(product.is_contiguous() && product.storage_offset() == 0 &&
                  static_cast<size_t>(product.numel() * product.element_size()) == nbytes,
              "SwiGluThenDown: the product does not own its whole storage");
  storage.set_data_ptr(c10::DataPtr(nullptr, product.device()));  // the old bytes are released here
  out.register_hook([storage, nbytes, gate, up, fused](const torch::Tensor&) {
    torch::NoGradGuard no_grad;
    // One intermediate-wide tensor (the plain product in place), the same bits as the forward's.
    torch::Tensor again = fused ? FusedSwiGluProduct(gate, up) : torch::silu(gate).mul_(up);
    TORCH_CHECK(static_cast<size_t>(again.numel() * again.element_size()) == nbytes,
                "SwiGluThenDown: the recomputed product has another size");
    storage.set_data_ptr(again.storage().set_data_ptr(c10::DataPtr(nullptr, again.device())));
  });
  return out;
}

}  // namespace zerofit::worker
