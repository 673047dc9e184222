// CUDA's device-side spellings for emulated kernels (runtime_api.h says what emulation is): declaration
// specifiers, the IEEE-rounded intrinsics zerofit's kernels use, and the bf16/fp16 types with core/dtype.h's
// round-to-nearest-even conversions. The intrinsics are the plain IEEE operations; the emulated sources are
// compiled with -ffp-contract=off, so nothing is fused that CUDA would round separately.
#pragma once

#include <math.h>

#include <cstdint>
#include <cstring>

#include "core/dtype.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __double2float_rn(double a) { return static_cast<float>(a); }
inline float rsqrtf(float a) { return 1.0f / sqrtf(a); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }

inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// CUDA's 16-bit float types: the bits, converted as core/dtype.h converts them.
struct __nv_bfloat16 {
  uint16_t bits;
};
struct __half {
  uint16_t bits;
};

inline float __bfloat162float(__nv_bfloat16 v) { return ::zerofit::core::Bf16ToFloat(v.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float v) { return {::zerofit::core::FloatToBf16(v)}; }
inline float __half2float(__half v) { return ::zerofit::core::Fp16ToFloat(v.bits); }
inline __half __float2half_rn(float v) { return {::zerofit::core::FloatToFp16(v)}; }
