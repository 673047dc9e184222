// AdamW: optim/adamw_math.h's AdamWElement on the GPU, the same operations in the same order with
// IEEE-rounded intrinsics (__fmul_rn, __fmaf_rn, __fsqrt_rn, __fdiv_rn, __fadd_rn: nvcc may not contract or
// approximate them), so fp32 param, m and v are bit-identical to the CPU oracle given the same constants
// (computed on the host by MakeConstants). The optional 16-bit param_out is written in the same pass,
// rounded to nearest even as core::FloatToBf16 / FloatToFp16.
#include "device/cuda/cuda_dtype.cuh"
#include "device/cuda/cuda_kernels.h"

namespace zerofit::device::cuda {
namespace {

__global__ void AdamWKernel(float* param, const void* grad, int grad_type, float* m, float* v, size_t n,
                            void* param_out, int out_type, AdamWKernelConstants c) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = __fmul_rn(LoadAsFloatDev(grad, grad_type, i), c.grad_scale);
    const float decayed = __fmul_rn(param[i], c.decay);
    const float mi = __fmaf_rn(c.b1, m[i], __fmul_rn(c.one_minus_b1, g));
    const float vi = __fmaf_rn(c.b2, v[i], __fmul_rn(__fmul_rn(c.one_minus_b2, g), g));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.sqrt_bc2), c.eps);
    const float out = __fmaf_rn(c.neg_step_size, __fdiv_rn(mi, denom), decayed);
    m[i] = mi;
    v[i] = vi;
    param[i] = out;
    if (param_out != nullptr) StoreFromFloatDev(param_out, out_type, i, out);
  }
}

}  // namespace

cudaError_t LaunchAdamW(float* param, const void* grad, core::DType grad_type, float* m, float* v, size_t n,
                        void* param_out, core::DType out_type, const AdamWKernelConstants& c,
                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  AdamWKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(param, grad, static_cast<int>(grad_type), m, v,
                                                             n, param_out, static_cast<int>(out_type), c);
  return cudaGetLastError();
}

}  // namespace zerofit::device::cuda
