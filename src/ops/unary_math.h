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
// Trigonometric and hyperbolic functions and their inverses (x inside
// their domains; outside, NaN as the C library gives).
struct Sin {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return sinf(x); }
  FRUGAL_HD static float D(float dy, float x, ClipParams) { return dy * cosf(x); }
};
struct Cos {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return cosf(x); }
  FRUGAL_HD static float D(float dy, float x, ClipParams) { return -dy * sinf(x); }
};
struct Tan {
  static constexpr bool kReadsY = true;
  FRUGAL_HD static float F(float x, ClipParams) { return tanf(x); }
  FRUGAL_HD static float D(float dy, float y, ClipParams) { return dy * (1 + y * y); }
};
struct Asin {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return asinf(x); }
  FRUGAL_HD static float D(float dy, float x, ClipParams) { return dy / sqrtf(1 - x * x); }
};
struct Acos {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return acosf(x); }
  FRUGAL_HD static float D(float dy, float x, ClipParams) { return -dy / sqrtf(1 - x * x); }
};
struct Atan {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return atanf(x); }
  FRUGAL_HD static float D(float dy, float x, ClipParams) { return dy / (1 + x * x); }
};
struct Sinh {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return sinhf(x); }
  FRUGAL_HD static float D(float dy, float x, ClipParams) { return dy * coshf(x); }
};
struct Asinh {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return asinhf(x); }
  FRUGAL_HD static float D(float dy, float x, ClipParams) { return dy / sqrtf(x * x + 1); }
};
struct Acosh {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return acoshf(x); }
  FRUGAL_HD static float D(float dy, float x, ClipParams) { return dy / sqrtf(x * x - 1); }
};
struct Atanh {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return atanhf(x); }
  FRUGAL_HD static float D(float dy, float x, ClipParams) { return dy / (1 - x * x); }
};

// Steps: their gradient is 0 wherever it exists (as PyTorch's).
struct Floor {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return floorf(x); }
  FRUGAL_HD static float D(float, float, ClipParams) { return 0.f; }
};
struct Ceil {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return ceilf(x); }
  FRUGAL_HD static float D(float, float, ClipParams) { return 0.f; }
};
// Halves to even (rintf in the default rounding mode), as ONNX and numpy round.
struct Round {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return rintf(x); }
  FRUGAL_HD static float D(float, float, ClipParams) { return 0.f; }
};
struct Sign {
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, ClipParams) { return x > 0 ? 1.f : x < 0 ? -1.f : x; }  // 0, -0, NaN kept
  FRUGAL_HD static float D(float, float, ClipParams) { return 0.f; }
};

// GELU on the GPU; the CPU kernels run the same functions vectorised (vec.h).
struct Gelu {
  using Params = GeluParams;
  static constexpr bool kReadsY = false;
  FRUGAL_HD static float F(float x, GeluParams p) { return fmath::Gelu(x, p.tanh); }
  FRUGAL_HD static float D(float dy, float x, GeluParams p) { return dy * fmath::GeluGrad(x, p.tanh); }
};

}  // namespace frugal::unary
