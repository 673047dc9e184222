// Convert: dst[i] = src[i] between fp32, bf16, fp16 (and fp64), as core::ConvertElements: through float,
// rounding to nearest even with core/dtype.h's own integer arithmetic (cuda_dtype.cuh), so every bit matches.
#include "device/cuda/cuda_dtype.cuh"
#include "device/cuda/cuda_kernels.h"

namespace zerofit::device::cuda {
namespace {

__global__ void ConvertKernel(const void* src, int src_type, void* dst, int dst_type, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    StoreFromFloatDev(dst, dst_type, i, LoadAsFloatDev(src, src_type, i));
  }
}

}  // namespace

cudaError_t LaunchConvert(const void* src, core::DType src_type, void* dst, core::DType dst_type, size_t n,
                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ConvertKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(src, static_cast<int>(src_type), dst,
                                                               static_cast<int>(dst_type), n);
  return cudaGetLastError();
}

}  // namespace zerofit::device::cuda
