// Element types that cross zerofit's library borders (flat buffers, collectives, kernels).
// Conversions are scalar, portable and bit-exact with the hardware/LibTorch round-to-nearest-even rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace zerofit::core {

enum class DType { kFloat32, kBFloat16, kFloat16, kFloat64 };

// Size of one element in bytes.
constexpr size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 4;
    case DType::kBFloat16:
    case DType::kFloat16:
      return 2;
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

const char* DTypeName(DType t);

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// fp32 -> bf16 with round-to-nearest-even; NaN stays a (quiet) NaN.
inline uint16_t FloatToBf16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float Bf16ToFloat(uint16_t h) { return BitsToFloat(static_cast<uint32_t>(h) << 16); }

// IEEE binary16 conversions, round-to-nearest-even, with subnormals, infinities and NaN.
uint16_t FloatToFp16(float f);
float Fp16ToFloat(uint16_t h);

// Element access at any byte address: callers may hand in buffers that are not aligned to the element
// (the SIMD AdamW kernels write parameter copies at any offset, and their scalar tails use these), so the
// accesses are memcpy, which compiles to one ordinary load or store; a cast pointer would be undefined
// behaviour there (UBSan: misaligned store).
template <typename T>
inline T LoadUnaligned(const void* data, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(data) + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
inline void StoreUnaligned(void* data, size_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(data) + i * sizeof(T), &v, sizeof(T));
}

// Reads element i of a buffer of type t as float (kFloat64 is narrowed). Any alignment.
inline float LoadAsFloat(const void* data, DType t, size_t i) {
  switch (t) {
    case DType::kFloat32:
      return LoadUnaligned<float>(data, i);
    case DType::kBFloat16:
      return Bf16ToFloat(LoadUnaligned<uint16_t>(data, i));
    case DType::kFloat16:
      return Fp16ToFloat(LoadUnaligned<uint16_t>(data, i));
    case DType::kFloat64:
      return static_cast<float>(LoadUnaligned<double>(data, i));
  }
  return 0.0f;
}

// Writes float v as element i of a buffer of type t (rounded to nearest even for 16-bit types). Any
// alignment.
inline void StoreFromFloat(void* data, DType t, size_t i, float v) {
  switch (t) {
    case DType::kFloat32:
      StoreUnaligned<float>(data, i, v);
      return;
    case DType::kBFloat16:
      StoreUnaligned<uint16_t>(data, i, FloatToBf16(v));
      return;
    case DType::kFloat16:
      StoreUnaligned<uint16_t>(data, i, FloatToFp16(v));
      return;
    case DType::kFloat64:
      StoreUnaligned<double>(data, i, static_cast<double>(v));
      return;
  }
}

// v rounded to type t (nearest even) and widened back: what storing it as an element of t and loading it
// gives, without a buffer (the identity for fp32 and fp64).
inline float RoundTo(DType t, float v) {
  switch (t) {
    case DType::kBFloat16:
      return Bf16ToFloat(FloatToBf16(v));
    case DType::kFloat16:
      return Fp16ToFloat(FloatToFp16(v));
    default:
      return v;
  }
}

// dst[i] = convert(src[i]) for n elements; same-type copies are memcpy.
void ConvertElements(const void* src, DType src_type, void* dst, DType dst_type, size_t n);

// acc[i] += convert(src[i]) for n elements of an fp32 accumulator.
void AccumulateToFloat(const void* src, DType src_type, float* acc, size_t n);

}  // namespace zerofit::core
