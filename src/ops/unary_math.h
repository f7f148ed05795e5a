// The elementwise unary functions and their derivatives, written once in
// float for the CPU kernels (elemwise_unary.cc) and the CUDA ones
// (cuda/elemwise_unary.cu), so the two compute the same thing.
//   F(x, p): y.   D(dy, v, p): dx, where v is y if kReadsY, else x.
// p: the op's params (UnaryParams in op_params.h: ClipParams for all but gelu).
#pragma once

#include <math.h>

#include "frugal/host_device.h"
#include "ops/op_params.h"

namespace frugal::unary {

struct Exp {
  static constexpr bool kReadsY = true;
  FRUGAL_HD static float F(float x, ClipParams) { return expf(x); }
  FRUGAL_HD static float D(float dy, float y, ClipParams) { return dy * y; }
};
struct Log {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return logf(x); }
  FRUGAL_HD static float D(float dy, float x, ClipParams) { return dy / x; }
};
struct Sqrt {
  static constexpr bool kReadsY = true;
  FRUGAL_HD static float F(float x, ClipParams) { return sqrtf(x); }
  FRUGAL_HD static float D(float dy, float y, ClipParams) { return dy / (2 * y); }
};
struct Square {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return x * x; }
  FRUGAL_HD static float D(float dy, float x, ClipParams) { return 2 * x * dy; }
};
struct Abs {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return fabsf(x); }
  FRUGAL_HD static float D(float dy, float x, ClipParams) { return x > 0 ? dy : x < 0 ? -dy : 0.f; }
};
// A NaN stays NaN (every comparison with it is false).
struct Clip {
  static constexpr bool kReadsY = true;
  FRUGAL_HD static float F(float x, ClipParams p) { return x < p.a_min ? p.a_min : x > p.a_max ? p.a_max : x; }
  FRUGAL_HD static float D(float dy, float y, ClipParams p) { return y > p.a_min && y < p.a_max ? dy : 0.f; }
};

constexpr float kTwoOverSqrtPi = 1.1283791671f, kSqrtHalf = 0.7071067812f, kSqrtTwoOverPi = 0.7978845608f;

struct Erf {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return erff(x); }
  FRUGAL_HD static float D(float dy, float x, ClipParams) { return dy * kTwoOverSqrtPi * expf(-x * x); }
};
// Phi(x) = erfc(-x / sqrt 2) / 2, which keeps its precision where Phi is
// small (1 + erf(x / sqrt 2) would cancel for x below about -3).
struct Gelu {
  using Params = GeluParams;
  static constexpr bool kReadsY = false;
  static constexpr float kCubic = 0.044715f;
  FRUGAL_HD static float F(float x, GeluParams p) {
    if (p.tanh) return 0.5f * x * (1 + tanhf(kSqrtTwoOverPi * (x + kCubic * x * x * x)));
    return 0.5f * x * erfcf(-x * kSqrtHalf);
  }
  FRUGAL_HD static float D(float dy, float x, GeluParams p) {
    if (p.tanh) {
      const float t = tanhf(kSqrtTwoOverPi * (x + kCubic * x * x * x));
      return dy * (0.5f * (1 + t) + 0.5f * x * (1 - t * t) * kSqrtTwoOverPi * (1 + 3 * kCubic * x * x));
    }
    const float phi = 0.5f * kTwoOverSqrtPi * kSqrtHalf * expf(-0.5f * x * x);  // the normal density
    return dy * (0.5f * erfcf(-x * kSqrtHalf) + x * phi);
  }
};

}  // namespace frugal::unary
