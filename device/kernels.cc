#include "device/kernels.h"

#include <cstring>

#include "optim/cpu_adamw.h"

namespace zerofit::device {

void HostFill(void* dst, uint8_t value, size_t bytes) {
  if (bytes > 0) std::memset(dst, value, bytes);
}

void HostAccumulate(const void* src, core::DType src_type, float* acc, size_t n, float scale) {
  if (scale == 1.0f) return core::AccumulateToFloat(src, src_type, acc, n);
  for (size_t i = 0; i < n; ++i) acc[i] += scale * core::LoadAsFloat(src, src_type, i);
}

void HostSumOfSquares(const float* src, size_t n, double* out) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(src[i]) * src[i];
  *out = sum;
}

void HostConvert(const void* src, core::DType src_type, void* dst, core::DType dst_type, size_t n) {
  core::ConvertElements(src, src_type, dst, dst_type, n);
}

void HostAdamW(const AdamWArgs& a) {
  // Every SIMD kernel is bit-identical to the scalar oracle: the best one this CPU runs (CPUID, cheap).
  auto kernel = optim::KernelFor(optim::DetectSimdLevel());
  (kernel.ok() ? *kernel : &optim::CpuAdamWScalarKernel)(a.spans, a.hyper, a.step, a.grad_scale);
}

}  // namespace zerofit::device
