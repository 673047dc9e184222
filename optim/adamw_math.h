// The one definition of zerofit's AdamW arithmetic, shared by the scalar oracle and the SIMD kernels. The
// SIMD bodies vectorise exactly these operations in this order (multiplications, fused multiply-adds,
// correctly rounded sqrt and division), so every kernel produces identical bits. Internal to offload/.
//
// ODR note: the SIMD translation units are compiled with -mavx2 / -mavx512*. They must not instantiate any
// inline function that other code also uses (the linker could keep their AVX-512 copy for everybody), so the
// helpers below have internal linkage and the SIMD bodies use none of core/dtype.h's inline functions.
#pragma once

#include <cmath>
#include <cstdint>

#include "optim/cpu_adamw.h"

namespace zerofit::optim::internal {

struct AdamWConstants {
  float decay, b1, b2, one_minus_b1, one_minus_b2, sqrt_bc2, neg_step_size, eps, grad_scale;
};

// Scalars are formed in double and rounded to float once, as ATen does when it applies a double Scalar to a
// float tensor. Defined in cpu_adamw_scalar.cc (compiled without ISA flags).
AdamWConstants MakeConstants(const AdamWHyper& h, int64_t step, float grad_scale);

// SIMD bodies: process all n elements of `s` (tails included, with masks or padded copies).
void AdamWAvx2Body(const AdamWSpans& s, const AdamWConstants& c);
void AdamWAvx512Body(const AdamWSpans& s, const AdamWConstants& c);
// The 8-bit step (adamw_8bit.h) on every block of `s`, bit for bit CpuAdamW8bit.
void AdamW8bitAvx2Body(const AdamW8bitSpans& s, const AdamW8bitMaps& maps, const AdamWConstants& c);
void AdamW8bitAvx512Body(const AdamW8bitSpans& s, const AdamW8bitMaps& maps, const AdamWConstants& c);

namespace {

// Updates one element; returns the new parameter value.
[[maybe_unused]] inline float AdamWElement(float* p, float grad, float* m, float* v,
                                           const AdamWConstants& c) {
  const float g = grad * c.grad_scale;
  const float decayed = *p * c.decay;
  const float mi = std::fma(c.b1, *m, c.one_minus_b1 * g);
  const float vi = std::fma(c.b2, *v, (c.one_minus_b2 * g) * g);
  const float denom = std::sqrt(vi) / c.sqrt_bc2 + c.eps;
  const float out = std::fma(c.neg_step_size, mi / denom, decayed);
  *m = mi;
  *v = vi;
  *p = out;
  return out;
}

}  // namespace
}  // namespace zerofit::optim::internal
