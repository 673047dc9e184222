#include "kernels/dispatch.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda/model_kernels.h"
#include "kernels/swiglu.h"

namespace zerofit::kernels {
namespace {

// A CUDA launcher's result as a Status naming the kernel.
absl::Status Launched(const char* error, const char* what) {
  if (error == nullptr) return absl::OkStatus();
  if (!cuda::CudaKernelsBuilt()) return absl::FailedPreconditionError(absl::StrCat(what, ": ", error));
  return absl::InternalError(absl::StrCat(what, ": ", error));
}

}  // namespace

bool HaveCudaKernels() { return cuda::CudaKernelsBuilt(); }

absl::Status RmsNormForward(Place place, const void* x, const void* w, core::DType type, RmsNormShape shape,
                            float eps, void* y, float* rstd) {
  if (!place.cuda) return RmsNormForwardHost(x, w, type, shape, eps, y, rstd), absl::OkStatus();
  return Launched(cuda::LaunchRmsNormForward(x, w, type, shape, eps, y, rstd, place.stream),
                  "RMSNorm forward");
}

absl::Status RmsNormBackward(Place place, const void* dy, const void* x, const void* w, const float* rstd,
                             core::DType type, RmsNormShape shape, void* dx, void* dw, float* scratch) {
  if (!place.cuda) return RmsNormBackwardHost(dy, x, w, rstd, type, shape, dx, dw), absl::OkStatus();
  return Launched(cuda::LaunchRmsNormBackward(dy, x, w, rstd, type, shape, dx, dw, scratch, place.stream),
                  "RMSNorm backward");
}

absl::Status SwiGluForward(Place place, const void* gate, const void* up, core::DType type, size_t n,
                           void* out) {
  if (!place.cuda) return SwiGluForwardHost(gate, up, type, n, out), absl::OkStatus();
  return Launched(cuda::LaunchSwiGluForward(gate, up, type, n, out, place.stream), "SwiGLU forward");
}

absl::Status SwiGluBackward(Place place, const void* grad, const void* gate, const void* up, core::DType type,
                            size_t n, void* d_gate, void* d_up) {
  if (!place.cuda) return SwiGluBackwardHost(grad, gate, up, type, n, d_gate, d_up), absl::OkStatus();
  return Launched(cuda::LaunchSwiGluBackward(grad, gate, up, type, n, d_gate, d_up, place.stream),
                  "SwiGLU backward");
}

absl::Status RopeForward(Place place, const void* x, const void* cos, const void* sin, core::DType type,
                         RopeShape shape, void* y) {
  if (!place.cuda) return RopeForwardHost(x, cos, sin, type, shape, y), absl::OkStatus();
  return Launched(cuda::LaunchRopeForward(x, cos, sin, type, shape, y, place.stream), "rotary forward");
}

absl::Status RopeBackward(Place place, const void* dy, const void* cos, const void* sin, core::DType type,
                          RopeShape shape, void* dx) {
  if (!place.cuda) return RopeBackwardHost(dy, cos, sin, type, shape, dx), absl::OkStatus();
  return Launched(cuda::LaunchRopeBackward(dy, cos, sin, type, shape, dx, place.stream), "rotary backward");
}

}  // namespace zerofit::kernels
