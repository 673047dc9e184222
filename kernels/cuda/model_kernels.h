// The fused model kernels' CUDA launchers (rms_norm.cu, swiglu.cu, rope.cu beside this header). Each runs the
// arithmetic of its host reference (kernels/rms_norm.h, swiglu.h, rope.h): element-wise results equal the
// reference's up to the device's exponential and reciprocal square root (a few fp32 ulps before the final
// rounding; the rotary embedding has neither: bit for bit), sums are fixed-shape trees (the same order on
// every run and every GPU for a given shape, another order than the reference's). Types: fp32, bf16, fp16.
//
// Each enqueues on `stream` (a cudaStream_t of the current device) and returns null, or CUDA's message when
// the launch failed. The declarations carry no CUDA type, so that a build without nvcc links the same names
// from unavailable.cc, which fail every launch with a message saying so (CudaKernelsBuilt() is false there):
// callers go through kernels/dispatch.h and need no #ifdef.
#pragma once

#include <cstddef>

#include "core/dtype.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"

namespace zerofit::kernels::cuda {

// True when the kernels were compiled (nvcc found at configure time).
bool CudaKernelsBuilt();

const char* LaunchRmsNormForward(const void* x, const void* w, core::DType type, RmsNormShape shape,
                                 float eps, void* y, float* rstd, void* stream);

// scratch: RmsNormBackwardScratchFloats(shape) floats of device memory, used only by this launch's kernels on
// `stream` (unused, and may be null, when dw is null).
const char* LaunchRmsNormBackward(const void* dy, const void* x, const void* w, const float* rstd,
                                  core::DType type, RmsNormShape shape, void* dx, void* dw, float* scratch,
                                  void* stream);

const char* LaunchSwiGluForward(const void* gate, const void* up, core::DType type, size_t n, void* out,
                                void* stream);

// d_gate and d_up: either may be null.
const char* LaunchSwiGluBackward(const void* grad, const void* gate, const void* up, core::DType type,
                                 size_t n, void* d_gate, void* d_up, void* stream);

// Rotary position embedding: bit for bit the reference (no sums, IEEE-rounded products and sums).
const char* LaunchRopeForward(const void* x, const void* cos, const void* sin, core::DType type,
                              RopeShape shape, void* y, void* stream);
const char* LaunchRopeBackward(const void* dy, const void* cos, const void* sin, core::DType type,
                               RopeShape shape, void* dx, void* stream);

}  // namespace zerofit::kernels::cuda
