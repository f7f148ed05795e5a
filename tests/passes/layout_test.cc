// Channels-last layouts (ChooseLayouts): which activations become nhwc, that
// nothing that cannot take them sees them, that training on them gives what
// plain training gives, and that recomputation stays exact on them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ops/cpu/dnnl.h"
#include "frugal/config.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/train.h"
#include "test_util.h"
#include "train/train_steps.h"

namespace frugal {
namespace {

// test::ConvNet (convolution, BatchNorm, ReLU, max pooling into dropout,
// which takes plain only, a residual sum, average pooling into a fully
// connected layer), conv2 with a bias: a bias on nhwc.
ConfigFile BiasedConvNet(const std::string& dtype = "float32") {
  ConfigFile cfg = test::ConvNet(dtype);
  for (auto& n : *cfg.net.mutable_node())
    if (n.name() == "conv2") n.mutable_attr()->erase("no_bias");
  return cfg;
}

// The same without BatchNorm: ReLU alone between the convolutions.
ConfigFile ConvReluNet() {
  ConfigFile cfg = BiasedConvNet();
  for (auto& n : *cfg.net.mutable_node()) {
    if (n.op() != "batch_norm") continue;
    n.set_op("relu");
    n.clear_attr();
  }
  return cfg;
}

Layout OutputLayout(const Graph& g, const std::string& node) {
  const int i = g.FindNode(node);
  EXPECT_GE(i, 0) << node;
  return g.layout(Entry{i, 0});
}

TEST(Layouts, ChannelsLastBetweenConvolutionsPlainAtTheEdges) {
  const Model m = BuildModel(BiasedConvNet(), MemoryStrategy::kShare);
  const Graph& g = m.train;
  ASSERT_EQ(g.layouts.size(), static_cast<size_t>(g.num_entries()));
  // Between the convolutions, pooling and the ops that take either order.
  for (const char* n : {"conv1", "bn1", "conv2", "bn2", "conv3", "sum"})
    EXPECT_EQ(OutputLayout(g, n), Layout::kNhwc) << n;
  // Into dropout and into fully_connected, which take plain only; the data.
  for (const char* n : {"pool1", "drop1", "pool2", "data"}) EXPECT_EQ(OutputLayout(g, n), Layout::kPlain) << n;
  for (const Entry& e : g.outputs) EXPECT_EQ(g.layout(e), Layout::kPlain);
  int nhwc = 0;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (i < static_cast<int>(g.grad_of.size()) && g.grad_of[i].valid()) {
      EXPECT_EQ(g.layout(g.grad_of[i]), Layout::kPlain) << "the gradient of " << n.name;
    }
    if (n.is_variable()) {
      EXPECT_EQ(g.layout(Entry{i, 0}), Layout::kPlain) << n.name;
      continue;
    }
    // No slot sees a layout its op does not take; tied slots share one.
    std::vector<Layout> tied;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Layout l = g.layout(n.inputs[k]);
      if (l == Layout::kNhwc) { EXPECT_TRUE(n.op->nhwc_input(static_cast<int>(k))) << n.name << " input " << k; }
      if (n.op->nhwc_tied() && g.shape(n.inputs[k]).ndim() == 4) tied.push_back(l);
    }
    for (int k = 0; k < g.NumOutputs(i); ++k) {
      const Layout l = g.layout(Entry{i, k});
      nhwc += l == Layout::kNhwc;
      if (l == Layout::kNhwc) { EXPECT_TRUE(n.op->nhwc_output(k)) << n.name << " output " << k; }
      if (n.op->nhwc_tied() && g.shape(Entry{i, k}).ndim() == 4) tied.push_back(l);
    }
    for (Layout l : tied) EXPECT_EQ(l, tied[0]) << n.name << "'s tied slots differ";
    // A gradient node lays dx out as x.
    if (n.fwd >= 0 && g.node(n.fwd).op->backward_op() == n.op->name()) {
      const Node& f = g.node(n.fwd);
      for (int k = 0; k < g.NumOutputs(i) && k < static_cast<int>(f.inputs.size()); ++k) {
        EXPECT_EQ(g.layout(Entry{i, k}), g.layout(f.inputs[k])) << n.name << " output " << k;
      }
    }
  }
  EXPECT_GE(nhwc, 10) << "forward and backward activations between the convolutions";
  // Inference too; a GPU's graphs stay plain.
  EXPECT_EQ(OutputLayout(m.eval, "conv2"), Layout::kNhwc);
}

// b within tol of a, relative in L2; a value that is rounding noise (conv2's
// bias, which the BatchNorm after it cancels: its gradient is zero but for
// rounding) within tol absolute.
void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, double tol, size_t k) {
  double norm = 0, diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    norm = std::max(norm, std::fabs(double(a[i])));
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
  }
  if (norm < 1e-3) {
    EXPECT_LT(diff, tol) << "value " << k << " (rounding noise: compared absolutely)";
  } else {
    EXPECT_LT(test::RelErr(a, b), tol) << "value " << k;
  }
}

TEST(Layouts, ChannelsLastTrainsAsPlain) {
  // Three steps of SGD on nhwc activations and on plain ones: oneDNN's
  // kernels for the two orders sum in different orders, so the results
  // agree to rounding, not bit for bit. A kernel reading a layout wrong
  // moves them by 100%.
  for (const ConfigFile& cfg : {BiasedConvNet(), ConvReluNet()}) {
    const auto nhwc = test::TrainSteps(cfg, MemoryStrategy::kShare, 3);
    const auto plain = test::TrainSteps(cfg, MemoryStrategy::kShare, 3, nullptr, /*plain_layouts=*/true);
    ASSERT_EQ(nhwc.size(), plain.size());
    for (size_t k = 0; k < plain.size(); ++k) ExpectClose(plain[k], nhwc[k], 1e-4, k);
    const Model m = BuildModel(cfg, MemoryStrategy::kShare);
    EXPECT_GE(std::count(m.train.layouts.begin(), m.train.layouts.end(), Layout::kNhwc), 10);
  }
}

TEST(Layouts, Bfloat16ChannelsLastTrainsAsPlain) {
  if (!cpu::HasBf16()) {
    ASSERT_FALSE(test::CpuHasFlag("avx512_bf16"))
        << "the CPU has avx512_bf16, yet frugal finds no bfloat16 convolution";
    GTEST_SKIP() << "oneDNN has no bfloat16 convolution on this CPU (it needs AVX-512)";
  }
  const ConfigFile cfg = BiasedConvNet("bf16");
  const auto nhwc = test::TrainSteps(cfg, MemoryStrategy::kShare, 2);
  const auto plain = test::TrainSteps(cfg, MemoryStrategy::kShare, 2, nullptr, /*plain_layouts=*/true);
  ASSERT_EQ(nhwc.size(), plain.size());
  // bfloat16 rounds each stored activation (2^-9 relative); the two orders
  // round different sums.
  for (size_t k = 0; k < plain.size(); ++k) ExpectClose(plain[k], nhwc[k], 2e-2, k);
}

TEST(Layouts, EveryStrategyGivesTheBitsOfNone) {
  // A recomputed node runs the kernel of the node it recomputes on the same
  // layout: the same bits, as on plain activations.
  const ConfigFile cfg = BiasedConvNet();
  const auto none = test::TrainSteps(cfg, MemoryStrategy::kNone, 2);
  for (const MemoryStrategy& s : AllMemoryStrategies()) {
    if (s.kind == MemoryStrategy::kNone) continue;
    const Model m = BuildModel(cfg, s);
    EXPECT_TRUE(std::count(m.train.layouts.begin(), m.train.layouts.end(), Layout::kNhwc) > 0) << s.Name();
    EXPECT_EQ(test::TrainSteps(cfg, s, 2), none) << s.Name();
  }
}

}  // namespace
}  // namespace frugal
