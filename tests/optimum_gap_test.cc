// The budget planner against the exact reference of tests/optimum.h (issue
// 18 §4): the reference finds the least recomputation of every drop set on
// tiny graphs, and the planner stays within 5% of it, or within the gap
// documented where it misses, on the small suite at three budgets
// (docs/memory.md, "How far from the optimum").
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "optimum.h"

namespace frugal {
namespace {

// The least recomputation cost of every drop set whose placed arena fits,
// by trying them all; -1 when none fits.
double BruteForce(const test::GapCase& c, int64_t budget) {
  const std::vector<int> cand = DropCandidates(c.fwd);
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
    ASSERT_LE(DropCandidates(c.fwd).size(), 10u) << c.name;
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

// What a drop set keeps of BackwardReads' bytes never exceeds its arena's
// lower bound (the exact search never takes the sets whose kept bytes exceed
// the budget), on every drop set of the tiny graphs and on 200 random
// ones of LeNet and the Inception module (each candidate dropped with
// probability 1/4).
TEST(OptimumGap, BytesReadByBackwardBoundEveryDropSetsArena) {
  std::mt19937_64 rng(18);
  for (const test::GapCase& c : test::GapSuite(/*small=*/true)) {
    const std::vector<int> cand = DropCandidates(c.fwd);
    const BackwardReads reads =
        BackwardReadsOf(c.fwd, BuildTrainingPlan(c.fwd, c.inputs, MemoryStrategy::kShare, {}, {}, true));
    const bool all = cand.size() <= 10;
    for (uint64_t k = 0; k < (all ? uint64_t{1} << cand.size() : 200); ++k) {
      const uint64_t mask = all ? k : rng() & rng() & ((uint64_t{1} << cand.size()) - 1);
      const KeepLevels keep = test::DropLevels(c.fwd, cand, mask);
      int64_t kept = 0;
      for (int i = 0; i < c.fwd.num_nodes(); ++i) kept += keep[i] == 0 ? reads.bytes[i] : 0;
      const TrainingPlan t = BuildTrainingPlan(c.fwd, c.inputs, MemoryStrategy::kShare, keep, {}, true);
      ASSERT_LE(kept, t.plan.arena_bytes) << c.name << ", drop set " << mask;
    }
  }
}

// Every budget of the small suite is solved exactly, and the planner's plan
// recomputes at most 5% more than the optimum, or no more than the gap
// docs/memory.md records ("How far from the optimum": where and why it
// misses). A planner that closes a gap passes; update the table then.
// The layouts oneDNN picks for the CPU change the Inception module's
// arenas, so its budgets and gaps: 295% and 215% at its second and third
// budgets on an AMD EPYC, 228% and 307% on an Intel Xeon with AVX-512 (0%
// and 0% there since the planner's swaps and exact search; the EPYC not
// measured since); each bound is the larger.
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

// The planner ends with the exact search (drop sets cheaper than its best
// plan, cheapest first) for ExactSearchBuilds builds and kExactPlacements
// placements, so wherever the reference reaches the optimum within as many,
// the planner's plan is optimal. Before that search, the random DAG of 30
// nodes missed its optimum by 68.8% and 35.8% at its first two budgets
// (optimum 48 and 268 builds away), the DenseNet block by 169.8% and 16.2%
// at its first two (138 and 4,339).
TEST(OptimumGap, PlannerFindsEveryOptimumWithinItsExactSearch) {
  int checked = 0;
  for (const test::GapCase& c : test::GapSuite(/*small=*/false)) {
    if (c.name != "dag30" && c.name != "densenet_block") continue;
    std::vector<int64_t> budgets = test::GapBudgets(c);
    if (c.name == "densenet_block") budgets.pop_back();  // its third: 18,888 builds away, 2-3 s of planning
    for (int64_t budget : budgets) {
      const test::GapRow r = test::MeasureGap(c, budget, ExactSearchBuilds(c.fwd));
      if (!r.optimum.exact || r.optimum.placed > kExactPlacements) continue;  // further than the planner searches
      ++checked;
      ASSERT_TRUE(r.planner_fits) << test::GapTableLine(r);
      EXPECT_EQ(r.gap(), 0) << test::GapTableLine(r);
    }
  }
  EXPECT_GE(checked, 2) << "the cases' optima are further away than the exact search: choose others";
}

// A memory plan placed until it fits a size: at most that size where the
// full placement fits it, the full placement where it does not, and sound
// either way; with room to spare it stops at an arena the full placement
// improves on (the small suite's training graphs, under share and
// drop_cheap).
TEST(OptimumGap, PlacingUntilItFitsAnswersAsTheFullPlacement) {
  int stopped_early = 0;
  for (const test::GapCase& c : test::GapSuite(/*small=*/true)) {
    for (MemoryStrategy s : {MemoryStrategy::kShare, MemoryStrategy::kDropCheap}) {
      const TrainingPlan t = PlanTraining(c.fwd, c.inputs, s);
      const MemoryPlan& full = t.plan;
      SCOPED_TRACE(c.name + " " + s.Name());
      const MemoryPlan roomy = PlanMemory(t.graph, s, false, 2 * full.arena_bytes);
      EXPECT_EQ(VerifyPlan(t.graph, roomy), "");
      EXPECT_GE(roomy.arena_bytes, full.arena_bytes);
      stopped_early += roomy.arena_bytes > full.arena_bytes;
      const MemoryPlan fitted = PlanMemory(t.graph, s, false, full.arena_bytes);
      EXPECT_EQ(VerifyPlan(t.graph, fitted), "");
      EXPECT_LE(fitted.arena_bytes, full.arena_bytes);
      const MemoryPlan tight = PlanMemory(t.graph, s, false, full.arena_bytes - 1);
      EXPECT_EQ(tight.arena_bytes, full.arena_bytes);
    }
  }
  EXPECT_GT(stopped_early, 0) << "no graph whose first placement the full one improves on";
}

}  // namespace
}  // namespace frugal
