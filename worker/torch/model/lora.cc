#include "worker/torch/model/lora.h"

#include <cmath>

namespace zerofit::worker {

LoraLinearImpl::LoraLinearImpl(int64_t in_features, int64_t out_features, bool bias, int64_t rank,
                               double alpha, double dropout, double init_std)
    : rank_(rank), scaling_(rank > 0 ? alpha / static_cast<double>(rank) : 0.0), dropout_(dropout) {
  TORCH_CHECK(in_features > 0 && out_features > 0, "LoraLinear: features must be positive");
  TORCH_CHECK(rank >= 0, "LoraLinear: rank must be >= 0, got ", rank);
  TORCH_CHECK(dropout >= 0 && dropout < 1, "LoraLinear: dropout must be in [0, 1), got ", dropout);
  torch::NoGradGuard no_grad;
  weight = register_parameter("weight", torch::empty({out_features, in_features}).normal_(0, init_std));
  if (bias) this->bias = register_parameter("bias", torch::zeros({out_features}));
  if (rank > 0) {
    lora_A = register_parameter("lora_A", torch::empty({rank, in_features}));
    torch::nn::init::kaiming_uniform_(lora_A, std::sqrt(5.0));
    lora_B = register_parameter("lora_B", torch::zeros({out_features, rank}));
  }
}

torch::Tensor LoraLinearImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = torch::linear(x, weight, bias);
  if (rank_ == 0 || !adapter_enabled_) return y;
  // PEFT's order of operations: result + lora_B(lora_A(dropout(x))) * scaling.
  torch::Tensor d = dropout_ > 0 ? torch::dropout(x, dropout_, is_training()) : x;
  return y + torch::linear(torch::linear(d, lora_A), lora_B) * scaling_;
}

torch::Tensor LoraLinearImpl::MergedWeight() const {
  torch::NoGradGuard no_grad;
  if (rank_ == 0) return weight.detach().clone();
  torch::Tensor delta = torch::mm(lora_B.detach().to(torch::kFloat32), lora_A.detach().to(torch::kFloat32));
  return (weight.detach().to(torch::kFloat32) + delta * scaling_).to(weight.scalar_type());
}

void LoraLinearImpl::MergeInPlace() {
  if (rank_ == 0) return;
  torch::Tensor merged = MergedWeight();
  torch::NoGradGuard no_grad;
  weight.copy_(merged);
  lora_B.zero_();
}

}  // namespace zerofit::worker
