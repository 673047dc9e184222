#include "worker/torch/train/host_to_device.h"

namespace zerofit::worker {

torch::Tensor HostToDevice(const torch::Tensor& host, const torch::Device& device) {
  if (!host.defined() || device.is_cpu()) return host;
  const torch::Tensor staged = device.is_cuda() && !host.is_pinned() ? host.pin_memory() : host;
  return staged.to(torch::TensorOptions().device(device), /*non_blocking=*/true);
}

}  // namespace zerofit::worker
