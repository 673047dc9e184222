// Where a fused model kernel runs, chosen per call: the host (the references of rms_norm.h, swiglu.h and
// rope.h) or a CUDA stream (kernels/cuda/model_kernels.h). Callers (worker/torch/model/fused_kernels.cc) say
// where their tensors live and need no #ifdef: a build without nvcc has no CUDA kernels
// (cuda::CudaKernelsBuilt() false), and a CUDA place there is an error, not a fallback.
//
// Buffers, shapes and types are those of the host references (one element type per call: fp32, bf16 or
// fp16). Errors, naming the kernel: Internal with CUDA's message when a launch fails; FailedPrecondition for
// a CUDA place in a build without the CUDA kernels.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"

namespace zerofit::kernels {

struct Place {
  static Place Host() { return Place{}; }
  // `stream`: a cudaStream_t of the current device (the caller holds the device guard while it launches).
  static Place Cuda(void* stream) { return Place{true, stream}; }
  bool cuda = false;
  void* stream = nullptr;
};

// True when this build has the CUDA kernels.
bool HaveCudaKernels();

absl::Status RmsNormForward(Place place, const void* x, const void* w, core::DType type, RmsNormShape shape,
                            float eps, void* y, float* rstd);
// scratch: on CUDA, RmsNormBackwardScratchFloats(shape) floats of device memory when dw is not null (see
// model_kernels.h); unused on the host.
absl::Status RmsNormBackward(Place place, const void* dy, const void* x, const void* w, const float* rstd,
                             core::DType type, RmsNormShape shape, void* dx, void* dw, float* scratch);
absl::Status SwiGluForward(Place place, const void* gate, const void* up, core::DType type, size_t n,
                           void* out);
absl::Status SwiGluBackward(Place place, const void* grad, const void* gate, const void* up, core::DType type,
                            size_t n, void* d_gate, void* d_up);
absl::Status RopeForward(Place place, const void* x, const void* cos, const void* sin, core::DType type,
                         RopeShape shape, void* y);
absl::Status RopeBackward(Place place, const void* dy, const void* cos, const void* sin, core::DType type,
                          RopeShape shape, void* dx);

}  // namespace zerofit::kernels
