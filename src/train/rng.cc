// Rng: normal draws and the saved state.
#include "frugal/rng.h"

#include <cmath>
#include <sstream>

#include "frugal/base.h"

namespace frugal {

double Rng::Normal() {
  // Box-Muller; 1 - u keeps the log finite.
  double u = 1.0 - Uniform(), v = Uniform();
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * v);
}

std::string Rng::Save() const {
  std::ostringstream os;
  os << gen_;
  return os.str();
}

void Rng::Load(const std::string& state) {
  std::istringstream is(state);
  std::mt19937_64 gen;
  is >> gen;
  // A complete state is 312 words and a position; anything left over or
  // missing means the text is not one Save wrote.
  std::string rest;
  FRUGAL_REQUIRE(!is.fail() && !(is >> rest), "random generator state is malformed (", state.size(),
                 " characters; expected the text Rng::Save writes)");
  gen_ = gen;
}

}  // namespace frugal
