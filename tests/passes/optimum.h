// An exact reference for the budget planner (issue 18 §4): the least
// recomputation of any one-level plan (each forward result kept or dropped,
// as the planner's keep levels) whose planned arena fits a budget, by
// frugal's own evaluation (BuildTrainingPlan: the gradient pass's mirrors,
// PlanMemory's placement). A measuring tool for tests/passes/optimum_gap_test.cc
// and tools/bench/optimum_gap.cc, not part of the library.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "frugal/passes/gradient.h"
#include "passes/build_training_plan.h"

namespace frugal {
namespace test {

using Inputs = std::vector<std::pair<std::string, Shape>>;

// A forward graph with shapes inferred, and its input shapes.
struct GapCase {
  std::string name;
  Graph fwd;
  Inputs inputs;
};

// Keep levels with the candidates in `mask` (bit k: candidates[k]) dropped.
KeepLevels DropLevels(const Graph& fwd, const std::vector<int>& candidates, uint64_t mask);

// The planner's exact search of drop sets (CheapestFittingDrops,
// passes/build_training_plan.h) with no cost limit, on the share strategy:
// optimal without assuming the arena falls as more is dropped. Cut off
// after max_builds builds, the cost reached is a lower bound of the optimum
// (every cheaper set that could fit was tried). The planner runs the same search for
// ExactSearchBuilds builds and kExactPlacements placements;
// OptimumGap.ReferenceIsExactOnTinyGraphs checks it against every drop set.
// `exact`: the search ended, `cost` is the optimum (or nothing fits: no
// plan); cut off, `cost` is a lower bound of it.
DropSetSearch OptimalDrops(const GapCase& c, int64_t budget, int64_t max_builds);

// The same optimum by integer programming (tests/passes/optimum_ilp.cc, Debian's
// coinor-cbc): the least-cost drop set whose linear form of the
// BackwardReads bound fits at every step, checked exactly and cut off where
// it does not fit, max_programs times at most. `subsets`: programs solved;
// cut off, `cost` (the last program's optimum) is a lower bound of the
// optimum.
DropSetSearch IlpOptimalDrops(const GapCase& c, int64_t budget, int64_t max_programs);
// For a drop set: what the program's rows hold at each step of share (its
// forced columns at their least), and BackwardReads::Held, which the rows
// never exceed.
struct ProgramHeld {
  std::vector<int64_t> form, exact;
};
ProgramHeld IlpHeld(const GapCase& c, const KeepLevels& keep);

// The planner's plan (strategy budget) and the reference at one budget.
struct GapRow {
  std::string name;
  int nodes = 0;       // forward nodes, variables excluded
  int candidates = 0;  // of them, those a plan may drop
  int64_t budget = 0;
  bool planner_fits = false;
  double planner_cost = 0, planner_ms = 0;
  KeepLevels planner_keep;
  DropSetSearch optimum;
  int64_t programs = 0;  // integer programs solved (IlpOptimalDrops), where the search was cut off
  double optimum_ms = 0;
  // (planner - optimum) / optimum: exact, or an upper bound when the
  // optimum is only bounded; 0 when both are 0.
  double gap() const;
};
// The reference: OptimalDrops for max_builds builds; where that is cut
// off, IlpOptimalDrops for max_programs programs, whose optimum (or lower
// bound, if higher) it takes; builds and placements are both searches'.
GapRow MeasureGap(const GapCase& c, int64_t budget, int64_t max_builds, int64_t max_programs = 0);
// The planner's half of a row (no reference).
GapRow MeasurePlanner(const GapCase& c, int64_t budget);

// Three budgets for a case: 3/4, 1/2 and 1/4 of the way from the smallest
// arena of the planner's fixed strategies (drop_cheap, sqrt, logn) to
// share's arena. logn recomputes on several levels, so a one-level plan may
// not reach the tightest.
std::vector<int64_t> GapBudgets(const GapCase& c);

// The suite: random chains and DAGs of 10-40 nodes, LeNet, ResNet-20, a
// DenseNet block, an Inception-style module. `small`: the cases the test
// solves in seconds.
std::vector<GapCase> GapSuite(bool small);
// More random chains and DAGs of 20, 30 and 40 nodes, one per seed in
// [first_seed, last_seed], named "chain20/SEED" and so on.
std::vector<GapCase> RandomGapCases(uint64_t first_seed, uint64_t last_seed);
// One of them by name ("chain40/102").
GapCase RandomGapCase(const std::string& name);
// What share's backward pass reads (BackwardReadsOf), under the case's
// annotations.
BackwardReads ShareReads(const GapCase& c);

// "case nodes cand budget optimum planner gap% ..." table lines.
std::string GapTableHeader();
std::string GapTableLine(const GapRow& r);
// The names of the nodes keep drops (name@level for a checkpoint level).
std::string Dropped(const Graph& fwd, const KeepLevels& keep);

}  // namespace test
}  // namespace frugal
