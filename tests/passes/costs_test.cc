// Plans priced in time: the cost table's file, the step time a plan
// predicts from it, and a budget search that minimises predicted time
// rather than FLOPs where the two disagree.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include "frugal/passes/costs.h"
#include "frugal/passes/schedule.h"
#include "frugal/train.h"
#include "test_util.h"

namespace frugal {
namespace {

// A chain of fully_connected+relu layers whose widths alternate, so that
// FLOPs and bytes per layer vary along it.
ConfigFile UnevenChain(int depth) {
  std::string text = "version: 1\n";
  std::string prev = "data";
  for (int i = 0; i < depth; ++i) {
    const std::string fc = "fc" + std::to_string(i), relu = "relu" + std::to_string(i);
    const int hidden = i % 3 == 0 ? 256 : i % 3 == 1 ? 32 : 96;
    text += "node { name: \"" + fc + "\" op: \"fully_connected\" input: \"" + prev +
            "\" attr { key: \"num_hidden\" value: \"" + std::to_string(hidden) + "\" } }\n";
    text += "node { name: \"" + relu + "\" op: \"relu\" input: \"" + fc + "\" }\n";
    prev = relu;
  }
  text += "node { name: \"out\" op: \"fully_connected\" input: \"" + prev +
          "\" attr { key: \"num_hidden\" value: \"10\" } }\n";
  text += "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"out\" input: \"label\" }\n";
  text += "data { batch_size: 16 sample_shape: [64] }\nsolver { lr: 0.05 seed: 5 }\n";
  return ParseConfig(text, "uneven.prototxt", {});
}

// A table for the model's forward nodes: every node `fc_ms` forward if a
// fully_connected, else 0.5; backward twice that; gradient sums 0.25; one
// worker; the step's wall time half its schedule's.
CostTable FlatTable(const Graph& g, double fc_ms) {
  CostTable t;
  for (int i = 0; i < g.num_forward(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) continue;
    const double f = n.op->name() == "fully_connected" ? fc_ms : 0.5;
    if (t.Of(g, i).count == 0) t.Add(CostTable::Key(g, i), f, 2 * f);
  }
  t.ms_per_flop = 1e-9;
  t.sums_ms = 0.25;
  t.wall_per_schedule_ms = 0.5;
  return t;
}

MemoryStrategy Priced(MemoryStrategy s, const CostTable& t) {
  s.costs = std::make_shared<const CostTable>(t);
  return s;
}

// Predicted recomputation of a plan under a table: its mirrors' forward times.
double ExtraMs(const Graph& train, const CostTable& t) {
  double ms = 0;
  for (int i = 0; i < train.num_nodes(); ++i)
    if (train.node(i).mirror_of >= 0) ms += t.Of(train, i).forward_ms;
  return ms;
}

TEST(CostTable, SavesLoadsAndAveragesPerKey) {
  const Model m = BuildModel(UnevenChain(3), MemoryStrategy::kShare);
  const Graph& g = m.train;
  const int fc0 = g.FindNode("fc0");
  EXPECT_EQ(CostTable::Key(g, fc0), "fully_connected num_hidden=256 (16,64)float32 (256,64)float32 (256)float32");
  CostTable t;
  t.Add(CostTable::Key(g, fc0), 1.0, 3.0, 100, 300);
  t.Add(CostTable::Key(g, fc0), 2.0, 5.0, 200, 500);
  t.ms_per_flop = 2e-9;
  t.backward_ratio = 1.5;
  t.sums_ms = 0.125;
  t.sums_cold = 4096;
  t.cache_bytes = int64_t{32} << 20;
  t.ms_per_cold_byte = 2.5e-8;
  t.workers = 2;
  t.wall_per_schedule_ms = 0.75;
  test::TempDir dir;
  t.Save(dir.File("t.costs"));
  const CostTable back = CostTable::Load(dir.File("t.costs"));
  ASSERT_EQ(back.costs().size(), 1u);
  EXPECT_DOUBLE_EQ(back.Of(g, fc0).forward_ms, 1.5);
  EXPECT_DOUBLE_EQ(back.Of(g, fc0).backward_ms, 4.0);
  EXPECT_DOUBLE_EQ(back.Of(g, fc0).forward_cold, 150);
  EXPECT_DOUBLE_EQ(back.Of(g, fc0).backward_cold, 400);
  EXPECT_EQ(back.costs().begin()->second.count, 2);
  EXPECT_DOUBLE_EQ(back.sums_ms, 0.125);
  EXPECT_DOUBLE_EQ(back.sums_cold, 4096);
  EXPECT_EQ(back.cache_bytes, int64_t{32} << 20);
  EXPECT_DOUBLE_EQ(back.ms_per_cold_byte, 2.5e-8);
  EXPECT_EQ(back.workers, 2);
  EXPECT_DOUBLE_EQ(back.wall_per_schedule_ms, 0.75);
  // A node not in the table: its FLOPs at the table's rate.
  const int fc1 = g.FindNode("fc1");
  EXPECT_DOUBLE_EQ(back.Of(g, fc1).forward_ms, NodeFlops(g, fc1) * 2e-9);
  EXPECT_DOUBLE_EQ(back.Of(g, fc1).backward_ms, NodeFlops(g, fc1) * 2e-9 * 1.5);
  EXPECT_EQ(back.Of(g, fc1).count, 0);
  EXPECT_EQ(back.Of(g, fc0).count, 2);
}

TEST(CostTable, BadFilesNameTheLine) {
  test::TempDir dir;
  auto expect_error = [&](const std::string& text, const std::string& needle) {
    std::ofstream(dir.File("bad.costs")) << text;
    try {
      CostTable::Load(dir.File("bad.costs"));
      ADD_FAILURE() << "no error for: " << text;
    } catch (const Error& e) { EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what(); }
  };
  expect_error("ms_per_flop 1e-9\n1 2 0 0 x relu (2)float32\n", "bad.costs:2: an entry without finite forward_ms >= 0");
  // A table of the format before cold bytes: its entries lack them.
  expect_error("ms_per_flop 1e-9\n1 2 1 relu (2)float32\n", "bad.costs:2: an entry without finite forward_ms >= 0");
  expect_error("ms_per_flop 1e-9\n1 2 0 -5 1 k\n", "backward_cold >= 0");
  expect_error("ms_per_flop 1e-9\n1 2 0 0 1\n", "bad.costs:2: an entry without its key");
  expect_error("ms_per_flop 1e-9\nfast 1\n", "bad.costs:2: an unknown line");
  expect_error("ms_per_flop -1\n", "bad.costs:1: a missing, negative or non-finite value");
  expect_error("ms_per_flop 1\nms_per_cold_byte -1\n", "bad.costs:2: a missing, negative or non-finite value");
  // Not a number passes every comparison: refused as such.
  expect_error("ms_per_flop 1\nsums_ms nan\n", "bad.costs:2: a missing, negative or non-finite value");
  expect_error("ms_per_flop 1e-9\nnan 2 0 0 1 k\n", "bad.costs:2: an entry without finite forward_ms >= 0");
  expect_error("ms_per_flop 1e-9\n1 inf 0 0 1 k\n", "bad.costs:2: an entry without finite forward_ms >= 0");
  expect_error("ms_per_flop 1\ncache_bytes -1\n", "bad.costs:2: a missing or negative cache size");
  expect_error("ms_per_flop 1\nworkers 0\n", "bad.costs:2: a missing or non-positive worker count");
  expect_error("ms_per_flop 1\n1 2 0 0 1 k\n1 2 0 0 1 k\n", "bad.costs:3: a key listed twice");
  expect_error("1 2 0 0 1 k\n", "no ms_per_flop line");
  EXPECT_THROW(CostTable::Load(dir.File("missing.costs")), Error);
}

// On one worker the schedule runs every node back to back: a plan's step is
// the sum of its nodes' times, recomputation included.
TEST(CostTable, PlansOnOneWorkerPredictTheSumOfTheirNodes) {
  const ConfigFile cfg = UnevenChain(6);
  const Model share = BuildModel(cfg, MemoryStrategy::kShare);
  const CostTable t = FlatTable(share.train, 3.0);
  int fcs = 0, others = 0;
  for (int i = 0; i < share.train.num_forward(); ++i) {
    const Node& n = share.train.node(i);
    if (!n.is_variable()) (n.op->name() == "fully_connected" ? fcs : others) += 1;
  }
  const Model m = BuildModel(cfg, Priced(MemoryStrategy::kSqrt, t));
  ASSERT_TRUE(m.train_plan.priced());
  ASSERT_GT(m.train_plan.num_recomputed, 0);
  EXPECT_DOUBLE_EQ(m.train_plan.extra_ms, 0.5 * ExtraMs(m.train, t));
  EXPECT_NEAR(m.train_plan.step_ms, 0.5 * (fcs * 9.0 + others * 1.5) + m.train_plan.extra_ms, 1e-9);
  EXPECT_FALSE(BuildModel(cfg, MemoryStrategy::kSqrt).train_plan.priced());
}

// With ms_per_cold_byte, a placed plan's ops are priced where their bytes
// are: each moved by that much per cold byte (ColdBytes) over what the
// table measured. A table of the share plan's own cold bytes (what `frugal
// time --save-costs` writes) predicts share's one-worker step unchanged; the
// sqrt plan's moves by the cold bytes its ops gain or lose.
TEST(CostTable, PlacedOpsArePricedByTheirColdBytes) {
  const ConfigFile cfg = UnevenChain(6);
  const Model share = BuildModel(cfg, MemoryStrategy::kShare);
  const Graph& g = share.train;
  const int64_t cache = share.train_plan.arena_bytes / 4;
  const std::vector<double> cold = ColdBytes(g, share.train_plan, cache);
  CostTable flat = FlatTable(g, 3.0);
  CostTable t;
  std::vector<double> backward_cold(g.num_forward(), 0);
  double sums_cold = 0;
  for (int i = g.num_forward(); i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) continue;
    (n.fwd >= 0 ? backward_cold[n.fwd] : sums_cold) += cold[i];
  }
  for (int i = 0; i < g.num_forward(); ++i) {
    if (g.node(i).is_variable()) continue;
    const CostTable::Cost c = flat.Of(g, i);
    t.Add(CostTable::Key(g, i), c.forward_ms, c.backward_ms, cold[i], backward_cold[i]);
  }
  t.ms_per_flop = flat.ms_per_flop;
  t.sums_ms = flat.sums_ms;
  t.sums_cold = sums_cold;
  t.cache_bytes = cache;
  t.ms_per_cold_byte = 1e-6;  // 1 ms per MB
  t.wall_per_schedule_ms = 0.5;
  CostTable blind = t;
  blind.ms_per_cold_byte = 0;

  const Model priced_share = BuildModel(cfg, Priced(MemoryStrategy::kShare, t));
  const Model blind_share = BuildModel(cfg, Priced(MemoryStrategy::kShare, blind));
  ASSERT_GT(std::accumulate(cold.begin(), cold.end(), 0.0), 0);
  EXPECT_NEAR(priced_share.train_plan.step_ms, blind_share.train_plan.step_ms, 1e-9);

  const Model sqrt = BuildModel(cfg, Priced(MemoryStrategy::kSqrt, t));
  const Model blind_sqrt = BuildModel(cfg, Priced(MemoryStrategy::kSqrt, blind));
  ASSERT_GT(sqrt.train_plan.num_recomputed, 0);
  const std::vector<double> at = t.NodeMs(sqrt.train, &sqrt.train_plan), measured = t.NodeMs(sqrt.train);
  const std::vector<double> sqrt_cold = ColdBytes(sqrt.train, sqrt.train_plan, cache);
  for (int i = 0; i < sqrt.train.num_nodes(); ++i) {
    const Node& n = sqrt.train.node(i);
    if (n.mirror_of < 0) continue;  // a recomputation: its original's forward time and cold bytes
    EXPECT_NEAR(at[i], std::max(0.0, measured[i] + 1e-6 * (sqrt_cold[i] - cold[n.mirror_of])), 1e-9) << n.name;
  }
  EXPECT_NEAR(sqrt.train_plan.step_ms, 0.5 * std::accumulate(at.begin(), at.end(), 0.0), 1e-9);
  EXPECT_NEAR(blind_sqrt.train_plan.step_ms, 0.5 * std::accumulate(measured.begin(), measured.end(), 0.0), 1e-9);
  EXPECT_GT(std::abs(sqrt.train_plan.step_ms - blind_sqrt.train_plan.step_ms), 1e-3);  // some bytes moved
  // The planners' price stays the measured times.
  EXPECT_DOUBLE_EQ(sqrt.train_plan.extra_ms, blind_sqrt.train_plan.extra_ms);
}

TEST(CostTable, BudgetPlansMinimiseTimeWhereFlopsDisagree) {
  // fully_connected priced equal whatever its size, relu at 0.5 ms: recomputing
  // the wide layers is as cheap in time as the narrow ones, unlike in FLOPs.
  const ConfigFile cfg = UnevenChain(24);
  const Model share = BuildModel(cfg, MemoryStrategy::kShare);
  const Model sqrt = BuildModel(cfg, MemoryStrategy::kSqrt);
  const CostTable t = FlatTable(share.train, 1.0);
  int strictly_faster = 0;
  // Budgets 4/7, 5/7 and 6/7 of the way from sqrt's arena to share's: a
  // plan whose exact search spends all its builds takes 0.5-0.7 s, and at
  // 1/7-3/7 too one of the two does.
  for (int k = 4; k <= 6; ++k) {
    const int64_t budget =
        sqrt.train_plan.arena_bytes + (share.train_plan.arena_bytes - sqrt.train_plan.arena_bytes) * k / 7;
    const Model by_flops = BuildModel(cfg, {MemoryStrategy::kBudget, budget});
    const Model by_time = BuildModel(cfg, Priced({MemoryStrategy::kBudget, budget}, t));
    EXPECT_LE(by_time.train_plan.arena_bytes, budget);
    const double flops_plan_ms = ExtraMs(by_flops.train, t), time_plan_ms = ExtraMs(by_time.train, t);
    EXPECT_LE(time_plan_ms, flops_plan_ms * (1 + 1e-9)) << "budget " << budget;
    EXPECT_LE(by_flops.train_plan.extra_flops, by_time.train_plan.extra_flops * (1 + 1e-9)) << "budget " << budget;
    strictly_faster += time_plan_ms < flops_plan_ms * 0.95;
  }
  EXPECT_GT(strictly_faster, 0) << "pricing in time never changed the plan";
}

TEST(CostTable, TimeWritesATablePlanReadsIt) {
  test::TempDir dir;
  const std::string config = std::string(FRUGAL_SOURCE_DIR) + "/models/mlp/fashion_mnist.prototxt";
  test::RunResult r =
      test::RunFrugal("time --config " + config + " --iters 1 --warmup 0 --save-costs " + dir.File("mlp.costs"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cost table: " + dir.File("mlp.costs")), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("locality: "), std::string::npos) << r.output;
  const CostTable t = CostTable::Load(dir.File("mlp.costs"));
  EXPECT_GT(t.cache_bytes, 0);
  r = test::RunFrugal("plan --config " + config + " --costs " + dir.File("mlp.costs"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("predicted step"), std::string::npos) << r.output;
  std::ofstream(dir.File("bad.costs")) << "ms_per_flop 1\nsoon\n";
  r = test::RunFrugal("plan --config " + config + " --costs " + dir.File("bad.costs"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("bad.costs:2: an unknown line"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace frugal
