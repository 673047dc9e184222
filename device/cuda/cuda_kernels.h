// Host-side launchers of the CUDA device's kernels (the .cu files beside this header). Each has a host
// reference in device/kernels.h and must match it: bit-identical for Accumulate, Convert and AdamW (same
// operations in the same order, IEEE-rounded intrinsics, no contraction), and to 1e-10 relative for
// SumOfSquares (a fixed-shape tree instead of index order; deterministic for a given n on any GPU).
// Each launcher enqueues on `stream` (of the current device: callers cudaSetDevice first) and returns the
// launch's error (cudaGetLastError), not the kernel's: faults surface later on the stream. Counts are
// ELEMENTS.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/dtype.h"

namespace zerofit::device::cuda {

// Partial sums SumOfSquares needs: `scratch` must hold this many doubles of device memory, used only by
// work on `stream` (one scratch per stream is enough: a stream runs its work in order).
constexpr int kSumOfSquaresMaxBlocks = 1024;

// The scalars of one AdamW step, computed on the host exactly as optim/adamw_math.h's MakeConstants does.
struct AdamWKernelConstants {
  float decay, b1, b2, one_minus_b1, one_minus_b2, sqrt_bc2, neg_step_size, eps, grad_scale;
};

// acc[i] += scale * src[i] (src fp32, bf16, fp16 or fp64).
cudaError_t LaunchAccumulate(const void* src, core::DType src_type, float* acc, size_t n, float scale,
                             cudaStream_t stream);
// *out = sum of double(src[i])^2, src fp32, bf16 or fp16 (widened exactly).
cudaError_t LaunchSumOfSquares(const void* src, core::DType src_type, size_t n, double* out, double* scratch,
                               cudaStream_t stream);
// dst[i] = convert(src[i]) between different types (same-type copies are the caller's cudaMemcpyAsync).
cudaError_t LaunchConvert(const void* src, core::DType src_type, void* dst, core::DType dst_type, size_t n,
                          cudaStream_t stream);
// optim/adamw_math.h's AdamWElement on n elements; param_out (may be null) gets the new param as out_type.
cudaError_t LaunchAdamW(float* param, const void* grad, core::DType grad_type, float* m, float* v, size_t n,
                        void* param_out, core::DType out_type, const AdamWKernelConstants& c,
                        cudaStream_t stream);
// optim/adamw_8bit.h's CpuAdamW8bit (8-bit blockwise moments) on n elements from a block boundary: one
// thread block of 256 threads per quantisation block; the same AdamWElement arithmetic and, in
// quantisation, the same nearest-code search over fp32 midpoints, so codes, scales and parameters are
// bit-identical to the host reference.
struct AdamW8bitState {
  unsigned char* m;  // codes of the signed map
  unsigned char* v;  // codes of the unsigned map
  float* m_absmax;
  float* v_absmax;
  const float* m_map;  // 256 codes each, device memory
  const float* v_map;
};
cudaError_t LaunchAdamW8bit(float* param, const void* grad, core::DType grad_type,
                            const AdamW8bitState& state, size_t n, void* param_out, core::DType out_type,
                            const AdamWKernelConstants& c, cudaStream_t stream);

}  // namespace zerofit::device::cuda
