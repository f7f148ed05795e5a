// Training a config's model for a few steps outside the trainer: the
// reference that memory strategies must reproduce bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "frugal/train.h"

namespace frugal::test {

// Runs `steps` steps of the config's optimizer (solver section) on the naive
// engine, on pseudo-random data drawn from the solver's seed (data uniform in
// [-1, 1), labels in [0, 10)). Returns every parameter's values, then the
// last step's output 0. If arena_allocated is set, it gets the bytes the
// executor allocated for its arena.
std::vector<std::vector<float>> TrainSteps(const ConfigFile& cfg, const MemoryStrategy& strategy, int steps,
                                           int64_t* arena_allocated = nullptr);

}  // namespace frugal::test
