// Parameter initializers, chosen per parameter by a spec string:
//
//   xavier([uniform|gaussian][,in|out|avg][,magnitude])   default uniform, avg, 3
//   msra([in|out|avg])       He et al.: gaussian with variance 2 / fan (default fan_in)
//   uniform(scale)           U(-scale, scale);  uniform(low,high): U(low, high)
//   normal(sigma)            N(0, sigma^2);     normal(mean,sigma)
//   constant(value)          zero = constant(0), one = constant(1)
//
// Xavier follows MXNet: with fan = fan_in, fan_out or their average,
// scale = sqrt(magnitude / fan); "uniform" draws U(-scale, scale) (variance
// magnitude / (3 fan)), "gaussian" draws N(0, scale^2) (variance magnitude /
// fan). A weight of shape (out, in, k...) has fan_in = in * prod(k) and
// fan_out = out * prod(k); a vector of length n has fan_in = fan_out = n.
// Xavier's arguments may come in any order (each is recognised by its form).
#pragma once

#include <string>

#include "frugal/rng.h"
#include "frugal/tensor.h"

namespace frugal {

struct InitSpec {
  enum class Kind { kXavier, kMsra, kUniform, kNormal, kConstant };
  enum class Rnd { kUniform, kGaussian };
  enum class Factor { kIn, kOut, kAvg };
  Kind kind = Kind::kXavier;
  Rnd rnd = Rnd::kUniform;       // xavier
  Factor factor = Factor::kAvg;  // xavier, msra
  double magnitude = 3;          // xavier (msra: 2)
  double a = 0, b = 0;           // uniform: [a, b); normal: mean a, sigma b; constant: a
  std::string ToString() const;  // canonical form, e.g. "xavier(gaussian,in,2)"
};

// Parses a spec. Throws Error "<where>: bad initializer '<text>': <what>
// (forms: ...)" for an unknown name, a malformed argument list or a value
// out of range.
InitSpec ParseInitSpec(const std::string& text, const std::string& where);

// Fills t (float32) by the spec. Randomness comes from rng only.
void InitTensor(const InitSpec& spec, Tensor* t, Rng* rng);

// ParseInitSpec + InitTensor; errors name the parameter.
void InitParam(const std::string& init, const std::string& name, Tensor* t, Rng* rng);

}  // namespace frugal
