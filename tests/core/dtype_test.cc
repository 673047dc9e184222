#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace zerofit::core {
namespace {

TEST(DTypeTest, Sizes) {
  EXPECT_EQ(DTypeSize(DType::kFloat32), 4u);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kFloat64), 8u);
}

TEST(DTypeTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even): rounds up.
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::infinity())),
            std::numeric_limits<float>::infinity());
  // Largest finite float rounds to inf in bf16, as in every IEEE-style rounding.
  EXPECT_TRUE(std::isinf(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::max()))));
}

TEST(DTypeTest, Fp16RoundTripsEveryHalfValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = Fp16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Fp16ToFloat(FloatToFp16(f))));
      continue;
    }
    ASSERT_EQ(FloatToFp16(f), h) << std::hex << h;
  }
}

TEST(DTypeTest, Fp16RoundingAndRange) {
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(Fp16ToFloat(FloatToFp16(65520.0f))));  // halfway to 2^16 ties up to inf
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(65519.0f)), 65504.0f);
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(std::ldexp(1.0f, -25))), 0.0f);                   // tie to even: zero
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(std::ldexp(1.5f, -25))), std::ldexp(1.0f, -24));
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even.
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(1.0f + std::ldexp(1.0f, -11))), 1.0f);
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(-2.5f)), -2.5f);
}

TEST(DTypeTest, ConvertAndAccumulate) {
  const float src[3] = {1.5f, -2.0f, 3.25f};
  uint16_t bf[3];
  ConvertElements(src, DType::kFloat32, bf, DType::kBFloat16, 3);
  float acc[3] = {1, 1, 1};
  AccumulateToFloat(bf, DType::kBFloat16, acc, 3);
  EXPECT_EQ(acc[0], 2.5f);
  EXPECT_EQ(acc[1], -1.0f);
  EXPECT_EQ(acc[2], 4.25f);
}

}  // namespace
}  // namespace zerofit::core
