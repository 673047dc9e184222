// Host-side launchers of the fused model kernels (rms_norm.cu, swiglu.cu, rope.cu beside this header). Each
// runs the arithmetic of its host reference (kernels/rms_norm.h, swiglu.h, rope.h): element-wise results
// equal the reference's up to the device's exponential and reciprocal square root (a few fp32 ulps before the
// final rounding; the rotary embedding has neither: bit for bit), sums are fixed-shape trees (the same order
// on every run and every GPU for a given shape, another order than the reference's). Each enqueues on
// `stream` of the current device and returns the launch's error (cudaGetLastError). Types: fp32, bf16 and
// fp16.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/dtype.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"

namespace zerofit::kernels::cuda {

cudaError_t LaunchRmsNormForward(const void* x, const void* w, core::DType type, RmsNormShape shape,
                                 float eps, void* y, float* rstd, cudaStream_t stream);

// scratch: RmsNormBackwardScratchFloats(shape) floats of device memory, used only by this launch's kernels on
// `stream` (unused, and may be null, when dw is null).
cudaError_t LaunchRmsNormBackward(const void* dy, const void* x, const void* w, const float* rstd,
                                  core::DType type, RmsNormShape shape, void* dx, void* dw, float* scratch,
                                  cudaStream_t stream);

cudaError_t LaunchSwiGluForward(const void* gate, const void* up, core::DType type, size_t n, void* out,
                                cudaStream_t stream);

// d_gate and d_up: either may be null.
cudaError_t LaunchSwiGluBackward(const void* grad, const void* gate, const void* up, core::DType type,
                                 size_t n, void* d_gate, void* d_up, cudaStream_t stream);

// Rotary position embedding: bit for bit the reference (no sums, IEEE-rounded products and sums).
cudaError_t LaunchRopeForward(const void* x, const void* cos, const void* sin, core::DType type,
                              RopeShape shape, void* y, cudaStream_t stream);
cudaError_t LaunchRopeBackward(const void* dy, const void* cos, const void* sin, core::DType type,
                               RopeShape shape, void* dx, cudaStream_t stream);

}  // namespace zerofit::kernels::cuda
