// Checked integer arithmetic for parsers and validators (STYLE 18): sizes read from files and specs are
// multiplied only through these, so that a product that does not fit is an error instead of a wrapped
// value that happens to pass the next check.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace zerofit::core {

// *out = a * b; false (and *out untouched) when the product does not fit in int64.
inline bool CheckedMul(int64_t a, int64_t b, int64_t* out) {
  int64_t p = 0;
  if (__builtin_mul_overflow(a, b, &p)) return false;
  *out = p;
  return true;
}

// *out = a + b; false (and *out untouched) when the sum does not fit in int64.
inline bool CheckedAdd(int64_t a, int64_t b, int64_t* out) {
  int64_t s = 0;
  if (__builtin_add_overflow(a, b, &s)) return false;
  *out = s;
  return true;
}

// *out = the product of `factors`; false when any partial product overflows.
inline bool CheckedProduct(std::initializer_list<int64_t> factors, int64_t* out) {
  int64_t p = 1;
  for (int64_t f : factors) {
    if (!CheckedMul(p, f, &p)) return false;
  }
  *out = p;
  return true;
}

// A JSON or YAML number that must be an integer: true when `v` is finite, has no fractional part and lies
// within +-2^53 (where every integer is exact in a double), so the cast below is defined behaviour.
inline bool DoubleToInt64(double v, int64_t* out) {
  constexpr double kExact = 9007199254740992.0;  // 2^53
  if (!std::isfinite(v) || v != std::trunc(v) || v > kExact || v < -kExact) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

}  // namespace zerofit::core
