// The elementwise unary functions and their derivatives, written once in
// float for the CPU kernels (elemwise_unary.cc) and the CUDA ones
// (cuda/elemwise_unary.cu), so the two compute the same thing.
//   F(x, p): y.   D(dy, v, p): dx, where v is y if kReadsY, else x.
// p: the op's params (UnaryParams in op_params.h: ClipParams for all but gelu).
#pragma once

#include <math.h>

#include "base/float_math.h"
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

constexpr float kTwoOverSqrtPi = 1.1283791671f;

struct Erf {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return erff(x); }
  FRUGAL_HD static float D(float dy, float x, ClipParams) { return dy * kTwoOverSqrtPi * expf(-x * x); }
};
// GELU on the GPU; the CPU kernels run the same functions vectorised (vec.h).
struct Gelu {
  using Params = GeluParams;
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, GeluParams p) { return fmath::Gelu(x, p.tanh); }
  FRUGAL_HD static float D(float dy, float x, GeluParams p) { return dy * fmath::GeluGrad(x, p.tanh); }
};

}  // namespace frugal::unary
