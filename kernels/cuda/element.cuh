// Element types of the fused model kernels on the device: loads widen to fp32, stores round to nearest even
// (CUDA's conversion intrinsics, the rounding of core/dtype.h), and a dispatch from core::DType to the
// kernel instantiated for the type; the element-wise kernels' launch shape.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/dtype.h"

namespace zerofit::kernels::cuda {

__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float ToFloat(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}

// v rounded to T and widened back (core::RoundTo).
template <typename T>
__device__ __forceinline__ float Round(float v) {
  return ToFloat(FromFloat<T>(v));
}

// The element-wise kernels' launch shape: kElementwiseThreads a block, grid-stride loops over at most
// 65535 blocks.
constexpr int kElementwiseThreads = 256;
inline unsigned ElementwiseBlocks(size_t n) {
  const size_t blocks = (n + kElementwiseThreads - 1) / kElementwiseThreads;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

// model_kernels.h's launch result: null on success, else CUDA's message for `rc`.
inline const char* ErrorText(cudaError_t rc) { return rc == cudaSuccess ? nullptr : cudaGetErrorString(rc); }

// Calls launch(T{}) with T the device type of `type`; cudaErrorInvalidValue for a type the kernels lack.
template <typename Launch>
cudaError_t DispatchElementType(core::DType type, Launch&& launch) {
  switch (type) {
    case core::DType::kFloat32:
      return launch(float{});
    case core::DType::kBFloat16:
      return launch(__nv_bfloat16{});
    case core::DType::kFloat16:
      return launch(__half{});
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace zerofit::kernels::cuda
