// Accumulate: acc[i] += scale * src[i], as device/kernels.h's HostAccumulate. The product and the sum are
// rounded separately (__fmul_rn, __fadd_rn: never contracted into an FMA), so the result is bit-identical to
// the host's; with scale == 1 the product is exact and this is acc[i] + src[i].
#include "device/cuda/cuda_dtype.cuh"
#include "device/cuda/cuda_kernels.h"

namespace zerofit::device::cuda {
namespace {

__global__ void AccumulateKernel(const void* src, int src_type, float* acc, size_t n, float scale) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    acc[i] = __fadd_rn(acc[i], __fmul_rn(scale, LoadAsFloatDev(src, src_type, i)));
  }
}

}  // namespace

cudaError_t LaunchAccumulate(const void* src, core::DType src_type, float* acc, size_t n, float scale,
                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  AccumulateKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(src, static_cast<int>(src_type), acc, n,
                                                                  scale);
  return cudaGetLastError();
}

}  // namespace zerofit::device::cuda
