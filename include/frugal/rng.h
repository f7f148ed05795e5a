// A deterministic random source for initializers and data order: the same
// seed gives the same numbers on every platform and standard library (std::
// distributions do not promise that), and its state can be saved into a
// checkpoint and restored bit for bit.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace frugal {

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double Uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Normal();  // standard normal (Box-Muller, one draw per pair of uniforms; no cached value)
  uint64_t Next() { return gen_(); }

  // The full generator state as text (the standard's portable
  // representation of mt19937_64). Load throws Error if the text is not a
  // state written by Save.
  std::string Save() const;
  void Load(const std::string& state);

 private:
  std::mt19937_64 gen_;
};

}  // namespace frugal
