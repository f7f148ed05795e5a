#include <algorithm>
#include <cmath>

#include "frugal/train.h"

namespace frugal {

void Metrics::Update(const Tensor& prob, const Tensor& label, int64_t num_valid) {
  const int64_t k = prob.shape()[1];
  const float* p = prob.f();
  const float* y = label.f();
  for (int64_t i = 0; i < num_valid; ++i) {
    const float* pi = p + i * k;
    int64_t truth = static_cast<int64_t>(y[i]);
    int64_t guess = std::max_element(pi, pi + k) - pi;
    correct_ += guess == truth;
    ce_ -= std::log(std::max(pi[truth], 1e-12f));
  }
  n_ += num_valid;
}

std::string Metrics::ToString(const std::string& prefix) const {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%saccuracy=%.6f %scross_entropy=%.6f", prefix.c_str(), accuracy(),
                prefix.c_str(), cross_entropy());
  return buf;
}

}  // namespace frugal
