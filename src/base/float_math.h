// Float functions written as plain arithmetic and selects, so that a loop of
// them vectorises (ops/cpu/vec_kernels.inc, compiled per instruction
// set) and the CUDA kernels run the same code (FRUGAL_HD): Cephes' expf and
// tanhf, the normal distribution's CDF (Cephes' ndtrf), and GELU.
#pragma once

#include <cstdint>
#include <cstring>

#include "frugal/host_device.h"

namespace frugal::fmath {
// Internal linkage: vec_kernels.inc compiles these once per instruction set,
// and a copy with AVX-512 must never stand in for another translation unit's.
namespace {

// exp(x) for x in [-87, 88] (clamped outside), Cephes' expf: x = n ln2 + r,
// exp(r) by a degree-6 polynomial, 2^n built in the exponent bits. n is
// x / ln2 rounded to nearest by adding and subtracting 1.5 2^23 (a compare
// and select for floor kept GCC from vectorising the loop for AVX).
FRUGAL_HD inline float Exp(float x) {
  x = x < -87.f ? -87.f : x;
  x = x > 88.f ? 88.f : x;
  const float n = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;
  x = x - n * 0.693359375f;
  x = x - n * -2.12194440e-4f;
  const float z = x * x;
  float y = 1.9875691500e-4f;
  y = y * x + 1.3981999507e-3f;
  y = y * x + 8.3334519073e-3f;
  y = y * x + 4.1665795894e-2f;
  y = y * x + 1.6666665459e-1f;
  y = y * x + 5.0000001201e-1f;
  y = y * z + x + 1.f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float p;
  memcpy(&p, &bits, sizeof p);
  return y * p;
}

// Cephes' tanhf: an odd polynomial below 0.625, else 1 - 2 / (exp(2|x|) + 1).
FRUGAL_HD inline float Tanh(float x) {
  const float ax = x < 0 ? -x : x;
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float big = 1.f - 2.f / (Exp(2.f * ax) + 1.f);
  const float r = x < 0 ? -big : big;
  return ax < 0.625f ? small : r;
}

// c[0] y^(N-1) + c[1] y^(N-2) + ... + c[N-1], by Horner's rule.
template <int N>
FRUGAL_HD inline float Horner(float y, const float (&c)[N]) {
  float p = c[0];
  for (int i = 1; i < N; ++i) p = p * y + c[i];
  return p;
}

// Phi(x), the standard normal CDF, as Cephes' ndtrf: with u = x / sqrt 2,
// 1/2 + erf(u) / 2 for |u| < 1/sqrt 2 (erf(u) = u T(u^2)), else erfc(|u|) / 2
// (or 1 minus it for u > 0), erfc(z) = 1 - erf(z) below 1, exp(-z^2) P(1/z^2)
// / z from 1 to 2 and exp(-z^2) R(1/z^2) / z beyond. Relative error about
// 4e-6 at most (Cephes), also far in the tail where 1 + erf would cancel;
// 0 below x = -13 (z^2 > 87).
FRUGAL_HD inline float NormalCdf(float x) {
  const float u = x * 0.70710678118654752f;
  const float z = u < 0 ? -u : u;
  const float s = u * u;
  constexpr float kT[] = {7.853861353153693e-5f, -8.010193625184903e-4f, 5.188327685732524e-3f, -2.685381193529856e-2f,
                          1.128358514861418e-1f, -3.761262582423300e-1f, 1.128379165726710f};
  constexpr float kP[] = {2.326819970068386e-2f,  -1.387039388740657e-1f, 3.687424674597105e-1f,
                          -5.824733027278666e-1f, 6.210004621745983e-1f,  -4.944515323274145e-1f,
                          3.404879937665872e-1f,  -2.741127028184656e-1f, 5.638259427386472e-1f};
  constexpr float kR[] = {-1.047766399936249e+1f, 1.297719955372516e+1f, -7.495518717768503f,    2.921019019210786f,
                          -1.015265279202700f,    4.218463358204948e-1f, -2.820767439740514e-1f, 5.641895067754075e-1f};
  const float t = Horner(s, kT);  // erf(u) = u t
  const float zc = z < 1.f ? 1.f : z;
  const float q = 1.f / zc, y = q * q;
  const float p = Horner(y, kP), r = Horner(y, kR);
  const float tail = zc * zc > 87.f ? 0.f : Exp(-zc * zc) * q * (zc < 2.f ? p : r);
  const float erfc = z < 1.f ? 1.f - z * t : tail;
  const float half = 0.5f * erfc;
  const float big = u > 0 ? 1.f - half : half;
  return z < 0.70710678118654752f ? 0.5f + 0.5f * u * t : big;
}

// GELU, exact (x Phi(x)) or in tanh form (x (1 + tanh(sqrt(2/pi) (x +
// 0.044715 x^3))) / 2, PyTorch's approximate='tanh'), and its derivative.
constexpr float kGeluCubic = 0.044715f, kSqrtTwoOverPi = 0.7978845608028654f;
constexpr float kInvSqrtTwoPi = 0.3989422804014327f;

FRUGAL_HD inline float Gelu(float x, bool tanh_form) {
  if (tanh_form) return 0.5f * x * (1 + Tanh(kSqrtTwoOverPi * (x + kGeluCubic * x * x * x)));
  return x * NormalCdf(x);
}

FRUGAL_HD inline float GeluGrad(float x, bool tanh_form) {
  if (tanh_form) {
    const float t = Tanh(kSqrtTwoOverPi * (x + kGeluCubic * x * x * x));
    return 0.5f * (1 + t) + 0.5f * x * (1 - t * t) * kSqrtTwoOverPi * (1 + 3 * kGeluCubic * x * x);
  }
  return NormalCdf(x) + x * kInvSqrtTwoPi * Exp(-0.5f * x * x);
}

}  // namespace
}  // namespace frugal::fmath
