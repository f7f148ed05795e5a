// Recomputation is exact through the real training loop: a
// convolution-BatchNorm-ReLU-pooling-dropout net and the char LSTM, trained
// by Train on the config's (threaded) engine with the arena poisoned
// (TrainOptions::poison_arena, frugal/executor.h), end under every memory strategy
// with the bits of `none`: parameters, BatchNorm moving statistics and
// optimizer state, as the last checkpoint holds them. A recomputed BatchNorm
// that updates its moving statistics twice, a recomputed dropout that draws
// other numbers, or a kernel that reads a dead buffer fails here. The
// strategies include two budget plans, and the test checks that the ops
// whose replay it means to compare (batch_norm, dropout) are recomputed.
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "frugal/checkpoint.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/train.h"
#include "test_util.h"

namespace frugal {
namespace {

ConfigFile BnReluConvNet() {
  const std::string text = R"cfg(version: 1
node { name: "conv1" op: "convolution" input: "data" attr { key: "kernel" value: "(3,3)" } attr { key: "pad" value: "(1,1)" } attr { key: "num_filter" value: "8" } }
node { name: "bn1" op: "batch_norm" input: "conv1" attr { key: "fix_gamma" value: "false" } }
node { name: "relu1" op: "relu" input: "bn1" }
node { name: "pool1" op: "pooling" input: "relu1" attr { key: "kernel" value: "(2,2)" } attr { key: "stride" value: "(2,2)" } attr { key: "pool_type" value: "max" } }
node { name: "drop1" op: "dropout" input: "pool1" attr { key: "p" value: "0.3" } }
node { name: "conv2" op: "convolution" input: "drop1" attr { key: "kernel" value: "(3,3)" } attr { key: "pad" value: "(1,1)" } attr { key: "num_filter" value: "8" } }
node { name: "bn2" op: "batch_norm" input: "conv2" attr { key: "fix_gamma" value: "false" } }
node { name: "relu2" op: "relu" input: "bn2" }
node { name: "pool2" op: "pooling" input: "relu2" attr { key: "kernel" value: "(2,2)" } attr { key: "stride" value: "(2,2)" } attr { key: "pool_type" value: "avg" } }
node { name: "fc" op: "fully_connected" input: "pool2" attr { key: "num_hidden" value: "10" } }
node { name: "prob" op: "softmax_cross_entropy" input: "fc" input: "label" }
data { train { synthetic { num_samples: 16 min: -1 max: 1 } } batch_size: 4 sample_shape: [3, 8, 8] }
solver { optimizer: ADAM lr: 0.01 epochs: 2 seed: 3 }
)cfg";
  return ParseConfig(text, "convnet.prototxt", {});
}

ConfigFile CharLstm(const test::TempDir& dir) {
  std::string corpus;
  for (int i = 0; i < 40; ++i) corpus += "the quick brown fox " + std::to_string(i * 7 % 13) + "\n";
  std::ofstream(dir.File("corpus.txt")) << corpus;
  ConfigFile cfg = LoadConfig(std::string(FRUGAL_SOURCE_DIR) + "/models/lstm/char_lm.prototxt",
                              {"seq_len=12", "chunk=4", "batch=4", "hidden=16", "train=" + dir.File("corpus.txt"),
                               "val=" + dir.File("corpus.txt"), "epochs=1", "val_interval=0"});
  cfg.net.mutable_solver()->set_max_iters(0);
  return cfg;
}

// Trains cfg under strategy s; returns the last checkpoint's tensors by
// kind and name, as raw bytes.
std::map<std::string, std::string> TrainAndRead(ConfigFile cfg, const MemoryStrategy& s, const std::string& dir) {
  cfg.net.mutable_memory()->set_strategy(s.Name());
  cfg.net.mutable_solver()->set_checkpoint_dir(dir);
  TrainOptions opts;
  opts.poison_arena = true;
  Train(cfg, opts);
  const std::string latest = CheckpointManager(dir, 0, 0).Latest();
  EXPECT_FALSE(latest.empty()) << s.Name() << ": no checkpoint in " << dir;
  if (latest.empty()) return {};
  const CheckpointState st = LoadCheckpoint(latest);
  std::map<std::string, std::string> bytes;
  auto add = [&](const char* kind, const std::map<std::string, Tensor>& tensors) {
    for (const auto& [name, t] : tensors)
      bytes[std::string(kind) + ":" + name] = std::string(static_cast<const char*>(t.raw()), t.bytes());
  };
  add("param", st.params);
  add("aux", st.aux);
  add("state", st.opt_state);
  return bytes;
}

// The strategies the tests train under: every fixed one, and budgets the
// given quarters of the way from the sqrt plan's arena to share's.
std::vector<MemoryStrategy> Strategies(const ConfigFile& cfg, const std::vector<int>& quarters) {
  std::vector<MemoryStrategy> out = AllMemoryStrategies();
  const int64_t lo = BuildModel(cfg, MemoryStrategy::kSqrt).train_plan.arena_bytes;
  const int64_t hi = BuildModel(cfg, MemoryStrategy::kShare).train_plan.arena_bytes;
  for (int q : quarters) out.emplace_back(MemoryStrategy::kBudget, lo + (hi - lo) * q / 4);
  return out;
}

// Trains cfg under every strategy and compares the bits with none's; the
// ops the strategies recompute (their mirrors' ops, all strategies
// together) include `recomputed`, so their replay is what is compared.
void ExpectEveryStrategyGivesTheBitsOfNone(const ConfigFile& cfg, const std::string& what,
                                           const std::set<std::string>& recomputed, const std::vector<int>& quarters) {
  const int saved = FLAGS_minloglevel;
  FLAGS_minloglevel = 2;
  test::TempDir dir;
  const auto reference = TrainAndRead(cfg, MemoryStrategy::kNone, dir.File("none"));
  int aux = 0, states = 0;
  for (const auto& [key, b] : reference) {
    aux += key.rfind("aux:", 0) == 0;
    states += key.rfind("state:", 0) == 0;
  }
  EXPECT_GT(aux, 0) << what << ": no moving statistics or states in the checkpoint";
  EXPECT_GT(states, 0) << what << ": no optimizer state in the checkpoint";
  std::set<std::string> ops;  // of the mirrors of every strategy's training graph
  for (const MemoryStrategy& s : Strategies(cfg, quarters)) {
    if (s.kind == MemoryStrategy::kNone) continue;
    const Model m = BuildModel(cfg, s);
    for (const Node& n : m.train.nodes())
      if (n.mirror_of >= 0) ops.insert(n.op->name());
    if (s.kind == MemoryStrategy::kBudget) {
      EXPECT_GT(m.train_plan.num_recomputed, 0) << what << " with " << s.Name();
    }
    const auto got = TrainAndRead(cfg, s, dir.File(s.Name()));
    ASSERT_EQ(got.size(), reference.size()) << what << " with " << s.Name();
    for (const auto& [key, b] : reference) {
      auto it = got.find(key);
      ASSERT_NE(it, got.end()) << what << " with " << s.Name() << ": " << key << " missing";
      EXPECT_TRUE(it->second == b) << what << " with " << s.Name() << ": " << key << " differs from none";
    }
  }
  for (const std::string& op : recomputed) EXPECT_EQ(ops.count(op), 1u) << what << ": no strategy recomputes a " << op;
  FLAGS_minloglevel = saved;
}

TEST(StrategyTrain, ConvBatchNormDropoutNetEndsWithTheBitsOfNone) {
  ExpectEveryStrategyGivesTheBitsOfNone(BnReluConvNet(), "the conv net", {"batch_norm", "dropout", "convolution"},
                                        {1, 2});
}

TEST(StrategyTrain, CharLstmEndsWithTheBitsOfNone) {
  test::TempDir dir;
  // One budget: each of its plans takes the budget search about 2 s (its
  // exact search of drop sets, to its limits), and it is planned twice.
  ExpectEveryStrategyGivesTheBitsOfNone(CharLstm(dir), "the char LSTM", {"lstm"}, {2});
}

}  // namespace
}  // namespace frugal
