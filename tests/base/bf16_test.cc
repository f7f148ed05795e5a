// frugal/bf16.h: FloatToBf16 rounds to nearest, ties to even; keeps NaN a
// NaN (of its sign) even when the payload lies only in the bits it drops;
// keeps the infinities; and Bf16ToFloat is exact, so every bfloat16 value
// survives the round trip.
#include "frugal/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace frugal {
namespace {

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(Bf16, RoundsToNearestTiesToEven) {
  // Near 1 a bfloat16 step is 2^-7: 1 + 2^-8 is halfway between 1 (even
  // mantissa) and 1 + 2^-7 (odd), 1 + 3 2^-8 halfway between 1 + 2^-7 (odd)
  // and 1 + 2^-6 (even).
  EXPECT_EQ(FloatToBf16(1.f + std::ldexp(1.f, -8)), 0x3F80);
  EXPECT_EQ(FloatToBf16(1.f + 3 * std::ldexp(1.f, -8)), 0x3F82);
  // Off the tie, by one float ulp either way: to the nearer one.
  EXPECT_EQ(FloatToBf16(1.f + std::ldexp(1.f, -8) + std::ldexp(1.f, -23)), 0x3F81);
  EXPECT_EQ(FloatToBf16(1.f + std::ldexp(1.f, -8) - std::ldexp(1.f, -23)), 0x3F80);
  EXPECT_EQ(FloatToBf16(1.f + 3 * std::ldexp(1.f, -8) - std::ldexp(1.f, -23)), 0x3F81);
  // Negative numbers round by magnitude, the same way.
  EXPECT_EQ(FloatToBf16(-(1.f + std::ldexp(1.f, -8))), 0xBF80);
  EXPECT_EQ(FloatToBf16(-(1.f + 3 * std::ldexp(1.f, -8))), 0xBF82);
  // A carry out of the mantissa bumps the exponent: just under 2 rounds to 2.
  EXPECT_EQ(FloatToBf16(std::nextafter(2.f, 0.f)), 0x4000);
  // The smallest float subnormal rounds to zero, a tie in the subnormals to even.
  EXPECT_EQ(FloatToBf16(FromBits(0x00000001u)), 0x0000);
  EXPECT_EQ(FloatToBf16(FromBits(0x00018000u)), 0x0002);
}

TEST(Bf16, KeepsInfinitiesAndSignedZeros) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToBf16(inf), 0x7F80);
  EXPECT_EQ(FloatToBf16(-inf), 0xFF80);
  EXPECT_EQ(Bf16ToFloat(0x7F80), inf);
  EXPECT_EQ(Bf16ToFloat(0xFF80), -inf);
  // The largest float is past the largest bfloat16 by more than half a step.
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::max()), 0xFF80);
  EXPECT_EQ(FloatToBf16(0.f), 0x0000);
  EXPECT_EQ(FloatToBf16(-0.f), 0x8000);
}

TEST(Bf16, KeepsNaNANaN) {
  // Rounding would carry 0x7FFFFFFF into the sign bit, and truncating
  // 0x7F800001 would give infinity: both must stay NaN, with their sign.
  for (uint32_t bits : {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu, 0x7F80FFFFu, 0xFFC00000u, 0xFF800001u}) {
    const uint16_t b = FloatToBf16(FromBits(bits));
    EXPECT_TRUE(std::isnan(Bf16ToFloat(b))) << std::hex << bits << " -> " << b;
    EXPECT_EQ(b & 0x8000, (bits >> 16) & 0x8000) << std::hex << bits;
  }
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Bf16, EveryBfloat16ValueSurvivesTheRoundTrip) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    ASSERT_EQ(u, b << 16) << std::hex << b;  // widening is exact: the bits, shifted
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(f)))) << std::hex << b;
    } else {
      ASSERT_EQ(FloatToBf16(f), b) << std::hex << b;
    }
  }
}

}  // namespace
}  // namespace frugal
