// bfloat16: the top 16 bits of a float32 (8 exponent bits, 7 mantissa bits).
// A mixed-precision graph (frugal/passes/rewrite.h, ToMixedPrecision) keeps
// its activations and their gradients in it; parameters, optimizer state and
// losses stay float32. Conversion to float is exact; from float rounds to
// nearest even, and NaN stays NaN. Both are branch-free, so loops over them
// vectorise (vec.h's per-ISA kernels use them; checked with objdump there).
#pragma once

#include <cstdint>
#include <cstring>

namespace frugal {

inline float Bf16ToFloat(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<uint16_t>(nan ? (u >> 16) | 0x40u : rounded);  // a quiet NaN of the same sign
}

}  // namespace frugal
