#include <cmath>

#include "frugal/train.h"

namespace frugal {

double Rng::Normal() {
  // Box-Muller; 1 - u keeps the log finite.
  double u = 1.0 - Uniform(), v = Uniform();
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * v);
}

void InitParam(const std::string& init, const std::string& name, Tensor* t, Rng* rng) {
  float* w = t->f();
  const int64_t n = t->size();
  if (init == "zero" || init == "one") {
    t->Fill(init == "one" ? 1.f : 0.f);
  } else if (init == "xavier") {
    // Weight (out, in, k...): fan_in = in * k..., fan_out = out * k...
    const Shape& s = t->shape();
    double receptive = s.ndim() > 2 ? static_cast<double>(s.Prod(2, s.ndim())) : 1.0;
    double fan_in = s.ndim() > 1 ? s[1] * receptive : s[0];
    double fan_out = s[0] * receptive;
    double scale = std::sqrt(3.0 / ((fan_in + fan_out) / 2.0));
    for (int64_t i = 0; i < n; ++i) w[i] = static_cast<float>((2.0 * rng->Uniform() - 1.0) * scale);
  } else {
    throw Error(Fmt("parameter '", name, "': unknown initializer '", init, "' (built: xavier, zero, one)"));
  }
}

}  // namespace frugal
