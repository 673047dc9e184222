// LibTorch's own torch::optim::AdamW on one flat fp32 parameter, behind a header without LibTorch includes,
// so benchmarks can compare against it side by side while LibTorch stays inside worker/torch/.
#pragma once

#include <cstddef>
#include <memory>

#include "optim/cpu_adamw.h"

namespace zerofit::worker {

class TorchAdamWBaseline {
 public:
  // An n-element fp32 parameter with a fixed fp32 gradient; LibTorch intra-op threads set to `threads`.
  static std::unique_ptr<TorchAdamWBaseline> Create(size_t n, int threads, const optim::AdamWHyper& hyper);
  ~TorchAdamWBaseline();
  void Step();  // one torch::optim::AdamW::step()
  const float* param() const;

 private:
  struct Impl;
  explicit TorchAdamWBaseline(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zerofit::worker
