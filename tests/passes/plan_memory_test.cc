// The memory plan: sound for every strategy, close to the lower bound, and
// allocated byte for byte by the executor; training is bit-identical under
// every strategy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <random>

#include "frugal/passes/memory_plan.h"
#include "frugal/train.h"
#include "test_util.h"
#include "train/train_steps.h"

namespace frugal {
namespace {

// An MLP with a skip connection, so one entry has two readers (the gradient
// pass must sum two parts) and lifetimes are not a simple chain.
const char* kConfig = R"(
version: 1
variable { name: "batch" value: "16" }
node { name: "flat" op: "flatten" input: "data" }
node { name: "fc1" op: "fully_connected" input: "flat" attr { key: "num_hidden" value: "32" } }
node { name: "relu1" op: "relu" input: "fc1" }
node { name: "fc2" op: "fully_connected" input: "relu1" attr { key: "num_hidden" value: "32" } }
node { name: "relu2" op: "relu" input: "fc2" }
node { name: "skip" op: "add_n" input: "relu1" input: "relu2" }
node { name: "fc3" op: "fully_connected" input: "skip" attr { key: "num_hidden" value: "10" } }
node { name: "prob" op: "softmax_cross_entropy" input: "fc3" input: "label" }
data { batch_size: ${batch} sample_shape: [1, 6, 6] }
solver { lr: 0.1 momentum: 0.9 weight_decay: 0.001 seed: 3 }
)";

ConfigFile Config(const std::vector<std::string>& defines = {}) {
  return ParseConfig(kConfig, "test.prototxt", defines);
}

TEST(PlanMemory, EveryStrategyIsSound) {
  for (MemoryStrategy s : AllMemoryStrategies()) {
    Model m = BuildModel(Config(), s);
    EXPECT_EQ(VerifyPlan(m.train, m.train_plan), "") << s.Name();
    EXPECT_EQ(VerifyPlan(m.eval, m.eval_plan), "") << s.Name();
    EXPECT_GE(m.train_plan.arena_bytes, m.train_plan.lower_bound_bytes);
  }
}

// The timeline reads the plan's blocks back: its peak is the lower bound,
// at the plan's peak step, made of the kinds it stacks; recomputation
// shows only where a plan recomputes; the names at the peak are its
// largest blocks.
TEST(PlanMemory, TimelinePeaksAtTheLowerBound) {
  for (MemoryStrategy s : AllMemoryStrategies()) {
    SCOPED_TRACE(s.Name());
    Model m = BuildModel(Config(), s);
    const MemoryTimeline t = Timeline(m.train, m.train_plan, 7, 3);
    EXPECT_EQ(t.num_steps, m.train.num_nodes());
    EXPECT_LE(t.steps.size(), 7u);
    EXPECT_EQ(t.peak_bytes, m.train_plan.lower_bound_bytes);
    EXPECT_EQ(t.peak_step, m.train_plan.peak_step) << "the plan's peak is the timeline's first";
    int64_t at_peak = 0;
    for (size_t j = 0; j < t.steps.size(); ++j) {
      int64_t sum = 0;
      for (int64_t b : t.bytes[j]) sum += b;
      EXPECT_LE(sum, t.peak_bytes);
      if (t.steps[j] == t.peak_step) at_peak = sum;
    }
    EXPECT_EQ(at_peak, t.peak_bytes) << "the peak step is one of the points";
    EXPECT_EQ(t.recomputing.empty(), m.train_plan.num_recomputed == 0);
    ASSERT_FALSE(t.peak_tensors.empty());
    EXPECT_LE(t.peak_tensors.size(), 3u);
    for (size_t j = 1; j < t.peak_tensors.size(); ++j)
      EXPECT_GE(t.peak_tensors[j - 1].second, t.peak_tensors[j].second);
  }
}

TEST(PlanMemory, StrategiesOrderAndShareMeetsTheLowerBound) {
  Model none = BuildModel(Config(), MemoryStrategy::kNone);
  Model inplace = BuildModel(Config(), MemoryStrategy::kInplace);
  Model share = BuildModel(Config(), MemoryStrategy::kShare);
  EXPECT_EQ(none.train_plan.arena_bytes, none.train_plan.no_sharing_bytes);
  EXPECT_EQ(none.train_plan.num_inplace, 0);
  EXPECT_GT(inplace.train_plan.num_inplace, 0);
  EXPECT_LT(inplace.train_plan.arena_bytes, none.train_plan.arena_bytes);
  EXPECT_LT(share.train_plan.arena_bytes, inplace.train_plan.arena_bytes);
  EXPECT_LE(share.train_plan.arena_bytes, 1.02 * share.train_plan.lower_bound_bytes);
  // Parameters live outside the arena: 6*6*32+32 + 32*32+32 + 32*10+10 floats.
  EXPECT_EQ(share.train_plan.param_bytes, 4 * (36 * 32 + 32 + 32 * 32 + 32 + 32 * 10 + 10));
  EXPECT_EQ(share.train_plan.param_grad_bytes, share.train_plan.param_bytes);
}

// Arena <= 1.02 x lower bound on every model config at its defaults, under
// every sharing strategy, for training and evaluation (one exception, below;
// docs/memory.md: the
// MLP's sqrt plan was 1.162 with greedy by size alone, ResNet-1001's logn
// plan 1.022 before the busiest-steps-first order). Every plan is also
// checked entry by entry (VerifyPlan), the largest (ResNet-1001's logn, over
// 20,000 blocks) past kManyBlocks, where the placement takes one order.
TEST(PlanMemory, ModelConfigsPlaceWithin2PercentOfTheLowerBound) {
  const std::vector<std::string> paths = test::ModelConfigPaths();
  ASSERT_GE(paths.size(), 9u);
  int largest = 0;
  for (const std::string& path : paths) {
    ConfigFile cfg = LoadConfig(path, {});
    for (MemoryStrategy s : AllMemoryStrategies()) {
      if (!s.shares()) continue;
      Model m = BuildModel(cfg, s);
      EXPECT_EQ(VerifyPlan(m.train, m.train_plan), "") << path << " " << s.Name();
      EXPECT_EQ(VerifyPlan(m.eval, m.eval_plan), "") << path << " " << s.Name() << " (evaluation)";
      largest = std::max(largest, m.train_plan.num_blocks);
      EXPECT_LE(m.train_plan.arena_bytes, 1.02 * m.train_plan.lower_bound_bytes) << path << " " << s.Name();
      // ResNet-1001's evaluation plan (2,344 blocks) is 1.111 of its bound in
      // every order, and online: the 98 MiB blocks of its residual units
      // take two slots, and a 24.5 MiB block live beside two of them at
      // once finds no gap below them (docs/memory.md); whether the bound
      // can be met is not known.
      const double eval_limit = path.find("resnet_imagenet.prototxt") != std::string::npos ? 1.111 : 1.02;
      EXPECT_LE(m.eval_plan.arena_bytes, eval_limit * m.eval_plan.lower_bound_bytes) << path << " " << s.Name();
    }
  }
  EXPECT_GT(largest, 4000) << "no plan took the large plans' path (kManyBlocks)";
}

// Past kManyBlocks the placement takes the busiest-steps-first order, and
// the order by size where that misses by more than 2%: the logn plan of an
// LSTM over 128 steps (5,767 blocks) was 1.127 of its bound by the first
// alone (hidden 64; 1.12-1.17 at hidden 256 and 512 over 128-512 steps).
TEST(PlanMemory, LongLstmPlansPlaceWithin2PercentOfTheLowerBound) {
  const ConfigFile cfg = LoadConfig(std::string(FRUGAL_SOURCE_DIR) + "/models/lstm/lstm_lm.prototxt",
                                    {"layers=2", "hidden=64", "batch=8", "vocab=50", "seq_len=128", "outputs=127"});
  for (MemoryStrategy s :
       {MemoryStrategy::kShare, MemoryStrategy::kDropCheap, MemoryStrategy::kSqrt, MemoryStrategy::kLogn}) {
    const Model m = BuildModel(cfg, s);
    EXPECT_EQ(VerifyPlan(m.train, m.train_plan), "") << s.Name();
    EXPECT_LE(m.train_plan.arena_bytes, 1.02 * m.train_plan.lower_bound_bytes) << s.Name();
    if (s.kind == MemoryStrategy::kLogn) { EXPECT_GT(m.train_plan.num_blocks, 4000); }
  }
}

// VerifyPlan rejects two entries of different blocks live at the same step
// in overlapping bytes, an entry past the arena's end and a misaligned one.
TEST(PlanMemory, VerifyPlanFindsOverlapsOverrunsAndMisalignment) {
  const Model m = BuildModel(Config(), MemoryStrategy::kShare);
  const Graph& g = m.train;
  ASSERT_EQ(VerifyPlan(g, m.train_plan), "");
  std::vector<int> last(g.num_entries(), -1);
  for (int i = 0; i < g.num_nodes(); ++i)
    for (const Entry& e : g.node(i).inputs) last[g.EntryId(e)] = i;
  for (const Entry& e : g.outputs) last[g.EntryId(e)] = g.num_nodes();  // live to the step's end
  int x = -1, y = -1;  // in the arena, different blocks, live at one step
  for (int a = 0; a < g.num_entries() && y < 0; ++a)
    for (int b = 0; b < g.num_entries() && y < 0; ++b) {
      const MemoryPlan& p = m.train_plan;
      if (a == b || p.entry_offset[a] < 0 || p.entry_offset[b] < 0 || p.entry_block[a] == p.entry_block[b]) continue;
      const int sa = g.EntryOf(a).node, sb = g.EntryOf(b).node;
      if (sa < sb && last[a] > sb) x = a, y = b;
    }
  ASSERT_GE(y, 0) << "no two entries live at once";
  const std::string name_y = g.node(g.EntryOf(y).node).name;
  MemoryPlan overlap = m.train_plan;
  overlap.entry_offset[y] = overlap.entry_offset[x];
  EXPECT_NE(VerifyPlan(g, overlap).find(name_y), std::string::npos) << VerifyPlan(g, overlap);
  EXPECT_NE(VerifyPlan(g, overlap).find("live together in overlapping memory"), std::string::npos);
  MemoryPlan overrun = m.train_plan;
  overrun.entry_offset[y] = (overrun.arena_bytes + MemoryPlan::kAlign - 1) / MemoryPlan::kAlign * MemoryPlan::kAlign;
  EXPECT_NE(VerifyPlan(g, overrun).find("overruns the arena"), std::string::npos);
  MemoryPlan misaligned = m.train_plan;
  misaligned.entry_offset[y] += 4;
  EXPECT_NE(VerifyPlan(g, misaligned).find("is not aligned"), std::string::npos);

  // Against every pair of entries (what VerifyPlan's sweep stands for), on
  // plans with a few entries moved to random aligned offsets.
  std::vector<int> placed;
  for (int e = 0; e < g.num_entries(); ++e)
    if (m.train_plan.entry_offset[e] >= 0) placed.push_back(e);
  auto pairwise_sound = [&](const MemoryPlan& p) {
    for (int a : placed)
      for (int b : placed) {
        if (a >= b || last[a] < 0 || last[b] < 0) continue;
        const int sa = g.EntryOf(a).node, sb = g.EntryOf(b).node;
        const bool time = sa <= last[b] && sb <= last[a];
        const bool mem = p.entry_offset[a] < p.entry_offset[b] + g.EntryBytes(b) &&
                         p.entry_offset[b] < p.entry_offset[a] + g.EntryBytes(a);
        const bool handoff =
            p.entry_block[a] == p.entry_block[b] &&
            (last[a] == sb || last[b] == sa || p.entry_req[a] == OpReq::kAdd || p.entry_req[b] == OpReq::kAdd);
        if (time && mem && !handoff) return false;
      }
    return true;
  };
  std::mt19937 rng(7);
  int unsound = 0;
  for (int trial = 0; trial < 200; ++trial) {
    MemoryPlan p = m.train_plan;
    for (int k = 0; k < 1 + trial % 3; ++k) {
      const int e = placed[rng() % placed.size()];
      const int64_t room = std::max<int64_t>(1, (p.arena_bytes - g.EntryBytes(e)) / MemoryPlan::kAlign + 1);
      p.entry_offset[e] = static_cast<int64_t>(rng() % room) * MemoryPlan::kAlign;
    }
    const bool sound = pairwise_sound(p);
    unsound += !sound;
    EXPECT_EQ(VerifyPlan(g, p).empty(), sound) << "trial " << trial << ": " << VerifyPlan(g, p);
  }
  EXPECT_GT(unsound, 20) << "the random plans should include unsound ones";
  EXPECT_LT(unsound, 200) << "and sound ones";
}

TEST(PlanMemory, GradientSumsTheTwoPartsOfASharedEntry) {
  Model m = BuildModel(Config(), MemoryStrategy::kShare);
  int sums = 0;
  for (const Node& n : m.train.nodes()) sums += n.op && n.op->name() == "add_n" && n.fwd < 0 && n.name != "skip";
  EXPECT_EQ(sums, 1);  // relu1's gradient = part through fc2 + part through skip
}

// Three fully connected layers with one weight w: its gradient is the sum
// of three parts, and the planner folds the sum into the parts' GEMMs (the
// part is added into the running sum, kAdd; the add_n does nothing). One SGD
// step moves w by the sum of what three separate weights, equal at the start,
// move by.
ConfigFile SharedWeightNet(bool shared) {
  std::string text = R"(version: 1
node { name: "flat" op: "flatten" input: "data" }
)";
  for (int k = 1; k <= 3; ++k) {
    const std::string w = shared ? "w" : Fmt("w", k);
    if (!shared || k == 1)
      text += Fmt("node { name: \"", w, "\" op: \"variable\" attr { key: \"init\" value: \"constant(0.05)\" } }\n");
    text += Fmt("node { name: \"b", k, "\" op: \"variable\" attr { key: \"init\" value: \"constant(0.01)\" } }\n");
    text += Fmt("node { name: \"fc", k, "\" op: \"fully_connected\" input: \"", k == 1 ? "flat" : Fmt("r", k - 1),
                "\" input: \"", w, "\" input: \"b", k, "\" attr { key: \"num_hidden\" value: \"16\" } }\n");
    text += Fmt("node { name: \"r", k, "\" op: \"relu\" input: \"fc", k, "\" }\n");
  }
  text += R"(node { name: "out" op: "fully_connected" input: "r3" attr { key: "num_hidden" value: "10" } }
node { name: "prob" op: "softmax_cross_entropy" input: "out" input: "label" }
data { batch_size: 8 sample_shape: [1, 4, 4] }
solver { lr: 0.5 momentum: 0.9 seed: 5 }
)";
  return ParseConfig(text, "shared.prototxt", {});
}

TEST(PlanMemory, GradientPartsAddIntoTheirSum) {
  const ConfigFile shared = SharedWeightNet(true), separate = SharedWeightNet(false);
  for (MemoryStrategy s : AllMemoryStrategies()) {
    const Model m = BuildModel(shared, s);
    EXPECT_EQ(VerifyPlan(m.train, m.train_plan), "") << s.Name();
    EXPECT_EQ(std::count(m.train_plan.entry_req.begin(), m.train_plan.entry_req.end(), OpReq::kAdd), 1) << s.Name();
  }
  // Parameters in name order: b1 b2 b3 out_bias out_weight, then w or w1 w2 w3.
  const auto a = test::TrainSteps(shared, MemoryStrategy::kShare, 1);
  const auto b = test::TrainSteps(separate, MemoryStrategy::kNone, 1);
  ASSERT_EQ(a.size(), 7u);
  ASSERT_EQ(b.size(), 9u);
  for (size_t i = 0; i < a[5].size(); ++i) {
    const float moved = a[5][i] - 0.05f, parts = (b[5][i] - 0.05f) + (b[6][i] - 0.05f) + (b[7][i] - 0.05f);
    ASSERT_NEAR(moved, parts, 1e-6f + 1e-4f * std::fabs(parts)) << "w[" << i << "]";
  }
  float total = 0;
  for (float v : a[5]) total += std::fabs(v - 0.05f);
  EXPECT_GT(total, 1e-3f) << "the step moved w";
}

TEST(PlanMemory, PlanScalesWithBatch) {
  Model b16 = BuildModel(Config(), MemoryStrategy::kNone);
  Model b32 = BuildModel(Config({"batch=32"}), MemoryStrategy::kNone);
  EXPECT_EQ(b32.batch, 32);
  EXPECT_GT(b32.train_plan.arena_bytes, b16.train_plan.arena_bytes);
  EXPECT_EQ(b32.train_plan.param_bytes, b16.train_plan.param_bytes);
}

// The batch FitBatch finds fits and the next one does not, by the same
// process (the resident bytes when it starts, the footprint, the runtime);
// too small a memory fits no batch and says what batch 1 needs.
TEST(PlanMemory, FitBatchFindsTheLargestBatchThatFits) {
  auto config_at = [](int64_t b) { return Config({Fmt("batch=", b)}); };
  auto process = [&](int64_t b, const MemoryStrategy& s, int64_t resident) {
    const Model m = BuildModel(config_at(b), s);
    return ProcessBytes{resident, PlannedFootprint(m), RuntimeBytes(m.train)};
  };
  for (const MemoryStrategy& s : {MemoryStrategy(MemoryStrategy::kNone), MemoryStrategy(MemoryStrategy::kSqrt)}) {
    SCOPED_TRACE(s.Name());
    const int64_t resident = 100 << 20;
    const int64_t bytes = process(1000, s, resident).total() + 12345;  // between two batches, past 1000
    for (int64_t start : {1, 16, 4096}) {
      const BatchFit f = FitBatch(config_at, start, s, bytes, resident);
      ASSERT_GE(f.batch, 1000) << "from " << start;
      EXPECT_EQ(f.process.resident, resident);
      EXPECT_EQ(f.process.total(), process(f.batch, s, f.process.resident).total());
      EXPECT_LE(f.process.total(), bytes);
      EXPECT_GT(process(f.batch + 1, s, f.process.resident).total(), bytes) << "batch " << f.batch + 1 << " fits too";
      EXPECT_LT(f.plans, 40);
    }
    const BatchFit none = FitBatch(config_at, 16, s, 1000, resident);
    EXPECT_EQ(none.batch, 0);
    EXPECT_EQ(none.process.total(), process(1, s, none.process.resident).total());
  }
  const Model m = BuildModel(Config(), MemoryStrategy::kShare);
  const MemoryPlan& t = m.train_plan;
  EXPECT_EQ(PlannedFootprint(m), t.arena_bytes + m.eval_plan.arena_bytes + t.param_bytes + t.param_grad_bytes +
                                     m.update_plan.state_bytes + t.input_bytes + m.eval_plan.input_bytes);
}

// A budget's name gives its size in the unit it was written in, binary or
// decimal, and parses back to the same bytes.
TEST(PlanMemory, BudgetNamesKeepTheUnitAsWritten) {
  for (const char* text : {"budget=4GiB", "budget=7GB", "budget=100MiB", "budget=60MB", "budget=3KiB", "budget=1234",
                           "limit=8GiB", "limit=300MB"}) {
    const MemoryStrategy s = ParseMemoryStrategy(text);
    EXPECT_EQ(s.Name(), text);
    EXPECT_EQ(ParseMemoryStrategy(s.Name()), s) << text;
  }
  EXPECT_FALSE(ParseMemoryStrategy("limit=8GiB") == ParseMemoryStrategy("limit=4GiB"));
  EXPECT_FALSE(ParseMemoryStrategy("limit=8GiB") == ParseMemoryStrategy("budget=8GiB"));
}

// limit=SIZE leaves the training arena what the rest of the process does
// not take, so that the planned process is within the limit; a limit below
// the smallest plan's process names the smallest that fits, and that one
// plans.
TEST(PlanMemory, LimitBoundsThePlannedProcess) {
  const ConfigFile cfg = Config({"batch=4096"});  // arenas of MiB, beside the nodes' KiB
  const Model share = BuildModel(cfg, MemoryStrategy::kShare);
  const int64_t outside = PlannedFootprint(share) - share.train_plan.arena_bytes;
  const int64_t resident = int64_t{50} << 20;
  // An arena between sqrt's and share's, and room for the nodes a
  // recomputing plan adds.
  const Model sqrt = BuildModel(cfg, MemoryStrategy::kSqrt);
  const int64_t arena = (sqrt.train_plan.arena_bytes + share.train_plan.arena_bytes) / 2;
  const int64_t nodes = 2 * (RuntimeBytes(sqrt.train) - RuntimeBytes(share.train));
  const int64_t limit = resident + outside + RuntimeBytes(share.train) + arena + nodes;
  MemoryStrategy s(MemoryStrategy::kBudget);
  s.limit_bytes = limit;
  ProcessBytes rest;
  std::string note;
  const MemoryStrategy r = ResolveLimit(cfg, s, Device{}, resident, &rest, &note);
  EXPECT_EQ(rest.resident, resident);
  EXPECT_EQ(rest.tensors, outside);
  EXPECT_EQ(rest.runtime, RuntimeBytes(share.train));
  EXPECT_EQ(r.budget_bytes, arena + nodes);
  EXPECT_EQ(r.limit_bytes, limit);
  EXPECT_NE(note.find(s.Name() + ": "), std::string::npos) << note;
  EXPECT_EQ(ResolveLimit(cfg, MemoryStrategy::kSqrt, Device{}, resident, &rest, &note),
            MemoryStrategy(MemoryStrategy::kSqrt));

  // BuildModel measures the resident bytes itself.
  s.limit_bytes = ProcessResidentBytes() + outside + RuntimeBytes(share.train) + arena + nodes;
  const Model m = BuildModel(cfg, s);
  EXPECT_LE(m.process.total(), s.limit_bytes) << m.process.ToString();
  EXPECT_GT(m.train_plan.num_recomputed, 0) << "an arena below share's needs recomputation";
  EXPECT_EQ(m.process.tensors, PlannedFootprint(m));
  EXPECT_EQ(m.process.runtime, RuntimeBytes(m.train)) << "the recomputing graph's own allowance";

  s.limit_bytes = 1 << 20;
  try {
    BuildModel(cfg, s);
    FAIL() << "limit=1MiB planned";
  } catch (const Error& e) {
    const std::string what = e.what();
    std::smatch need;
    ASSERT_TRUE(std::regex_search(what, need, std::regex("use --memory-limit (\\d+)MiB or more"))) << what;
    EXPECT_NE(what.find("the largest part is"), std::string::npos) << what;
    // Room for what the resident set may grow by between the two plans: 4
    // MiB; under a sanitizer, whose quarantine holds freed memory, 32 (it
    // grew by 5.5 MiB under ASan).
#ifdef FRUGAL_TEST_SANITIZED
    constexpr int64_t kGrowthMiB = 32;
#else
    constexpr int64_t kGrowthMiB = 4;
#endif
    s.limit_bytes = (std::stoll(need[1]) + kGrowthMiB) << 20;
    EXPECT_NO_THROW(BuildModel(cfg, s)) << "the answer to " << what;
  }
}

// budget=auto becomes a budget that leaves the machine's available memory
// room for everything outside the training arena.
TEST(PlanMemory, AutoBudgetIsWhatTheMachineHasLeft) {
  EXPECT_TRUE(ParseMemoryStrategy("budget=auto").auto_budget());
  EXPECT_EQ(ParseMemoryStrategy("budget=auto").Name(), "budget=auto");
  std::string note;
  EXPECT_EQ(ResolveAutoBudget(Config(), MemoryStrategy::kSqrt, Device{}, &note), MemoryStrategy(MemoryStrategy::kSqrt));
  EXPECT_EQ(note, "");
  const int64_t before = AvailableBytes(Device{});
  const MemoryStrategy r = ResolveAutoBudget(Config(), ParseMemoryStrategy("budget=auto"), Device{}, &note);
  const int64_t after = AvailableBytes(Device{});
  ASSERT_EQ(r.kind, MemoryStrategy::kBudget);
  ASSERT_FALSE(r.auto_budget());
  const Model share = BuildModel(Config(), MemoryStrategy::kShare);
  const int64_t outside = PlannedFootprint(share) - share.train_plan.arena_bytes;
  // free - max(free / 10, 256 MiB) - outside, with free read between before
  // and after; 64 MiB either way for the other processes (the tests' other
  // shard) that allocate and free meanwhile (CI at 73f3911: 209 KiB above).
  const int64_t lo = std::min(before, after), hi = std::max(before, after);
  EXPECT_LE(r.budget_bytes, hi - std::max<int64_t>(hi / 10, 256 << 20) - outside + (64 << 20));
  EXPECT_GE(r.budget_bytes, lo - std::max<int64_t>(lo / 10, 256 << 20) - outside - (64 << 20));
  EXPECT_NE(note.find("budget=auto: "), std::string::npos) << note;
  const Model m = BuildModel(Config(), ParseMemoryStrategy("budget=auto"));
  EXPECT_EQ(m.train_plan.strategy.kind, MemoryStrategy::kBudget);
  EXPECT_EQ(m.train_plan.arena_bytes, share.train_plan.arena_bytes) << "a small model needs no recomputation";
}

TEST(PlanMemory, ExecutorAllocatesExactlyThePlannedArena) {
  for (MemoryStrategy s : AllMemoryStrategies()) {
    int64_t allocated = -1;
    test::TrainSteps(Config(), s, 1, &allocated);
    EXPECT_EQ(allocated, BuildModel(Config(), s).train_plan.arena_bytes) << s.Name();
  }
}

TEST(PlanMemory, TrainingIsBitIdenticalUnderEveryStrategy) {
  int64_t unused;
  auto reference = test::TrainSteps(Config(), MemoryStrategy::kNone, 4, &unused);
  for (const MemoryStrategy& s : AllMemoryStrategies()) {
    EXPECT_EQ(test::TrainSteps(Config(), s, 4, &unused), reference) << s.Name();
  }
}

}  // namespace
}  // namespace frugal
