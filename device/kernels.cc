#include "device/kernels.h"

#include <algorithm>
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

namespace {
// The one order of SumOfSquaresChunk, over any element type `load(i)` widens to float.
template <typename Load>
double LaneSumOfSquares(size_t n, Load load) {
  constexpr size_t kLanes = 8;
  double lane[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t k = 0; k < kLanes; ++k) {
      const double x = load(i + k);
      lane[k] += x * x;
    }
  }
  for (; i < n; ++i) {
    const double x = load(i);
    lane[i % kLanes] += x * x;
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}
}  // namespace

double SumOfSquaresChunk(const float* src, size_t n) {
  return LaneSumOfSquares(n, [src](size_t i) { return src[i]; });
}

double SumOfSquaresChunk(const void* src, core::DType dtype, size_t n) {
  switch (dtype) {
    case core::DType::kBFloat16: {
      const auto* h = static_cast<const uint16_t*>(src);
      return LaneSumOfSquares(n, [h](size_t i) { return core::Bf16ToFloat(h[i]); });
    }
    case core::DType::kFloat16: {
      const auto* h = static_cast<const uint16_t*>(src);
      return LaneSumOfSquares(n, [h](size_t i) { return core::Fp16ToFloat(h[i]); });
    }
    default:
      return SumOfSquaresChunk(static_cast<const float*>(src), n);
  }
}

void HostSumOfSquares(const float* src, size_t n, double* out) {
  HostSumOfSquares(src, core::DType::kFloat32, n, out);
}

void HostSumOfSquares(const void* src, core::DType dtype, size_t n, double* out) {
  const auto* bytes = static_cast<const char*>(src);
  const size_t size = core::DTypeSize(dtype);
  double sum = 0.0;
  for (size_t begin = 0; begin < n; begin += kSumOfSquaresChunk) {
    sum += SumOfSquaresChunk(bytes + begin * size, dtype, std::min(kSumOfSquaresChunk, n - begin));
  }
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

void HostAdamW8bit(const AdamW8bitArgs& a) {
  // The AVX-512 kernel where this CPU has it, bit for bit the scalar oracle.
  auto kernel = optim::AdamW8bitKernelFor(optim::DetectSimdLevel());
  (kernel.ok() ? *kernel : &optim::CpuAdamW8bit)(a.spans, a.maps, a.hyper, a.step, a.grad_scale);
}

}  // namespace zerofit::device
