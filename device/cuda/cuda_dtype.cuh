// Device-side element loads and stores, bit-identical to core/dtype.h (the same integer arithmetic:
// round-to-nearest-even, subnormals, infinities, NaN kept quiet), so that every CUDA kernel rounds exactly
// as its host reference. Types are passed as int (core::DType's value): one uniform branch per element.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace zerofit::device::cuda {

__device__ __forceinline__ float Bf16ToFloatDev(uint16_t h) { return __uint_as_float(uint32_t{h} << 16); }

__device__ __forceinline__ uint16_t FloatToBf16Dev(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

__device__ __forceinline__ float Fp16ToFloatDev(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return __uint_as_float(sign);
    // Subnormal: shift the leading one up to bit 10 (core's loop, counted with clz).
    const uint32_t shift = static_cast<uint32_t>(__clz(mant)) - 21u;
    mant = (mant << shift) & 0x3ffu;
    return __uint_as_float(sign | ((113u - shift) << 23) | (mant << 13));
  }
  if (exp == 31) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
  return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

__device__ __forceinline__ uint16_t FloatToFp16Dev(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) {
    if (abs < 0x33000000u) return sign;
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;
    const uint32_t rounded = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    uint32_t out = rounded;
    if (rem > halfway || (rem == halfway && (rounded & 1u))) ++out;
    return static_cast<uint16_t>(sign | out);
  }
  uint32_t v = abs - 0x38000000u;
  v += 0xfffu + ((v >> 13) & 1u);
  return static_cast<uint16_t>(sign | (v >> 13));
}

__device__ __forceinline__ float LoadAsFloatDev(const void* data, int type, size_t i) {
  switch (static_cast<core::DType>(type)) {
    case core::DType::kFloat32:
      return static_cast<const float*>(data)[i];
    case core::DType::kBFloat16:
      return Bf16ToFloatDev(static_cast<const uint16_t*>(data)[i]);
    case core::DType::kFloat16:
      return Fp16ToFloatDev(static_cast<const uint16_t*>(data)[i]);
    case core::DType::kFloat64:
      return __double2float_rn(static_cast<const double*>(data)[i]);
  }
  return 0.0f;
}

__device__ __forceinline__ void StoreFromFloatDev(void* data, int type, size_t i, float v) {
  switch (static_cast<core::DType>(type)) {
    case core::DType::kFloat32:
      static_cast<float*>(data)[i] = v;
      return;
    case core::DType::kBFloat16:
      static_cast<uint16_t*>(data)[i] = FloatToBf16Dev(v);
      return;
    case core::DType::kFloat16:
      static_cast<uint16_t*>(data)[i] = FloatToFp16Dev(v);
      return;
    case core::DType::kFloat64:
      static_cast<double*>(data)[i] = static_cast<double>(v);
      return;
  }
}

// Grid shape of the element-wise kernels: grid-stride loops over at most kMaxBlocks blocks.
constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 4096;
inline unsigned ElementwiseBlocks(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? (blocks == 0 ? 1 : blocks) : kMaxBlocks);
}

}  // namespace zerofit::device::cuda
