// The budget planner against the exact reference of tests/optimum.h (issue
// 18 §4): the reference finds the least recomputation of every drop set on
// tiny graphs, and the planner stays within 5% of it, or within the gap
// documented where it misses, on the small suite at three budgets
// (docs/memory.md, "How far from the optimum").
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "optimum.h"

namespace frugal {
namespace {

// The least recomputation cost of every drop set whose placed arena fits,
// by trying them all; -1 when none fits.
double BruteForce(const test::GapCase& c, int64_t budget) {
  const std::vector<int> cand = test::DropCandidates(c.fwd);
  const MemoryStrategy share(MemoryStrategy::kShare);
  double best = -1;
  for (uint64_t mask = 0; mask < uint64_t{1} << cand.size(); ++mask) {
    const TrainingPlan t = BuildTrainingPlan(c.fwd, c.inputs, share, test::DropLevels(c.fwd, cand, mask));
    const double cost = t.plan.recompute_cost();
    if (t.plan.arena_bytes <= budget && (best < 0 || cost < best)) best = cost;
  }
  return best;
}

TEST(OptimumGap, ReferenceIsExactOnTinyGraphs) {
  for (const test::GapCase& c : test::GapSuite(/*small=*/true)) {
    if (c.name != "chain10" && c.name != "dag10") continue;
    ASSERT_LE(test::DropCandidates(c.fwd).size(), 10u) << c.name;
    for (int64_t budget : test::GapBudgets(c)) {
      const test::Optimum o = test::OptimalDrops(c, budget, 1 << 20);
      const double best = BruteForce(c, budget);
      ASSERT_TRUE(o.exact) << c.name << " at " << budget;
      ASSERT_EQ(o.feasible, best >= 0) << c.name << " at " << budget;
      EXPECT_NEAR(o.cost, best, 1e-9 * best) << c.name << " at " << budget;
      // The plan found is what it claims.
      const TrainingPlan t = BuildTrainingPlan(c.fwd, c.inputs, MemoryStrategy::kShare, o.keep);
      EXPECT_LE(t.plan.arena_bytes, budget) << c.name;
      EXPECT_NEAR(t.plan.recompute_cost(), o.cost, 1e-9 * o.cost) << c.name;
    }
  }
}

// Every budget of the small suite is solved exactly, and the planner's plan
// recomputes at most 5% more than the optimum, or no more than the gap
// docs/memory.md records ("How far from the optimum": where and why it
// misses). A planner that closes a gap passes; update the table then.
// The layouts oneDNN picks for the CPU change the Inception module's
// arenas, so its budgets and gaps: 295% and 215% at its second and third
// budgets on an AMD EPYC, 228% and 307% on an Intel Xeon with AVX-512; each
// bound is the larger.
TEST(OptimumGap, PlannerIsWithinItsDocumentedGapOfTheOptimum) {
  const std::map<std::string, std::vector<double>> documented = {
      {"chain10", {0.05, 0.05, 0.05}},
      {"dag10", {0.05, 0.05, 0.05}},
      {"lenet", {0.05, 0.05, 0.05}},
      {"inception", {0.05, 2.946, 3.069}},
  };
  for (const test::GapCase& c : test::GapSuite(/*small=*/true)) {
    const std::vector<int64_t> budgets = test::GapBudgets(c);
    ASSERT_EQ(budgets.size(), 3u);
    for (size_t k = 0; k < budgets.size(); ++k) {
      const test::GapRow r = test::MeasureGap(c, budgets[k], 20000);
      ASSERT_TRUE(r.optimum.exact && r.optimum.feasible) << test::GapTableLine(r);
      ASSERT_TRUE(r.planner_fits) << test::GapTableLine(r);
      EXPECT_LE(r.gap(), documented.at(c.name)[k] + 5e-4) << test::GapTableLine(r);
      EXPECT_GE(r.gap(), 0) << "a one-level plan beat the exact reference: " << test::GapTableLine(r);
    }
  }
}

}  // namespace
}  // namespace frugal
