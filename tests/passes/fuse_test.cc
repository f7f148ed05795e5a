// Fusion of batch_norm + relu (src/passes/fuse.cc): which pairs fuse, and
// that a fused net trains to the same bits as the unfused one under every
// memory strategy (parameters and BatchNorm moving statistics).
#include <gtest/gtest.h>

#include "frugal/passes/memory_plan.h"
#include "frugal/train.h"
#include "train/train_steps.h"

namespace frugal {
namespace {

// conv -> bn1 -> relu1 -> conv -> bn2 -> relu2 (+ bn2 read again by `skip`)
// -> pool -> fc -> softmax: bn1 + relu1 fuse; bn2 does not (its output has
// two readers).
ConfigFile FusableConvNet(bool fuse) {
  std::string text = R"cfg(version: 1
node { name: "conv1" op: "convolution" input: "data" attr { key: "kernel" value: "(3,3)" } attr { key: "pad" value: "(1,1)" } attr { key: "num_filter" value: "8" } }
node { name: "bn1" op: "batch_norm" input: "conv1" attr { key: "fix_gamma" value: "false" } }
node { name: "relu1" op: "relu" input: "bn1" mirror: true }
node { name: "conv2" op: "convolution" input: "relu1" attr { key: "kernel" value: "(3,3)" } attr { key: "pad" value: "(1,1)" } attr { key: "num_filter" value: "8" } }
node { name: "bn2" op: "batch_norm" input: "conv2" attr { key: "fix_gamma" value: "false" } }
node { name: "relu2" op: "relu" input: "bn2" }
node { name: "skip" op: "add_n" input: "relu2" input: "bn2" }
node { name: "pool" op: "pooling" input: "skip" attr { key: "kernel" value: "(2,2)" } attr { key: "stride" value: "(2,2)" } attr { key: "pool_type" value: "max" } }
node { name: "fc" op: "fully_connected" input: "pool" attr { key: "num_hidden" value: "10" } }
node { name: "prob" op: "softmax_cross_entropy" input: "fc" input: "label" }
data { batch_size: 4 sample_shape: [3, 6, 6] }
solver { lr: 0.1 momentum: 0.9 seed: 3 }
)cfg";
  if (!fuse) text += "fuse: false\n";
  return ParseConfig(text, "convnet.prototxt", {});
}

int Find(const Graph& g, const std::string& name) { return g.FindNode(name); }

TEST(Fuse, BatchNormTakesInTheReluThatAloneReadsIt) {
  const Graph fused = BuildGraph(FusableConvNet(true));
  const Graph plain = BuildGraph(FusableConvNet(false));
  EXPECT_EQ(fused.num_nodes(), plain.num_nodes() - 1);
  EXPECT_EQ(Find(fused, "relu1"), -1);
  const Node& bn1 = fused.node(Find(fused, "bn1"));
  EXPECT_EQ(bn1.attrs.at("act_type"), "relu");
  EXPECT_EQ(bn1.keep, Node::Keep::kMirror);  // the relu's annotation carries over
  EXPECT_EQ(fused.node(Find(fused, "conv2")).inputs[0].node, Find(fused, "bn1"));
  // bn2's output is read by relu2 and by skip: both stay.
  EXPECT_GE(Find(fused, "relu2"), 0);
  EXPECT_EQ(fused.node(Find(fused, "bn2")).attrs.count("act_type"), 0u);
  EXPECT_EQ(Find(plain, "bn1") >= 0 && Find(plain, "relu1") >= 0, true);
}

TEST(Fuse, FusedTrainsToTheBitsOfUnfusedUnderEveryStrategy) {
  const auto reference = test::TrainSteps(FusableConvNet(false), MemoryStrategy::kNone, 3);
  ASSERT_GT(reference.size(), 8u);  // weights, gamma/beta and the moving statistics
  for (const MemoryStrategy& s : AllMemoryStrategies()) {
    EXPECT_EQ(test::TrainSteps(FusableConvNet(true), s, 3), reference) << s.Name();
  }
}

// A recomputed batch_norm applies the statistics its original saved (it
// reads them in place of the moving ones) rather than computing them again;
// the bits are those of the plan without recomputation (above).
TEST(Fuse, RecomputedBatchNormReadsTheSavedStatistics) {
  for (bool fuse : {true, false}) {
    const Model m = BuildModel(FusableConvNet(fuse), MemoryStrategy::kDropCheap);
    int mirrors = 0;
    for (const Node& n : m.train.nodes()) {
      if (n.mirror_of < 0 || n.op->name() != "batch_norm") continue;
      ++mirrors;
      EXPECT_EQ(n.inputs[3], (Entry{n.mirror_of, 1})) << n.name;
      EXPECT_EQ(n.inputs[4], (Entry{n.mirror_of, 2})) << n.name;
    }
    EXPECT_GT(mirrors, 0) << "drop_cheap should recompute batch_norm (fuse " << fuse << ")";
  }
}

TEST(Fuse, ABadActTypeNamesTheNode) {
  const std::string text = R"cfg(version: 1
node { name: "bn" op: "batch_norm" input: "data" attr { key: "act_type" value: "tanh" } }
node { name: "prob" op: "softmax_cross_entropy" input: "bn" input: "label" }
data { batch_size: 2 sample_shape: [3] }
)cfg";
  try {
    BuildGraph(ParseConfig(text, "bad.prototxt", {}));
    FAIL() << "act_type tanh was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.prototxt:2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("act_type must be \"relu\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace frugal
