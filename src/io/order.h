// Reproducible randomness for the data iterators: the epoch's sample order and
// the per-sample random stream are pure functions of (seed, epoch[, sample]),
// identical on every platform and standard library (no std::shuffle, no std
// distributions), and independent of threads and batch sizes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "frugal/io.h"

namespace frugal::io {

// SplitMix64 finaliser: spreads nearby seeds/epochs over the whole 64-bit space.
inline uint64_t Mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A uniform integer in [0, n), n >= 1, without modulo bias.
inline uint64_t UniformBelow(std::mt19937_64& rng, uint64_t n) {
  // threshold = 2^64 mod n; draws below it are rejected so the remaining
  // 2^64 - threshold values split evenly into n classes.
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    uint64_t r = rng();
    if (r >= threshold) return r % n;
  }
}

// A uniform double in [0, 1) from the top 53 bits of one draw.
inline double Uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// The order of epoch `epoch` over n samples: 0..n-1, or with shuffle a
// Fisher-Yates permutation seeded from (seed, epoch) only.
inline std::vector<int64_t> EpochOrder(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  if (!shuffle) return order;
  std::mt19937_64 rng(Mix64(seed ^ Mix64(static_cast<uint64_t>(epoch))));
  // Back to front: swap each slot with a uniform earlier-or-same slot.
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(UniformBelow(rng, static_cast<uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

// The batches of a data-parallel part (frugal/io.h, Shard) over an epoch of
// n samples: batch k of part r of `parts`, batch b each, is positions
// [first, first + b) of the epoch's order, first = (k * parts + r) * b, each
// taken modulo n (the last global batch wraps to the start of the order).
inline void CheckShard(const Shard& s, const std::string& where) {
  FRUGAL_REQUIRE(s.num_parts >= 1 && s.part_index >= 0 && s.part_index < s.num_parts, where, ": data shard: part ",
                 s.part_index, " of ", s.num_parts, " is not a part (need 0 <= part < num_parts)");
}
inline int64_t PartBatchCount(int64_t n, int64_t batch, int parts) {
  const int64_t global = batch * parts;
  return (n + global - 1) / global;
}
inline int64_t PartFirst(int64_t k, int64_t batch, int part, int parts) { return (k * parts + part) * batch; }
// The real rows of the batch that starts at `first`: 0 to batch.
inline int64_t ValidRows(int64_t n, int64_t first, int64_t batch) {
  return std::max<int64_t>(0, std::min(batch, n - first));
}

// For Describe(): "" for one part, else which rows of which global batch.
inline std::string DescribePart(const Shard& s, int64_t batch) {
  if (s.num_parts == 1) return "";
  return Fmt(" (part ", s.part_index, " of ", s.num_parts, ": rows ", s.part_index * batch, "-",
             (s.part_index + 1) * batch - 1, " of every global batch of ", s.num_parts * batch, ")");
}

// The random stream of one sample in one epoch (augmentation draws): seeded
// from (seed, epoch, sample) so it does not depend on which thread decodes
// the sample or in which batch it lands.
inline std::mt19937_64 SampleRng(uint64_t seed, int64_t epoch, int64_t sample) {
  const uint64_t s = Mix64(seed ^ Mix64(static_cast<uint64_t>(epoch) ^ Mix64(static_cast<uint64_t>(sample) + 1)));
  return std::mt19937_64(s);
}

}  // namespace frugal::io
