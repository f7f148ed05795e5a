// The step a plan's schedule predicts (ScheduledStepMs): on one worker the
// sum of its ops; with workers to spare and no reuse, the longest path of
// its data dependencies; and longer where the arena's reuse orders ops that
// could otherwise run at once.
#include <gtest/gtest.h>

#include <random>

#include "frugal/passes/memory_plan.h"
#include "frugal/passes/schedule.h"
#include "frugal/train.h"
#include "test_util.h"

namespace frugal {
namespace {

// Two branches from the data, summed: a graph whose ops can run two at once
// and whose gradients need no sums (nothing but the data fans out, and the
// data gets no gradient).
const char* kBranches = R"(
version: 1
node { name: "flat" op: "flatten" input: "data" }
node { name: "a1" op: "fully_connected" input: "flat" attr { key: "num_hidden" value: "64" } }
node { name: "a2" op: "relu" input: "a1" }
node { name: "b1" op: "fully_connected" input: "flat" attr { key: "num_hidden" value: "64" } }
node { name: "b2" op: "abs" input: "b1" }
node { name: "sum" op: "add_n" input: "a2" input: "b2" }
node { name: "out" op: "fully_connected" input: "sum" attr { key: "num_hidden" value: "10" } }
node { name: "prob" op: "softmax_cross_entropy" input: "out" input: "label" }
data { batch_size: 8 sample_shape: [1, 6, 6] }
)";

ConfigFile SmallLstm() {
  return LoadConfig(std::string(FRUGAL_SOURCE_DIR) + "/models/lstm/lstm_lm.prototxt",
                    {"layers=2", "hidden=32", "batch=4", "vocab=50", "seq_len=16", "outputs=15"});
}

std::vector<double> RandomMs(const Graph& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> ms(0.5, 4.0);
  std::vector<double> out(g.num_nodes(), 0);
  for (int i = 0; i < g.num_nodes(); ++i)
    if (!g.node(i).is_variable()) out[i] = ms(rng);
  return out;
}

double Sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

TEST(Schedule, OneWorkerRunsEveryOpBackToBack) {
  for (const ConfigFile& cfg : {ParseConfig(kBranches, "branches.prototxt", {}), SmallLstm()}) {
    for (MemoryStrategy s : {MemoryStrategy::kNone, MemoryStrategy::kShare, MemoryStrategy::kSqrt}) {
      const Model m = BuildModel(cfg, s);
      const std::vector<double> ms = RandomMs(m.train, 3);
      EXPECT_NEAR(ScheduledStepMs(m.train, m.train_plan, ms, 1), Sum(ms), 1e-9) << s.Name();
    }
  }
}

TEST(Schedule, WithoutReuseSpareWorkersTakeTheLongestPath) {
  const Model m = BuildModel(ParseConfig(kBranches, "branches.prototxt", {}), MemoryStrategy::kNone);
  const Graph& g = m.train;
  const std::vector<double> ms = RandomMs(g, 7);
  std::vector<double> finish(g.num_nodes(), 0);
  double longest = 0;
  for (int i = 0; i < g.num_nodes(); ++i) {
    for (const Entry& e : g.node(i).inputs) finish[i] = std::max(finish[i], finish[e.node]);
    finish[i] += ms[i];
    longest = std::max(longest, finish[i]);
  }
  EXPECT_NEAR(ScheduledStepMs(g, m.train_plan, ms, 64), longest, 1e-9);
  // Two workers run the branches at once: less than one, more than the path.
  const double two = ScheduledStepMs(g, m.train_plan, ms, 2);
  EXPECT_LT(two, Sum(ms) - 1e-9);
  EXPECT_GE(two, longest - 1e-9);
}

// In place only, no block takes another's bytes; sharing, the op that opens
// a block waits for the last readers of the blocks it reuses. On an LSTM's
// two layers, whose steps could run side by side, that serialises.
TEST(Schedule, ReusedBytesOrderOpsThatCouldRunAtOnce) {
  const ConfigFile cfg = SmallLstm();
  const Model inplace = BuildModel(cfg, MemoryStrategy::kInplace);
  const Model share = BuildModel(cfg, MemoryStrategy::kShare);
  ASSERT_LT(share.train_plan.arena_bytes, inplace.train_plan.arena_bytes);
  const std::vector<double> ms(share.train.num_nodes(), 1.0);
  const double spare_inplace = ScheduledStepMs(inplace.train, inplace.train_plan, ms, 64);
  const double spare_share = ScheduledStepMs(share.train, share.train_plan, ms, 64);
  EXPECT_GT(spare_share, 1.2 * spare_inplace);
  // And each op waits for what the executor declares: the engine's
  // accesses of the share plan include writes of blocks the op does not
  // itself produce or read.
  int reuse_writes = 0;
  for (const OpAccess& a : EngineAccesses(share.train, share.train_plan))
    reuse_writes += static_cast<int>(a.writes.size()) > share.train.NumOutputs(a.node) + 1;
  EXPECT_GT(reuse_writes, 0);
}

// Reused pairs of blocks (b takes bytes of a after a died) of a placed
// plan, and of them those fewer than `gap` steps apart.
std::pair<int, int> ReusedAndClose(const MemoryPlan& p, int gap) {
  int reused = 0, close = 0;
  for (const ArenaBlock& a : p.blocks)
    for (const ArenaBlock& b : p.blocks) {
      const bool bytes = a.offset < b.offset + b.size && b.offset < a.offset + a.size;
      if (!bytes || a.end >= b.start) continue;
      ++reused;
      close += b.start - a.end < gap;
    }
  return {reused, close};
}

// Two workers run the LSTM on the CPU: its recomputing plans are placed
// again so that bytes are not reused within a few steps of their block's
// death wherever the lower bound allows, within 2% of the bound, and the
// schedule shortens; share's is not, nor a plan for a GPU or one worker.
TEST(Schedule, PlansForTwoWorkersKeepReusedBytesApart) {
  const ConfigFile cfg = LoadConfig(std::string(FRUGAL_SOURCE_DIR) + "/models/lstm/lstm_lm.prototxt",
                                    {"layers=2", "hidden=64", "batch=8", "vocab=50", "seq_len=64", "outputs=63"});
  EXPECT_EQ(BuildModel(cfg, MemoryStrategy::kShare).train_plan.reuse_gap, 0);
  // On a GPU one stream runs the ops in push order, and the config's one
  // worker runs them in order too: nothing to spread.
  EXPECT_EQ(BuildModel(cfg, MemoryStrategy::kSqrt, Device{DeviceType::kCUDA, 0}).train_plan.reuse_gap, 0);
  ConfigFile one_worker = cfg;
  one_worker.net.mutable_solver()->set_engine_workers(1);
  EXPECT_EQ(BuildModel(one_worker, MemoryStrategy::kSqrt).train_plan.reuse_gap, 0);
  for (MemoryStrategy s : {MemoryStrategy::kSqrt, MemoryStrategy::kDropCheap}) {
    const Model m = BuildModel(cfg, s);
    const MemoryPlan& p = m.train_plan;
    const MemoryPlan tight = PlanMemory(m.train, s);
    ASSERT_TRUE(TwoWorkersByDefault(m.train));
    EXPECT_GT(p.reuse_gap, 0) << s.Name();
    EXPECT_LE(p.arena_bytes, 1.02 * p.lower_bound_bytes) << s.Name();
    EXPECT_EQ(p.lower_bound_bytes, tight.lower_bound_bytes) << s.Name();
    EXPECT_EQ(VerifyPlan(m.train, p), "") << s.Name();
    const auto [reused, close] = ReusedAndClose(p, p.reuse_gap);
    // Bytes reused within the gap only where the bound left no room: under
    // 1% of the reuses (sqrt: 8 of 35,862), where the tight plan has many.
    EXPECT_LT(100 * close, reused) << s.Name();
    EXPECT_GT(ReusedAndClose(tight, p.reuse_gap).second, 10 * close) << s.Name();
    if (s.kind == MemoryStrategy::kSqrt) {
      const std::vector<double> ms(m.train.num_nodes(), 1.0);
      EXPECT_LT(ScheduledStepMs(m.train, p, ms, 2), ScheduledStepMs(m.train, tight, ms, 2));
    }
    // Where the bound leaves room, no bytes are reused within the gap.
    MemoryPlan roomy = tight;
    roomy.lower_bound_bytes = 2 * tight.arena_bytes;
    ASSERT_TRUE(PlaceWithGap(m.train, 8, roomy.lower_bound_bytes, &roomy)) << s.Name();
    EXPECT_EQ(roomy.reuse_gap, 8);
    EXPECT_EQ(VerifyPlan(m.train, roomy), "") << s.Name();
    const auto [roomy_reused, roomy_close] = ReusedAndClose(roomy, 8);
    EXPECT_GT(roomy_reused, 0) << s.Name();
    EXPECT_EQ(roomy_close, 0) << s.Name();
  }
}

// ColdBytes against a byte-by-byte simulation of the same rule: a byte an op
// reads or writes is cold when the ops before it (the previous step's
// included) touched more than the cache's bytes since it was last touched.
TEST(Schedule, ColdBytesAreTheBytesTouchedLongestAgo) {
  for (MemoryStrategy s : {MemoryStrategy::kShare, MemoryStrategy::kSqrt}) {
    const Model m = BuildModel(SmallLstm(), s);
    const Graph& g = m.train;
    const MemoryPlan& plan = m.train_plan;
    for (int64_t cache : {int64_t{0}, plan.arena_bytes / 8, plan.arena_bytes / 2, int64_t{1} << 40}) {
      std::vector<double> touched(plan.arena_bytes, -1e300), expect(g.num_nodes(), 0);
      double clock = 0;
      for (int pass = 0; pass < 2; ++pass)
        for (int i = 0; i < g.num_nodes(); ++i) {
          const Node& n = g.node(i);
          if (n.is_variable()) continue;
          std::vector<std::pair<int64_t, int64_t>> ranges;
          double bytes = 0;
          std::vector<int> entries;
          for (const Entry& e : n.inputs) entries.push_back(g.EntryId(e));
          for (int k = 0; k < g.NumOutputs(i); ++k) entries.push_back(g.EntryId({i, k}));
          for (int e : entries) {
            bytes += g.EntryBytes(e);
            if (plan.entry_offset[e] >= 0) ranges.push_back({plan.entry_offset[e], g.EntryBytes(e)});
          }
          if (plan.workspace_offset[i] >= 0) {
            ranges.push_back({plan.workspace_offset[i], plan.workspace_bytes[i]});
            bytes += plan.workspace_bytes[i];
          }
          std::vector<char> seen(plan.arena_bytes, 0);  // a byte counts once per op
          double cold = 0;
          for (auto [offset, size] : ranges)
            for (int64_t x = offset; x < offset + size; ++x)
              if (!seen[x]) {
                seen[x] = 1;
                cold += touched[x] < clock - static_cast<double>(cache);
              }
          clock += bytes;
          for (auto [offset, size] : ranges)
            for (int64_t x = offset; x < offset + size; ++x) touched[x] = clock;
          if (pass == 1) expect[i] = cold;
        }
      const std::vector<double> cold = ColdBytes(g, plan, cache);
      for (int i = 0; i < g.num_nodes(); ++i)
        ASSERT_EQ(cold[i], expect[i]) << s.Name() << " cache " << cache << " node " << g.node(i).name;
      if (cache == plan.arena_bytes / 8) {
        EXPECT_GT(Sum(cold), 0) << s.Name();
      } else if (cache == int64_t{1} << 40) {
        EXPECT_EQ(Sum(cold), 0) << s.Name();
      }
    }
  }
}

}  // namespace
}  // namespace frugal
