// Low-rank adaptation (LoRA, Hu et al. 2021) as PEFT implements it, for the linear layers of the decoder.
//
// LoraLinear is a bias-optional Linear y = x W^T + b whose parameters keep Hugging Face's names ("weight",
// "bias"), plus, when rank > 0, two adapter matrices registered as "lora_A" [rank, in] and "lora_B"
// [out, rank]:
//   y = x W^T + b + (alpha / rank) * dropout(x) A^T B^T.
// A is initialised like PEFT (kaiming-uniform with a = sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in))) and B with
// zeros, so a fresh adapter leaves the output unchanged. Which parameters train is the owning model's
// decision (LlamaModel freezes everything but the adapters and the reward head when LoRA is on).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace zerofit::worker {

struct LoraConfig {
  int64_t rank = 0;  // 0: LoRA off
  double alpha = 16;
  double dropout = 0;  // on the adapter's input only, in training mode
  // Among q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj.
  std::vector<std::string> target_modules = {"q_proj", "k_proj", "v_proj", "o_proj"};

  bool enabled() const { return rank > 0; }
  double scaling() const { return rank > 0 ? alpha / static_cast<double>(rank) : 0.0; }
};

class LoraLinearImpl : public torch::nn::Module {
 public:
  // `init_std`: W ~ N(0, init_std) as Hugging Face's _init_weights (initializer_range); b = 0. `rank` = 0
  // builds a plain linear layer.
  LoraLinearImpl(int64_t in_features, int64_t out_features, bool bias, int64_t rank, double alpha,
                 double dropout, double init_std);

  torch::Tensor forward(const torch::Tensor& x);

  bool has_lora() const { return rank_ > 0; }
  double scaling() const { return scaling_; }
  // W + (alpha / rank) B A, computed in fp32 and returned in W's dtype (a new tensor, no autograd history);
  // W itself when there is no adapter.
  torch::Tensor MergedWeight() const;
  // Folds the adapter into W (W <- MergedWeight()) and zeroes B, so the output is unchanged and further
  // training continues from the merged base.
  void MergeInPlace();
  // With the adapter disabled the layer is its base, y = x W^T + b, as PEFT's disable_adapter() makes it
  // (the frozen base serves as the reference policy of a LoRA run: AdaptersOff in llama_model.h).
  void set_adapter_enabled(bool enabled) { adapter_enabled_ = enabled; }
  bool adapter_enabled() const { return adapter_enabled_; }

  torch::Tensor weight, bias, lora_A, lora_B;  // bias, lora_A, lora_B undefined when absent

 private:
  int64_t rank_;
  double scaling_;
  double dropout_;
  bool adapter_enabled_ = true;
};
TORCH_MODULE(LoraLinear);

}  // namespace zerofit::worker
