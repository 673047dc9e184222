// SwiGLU forward and backward (kernels/swiglu.h's arithmetic): element-wise, grid-stride loops.
#include "kernels/cuda/element.cuh"
#include "kernels/cuda/model_kernels.h"

namespace zerofit::kernels::cuda {
namespace {

template <typename T>
__global__ void SwiGluForwardKernel(const T* gate, const T* up, size_t n, T* out) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = ToFloat(gate[i]);
    const float s = Round<T>(g / (1.0f + expf(-g)));
    out[i] = FromFloat<T>(s * ToFloat(up[i]));
  }
}

template <typename T>
__global__ void SwiGluBackwardKernel(const T* grad, const T* gate, const T* up, size_t n, T* d_gate,
                                     T* d_up) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float d = ToFloat(grad[i]);
    const float g = ToFloat(gate[i]);
    const float one_plus_e = 1.0f + expf(-g);  // silu's and its derivative's denominator, once
    if (d_up != nullptr) d_up[i] = FromFloat<T>(d * Round<T>(g / one_plus_e));
    if (d_gate != nullptr) {
      const float ds = Round<T>(d * ToFloat(up[i]));
      const float s = 1.0f / one_plus_e;
      d_gate[i] = FromFloat<T>(ds * s * (1.0f + g * (1.0f - s)));
    }
  }
}

}  // namespace

const char* LaunchSwiGluForward(const void* gate, const void* up, core::DType type, size_t n, void* out,
                                void* stream) {
  if (n == 0) return nullptr;
  return ErrorText(DispatchElementType(type, [&](auto tag) {
    using T = decltype(tag);
    SwiGluForwardKernel<T>
        <<<ElementwiseBlocks(n), kElementwiseThreads, 0, static_cast<cudaStream_t>(stream)>>>(
            static_cast<const T*>(gate), static_cast<const T*>(up), n, static_cast<T*>(out));
    return cudaGetLastError();
  }));
}

const char* LaunchSwiGluBackward(const void* grad, const void* gate, const void* up, core::DType type,
                                 size_t n, void* d_gate, void* d_up, void* stream) {
  if (n == 0 || (d_gate == nullptr && d_up == nullptr)) return nullptr;
  return ErrorText(DispatchElementType(type, [&](auto tag) {
    using T = decltype(tag);
    SwiGluBackwardKernel<T>
        <<<ElementwiseBlocks(n), kElementwiseThreads, 0, static_cast<cudaStream_t>(stream)>>>(
            static_cast<const T*>(grad), static_cast<const T*>(gate), static_cast<const T*>(up), n,
            static_cast<T*>(d_gate), static_cast<T*>(d_up));
    return cudaGetLastError();
  }));
}

}  // namespace zerofit::kernels::cuda
