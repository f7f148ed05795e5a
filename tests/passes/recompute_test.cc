// Recomputation: every strategy trains bit-identically to `none`, the
// sublinear plans use less memory on a deep chain, mirrors sit just before
// their first backward reader, and budgets are met or refused with the
// smallest feasible one.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>

#include "frugal/passes/memory_plan.h"
#include "frugal/passes/recompute.h"
#include "frugal/train.h"
#include "passes/build_training_plan.h"
#include "train/train_steps.h"

namespace frugal {
namespace {

// A chain of `depth` fully_connected+relu layers (a deep MLP), with dropout
// after each relu if asked.
ConfigFile DeepChain(int depth, int hidden = 64, bool dropout = false) {
  std::string text = "version: 1\n";
  std::string prev = "data";
  for (int i = 0; i < depth; ++i) {
    std::string fc = "fc" + std::to_string(i), relu = "relu" + std::to_string(i);
    text += "node { name: \"" + fc + "\" op: \"fully_connected\" input: \"" + prev +
            "\" attr { key: \"num_hidden\" value: \"" + std::to_string(hidden) + "\" } }\n";
    text += "node { name: \"" + relu + "\" op: \"relu\" input: \"" + fc + "\" }\n";
    prev = relu;
    if (dropout) {
      std::string drop = "drop" + std::to_string(i);
      text += "node { name: \"" + drop + "\" op: \"dropout\" input: \"" + relu +
              "\" attr { key: \"p\" value: \"0.2\" } }\n";
      prev = drop;
    }
  }
  text += "node { name: \"out\" op: \"fully_connected\" input: \"" + prev +
          "\" attr { key: \"num_hidden\" value: \"10\" } }\n";
  text += "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"out\" input: \"label\" }\n";
  text += "data { batch_size: 16 sample_shape: [32] }\nsolver { lr: 0.05 momentum: 0.9 seed: 5 }\n";
  return ParseConfig(text, "chain.prototxt", {});
}

std::vector<MemoryStrategy> StrategiesWithBudget(const ConfigFile& cfg) {
  std::vector<MemoryStrategy> all = AllMemoryStrategies();
  Model share = BuildModel(cfg, MemoryStrategy::kShare);
  all.push_back({MemoryStrategy::kBudget, share.train_plan.arena_bytes * 2 / 3});
  return all;
}

TEST(Recompute, EveryStrategyTrainsBitIdentically) {
  ConfigFile cfg = DeepChain(12);
  auto reference = test::TrainSteps(cfg, MemoryStrategy::kNone, 3);
  for (const MemoryStrategy& s : StrategiesWithBudget(cfg)) {
    EXPECT_EQ(test::TrainSteps(cfg, s, 3), reference) << s.Name();
  }
}

TEST(Recompute, DropoutMasksAreReplayedExactly) {
  ConfigFile cfg = DeepChain(10, 64, /*dropout=*/true);
  auto reference = test::TrainSteps(cfg, MemoryStrategy::kNone, 3);
  for (const MemoryStrategy& s : StrategiesWithBudget(cfg)) {
    Model m = BuildModel(cfg, s);
    int dropout_mirrors = 0;
    for (const Node& n : m.train.nodes()) dropout_mirrors += n.mirror_of >= 0 && n.op->name() == "dropout";
    if (s.kind == MemoryStrategy::kSqrt || s.kind == MemoryStrategy::kLogn) {
      EXPECT_GT(dropout_mirrors, 0) << s.Name() << " should recompute some dropout";
    }
    EXPECT_EQ(test::TrainSteps(cfg, s, 3), reference) << s.Name();
  }
}

TEST(Recompute, PlansAreSoundAndRecomputeWhatTheyClaim) {
  ConfigFile cfg = DeepChain(12);
  for (const MemoryStrategy& s : StrategiesWithBudget(cfg)) {
    Model m = BuildModel(cfg, s);
    EXPECT_EQ(VerifyPlan(m.train, m.train_plan), "") << s.Name();
    int mirrors = 0;
    for (const Node& n : m.train.nodes()) mirrors += n.mirror_of >= 0;
    EXPECT_EQ(mirrors, m.train_plan.num_recomputed) << s.Name();
    // On a fully_connected+relu chain, dropping relu frees nothing (it runs
    // in place on the fully_connected output), so drop_cheap keeps it.
    bool expect_mirrors = s.recomputes() && s.kind != MemoryStrategy::kDropCheap;
    EXPECT_EQ(mirrors > 0, expect_mirrors) << s.Name();
  }
}

TEST(Recompute, MirrorsRunJustBeforeTheirFirstBackwardReader) {
  Model m = BuildModel(DeepChain(12), MemoryStrategy::kSqrt);
  const Graph& g = m.train;
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (g.node(i).mirror_of < 0) continue;
    EXPECT_GE(i, g.num_forward()) << "mirrors belong to the backward pass";
    // The nodes between a mirror and its first reader are mirrors or sums.
    int first = -1;
    for (int j = i + 1; j < g.num_nodes() && first < 0; ++j)
      for (const Entry& e : g.node(j).inputs)
        if (e.node == i) first = j;
    ASSERT_GT(first, i) << g.node(i).name << " is never read";
    for (int j = i + 1; j < first; ++j) {
      EXPECT_TRUE(g.node(j).mirror_of >= 0 || g.node(j).fwd < 0)
          << g.node(i).name << " runs long before its reader " << g.node(first).name;
    }
  }
}

// sqrt keeps its last segment: the backward pass starts on it right after
// the forward, so recomputing it would hold the same bytes for nothing. The
// last hidden layer is never recomputed; the first ones are.
TEST(Recompute, SqrtKeepsItsLastSegment) {
  for (int depth : {12, 48}) {
    Model m = BuildModel(DeepChain(depth, 256), MemoryStrategy::kSqrt);
    std::set<std::string> mirrored;
    for (const Node& n : m.train.nodes())
      if (n.mirror_of >= 0) mirrored.insert(m.train.node(n.mirror_of).name);
    EXPECT_TRUE(mirrored.count("relu0")) << depth;
    const std::string last = std::to_string(depth - 1);
    EXPECT_FALSE(mirrored.count("fc" + last) || mirrored.count("relu" + last)) << depth;
  }
}

TEST(Recompute, SublinearPlansShrinkADeepChain) {
  ConfigFile cfg = DeepChain(48, 256);
  Model share = BuildModel(cfg, MemoryStrategy::kShare);
  Model cheap = BuildModel(cfg, MemoryStrategy::kDropCheap);
  Model sqrt = BuildModel(cfg, MemoryStrategy::kSqrt);
  Model logn = BuildModel(cfg, MemoryStrategy::kLogn);
  // relu runs in place on the fully_connected output, so dropping it frees
  // nothing here (BatchNorm is where drop_cheap pays); it must not cost.
  EXPECT_LE(cheap.train_plan.arena_bytes, share.train_plan.arena_bytes);
  EXPECT_LT(sqrt.train_plan.arena_bytes * 3, share.train_plan.arena_bytes);
  EXPECT_LT(logn.train_plan.arena_bytes, sqrt.train_plan.arena_bytes);
  // sqrt recomputes each dropped node once: at most one extra forward pass,
  // which is about a third of a training step.
  EXPECT_LE(sqrt.train_plan.extra_flops_ratio(), 0.34);
  EXPECT_GT(logn.train_plan.extra_flops_ratio(), sqrt.train_plan.extra_flops_ratio());
  EXPECT_LE(share.train_plan.arena_bytes, 1.02 * share.train_plan.lower_bound_bytes);
}

// The recursive plan earns its name on an unrolled LSTM: its recomputation
// runs in forward order, so each step's input projection is made just
// before its cell; made in the order a depth-first walk reaches them, the
// projections of every step back to the checkpoint were alive at once
// (logn planned 755 MiB against sqrt's 480 MiB on 4x1024 over 1,000 steps).
TEST(Recompute, LognUsesLessThanSqrtOnALongLstm) {
  const ConfigFile cfg = LoadConfig(std::string(FRUGAL_SOURCE_DIR) + "/models/lstm/lstm_lm.prototxt",
                                    {"layers=2", "hidden=64", "batch=8", "vocab=50", "seq_len=256", "outputs=255"});
  const Model sqrt = BuildModel(cfg, MemoryStrategy::kSqrt);
  const Model logn = BuildModel(cfg, MemoryStrategy::kLogn);
  EXPECT_LT(logn.train_plan.arena_bytes, sqrt.train_plan.arena_bytes)
      << HumanBytes(logn.train_plan.arena_bytes) << " against " << HumanBytes(sqrt.train_plan.arena_bytes);
  // About one extra forward per level (log2 256 = 8), a forward being about
  // a third of a step.
  EXPECT_LE(logn.train_plan.extra_flops_ratio(), 8 / 3.0);
}

// Planning time grows with the graph through the number of training graphs
// a search builds (each a gradient pass, shape inference and a plan): the
// sqrt search builds its 13 segment budgets in the order of their bound
// only while one may be better, and the budget search bisects, so neither count may grow with the chain's length
// beyond a logarithm. Counted, not timed (no timed tests here).
TEST(Recompute, SearchesBuildFewGraphsAtAnyLength) {
  std::map<int, int> sqrt_builds, budget_builds;
  for (int depth : {12, 48, 192}) {
    const ConfigFile cfg = DeepChain(depth, 64);
    const Model share = BuildModel(cfg, MemoryStrategy::kShare);
    EXPECT_EQ(share.train_plan.num_builds, 1) << depth;
    sqrt_builds[depth] = BuildModel(cfg, MemoryStrategy::kSqrt).train_plan.num_builds;
    const Model sqrt = BuildModel(cfg, MemoryStrategy::kSqrt);
    const int64_t budget = (share.train_plan.arena_bytes + sqrt.train_plan.arena_bytes) / 2;
    budget_builds[depth] = BuildModel(cfg, {MemoryStrategy::kBudget, budget}).train_plan.num_builds;
    // share's build (for its BackwardReads), then the segment budgets in
    // increasing order of their bound until the next bound exceeds the
    // smallest arena built (4, 2 and 2 builds).
    EXPECT_LE(sqrt_builds[depth], 4) << "depth " << depth << ": builds only budgets whose bound may be better";
  }
  // 16x the layers: at most a few more builds (log2 16 = 4 bisection steps),
  // and up to 16 nodes kept again after the searches (12 layers recompute
  // fewer).
  EXPECT_LE(budget_builds[192], budget_builds[12] + 8 + 16) << budget_builds[12] << " -> " << budget_builds[192];
  EXPECT_LE(budget_builds[192], 40);
}

TEST(Recompute, BudgetIsMetWithLessRecomputationThanSqrt) {
  ConfigFile cfg = DeepChain(48, 256);
  Model share = BuildModel(cfg, MemoryStrategy::kShare);
  Model sqrt = BuildModel(cfg, MemoryStrategy::kSqrt);
  int64_t budget = (share.train_plan.arena_bytes + sqrt.train_plan.arena_bytes) / 2;
  Model b = BuildModel(cfg, {MemoryStrategy::kBudget, budget});
  EXPECT_LE(b.train_plan.arena_bytes, budget);
  EXPECT_LT(b.train_plan.extra_flops_ratio(), sqrt.train_plan.extra_flops_ratio());
  EXPECT_EQ(b.train_plan.strategy.Name(), ParseMemoryStrategy(b.train_plan.strategy.Name()).Name());
}

TEST(Recompute, InfeasibleBudgetNamesTheSmallestFeasible) {
  ConfigFile cfg = DeepChain(12);
  try {
    BuildModel(cfg, {MemoryStrategy::kBudget, 1000});
    FAIL() << "a 1000-byte budget cannot be met";
  } catch (const Error& e) {
    std::string msg = e.what();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(msg, m,
                                  std::regex("cannot be met: the smallest plan found \\(([a-z_ ]+)\\) needs "
                                             "an arena of [^;]*; use budget=([0-9]+) or more")))
        << msg;
    // The suggested budget is feasible, and the strategy named reaches it.
    const int64_t suggested = std::stoll(m[2]);
    EXPECT_LE(BuildModel(cfg, {MemoryStrategy::kBudget, suggested}).train_plan.arena_bytes, suggested);
    ASSERT_TRUE(m[1] == "sqrt" || m[1] == "logn") << "a 12-layer chain's smallest plan recomputes segments: " << msg;
    EXPECT_EQ(BuildModel(cfg, ParseMemoryStrategy(m[1])).train_plan.arena_bytes, suggested) << msg;
  }
}

TEST(Recompute, AnnotationsOverrideTheStrategy) {
  std::string text = R"(version: 1
node { name: "fc1" op: "fully_connected" input: "data" attr { key: "num_hidden" value: "8" } }
node { name: "r1" op: "relu" input: "fc1" mirror: true }
node { name: "fc2" op: "fully_connected" input: "r1" attr { key: "num_hidden" value: "8" } }
node { name: "r2" op: "relu" input: "fc2" checkpoint: true }
node { name: "fc3" op: "fully_connected" input: "r2" attr { key: "num_hidden" value: "4" } }
node { name: "prob" op: "softmax_cross_entropy" input: "fc3" input: "label" }
data { batch_size: 2 sample_shape: [3] }
)";
  ConfigFile cfg = ParseConfig(text, "a.prototxt", {});
  Model share = BuildModel(cfg, MemoryStrategy::kShare);
  Model cheap = BuildModel(cfg, MemoryStrategy::kDropCheap);
  for (const Model* m : {&share, &cheap}) {
    std::vector<std::string> mirrored;
    for (const Node& n : m->train.nodes())
      if (n.mirror_of >= 0) mirrored.push_back(m->train.node(n.mirror_of).name);
    EXPECT_EQ(mirrored, std::vector<std::string>{"r1"}) << "r1 is marked mirror, r2 is kept by its checkpoint mark";
  }
  EXPECT_THROW(ParseMemoryStrategy("budget=lots"), Error);
  EXPECT_THROW(ParseMemoryStrategy("sqrtn"), Error);
  EXPECT_EQ(ParseMemoryStrategy("budget=7GB").budget_bytes, 7000000000);
  EXPECT_EQ(ParseMemoryStrategy("budget=512MiB").budget_bytes, 512 * 1048576LL);
}

}  // namespace
}  // namespace frugal

namespace frugal {
namespace {

// A residual MLP: units of fc-relu-fc plus the identity, chained by a block.
ConfigFile ResidualChain(int units) {
  std::string text = R"cfg(version: 1
block { name: "unit"
  node { name: "fc1" op: "fully_connected" input: "@{in}" attr { key: "num_hidden" value: "32" } }
  node { name: "r" op: "relu" input: "fc1" }
  node { name: "fc2" op: "fully_connected" input: "r" attr { key: "num_hidden" value: "32" } }
  node { name: "add" op: "add_n" input: "fc2" input: "@{in}" }
}
node { name: "stem" op: "fully_connected" input: "data" attr { key: "num_hidden" value: "32" } }
)cfg";
  text += "node { name: \"body\" block: \"unit\" repeat: " + std::to_string(units) + " input: \"stem\" }\n";
  text += R"cfg(node { name: "out" op: "fully_connected" input: "body" attr { key: "num_hidden" value: "10" } }
node { name: "prob" op: "softmax_cross_entropy" input: "out" input: "label" }
data { batch_size: 8 sample_shape: [16] }
solver { seed: 2 }
)cfg";
  return ParseConfig(text, "residual.prototxt", {});
}

TEST(Recompute, ResidualNetsRecomputeWithoutBlowUp) {
  ConfigFile cfg = ResidualChain(16);  // a per-path rebuild makes 2^16 copies: fails, not hangs
  const int fwd = BuildModel(cfg, MemoryStrategy::kShare).eval.num_nodes();
  for (const MemoryStrategy& s : {MemoryStrategy(MemoryStrategy::kSqrt), MemoryStrategy(MemoryStrategy::kLogn)}) {
    Model m = BuildModel(cfg, s);
    // Each recursion level recomputes the forward at most once.
    EXPECT_LT(m.train_plan.num_recomputed, fwd * 8) << s.Name();
    EXPECT_EQ(VerifyPlan(m.train, m.train_plan), "") << s.Name();
  }
  ConfigFile small = ResidualChain(6);
  auto reference = test::TrainSteps(small, MemoryStrategy::kNone, 2);
  for (const MemoryStrategy& s : StrategiesWithBudget(small))
    EXPECT_EQ(test::TrainSteps(small, s, 2), reference) << s.Name();
}

// ExplainBlocks covers every forward node once, names exactly the nodes
// the training graph recomputes, and their FLOPs add up to the plan's.
TEST(ExplainBlocks, AddsUpToThePlan) {
  const ConfigFile cfg =
      LoadConfig(std::string(FRUGAL_SOURCE_DIR) + "/models/resnet/resnet_cifar.prototxt", {"depth=20", "batch=8"});
  for (MemoryStrategy s : {MemoryStrategy::kShare, MemoryStrategy::kDropCheap, MemoryStrategy::kSqrt}) {
    const Model m = BuildModel(cfg, s);
    const std::vector<BlockReport> blocks = ExplainBlocks(m.train);
    std::set<int> recomputed, mirrored;
    int nodes = 0, forward = 0;
    double flops = 0;
    int64_t kept = 0;
    for (const BlockReport& b : blocks) {
      nodes += b.nodes;
      recomputed.insert(b.recomputed.begin(), b.recomputed.end());
      flops += b.recompute_flops;
      kept += b.kept_bytes;
    }
    for (int i = 0; i < m.train.num_nodes(); ++i) {
      forward += i < m.train.num_forward() && !m.train.node(i).is_variable();
      if (m.train.node(i).mirror_of >= 0) mirrored.insert(m.train.node(i).mirror_of);
    }
    EXPECT_GT(blocks.size(), 9u) << s.Name() << ": a ResNet-20 is cut after each unit";
    EXPECT_EQ(nodes, forward) << s.Name();
    EXPECT_EQ(recomputed, mirrored) << s.Name();
    EXPECT_NEAR(flops, m.train_plan.extra_flops, 1e-6 * m.train_plan.step_flops) << s.Name();
    EXPECT_GT(kept, 0) << s.Name();
    EXPECT_EQ(recomputed.empty(), s.kind == MemoryStrategy::kShare) << s.Name();
  }
}

// The chain program is exact on its model: on random chains it finds the
// least FLOPs of all decisions (each block stored by one of three entries
// of its menu or recomputed, boundaries kept or not) whose peak fits
// (sizes in whole slots of the memory, so its rounding loses nothing).
TEST(ChainRecompute, FindsTheBestOfAllDecisions) {
  Rng rng(7);
  const int64_t memory = 512 * 1000;  // slots of 1000 bytes (chain.cc plans a chain of a few blocks in 512)
  auto slots = [&](int lo, int hi) { return 1000 * (lo + static_cast<int64_t>(rng.Uniform() * (hi - lo))); };
  std::set<int> chosen;  // the entries the program's plans use: the test sees each chosen
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 2 + trial % 4;
    std::vector<ChainBlock> chain(n);
    for (ChainBlock& b : chain) {
      b.boundary_bytes = slots(10, 60);
      b.boundary_read = rng.Uniform() < 0.5 ? b.boundary_bytes : slots(0, 10);
      b.read_bytes = slots(30, 200);
      b.held_bytes = slots(0, 100);
      b.inner_cost = 20 + rng.Uniform() * 100;
      b.boundary_cost = rng.Uniform() * 20;
      // Kept whole, part of its cheap ops recomputed, all of them (its
      // boundary too, half the time).
      const int64_t whole = b.read_bytes + b.boundary_bytes;
      b.stored = {{{}, 0, true, whole, whole + slots(0, 150)},
                  {{}, rng.Uniform() * 5, true, whole - slots(0, 30), whole + slots(0, 100), rng.Uniform() < 0.5},
                  {{}, 5 + rng.Uniform() * 10, rng.Uniform() < 0.5, slots(30, 150), slots(60, 300), true}};
    }
    chain.back().boundary_bytes = chain.back().boundary_read = 0;  // nothing crosses the end of the graph
    chain.back().boundary_cost = 0;
    // Every plan: each block's entry (3: recomputed), each boundary cut or
    // not, where cuts are as ChainPlan says: after an entry that keeps the
    // boundary, and around every run.
    double best = -1;
    int entries = 1;
    for (int j = 0; j < n; ++j) entries *= 4;
    for (int code = 0; code < entries; ++code) {
      for (int cuts = 0; cuts < (1 << n); ++cuts) {
        ChainPlan p{std::vector<int>(n), std::vector<bool>(n)};
        bool valid = true;
        for (int j = 0, c = code; j < n; ++j, c /= 4) {
          p.entry[j] = c % 4 == 3 ? ChainPlan::kRecompute : c % 4;
          p.cut[j] = cuts >> j & 1;
          if (p.entry[j] != ChainPlan::kRecompute && chain[j].stored[p.entry[j]].keeps_boundary)
            valid = valid && p.cut[j];
          valid = valid && (j + 1 < n || p.cut[j]);  // nothing follows the last block
        }
        for (int j = 0; j + 1 < n; ++j) {  // runs start and end at cuts
          const bool run = p.entry[j] == ChainPlan::kRecompute, next = p.entry[j + 1] == ChainPlan::kRecompute;
          valid = valid && (run == next || p.cut[j]);
        }
        if (valid && ChainPeak(chain, p) <= memory && (best < 0 || ChainCost(chain, p) < best))
          best = ChainCost(chain, p);
      }
    }
    const ChainPlan got = ChainRecompute(chain, memory);
    if (best < 0) {
      EXPECT_TRUE(got.empty()) << "trial " << trial << ": nothing fits";
      continue;
    }
    ASSERT_EQ(got.entry.size(), chain.size()) << "trial " << trial;
    EXPECT_LE(ChainPeak(chain, got), memory) << "trial " << trial;
    EXPECT_NEAR(ChainCost(chain, got), best, 1e-9) << "trial " << trial;
    chosen.insert(got.entry.begin(), got.entry.end());
  }
  EXPECT_EQ(chosen, (std::set<int>{ChainPlan::kRecompute, 0, 1, 2})) << "an entry no plan chose is not tested";
}

}  // namespace
}  // namespace frugal
