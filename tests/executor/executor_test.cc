// The executor under a threaded engine: every pair of ops that touch the same
// arena bytes (one writing) is ordered by the engine variables it pushes,
// including tensors that reuse another tensor's buffer and consecutive runs;
// runs pushed back to back on the threaded engine give the naive engine's
// bits.
#include <gtest/gtest.h>

#include "frugal/passes/memory_plan.h"
#include "frugal/train.h"
#include "test_util.h"

namespace frugal {
namespace {

// A skip connection (one entry read twice), unequal widths (so shared blocks
// overlap partly) and a chain long enough for buffers to be reused.
const char* kSkip = R"(
version: 1
node { name: "flat" op: "flatten" input: "data" }
node { name: "fc1" op: "fully_connected" input: "flat" attr { key: "num_hidden" value: "48" } }
node { name: "relu1" op: "relu" input: "fc1" }
node { name: "fc2" op: "fully_connected" input: "relu1" attr { key: "num_hidden" value: "32" } }
node { name: "relu2" op: "relu" input: "fc2" }
node { name: "fc3" op: "fully_connected" input: "relu2" attr { key: "num_hidden" value: "48" } }
node { name: "relu3" op: "relu" input: "fc3" }
node { name: "skip" op: "add_n" input: "relu1" input: "relu3" }
node { name: "fc4" op: "fully_connected" input: "skip" attr { key: "num_hidden" value: "24" } }
node { name: "relu4" op: "relu" input: "fc4" }
node { name: "fc5" op: "fully_connected" input: "relu4" attr { key: "num_hidden" value: "10" } }
node { name: "prob" op: "softmax_cross_entropy" input: "fc5" input: "label" }
data { batch_size: 8 sample_shape: [1, 6, 6] }
)";

// Two towers: b1 is planned into the bytes of a1, which a2 (not an ancestor
// of b1) still reads, so only the reuse ordering keeps them apart.
const char* kTowers = R"(
version: 1
node { name: "flat" op: "flatten" input: "data" }
node { name: "a1" op: "fully_connected" input: "flat" attr { key: "num_hidden" value: "64" } }
node { name: "a2" op: "fully_connected" input: "a1" attr { key: "num_hidden" value: "10" } }
node { name: "b1" op: "fully_connected" input: "flat" attr { key: "num_hidden" value: "64" } }
node { name: "b2" op: "fully_connected" input: "b1" attr { key: "num_hidden" value: "10" } }
node { name: "sum" op: "add_n" input: "a2" input: "b2" }
node { name: "prob" op: "softmax_cross_entropy" input: "sum" input: "label" }
data { batch_size: 8 sample_shape: [1, 6, 6] }
)";

struct Access {
  int64_t begin, end;  // arena bytes
  bool write;
  int block;  // the plan's block, -1 for a workspace
};

// The arena bytes each op of the schedule reads and writes.
std::vector<std::vector<Access>> ArenaAccesses(const Graph& g, const MemoryPlan& plan,
                                               const std::vector<Executor::OpSchedule>& sched) {
  std::vector<std::vector<Access>> out;
  for (const auto& op : sched) {
    const Node& n = g.node(op.node);
    std::vector<Access> a;
    auto add = [&](int e, bool write) {
      if (plan.entry_offset[e] < 0) return;
      int64_t bytes = g.shapes[e].Size() * 4;
      a.push_back({plan.entry_offset[e], plan.entry_offset[e] + bytes, write, plan.entry_block[e]});
    };
    for (size_t k = 0; k < n.inputs.size(); ++k) { add(g.EntryId(n.inputs[k]), n.op->mutates(static_cast<int>(k))); }
    for (int k = 0; k < g.NumOutputs(op.node); ++k) add(g.EntryId({op.node, k}), true);
    if (plan.workspace_offset[op.node] >= 0) {
      int64_t off = plan.workspace_offset[op.node];
      a.push_back({off, off + plan.workspace_bytes[op.node], true, -1});
    }
    out.push_back(a);
  }
  return out;
}

// Binds the training graph with fresh tensors for variables and gradients,
// and engine variables for data, label and gradients.
struct Bound {
  Model m;
  Bindings b;
  std::unique_ptr<Executor> exec;
  Bound(const char* config, MemoryStrategy s, Engine* engine)
      : m(BuildModel(ParseConfig(config, "test.prototxt", {}), s)) {
    Rng rng(5);
    for (int id : m.params) {
      const Node& n = m.train.node(id);
      Tensor w = Tensor::Empty(m.train.shape({id, 0}));
      InitParam(n.init, n.name, &w, &rng);
      b.vars[n.name] = w;
      b.grads[n.name] = Tensor::Empty(w.shape());
      b.grad_vars[n.name] = engine->NewVar();
    }
    b.vars["data"] = Tensor::Empty(m.data_shape);
    b.vars["label"] = Tensor::Empty(m.label_shape);
    b.var_vars["data"] = engine->NewVar();
    b.var_vars["label"] = engine->NewVar();
    exec = std::make_unique<Executor>(m.train, m.train_plan, b, engine);
  }
};

// --poison-arena fires: a plan with one entry moved onto the bytes of a block
// that dies between the entry's writer and its last reader (a planner bug)
// stops that reader with the poison error naming it; the plan as planned
// runs clean.
TEST(Executor, PoisonStopsAReaderOfBytesAnotherBlockLetDie) {
  auto engine = MakeEngine("naive");
  Bound bound(kSkip, MemoryStrategy::kShare, engine.get());
  const Graph& g = bound.m.train;
  const MemoryPlan& plan = bound.m.train_plan;
  for (Tensor* t : {&bound.b.vars["data"], &bound.b.vars["label"]}) t->Fill(0.f);
  bound.exec->SetPoisoning(true);
  bound.exec->Run(true, 0, 1);  // clean
  // Each arena entry's writer and last reader, each block's last reader.
  std::vector<int> last_read(g.num_entries(), -1), block_death(plan.num_blocks, -1);
  for (int i = 0; i < g.num_nodes(); ++i)
    for (const Entry& e : g.node(i).inputs) last_read[g.EntryId(e)] = i;
  for (int e = 0; e < g.num_entries(); ++e)
    if (plan.entry_offset[e] >= 0)
      block_death[plan.entry_block[e]] = std::max(block_death[plan.entry_block[e]], last_read[e]);
  for (const Entry& o : g.outputs) block_death[plan.entry_block[g.EntryId(o)]] = g.num_nodes();
  // An entry E and a block B of another entry whose death falls strictly
  // between E's writer and E's last reader.
  for (int e = 0; e < g.num_entries(); ++e) {
    if (plan.entry_offset[e] < 0 || last_read[e] < 0) continue;
    const int writer = g.EntryOf(e).node;
    for (int f = 0; f < g.num_entries(); ++f) {
      if (plan.entry_offset[f] < 0 || plan.entry_block[f] == plan.entry_block[e] || g.EntryBytes(f) < g.EntryBytes(e))
        continue;
      const int death = block_death[plan.entry_block[f]];
      if (g.EntryOf(f).node >= writer || death <= writer || death >= last_read[e]) continue;
      MemoryPlan broken = plan;
      broken.entry_offset[e] = plan.entry_offset[f];
      Executor exec(g, broken, bound.b, engine.get());
      exec.SetPoisoning(true);
      test::ExpectError([&] { exec.Run(true, 0, 1); },
                        {"holds the arena's poison", "the op reads bytes that are dead or were never written"});
      return;
    }
  }
  FAIL() << "no entry outlives another block in this plan";
}

TEST(Executor, EveryConflictingArenaAccessIsOrdered) {
  for (const char* config : {kSkip, kTowers}) {
    for (MemoryStrategy s : AllMemoryStrategies()) {
      auto engine = MakeEngine("naive");
      Bound bound(config, s, engine.get());
      const Graph& g = bound.m.train;
      // Two runs back to back: the second run's writers must also wait for
      // the first run's last readers.
      std::vector<Executor::OpSchedule> ops = bound.exec->schedule();
      ops.insert(ops.end(), bound.exec->schedule().begin(), bound.exec->schedule().end());
      auto acc = ArenaAccesses(g, bound.m.train_plan, ops);
      std::vector<test::PushRecord> pushes;
      for (const auto& op : ops) pushes.push_back({g.node(op.node).name, op.reads, op.writes});
      auto hb = test::HappensBefore(pushes);
      int conflicts = 0, reuse = 0;
      for (size_t i = 0; i < ops.size(); ++i) {
        for (size_t j = i + 1; j < ops.size(); ++j) {
          for (const Access& a : acc[i]) {
            for (const Access& b : acc[j]) {
              if (!(a.write || b.write) || a.end <= b.begin || b.end <= a.begin) continue;
              ++conflicts;
              reuse += a.block != b.block;
              EXPECT_TRUE(hb[i][j]) << s.Name() << ": " << g.node(ops[i].node).name << " and "
                                    << g.node(ops[j].node).name << " touch arena bytes [" << std::max(a.begin, b.begin)
                                    << ", " << std::min(a.end, b.end) << ") unordered";
            }
          }
        }
      }
      EXPECT_GT(conflicts, 10) << s.Name();
      // Only sharing puts different blocks on the same bytes.
      if (s.shares()) {
        EXPECT_GT(reuse, 4);
      } else {
        EXPECT_EQ(reuse, 0);
      }
    }
  }
}

// Pushes `runs` training runs without waiting, each on its own data written
// by a pushed function, and collects the output and every gradient after
// each run with a pushed function.
std::vector<std::vector<float>> PushedRuns(Engine* engine, const char* config, MemoryStrategy s, int runs) {
  Bound bound(config, s, engine);
  Bindings& b = bound.b;
  std::vector<std::vector<float>> results(runs);
  std::vector<Var> collect_reads{bound.exec->output_var(0)};
  std::vector<Tensor> collect{bound.exec->output(0)};
  for (const auto& [name, g] : b.grads) {
    collect.push_back(g);
    collect_reads.push_back(b.grad_vars[name]);
  }
  for (int r = 0; r < runs; ++r) {
    Tensor data = b.vars["data"], label = b.vars["label"];
    engine->Push(
        [data, label, r] {
          for (int64_t i = 0; i < data.size(); ++i) data.f()[i] = static_cast<float>((i * 7 + r * 13) % 17) / 17;
          for (int64_t i = 0; i < label.size(); ++i) label.f()[i] = static_cast<float>((i + r) % 10);
        },
        {}, {b.var_vars["data"], b.var_vars["label"]}, {});
    bound.exec->Push(true, r, 1);
    std::vector<float>* out = &results[r];
    engine->Push(
        [collect, out] {
          for (const Tensor& t : collect) out->insert(out->end(), t.f(), t.f() + t.size());
        },
        collect_reads, {}, {});
  }
  engine->WaitAll();
  return results;
}

TEST(Executor, RunsPushedBackToBackOnTheThreadedEngineMatchNaive) {
  for (const char* config : {kSkip, kTowers}) {
    for (MemoryStrategy s : AllMemoryStrategies()) {
      auto naive = MakeEngine("naive");
      auto reference = PushedRuns(naive.get(), config, s, 12);
      ASSERT_NE(reference[0], reference[1]) << "runs must differ for the test to mean anything";
      for (int workers : {1, 3}) {
        auto threaded = MakeEngine("threaded", {workers, 1});
        for (int round = 0; round < 5; ++round) {
          auto got = PushedRuns(threaded.get(), config, s, 12);
          for (size_t r = 0; r < got.size(); ++r) {
            EXPECT_TRUE(got[r] == reference[r]) << s.Name() << ", " << workers << " workers, round " << round
                                                << ": run " << r << " differs from the naive engine's";
          }
        }
      }
    }
  }
}

TEST(Executor, RunWaitsAndOutputsAreReadable) {
  auto engine = MakeEngine("threaded", {2, 1});
  Bound bound(kSkip, MemoryStrategy::kShare, engine.get());
  Tensor data = bound.b.vars["data"], label = bound.b.vars["label"];
  data.Fill(0.5f);
  label.Fill(3.f);
  bound.exec->Push(true, 0, 1);
  bound.exec->WaitForOutputs();
  const Tensor& p = bound.exec->output(0);
  double sum = 0;
  for (int64_t i = 0; i < p.size(); ++i) sum += p.f()[i];
  EXPECT_NEAR(sum, 8.0, 1e-4) << "each of 8 rows of probabilities sums to 1";
  engine->WaitAll();
}

}  // namespace
}  // namespace frugal
