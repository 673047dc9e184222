#include "core/dtype.h"

namespace zerofit::core {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "fp32";
    case DType::kBFloat16:
      return "bf16";
    case DType::kFloat16:
      return "fp16";
    case DType::kFloat64:
      return "fp64";
  }
  return "unknown";
}

uint16_t FloatToFp16(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN.
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // Rounds to >= 65520: inf.
  if (abs < 0x38800000u) {               // Below the smallest normal half (2^-14): subnormal or zero.
    if (abs < 0x33000000u) return sign;  // Below half of the smallest subnormal (2^-25): zero.
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // value / 2^-24 == mant24 >> (126 - exp)
    const uint32_t rounded = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    uint32_t out = rounded;
    if (rem > halfway || (rem == halfway && (rounded & 1u))) ++out;
    return static_cast<uint16_t>(sign | out);
  }
  // Normal: rebias exponent (127 -> 15) and round the 23-bit mantissa to 10 bits.
  uint32_t v = abs - 0x38000000u;  // exponent rebias: (127 - 15) << 23
  v += 0xfffu + ((v >> 13) & 1u);
  return static_cast<uint16_t>(sign | (v >> 13));
}

float Fp16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return BitsToFloat(sign);
    // Subnormal: normalise.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    return BitsToFloat(sign | ((112u - e) << 23) | (mant << 13));
  }
  if (exp == 31) return BitsToFloat(sign | 0x7f800000u | (mant << 13));
  return BitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

namespace {

// The dtype switch hoisted out of the element loops, so that the compiler vectorises the common cases (the
// offload pipeline converts and accumulates whole gradient shards: billions of elements a step).
template <typename Load>
void AccumulateWith(float* acc, size_t n, Load load) {
  for (size_t i = 0; i < n; ++i) acc[i] += load(i);
}

template <typename Load, typename Store>
void ConvertWith(size_t n, Load load, Store store) {
  for (size_t i = 0; i < n; ++i) store(i, load(i));
}

}  // namespace

void ConvertElements(const void* src, DType src_type, void* dst, DType dst_type, size_t n) {
  if (src_type == dst_type) {
    if (n != 0 && src != dst) std::memmove(dst, src, n * DTypeSize(src_type));
    return;
  }
  auto load_bf16 = [src](size_t i) { return Bf16ToFloat(LoadUnaligned<uint16_t>(src, i)); };
  auto load_f32 = [src](size_t i) { return LoadUnaligned<float>(src, i); };
  auto store_f32 = [dst](size_t i, float v) { StoreUnaligned<float>(dst, i, v); };
  auto store_bf16 = [dst](size_t i, float v) { StoreUnaligned<uint16_t>(dst, i, FloatToBf16(v)); };
  if (src_type == DType::kBFloat16 && dst_type == DType::kFloat32)
    return ConvertWith(n, load_bf16, store_f32);
  if (src_type == DType::kFloat32 && dst_type == DType::kBFloat16)
    return ConvertWith(n, load_f32, store_bf16);
  for (size_t i = 0; i < n; ++i) StoreFromFloat(dst, dst_type, i, LoadAsFloat(src, src_type, i));
}

void AccumulateToFloat(const void* src, DType src_type, float* acc, size_t n) {
  switch (src_type) {
    case DType::kFloat32:
      return AccumulateWith(acc, n, [src](size_t i) { return LoadUnaligned<float>(src, i); });
    case DType::kBFloat16:
      return AccumulateWith(acc, n, [src](size_t i) { return Bf16ToFloat(LoadUnaligned<uint16_t>(src, i)); });
    default:
      return AccumulateWith(acc, n, [src, src_type](size_t i) { return LoadAsFloat(src, src_type, i); });
  }
}

}  // namespace zerofit::core
