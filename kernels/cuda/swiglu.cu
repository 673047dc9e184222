// SwiGLU forward and backward (kernels/swiglu.h's arithmetic): element-wise, grid-stride loops.
#include "kernels/cuda/element.cuh"
#include "kernels/cuda/model_kernels.h"

namespace zerofit::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 65535;

unsigned Blocks(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// silu's logistic factor, as torch's kernels compute it.
__device__ __forceinline__ float Sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

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
    if (d_up != nullptr) d_up[i] = FromFloat<T>(d * Round<T>(g / (1.0f + expf(-g))));
    if (d_gate != nullptr) {
      const float ds = Round<T>(d * ToFloat(up[i]));
      const float s = Sigmoid(g);
      d_gate[i] = FromFloat<T>(ds * s * (1.0f + g * (1.0f - s)));
    }
  }
}

}  // namespace

cudaError_t LaunchSwiGluForward(const void* gate, const void* up, core::DType type, size_t n, void* out,
                                cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return DispatchElementType(type, [&](auto tag) {
    using T = decltype(tag);
    SwiGluForwardKernel<T><<<Blocks(n), kThreads, 0, stream>>>(
        static_cast<const T*>(gate), static_cast<const T*>(up), n, static_cast<T*>(out));
    return cudaGetLastError();
  });
}

cudaError_t LaunchSwiGluBackward(const void* grad, const void* gate, const void* up, core::DType type,
                                 size_t n, void* d_gate, void* d_up, cudaStream_t stream) {
  if (n == 0 || (d_gate == nullptr && d_up == nullptr)) return cudaSuccess;
  return DispatchElementType(type, [&](auto tag) {
    using T = decltype(tag);
    SwiGluBackwardKernel<T><<<Blocks(n), kThreads, 0, stream>>>(
        static_cast<const T*>(grad), static_cast<const T*>(gate), static_cast<const T*>(up), n,
        static_cast<T*>(d_gate), static_cast<T*>(d_up));
    return cudaGetLastError();
  });
}

}  // namespace zerofit::kernels::cuda
