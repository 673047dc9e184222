// model_kernels.h in a build without nvcc: no kernel exists, and every launch says so. Callers check
// CudaKernelsBuilt() first (worker/torch's FusedKernelsTake never hands these a tensor), so a message here is
// a caller's bug made plain, not a silent fallback.
#include "kernels/cuda/model_kernels.h"

namespace zerofit::kernels::cuda {
namespace {

constexpr char kNotBuilt[] = "this build has no CUDA kernels (nvcc was not found when it was configured)";

}  // namespace

bool CudaKernelsBuilt() { return false; }

const char* LaunchRmsNormForward(const void*, const void*, core::DType, RmsNormShape, float, void*, float*,
                                 void*) {
  return kNotBuilt;
}

const char* LaunchRmsNormBackward(const void*, const void*, const void*, const float*, core::DType,
                                  RmsNormShape, void*, void*, float*, void*) {
  return kNotBuilt;
}

const char* LaunchSwiGluForward(const void*, const void*, core::DType, size_t, void*, void*) {
  return kNotBuilt;
}

const char* LaunchSwiGluBackward(const void*, const void*, const void*, core::DType, size_t, void*, void*,
                                 void*) {
  return kNotBuilt;
}

const char* LaunchRopeForward(const void*, const void*, const void*, core::DType, RopeShape, void*, void*) {
  return kNotBuilt;
}

const char* LaunchRopeBackward(const void*, const void*, const void*, core::DType, RopeShape, void*, void*) {
  return kNotBuilt;
}

}  // namespace zerofit::kernels::cuda
