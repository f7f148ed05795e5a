// PlanTraining: the training pipeline from a forward graph to a placed plan.
// Needs: a forward graph (after the rewrites of frugal/passes/rewrite.h) and
// the shapes of its inputs. Runs InferShapes, a recompute policy or the
// budget search (frugal/passes/recompute.h), Gradient, InferShapes again,
// ChooseLayouts on the CPU and PlanMemory (frugal/passes/memory_plan.h).
// Provides: the training graph, its keep levels and its memory plan.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "frugal/base.h"
#include "frugal/graph.h"
#include "frugal/passes/gradient.h"
#include "frugal/passes/memory_plan.h"

namespace frugal {

// What the budget planner throws when no plan's arena fits the budget:
// need_bytes is the smallest arena it found (and the message says so).
struct BudgetError : Error {
  BudgetError(const std::string& msg, int64_t need) : Error(msg), need_bytes(need) {}
  int64_t need_bytes;
};

// The training graph of a forward graph under a strategy: keep levels chosen
// (searched, for sqrt and budget), gradient with mirrors, shapes, memory
// plan. A budget that no plan meets throws Error naming the smallest
// feasible budget.
struct TrainingPlan {
  Graph graph;
  MemoryPlan plan;
  KeepLevels keep;
};
// On the CPU (dev) the training graph's layouts are chosen (ChooseLayouts)
// before it is planned: a workspace depends on them. workers: how many CPU
// workers the engine runs a training graph on (CpuWorkersFor, train.h);
// a recomputing plan for two is placed for them (PlaceWithGap). None: one.
TrainingPlan PlanTraining(const Graph& fwd, const std::vector<std::pair<std::string, Shape>>& inputs,
                          const MemoryStrategy& strategy, Device dev = {},
                          const std::function<int(const Graph& train)>& workers = {});

}  // namespace frugal
