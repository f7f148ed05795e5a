// The training graph for given keep levels, as PlanTraining's searches
// build each candidate. Not in the public API: for the planner's searches
// and for measuring plans chosen elsewhere (the exact reference of
// tests/optimum.cc).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "frugal/passes.h"

namespace frugal {

// Gradient with mirrors, shapes, layouts on the CPU, memory plan (with
// estimate, not placed: arena_bytes is the lower bound, which the placed
// arena never undercuts).
TrainingPlan BuildTrainingPlan(const Graph& fwd, const std::vector<std::pair<std::string, Shape>>& inputs,
                               const MemoryStrategy& strategy, KeepLevels keep, Device dev = {}, bool estimate = false);

}  // namespace frugal
