// The budget planner against the exact reference of tests/passes/optimum.h (issue
// 18 §4): the reference finds the least recomputation of every drop set on
// tiny graphs, and the planner stays within 5% of it, or within the gap
// documented where it misses, on the small suite at three budgets
// (docs/memory.md, "How far from the optimum").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "frugal/config.h"
#include "frugal/passes/costs.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/recompute.h"
#include "frugal/passes/shapes.h"
#include "frugal/passes/training_plan.h"
#include "passes/optimum.h"
#include "test_util.h"

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
      const DropSetSearch o = test::OptimalDrops(c, budget, 1 << 20);
      const double best = BruteForce(c, budget);
      ASSERT_TRUE(o.exact) << c.name << " at " << budget;
      ASSERT_EQ(o.plan.has_value(), best >= 0) << c.name << " at " << budget;
      if (!o.plan) continue;
      EXPECT_NEAR(o.cost, best, 1e-9 * best) << c.name << " at " << budget;
      // The plan found is what it claims.
      const TrainingPlan t = BuildTrainingPlan(c.fwd, c.inputs, MemoryStrategy::kShare, o.plan->keep);
      EXPECT_LE(t.plan.arena_bytes, budget) << c.name;
      EXPECT_NEAR(t.plan.recompute_cost(), o.cost, 1e-9 * o.cost) << c.name;
    }
  }
}

// BackwardReads::Bound sees a mirror's workspace where it runs, between
// two of share's steps, which Held (share's steps) does not: on the random
// chain of 30 nodes of seed 116 at its second budget, dropping n27 (a
// fully_connected with a workspace) besides six others passes Held and
// misses the budget in the build, and the bound says so before it.
TEST(OptimumGap, BoundSeesAMirrorsWorkspace) {
  const test::GapCase c = test::RandomGapCase("chain30/116");
  const int64_t budget = test::GapBudgets(c)[1];
  const BackwardReads reads = test::ShareReads(c);
  KeepLevels keep = ApplyAnnotations(c.fwd, {});
  for (int i = 0; i < c.fwd.num_nodes(); ++i)
    for (const char* name : {"n8", "n9", "n12", "n13", "n14", "n21", "n27"})
      if (c.fwd.node(i).name == name) keep[i] = kDropped;
  const std::vector<int64_t> held = reads.Held(c.fwd, keep);
  const TrainingPlan t = BuildTrainingPlan(c.fwd, c.inputs, MemoryStrategy::kShare, keep, {}, true);
  ASSERT_LE(*std::max_element(held.begin(), held.end()), budget) << "choose another set";
  ASSERT_GT(t.plan.arena_bytes, budget) << "choose another set";
  EXPECT_GT(reads.Bound(c.fwd, keep), budget);
  EXPECT_LE(reads.Bound(c.fwd, keep), t.plan.arena_bytes);
}

// BackwardReads' bound (what a drop set holds at each step) never
// exceeds its arena's lower bound (the exact search never takes the sets
// whose bound exceeds the budget), on every drop set of the tiny graphs and
// on 200 random ones of LeNet and the Inception module (each candidate
// dropped with probability 1/4); and it is at least 0.65 of it.
TEST(OptimumGap, BytesReadByBackwardBoundEveryDropSetsArena) {
  std::mt19937_64 rng(18);
  double tightest = 1;
  for (const test::GapCase& c : test::GapSuite(/*small=*/true)) {
    const std::vector<int> cand = DropCandidates(c.fwd);
    const BackwardReads reads =
        BackwardReadsOf(c.fwd, BuildTrainingPlan(c.fwd, c.inputs, MemoryStrategy::kShare, {}, {}, true));
    const bool all = cand.size() <= 10;
    for (uint64_t k = 0; k < (all ? uint64_t{1} << cand.size() : 200); ++k) {
      const uint64_t mask = all ? k : rng() & rng() & ((uint64_t{1} << cand.size()) - 1);
      const KeepLevels keep = test::DropLevels(c.fwd, cand, mask);
      const int64_t bound = reads.Bound(c.fwd, keep);
      const TrainingPlan t = BuildTrainingPlan(c.fwd, c.inputs, MemoryStrategy::kShare, keep, {}, true);
      ASSERT_LE(bound, t.plan.arena_bytes) << c.name << ", drop set " << mask;
      tightest = std::min(tightest, static_cast<double>(bound) / static_cast<double>(t.plan.arena_bytes));
    }
  }
  // Without the gradient nodes' blocks the bound was as little as 0.28 of
  // the arena on these sets (the bytes kept between the passes, the bound
  // before, no more); with them and the mirrors held from when they are
  // made 0.60, with the forward pass and each output's own reader 0.70
  // (2026-12-05).
  EXPECT_GE(tightest, 0.65) << "BackwardReads' bound is weaker than it was";
}

// The integer program's rows (IlpOptimalDrops) are BackwardReads' bound at
// every step, and that bound is no more than the arena's lower bound, on
// every drop set of the tiny graphs and on random ones of LeNet, the
// Inception module and ResNet-20 (each candidate dropped with probability
// 1/4): the program rules out no set that fits, and only the sets the
// bound rules out. (With only the step each mirror is made at latest, its
// rows were below the bound's peak on 347 of these 1,264 sets, and the
// program took 455 solves on ResNet-20's first budget without reaching
// the optimum.)
TEST(OptimumGap, ProgramRowsAreTheBoundOfEveryDropSet) {
  std::mt19937_64 rng(18);
  std::vector<test::GapCase> cases = test::GapSuite(/*small=*/true);
  for (test::GapCase& c : test::GapSuite(/*small=*/false))
    if (c.name == "resnet20") cases.push_back(std::move(c));
  int sets = 0;
  for (const test::GapCase& c : cases) {
    const std::vector<int> cand = DropCandidates(c.fwd);
    const bool all = cand.size() <= 10;
    for (uint64_t k = 0; k < (all ? uint64_t{1} << cand.size() : c.name == "resnet20" ? 40 : 100); ++k) {
      const uint64_t mask = all ? k : rng() & rng() & ((uint64_t{1} << cand.size()) - 1);
      const KeepLevels keep = test::DropLevels(c.fwd, cand, mask);
      const test::ProgramHeld held = test::IlpHeld(c, keep);
      ASSERT_EQ(held.form.size(), held.exact.size());
      for (size_t t = 0; t < held.form.size(); ++t) {
        ASSERT_LE(held.form[t], held.exact[t]) << c.name << ", drop set " << mask << ", step " << t << ": unsound";
        EXPECT_EQ(held.form[t], held.exact[t]) << c.name << ", drop set " << mask << ", step " << t << ": weaker";
      }
      const int64_t bound = *std::max_element(held.exact.begin(), held.exact.end());
      const TrainingPlan built = BuildTrainingPlan(c.fwd, c.inputs, MemoryStrategy::kShare, keep, {}, true);
      ASSERT_LE(bound, built.plan.arena_bytes) << c.name << ", drop set " << mask;
      ++sets;
    }
  }
  EXPECT_EQ(sets, 1264);
}

// The integer program finds the optimum the search of drop sets finds, at
// the small suite's three budgets each: two exact references, one answer.
// Not where the search placed more sets than the planner would
// (kExactPlacements): the program then cuts off as many sets that pass
// the bound and miss in placement, one solve each (Inception's third
// budget with the layouts of a CPU without AVX-512: 177 sets, 7 minutes).
TEST(OptimumGap, ProgramFindsTheSearchsOptimum) {
  int checked = 0;
  for (const test::GapCase& c : test::GapSuite(/*small=*/true))
    for (int64_t budget : test::GapBudgets(c)) {
      const DropSetSearch search = test::OptimalDrops(c, budget, 1 << 20);
      if (search.placed > kExactPlacements) continue;
      ++checked;
      const DropSetSearch program = test::IlpOptimalDrops(c, budget, 1000);
      ASSERT_TRUE(search.exact && program.exact) << c.name << " at " << budget;
      ASSERT_EQ(search.plan.has_value(), program.plan.has_value()) << c.name << " at " << budget;
      if (!search.plan) continue;
      EXPECT_NEAR(program.cost, search.cost, 1e-9 * search.cost) << c.name << " at " << budget;
      EXPECT_LE(program.plan->plan.arena_bytes, budget) << c.name;
      EXPECT_NEAR(program.plan->plan.recompute_cost(), program.cost, 1e-9 * program.cost) << c.name;
    }
  EXPECT_GE(checked, 11) << "of the small suite's 12 budgets";
}

// PredictedRecomputeCost (the budget search builds no chain plan predicted
// to recompute no less than its best fit) is what the plan builds to: on
// every drop set of the tiny graphs and 100 random ones of each larger case
// of the suite, and on each model config's drop_cheap, sqrt and 20 random
// drop sets; in FLOPs and priced by a cost table. GradientReads is the
// same for every plan, and BackwardReads' bound bounds its arena (the
// budget search builds no plan where it exceeds the budget). Recursive
// levels (logn) get NaN.
TEST(OptimumGap, PredictedRecomputeCostIsTheBuiltOne) {
  std::mt19937_64 rng(18);
  CostTable table;
  table.ms_per_flop = 3e-9;
  table.wall_per_schedule_ms = 0.75;
  auto check = [&](const std::string& what, const Graph& fwd, const test::Inputs& inputs,
                   const std::vector<KeepLevels>& keeps) {
    for (int priced = 0; priced < 2; ++priced) {
      MemoryStrategy s(MemoryStrategy::kShare);
      if (priced) s.costs = std::make_shared<const CostTable>(table);
      const TrainingPlan share = BuildTrainingPlan(fwd, inputs, s, ApplyAnnotations(fwd, {}), {}, true);
      const std::vector<bool> reads = GradientReads(fwd, share);
      const BackwardReads backward = BackwardReadsOf(fwd, share);
      for (size_t k = 0; k < keeps.size(); ++k) {
        const TrainingPlan t = BuildTrainingPlan(fwd, inputs, s, keeps[k], {}, true);
        const double built = t.plan.recompute_cost();
        const double predicted = PredictedRecomputeCost(fwd, keeps[k], reads, s.costs.get());
        ASSERT_NEAR(predicted, built, 1e-9 * built) << what << ", keep levels " << k << (priced ? ", priced" : "");
        ASSERT_EQ(GradientReads(fwd, t), reads) << what << ", keep levels " << k << ": not the same as without drops";
        // The budget search builds no plan whose BackwardReads bound exceeds the budget.
        ASSERT_LE(backward.Bound(fwd, keeps[k]), t.plan.arena_bytes)
            << what << ", keep levels " << k << ": BackwardReads is no lower bound";
      }
    }
  };
  auto random_drops = [&](const Graph& fwd, int count) {
    const std::vector<int> cand = DropCandidates(fwd);
    std::vector<KeepLevels> keeps;
    for (int k = 0; k < count; ++k) {
      KeepLevels keep = ApplyAnnotations(fwd, {});
      for (int i : cand)
        if (rng() % 4 == 0) keep[i] = kDropped;
      keeps.push_back(keep);
    }
    return keeps;
  };
  for (const test::GapCase& c : test::GapSuite(/*small=*/false)) {
    const std::vector<int> cand = DropCandidates(c.fwd);
    std::vector<KeepLevels> keeps;
    if (cand.size() <= 10) {
      for (uint64_t mask = 0; mask < uint64_t{1} << cand.size(); ++mask)
        keeps.push_back(test::DropLevels(c.fwd, cand, mask));
    } else {
      keeps = random_drops(c.fwd, 100);
    }
    check(c.name, c.fwd, c.inputs, keeps);
  }
  int configs = 0, recursive_configs = 0;
  for (const std::string& path : test::ModelConfigPaths()) {
    const ConfigFile cfg = LoadConfig(path, {});
    Graph fwd = BuildGraph(cfg);
    test::Inputs inputs;
    for (const Node& n : fwd.nodes()) {
      if (n.var != VarKind::kInput) continue;
      const auto& dims =
          n.name == cfg.net.data().label_name() ? cfg.net.data().label_shape() : cfg.net.data().sample_shape();
      std::vector<int64_t> shape{cfg.net.data().batch_size()};
      shape.insert(shape.end(), dims.begin(), dims.end());
      inputs.push_back({n.name, Shape(shape)});
    }
    InferShapes(&fwd, inputs);
    std::vector<KeepLevels> keeps = random_drops(fwd, 20);
    keeps.push_back(DropCheapLevels(fwd));
    int64_t forward_bytes = 0;
    for (int i = 0; i < fwd.num_nodes(); ++i)
      for (int k = 0; !fwd.node(i).is_variable() && k < fwd.NumOutputs(i); ++k) forward_bytes += fwd.EntryBytes({i, k});
    keeps.push_back(SqrtLevels(fwd, forward_bytes / 8));
    check(path, fwd, inputs, keeps);
    const KeepLevels logn = LognLevels(fwd);
    const bool recursive = std::any_of(logn.begin(), logn.end(), [](int l) { return l != 0 && l != kDropped; });
    if (recursive) { EXPECT_TRUE(std::isnan(PredictedRecomputeCost(fwd, logn, {}, nullptr))) << path; }
    recursive_configs += recursive;
    ++configs;
  }
  EXPECT_GE(configs, 9);
  EXPECT_GT(recursive_configs, 0) << "no logn plan with recursive levels";
}

// Every budget of the suite that the reference solves within 1.28 million
// sets (20,000 builds allowed) or, where those are cut off, with one
// integer program (chain40's second budget and ResNet-20's three), is
// solved exactly, and the planner's plan recomputes at most 5% more than
// the optimum, or no more than the gap docs/memory.md records ("How far
// from the optimum": where and why it misses). A planner that closes a gap
// passes; update the table then. NAN: chain40's third budget, whose
// optimum takes more programs than a test should (the planner is within
// 0.8% of its lower bound). The layouts oneDNN picks for the CPU change
// the Inception module's arenas, so its budgets and optima: its gaps were
// 295% and 215% at its second and third budgets on an AMD EPYC, 228% and
// 307% on an Intel Xeon with AVX-512, and are 0% on both since the
// planner's swaps and exact search; on a CPU with AVX2 and no AVX-512 its
// third budget is 8.13 MiB (8.14 with AVX-512), where the optimum (15.73
// MFLOP) is the 177th drop set the reference places, beyond the planner's
// 32 (kExactPlacements): the planner recomputes 30% more.
TEST(OptimumGap, PlannerIsWithinItsDocumentedGapOfTheOptimum) {
  const std::map<std::string, std::vector<double>> documented = {
      {"chain10", {0.05, 0.05, 0.05}},   {"dag10", {0.05, 0.05, 0.05}},          {"lenet", {0.05, 0.05, 0.05}},
      {"inception", {0.05, 0.05, 0.30}}, {"chain20", {0.05, 0.05, 0.05}},        {"chain30", {0.05, 0.05, 0.05}},
      {"chain40", {0.05, 0.05, NAN}},    {"dag20", {0.05, 0.05, 0.05}},          {"dag30", {0.05, 0.05, 0.05}},
      {"dag40", {0.05, 0.05, 0.05}},     {"densenet_block", {0.05, 0.05, 0.05}}, {"resnet20", {0.05, 0.05, 0.05}},
  };
  int solved = 0;
  for (const test::GapCase& c : test::GapSuite(/*small=*/false)) {
    const std::vector<int64_t> budgets = test::GapBudgets(c);
    ASSERT_EQ(budgets.size(), 3u);
    for (size_t k = 0; k < budgets.size(); ++k) {
      const double gap = documented.at(c.name)[k];
      if (std::isnan(gap)) continue;
      const test::GapRow r = test::MeasureGap(c, budgets[k], 20000, /*max_programs=*/1);
      ASSERT_TRUE(r.optimum.exact && r.optimum.plan) << test::GapTableLine(r);
      ASSERT_TRUE(r.planner_fits) << test::GapTableLine(r);
      EXPECT_LE(r.gap(), gap + 5e-4) << test::GapTableLine(r);
      EXPECT_GE(r.gap(), 0) << "a one-level plan beat the exact reference: " << test::GapTableLine(r);
      ++solved;
    }
  }
  EXPECT_EQ(solved, 35);
}

// Beyond the suite, the random chain of 40 nodes of seed 102 at its second
// budget: its optimum drops ten cheap nodes; the planner's plan dropped 15
// and recomputed 330% more until a repair whose built graph peaked at a
// mirror's step (a recomputed fully_connected's workspace, which the bound
// leaves out) kept that mirror's node (Repair, plan_training.cc).
TEST(OptimumGap, PlannerRepairsAtAMirrorsStep) {
  const test::GapCase c = test::RandomGapCase("chain40/102");
  const test::GapRow r = test::MeasureGap(c, test::GapBudgets(c)[1], 200000);
  ASSERT_TRUE(r.optimum.exact && r.optimum.plan && r.planner_fits) << test::GapTableLine(r);
  EXPECT_LE(r.gap(), 0.05) << test::GapTableLine(r);
}

// The planner's plan is a local optimum of exact moves: no recomputed node
// kept again with the cheapest drops the exact search then finds (the
// plan's other drops fixed, 50 builds and one placement) recomputes less,
// on the random chain of 40 nodes of seed 126 at its second budget, where
// such a move once recomputed 24.8% less.
TEST(OptimumGap, NoExactMoveImprovesThePlannersPlan) {
  const test::GapCase c = test::RandomGapCase("chain40/126");
  const int64_t budget = test::GapBudgets(c)[1];
  const MemoryStrategy s(MemoryStrategy::kBudget, budget);
  const TrainingPlan plan = PlanTraining(c.fwd, c.inputs, s);
  const BackwardReads reads = test::ShareReads(c);
  const std::vector<int> candidates = DropCandidates(c.fwd);
  int moves = 0;
  for (int i : candidates) {
    if (plan.keep[i] != kDropped) continue;
    KeepLevels keep = plan.keep;
    keep[i] = 0;
    std::vector<int> kept;
    for (int j : candidates)
      if (keep[j] == 0 && j != i) kept.push_back(j);
    const DropSetSearch r = CheapestFittingDrops(c.fwd, c.inputs, s, {}, keep, kept, reads, budget, INFINITY, 50, 1);
    ++moves;
    if (r.plan) {
      EXPECT_GE(r.plan->plan.recompute_cost(), plan.plan.recompute_cost()) << "keeping " << c.fwd.node(i).name;
    }
  }
  EXPECT_GT(moves, 0) << "the plan recomputes nothing: choose another budget";
}

// The planner ends with the exact search (drop sets cheaper than its best
// plan, cheapest first) for ExactSearchBuilds builds and kExactPlacements
// placements, so wherever the reference reaches the optimum within as many,
// the planner's plan is optimal. Before that search, the random DAG of 30
// nodes missed its optimum by 68.8% and 35.8% at its first two budgets
// (optimum 48 and 268 builds away), the DenseNet block by 169.8% and 16.2%
// at its first two (138 and 4,339). Its third (77.4%) was 18,888 builds
// away, beyond the search, until the bound of what each step holds
// (BackwardReads) brought it to 503.
TEST(OptimumGap, PlannerFindsEveryOptimumWithinItsExactSearch) {
  int checked = 0;
  for (const test::GapCase& c : test::GapSuite(/*small=*/false)) {
    if (c.name != "dag30" && c.name != "densenet_block") continue;
    for (int64_t budget : test::GapBudgets(c)) {
      const test::GapRow r = test::MeasureGap(c, budget, ExactSearchBuilds(c.fwd));
      if (!r.optimum.exact || r.optimum.placed > kExactPlacements) continue;  // further than the planner searches
      ++checked;
      ASSERT_TRUE(r.planner_fits) << test::GapTableLine(r);
      EXPECT_EQ(r.gap(), 0) << test::GapTableLine(r);
    }
  }
  EXPECT_GE(checked, 6) << "the cases' optima are further away than the exact search: choose others";
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
      const MemoryPlan full = PlanMemory(t.graph, s);  // not spread for two workers (PlaceWithGap)
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
