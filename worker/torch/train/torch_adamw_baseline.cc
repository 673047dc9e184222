#include "worker/torch/train/torch_adamw_baseline.h"

#include <torch/torch.h>

namespace zerofit::worker {

struct TorchAdamWBaseline::Impl {
  int threads = 1;
  torch::Tensor param;
  std::unique_ptr<torch::optim::AdamW> opt;
};

TorchAdamWBaseline::TorchAdamWBaseline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TorchAdamWBaseline::~TorchAdamWBaseline() = default;

std::unique_ptr<TorchAdamWBaseline> TorchAdamWBaseline::Create(size_t n, int threads,
                                                               const optim::AdamWHyper& h) {
  torch::set_num_threads(threads);
  auto impl = std::make_unique<Impl>();
  impl->threads = threads;
  impl->param = torch::randn({static_cast<int64_t>(n)}).requires_grad_(true);
  impl->param.mutable_grad() = torch::randn({static_cast<int64_t>(n)}) * 1e-2;
  impl->opt = std::make_unique<torch::optim::AdamW>(
      std::vector<torch::Tensor>{impl->param},
      torch::optim::AdamWOptions(h.lr).betas({h.beta1, h.beta2}).eps(h.eps).weight_decay(h.weight_decay));
  return std::unique_ptr<TorchAdamWBaseline>(new TorchAdamWBaseline(std::move(impl)));
}

void TorchAdamWBaseline::Step() {
  // LibTorch's thread count is process-wide: set it for every step, other baselines may have changed it.
  torch::set_num_threads(impl_->threads);
  impl_->opt->step();
}

const float* TorchAdamWBaseline::param() const { return impl_->param.data_ptr<float>(); }

}  // namespace zerofit::worker
