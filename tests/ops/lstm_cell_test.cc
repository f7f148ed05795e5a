// Whole models from config text through the real pipeline (BuildGraph ->
// Gradient -> InferShapes -> PlanMemory -> Executor), checked by finite
// differences on every parameter: one unrolled LSTM cell step, and a split
// whose middle part is unused (the gradient pass gives it zeros_like).
#include <gtest/gtest.h>

#include <cmath>

#include "frugal/config.h"
#include "frugal/passes/gradient.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/shapes.h"
#include "ops/op_test_util.h"

namespace frugal::test {
namespace {

// One LSTM step (MXNet's unrolled cell) with relu in place of sigmoid and
// tanh, which live on another branch. data = [x (3) | h (4) | c (4)].
const char* kLstmCell = R"cfg(
version: 1
node { name: "x" op: "slice" input: "data" attr { key: "begin" value: "(None,0)" } attr { key: "end" value: "(None,3)" } }
node { name: "h" op: "slice" input: "data" attr { key: "begin" value: "(None,3)" } attr { key: "end" value: "(None,7)" } }
node { name: "c" op: "slice" input: "data" attr { key: "begin" value: "(None,7)" } attr { key: "end" value: "(None,None)" } }
node { name: "i2h" op: "fully_connected" input: "x" attr { key: "num_hidden" value: "16" } }
node { name: "h2h" op: "fully_connected" input: "h" attr { key: "num_hidden" value: "16" } }
node { name: "gates" op: "add" input: "i2h" input: "h2h" }
node { name: "slice_gates" op: "slice_channel" input: "gates" attr { key: "num_outputs" value: "4" } }
node { name: "in_gate" op: "relu" input: "slice_gates:0" }
node { name: "in_transform" op: "relu" input: "slice_gates:1" }
node { name: "forget_gate" op: "relu" input: "slice_gates:2" }
node { name: "out_gate" op: "relu" input: "slice_gates:3" }
node { name: "keep_c" op: "mul" input: "forget_gate" input: "c" }
node { name: "new_c" op: "mul" input: "in_gate" input: "in_transform" }
node { name: "next_c" op: "add" input: "keep_c" input: "new_c" }
node { name: "c_act" op: "relu" input: "next_c" }
node { name: "next_h" op: "mul" input: "out_gate" input: "c_act" }
node { name: "h_loss" op: "linear_regression_output" input: "next_h" input: "label" }
node { name: "c_loss" op: "make_loss" input: "next_c" attr { key: "grad_scale" value: "0.5" } }
)cfg";

// A split into three parts of which the middle one is never read.
const char* kSplitUnused = R"cfg(
version: 1
node { name: "fc" op: "fully_connected" input: "data" attr { key: "num_hidden" value: "6" } }
node { name: "parts" op: "split" input: "fc" attr { key: "num_outputs" value: "3" } }
node { name: "prod" op: "mul" input: "parts:0" input: "parts:2" }
node { name: "loss" op: "make_loss" input: "prod" }
output: "loss"
)cfg";

using Vars = std::map<std::string, std::pair<Shape, std::vector<float>>>;

// The scalar the loss heads of a graph differentiate, from its outputs.
using LossFn = std::function<double(const std::vector<std::vector<float>>& outputs, const Vars& vars)>;

struct FdReport {
  int checked = 0, kinks = 0;
};

// Checks the gradient of every element of every parameter by central
// differences of the objective on the forward graph, skipping kinks (where
// one-sided differences disagree), as the op harness does.
FdReport CheckParamGradients(const std::string& config, Vars vars, const LossFn& objective) {
  Graph fwd = BuildGraph(ParseConfig(config, "model.prototxt", {}));
  Graph train = fwd;
  Gradient(&train);
  auto analytic = RunGraph(train, vars).grads;
  // Every strategy gives the same bits.
  for (MemoryStrategy s : {MemoryStrategy::kInplace, MemoryStrategy::kShare})
    EXPECT_EQ(RunGraph(train, vars, true, 0, 1, s).grads, analytic) << s.Name();
  auto j = [&](const Vars& v) { return objective(RunGraph(fwd, v).outputs, v); };
  const double eps = 1e-2, tol = 1e-3, j0 = j(vars);
  FdReport rep;
  for (const auto& [name, grad] : analytic) {
    for (size_t i = 0; i < grad.size(); ++i) {
      Vars vp = vars, vm = vars;
      vp[name].second[i] += static_cast<float>(eps);
      vm[name].second[i] -= static_cast<float>(eps);
      const double jp = j(vp), jm = j(vm);
      const double right = (jp - j0) / eps, left = (j0 - jm) / eps, central = (jp - jm) / (2 * eps);
      if (std::fabs(right - left) > 10 * tol * std::max(1.0, std::fabs(central))) {
        ++rep.kinks;
        continue;
      }
      EXPECT_NEAR(grad[i], central, tol * std::max(1.0, std::fabs(central))) << name << "[" << i << "]";
      ++rep.checked;
    }
  }
  return rep;
}

TEST(LstmCell, GradientOfTheWholeCellMatchesFiniteDifferences) {
  const int64_t n = 2;
  Vars vars{{"data", {Shape{n, 11}, AwayFromZero(n * 11, 0.2f, 1.f, true, 1)}},
            {"label", {Shape{n, 4}, AwayFromZero(n * 4, 0.f, 0.5f, true, 2)}},
            {"i2h_weight", {Shape{16, 3}, AwayFromZero(48, 0.1f, 0.6f, true, 3)}},
            {"i2h_bias", {Shape{16}, AwayFromZero(16, 0.1f, 0.3f, false, 4)}},
            {"h2h_weight", {Shape{16, 4}, AwayFromZero(64, 0.1f, 0.6f, true, 5)}},
            {"h2h_bias", {Shape{16}, AwayFromZero(16, 0.1f, 0.3f, false, 6)}}};
  // Outputs: next_h (through linear_regression_output) and next_c (make_loss).
  LossFn loss = [](const std::vector<std::vector<float>>& out, const Vars& v) {
    const std::vector<float>& label = v.at("label").second;
    double l = 0;
    for (size_t i = 0; i < out[0].size(); ++i) l += (out[0][i] - label[i]) * (out[0][i] - label[i]) / 2 / 4;
    for (float c : out[1]) l += 0.5 * c;
    return l;
  };
  FdReport rep = CheckParamGradients(kLstmCell, vars, loss);
  EXPECT_GE(rep.checked, 130);  // of 144 parameter values; the rest sit near a relu kink
  EXPECT_EQ(rep.checked + rep.kinks, 144);
}

TEST(LstmCell, SplitWithAnUnusedPartGetsZerosForItsGradient) {
  Graph train = BuildGraph(ParseConfig(kSplitUnused, "split.prototxt", {}));
  Gradient(&train);
  const int split = train.FindNode("parts");
  int zeros = 0;
  for (const Node& node : train.nodes()) {
    if (!node.op || node.op->name() != "zeros_like") continue;
    ++zeros;
    EXPECT_EQ(node.fwd, split);
    EXPECT_TRUE(node.inputs.empty());  // it does not keep the unused part alive
  }
  EXPECT_EQ(zeros, 1);
  InferShapes(&train, {{"data", Shape{3, 4}}});
  MemoryPlan plan = PlanMemory(train, MemoryStrategy::kShare);
  EXPECT_EQ(plan.entry_req[train.EntryId({split, 1})], OpReq::kNull);
  EXPECT_EQ(plan.entry_offset[train.EntryId({split, 1})], -1);

  Vars vars{{"data", {Shape{3, 4}, AwayFromZero(12, 0.2f, 1.f, true, 1)}},
            {"fc_weight", {Shape{6, 4}, AwayFromZero(24, 0.1f, 0.6f, true, 2)}},
            {"fc_bias", {Shape{6}, AwayFromZero(6, 0.1f, 0.3f, true, 3)}}};
  LossFn loss = [](const std::vector<std::vector<float>>& out, const Vars&) {
    double l = 0;
    for (float v : out[0]) l += v;
    return l;
  };
  FdReport rep = CheckParamGradients(kSplitUnused, vars, loss);
  EXPECT_EQ(rep.checked, 30);
}

// concat of inputs with and without a gradient: the kernel of concat's
// gradient must place the parts it writes without the shapes of the parts
// nobody reads.
std::string ConcatConfig(const std::string& inputs) {
  return R"cfg(
version: 1
node { name: "fc" op: "fully_connected" input: "data" attr { key: "num_hidden" value: "3" } }
node { name: "both" op: "concat" )cfg" +
         inputs + R"cfg( }
node { name: "sq" op: "square" input: "both" }
node { name: "loss" op: "make_loss" input: "sq" attr { key: "grad_scale" value: "0.1" } }
output: "loss"
)cfg";
}

TEST(LstmCell, ConcatGradientSkipsInputsWithoutOne) {
  Vars vars{{"data", {Shape{2, 4}, AwayFromZero(8, 0.2f, 1.f, true, 1)}},
            {"fc_weight", {Shape{3, 4}, AwayFromZero(12, 0.1f, 0.6f, true, 2)}},
            {"fc_bias", {Shape{3}, AwayFromZero(3, 0.1f, 0.3f, true, 3)}}};
  LossFn loss = [](const std::vector<std::vector<float>>& out, const Vars&) {
    double l = 0;
    for (float v : out[0]) l += v;
    return 0.1 * l;  // small curvature: not taken for a kink
  };
  // One unread part before the read one (its length is deduced), and unread
  // parts after it (not needed).
  for (const char* inputs : {R"(input: "data" input: "fc")",
                             R"(input: "fc" input: "data" input: "data" attr { key: "num_args" value: "3" })"}) {
    SCOPED_TRACE(inputs);
    EXPECT_EQ(CheckParamGradients(ConcatConfig(inputs), vars, loss).checked, 15);
  }
  // Two unread parts before a read one: an Error that says what to do.
  Graph train = BuildGraph(
      ParseConfig(ConcatConfig(R"(input: "data" input: "data" input: "fc" attr { key: "num_args" value: "3" })"),
                  "c.prototxt", {}));
  Gradient(&train);
  try {
    RunGraph(train, vars);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("put inputs without a gradient last"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace frugal::test
