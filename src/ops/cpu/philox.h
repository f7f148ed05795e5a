// Counter-based random numbers: Philox-4x32-10 (Salmon, Moraes, Dror and
// Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3", SC 2011). The output
// is a pure function of a 128-bit counter and a 64-bit key, so any element's
// random word can be computed on its own, in any order, on any thread, and a
// recomputation reproduces it bit for bit. Checked against Random123's
// known-answer vectors in tests/base/philox_test.cc.
//
// Host and device: under nvcc every function here is __host__ __device__, so
// the CUDA dropout kernel (src/ops/cuda/dropout.cu) draws the very words the
// CPU kernel draws, and CPU and GPU masks agree bit for bit (nvcc needs
// --expt-relaxed-constexpr for std::array in device code; CMake passes it).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "frugal/host_device.h"

namespace frugal::cpu {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;  // Weyl key increments

// One round on a counter held in four scalars, with the round's key (k0,
// k1). Scalars rather than an array so that a loop over many counters runs
// one counter per vector lane (vec.h's philox_blocks).
FRUGAL_HD inline void PhiloxRound(uint32_t& x0, uint32_t& x1, uint32_t& x2, uint32_t& x3, uint32_t k0, uint32_t k1) {
  const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * x0;  // the round multipliers
  const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * x2;
  x0 = static_cast<uint32_t>(p1 >> 32) ^ x1 ^ k0;
  x1 = static_cast<uint32_t>(p1);
  x2 = static_cast<uint32_t>(p0 >> 32) ^ x3 ^ k1;
  x3 = static_cast<uint32_t>(p0);
}

FRUGAL_HD inline PhiloxCounter Philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  for (int round = 0; round < 10; ++round) {
    PhiloxRound(ctr[0], ctr[1], ctr[2], ctr[3], key[0], key[1]);
    key[0] += kPhiloxW0;
    key[1] += kPhiloxW1;
  }
  return ctr;
}

// SplitMix64's finaliser: a bijective 64-bit mix.
FRUGAL_HD inline uint64_t Mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The stream of one random op at one step: word i is a pure function of
// (seed, node key, step, i). Words come in blocks of four (one Philox call).
// The node key is KernelCtx::node_key: StableHash of the forward node's name.
class CounterStream {
 public:
  FRUGAL_HD CounterStream(uint64_t seed, uint64_t node_key, int64_t step) {
    const uint64_t k = Mix64(seed ^ Mix64(node_key));
    key_ = {static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)};
    step_ = static_cast<uint64_t>(step);
  }
  FRUGAL_HD PhiloxKey key() const { return key_; }
  FRUGAL_HD uint64_t step() const { return step_; }
  // Words 4*block .. 4*block+3.
  FRUGAL_HD PhiloxCounter Block(uint64_t block) const {
    return Philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                          static_cast<uint32_t>(step_), static_cast<uint32_t>(step_ >> 32)},
                         key_);
  }

 private:
  PhiloxKey key_;
  uint64_t step_;
};

}  // namespace frugal::cpu
