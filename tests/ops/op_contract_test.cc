// The registry's contract, op by op: every op has a doc, shape inference, a
// CPU kernel and a gradient (or NoGradient); backward ops have NoGradient;
// random ops are not free to recompute; and what an op declares its backward
// pass reads is what the gradient it builds actually reads, checked on a
// small sample graph per op (ops without a sample get range checks only).
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <set>

#include "frugal/op.h"
#include "frugal/passes/shapes.h"

namespace frugal {
namespace {

struct Sample {
  AttrMap attrs;
  std::vector<Shape> in;
};

// A small valid application of each op. Ops added later without a sample
// still get the range checks; add a line here to get the full check.
const std::map<std::string, Sample>& Samples() {
  static const auto* samples = new std::map<std::string, Sample>{
      {"abs", {{}, {Shape{2, 3}}}},
      {"add", {{}, {Shape{2, 3}, Shape{3}}}},
      {"add_n", {{{"num_args", "3"}}, {Shape{2, 3}, Shape{2, 3}, Shape{2, 3}}}},
      {"add_scalar", {{{"scalar", "2"}}, {Shape{2, 3}}}},
      {"attention",
       {{{"causal", "true"}, {"masked", "true"}},
        {Shape{1, 2, 3, 4}, Shape{1, 2, 5, 4}, Shape{1, 2, 5, 3}, Shape{1, 1, 3, 5}}}},
      {"batch_dot", {{}, {Shape{2, 2, 3}, Shape{2, 3, 4}}}},
      {"block_grad", {{}, {Shape{2, 3}}}},
      {"cast", {{{"dtype", "bf16"}}, {Shape{2, 3}}}},
      {"clip", {{{"a_min", "-1"}, {"a_max", "1"}}, {Shape{2, 3}}}},
      {"concat", {{{"num_args", "3"}}, {Shape{2, 3}, Shape{2, 4}, Shape{2, 1}}}},
      {"div", {{}, {Shape{2, 1}, Shape{2, 3}}}},
      {"div_scalar", {{{"scalar", "2"}}, {Shape{2, 3}}}},
      {"dropout", {{{"p", "0.5"}}, {Shape{2, 3}}}},
      {"embedding", {{{"input_dim", "4"}, {"output_dim", "2"}}, {Shape{3}, Shape{4, 2}}}},
      {"erf", {{}, {Shape{2, 3}}}},
      {"arcsin", {{}, {Shape{2, 3}}}},
      {"tan", {{}, {Shape{2, 3}}}},
      {"round", {{}, {Shape{2, 3}}}},
      {"exp", {{}, {Shape{2, 3}}}},
      {"expand_dims", {{{"axis", "1"}}, {Shape{2, 3}}}},
      {"flatten", {{}, {Shape{2, 3, 2}}}},
      {"fully_connected", {{{"num_hidden", "2"}}, {Shape{2, 3}, Shape{2, 3}, Shape{2}}}},
      {"gelu", {{{"approximate", "tanh"}}, {Shape{2, 3}}}},
      {"identity", {{}, {Shape{2, 3}}}},
      {"layer_norm", {{{"axis", "1"}}, {Shape{2, 3, 2}, Shape{3, 2}, Shape{3, 2}}}},
      {"linear_cross_entropy", {{{"num_hidden", "4"}, {"chunk", "2"}}, {Shape{3, 2}, Shape{3}, Shape{4, 2}, Shape{4}}}},
      {"linear_regression_output", {{}, {Shape{2, 3}, Shape{2, 3}}}},
      {"log", {{}, {Shape{2, 3}}}},
      {"lstm_cell", {{}, {Shape{2, 8}, Shape{2, 8}, Shape{2, 2}}}},
      {"logistic_regression_output", {{}, {Shape{2, 1}, Shape{2}}}},
      {"make_loss", {{}, {Shape{2, 3}}}},
      {"matmul", {{{"transpose_b", "true"}}, {Shape{2, 3}, Shape{4, 3}}}},
      {"max", {{{"axis", "1"}}, {Shape{2, 3}}}},
      {"maximum", {{}, {Shape{2, 3}, Shape{3}}}},
      {"mean", {{{"axis", "0"}}, {Shape{2, 3}}}},
      {"min", {{{"axis", "0"}}, {Shape{2, 3}}}},
      {"minimum", {{}, {Shape{2, 1}, Shape{2, 3}}}},
      {"mul", {{}, {Shape{2, 3}, Shape{2, 3}}}},
      {"mul_scalar", {{{"scalar", "2"}}, {Shape{2, 3}}}},
      {"negative", {{}, {Shape{2, 3}}}},
      {"rdiv_scalar", {{{"scalar", "2"}}, {Shape{2, 3}}}},
      {"power", {{}, {Shape{2, 3}, Shape{2, 3}}}},
      {"relu", {{}, {Shape{2, 3}}}},
      {"reshape", {{{"shape", "(3,2)"}}, {Shape{2, 3}}}},
      {"rsub_scalar", {{{"scalar", "2"}}, {Shape{2, 3}}}},
      {"slice", {{{"begin", "(0,1)"}, {"end", "(2,3)"}}, {Shape{2, 3}}}},
      {"slice_channel", {{{"num_outputs", "3"}}, {Shape{2, 3}}}},
      {"softmax_cross_entropy", {{}, {Shape{2, 3}, Shape{2}}}},
      {"split", {{{"num_outputs", "2"}, {"axis", "0"}}, {Shape{2, 3}}}},
      {"sqrt", {{}, {Shape{2, 3}}}},
      {"square", {{}, {Shape{2, 3}}}},
      {"sub", {{}, {Shape{3}, Shape{2, 3}}}},
      {"sub_scalar", {{{"scalar", "2"}}, {Shape{2, 3}}}},
      {"sum", {{}, {Shape{2, 3}}}},
      {"transpose", {{{"axes", "(1,0)"}}, {Shape{2, 3}}}},
      {"zeros_like", {{}, {Shape{2, 3}}}},
  };
  return *samples;
}

bool IsBackwardOp(const OpDef& op) { return op.name()[0] == '_'; }

std::string ReadName(const BackwardRead& r) {
  const char* kind[] = {"Input", "Output", "OutGrad"};
  return Fmt(kind[r.kind], "(", r.index, ")");
}

TEST(OpContract, EveryOpIsDeclaredCompletely) {
  for (const OpDef* op : OpRegistry::Get().All()) {
    SCOPED_TRACE(op->name());
    EXPECT_FALSE(op->doc().empty()) << "add .Doc(...)";
    EXPECT_TRUE(op->infer_shape() != nullptr) << "add .InferShape(...)";
    EXPECT_TRUE(op->cpu_kernel() != nullptr) << "add .CpuKernel(...)";
    // An op without outputs acts only on the inputs it mutates (the
    // optimizer updates).
    EXPECT_TRUE(!op->outputs().empty() || op->mutates_all() || !op->mutates().empty());
    if (IsBackwardOp(*op)) { EXPECT_FALSE(op->has_gradient()) << "backward ops declare .NoGradient()"; }
    if (op->randomness() == Randomness::kCounterRng) {
      EXPECT_NE(op->cost(), Cost::kFree) << "a random op costs a draw per element to recompute";
    }
    if (!op->backward_op().empty()) {
      const OpDef* b = OpRegistry::Get().Find(op->backward_op());
      ASSERT_NE(b, nullptr) << "backward op " << op->backward_op() << " is not registered";
      EXPECT_FALSE(b->has_gradient());
    }
    // Declared indices are in range of the declared inputs and outputs
    // (variadic ops list one input spec; their samples check the rest).
    const int n_in = std::max<int>(1, static_cast<int>(op->inputs().size()));
    const int n_out = static_cast<int>(op->outputs().size());
    for (const BackwardRead& r : op->backward_reads()) {
      EXPECT_GE(r.index, 0);
      EXPECT_LT(r.index, r.kind == BackwardRead::kInput ? n_in : n_out) << ReadName(r);
      if (op->is_loss()) { EXPECT_NE(r.kind, BackwardRead::kOutGrad) << "a loss head reads no output gradient"; }
    }
    if (op->has_gradient() && !op->is_loss() && op->backward_op().empty()) {
      EXPECT_TRUE(Samples().count(op->name())) << "an op with a GradientFn needs a sample to check its reads";
    }
  }
}

// What the gradient built for a sample node reads, as BackwardReads.
struct Built {
  std::set<std::pair<int, int>> reads;  // (kind, index)
  std::vector<std::string> stray;       // entries that are none of the three kinds
};

TEST(OpContract, BackwardReadsAreWhatTheGradientReads) {
  std::set<std::string> reached;  // backward ops some sample's gradient uses
  int checked = 0;
  std::vector<std::string> unsampled;
  for (const OpDef* op : OpRegistry::Get().All()) {
    if (IsBackwardOp(*op)) continue;
    auto it = Samples().find(op->name());
    if (it == Samples().end()) {
      unsampled.push_back(op->name());
      if (!op->backward_op().empty()) reached.insert(op->backward_op());
      continue;
    }
    SCOPED_TRACE(op->name());
    const Sample& s = it->second;
    Graph g;
    std::vector<Entry> xs;
    std::vector<std::pair<std::string, Shape>> shapes;
    for (size_t k = 0; k < s.in.size(); ++k) {
      xs.push_back({g.AddVariable(Fmt("x", k), VarKind::kInput), 0});
      shapes.push_back({Fmt("x", k), s.in[k]});
    }
    const int f = g.AddOp(op->name(), "f", s.attrs, xs);
    ASSERT_EQ(static_cast<int>(g.node(f).inputs.size()), op->NumInputs(g.node(f).params));
    InferShapes(&g, shapes);
    const int n_out = g.NumOutputs(f);
    for (const auto& [i, o] : op->inplace()) {
      EXPECT_LT(i, static_cast<int>(xs.size()));
      EXPECT_LT(o, n_out);
    }
    if (!op->has_gradient()) continue;
    // Output gradients: variables for the visible outputs; none for a loss.
    std::vector<Entry> dys(n_out);
    if (!op->is_loss()) {
      for (int k = 0; k < op->NumVisibleOutputs(g.node(f).params); ++k) {
        dys[k] = {g.AddVariable(Fmt("dy", k), VarKind::kInput), 0};
        shapes.push_back({Fmt("dy", k), g.shape({f, k})});
      }
    }
    const int first_new = g.num_nodes();
    GradCtx ctx{f, xs, {}, dys};
    for (int k = 0; k < n_out; ++k) ctx.outputs.push_back({f, k});
    std::vector<Entry> grads = op->BuildGradient(g, ctx);
    ASSERT_EQ(grads.size(), xs.size()) << "one gradient entry per input";
    // Classify every entry the gradient reads that existed before it.
    Built built;
    auto classify = [&](const Entry& e) {
      if (e.node >= first_new) return;
      for (size_t k = 0; k < xs.size(); ++k)
        if (e == xs[k]) return void(built.reads.insert({BackwardRead::kInput, static_cast<int>(k)}));
      if (e.node == f) return void(built.reads.insert({BackwardRead::kOutput, e.index}));
      for (int k = 0; k < n_out; ++k)
        if (e == dys[k]) return void(built.reads.insert({BackwardRead::kOutGrad, k}));
      built.stray.push_back(g.node(e.node).name);
    };
    for (int i = first_new; i < g.num_nodes(); ++i) {
      for (const Entry& e : g.node(i).inputs) classify(e);
      if (g.node(i).op && IsBackwardOp(*g.node(i).op)) reached.insert(g.node(i).op->name());
    }
    for (const Entry& e : grads)
      if (e.valid()) classify(e);  // a gradient passed through (identity, add_scalar)
    EXPECT_TRUE(built.stray.empty()) << "the gradient reads " << built.stray[0];
    std::set<std::pair<int, int>> declared;
    for (const BackwardRead& r : op->backward_reads()) {
      if (r.kind == BackwardRead::kInput && r.index >= static_cast<int>(xs.size())) continue;  // not this node's
      declared.insert({r.kind, r.index});
    }
    // Forward inputs and outputs: exactly as declared (they drive liveness).
    // Output gradients: every declared one is read; others only for ops
    // whose number of outputs varies (split lists OutGrad(0)).
    for (const auto& r : built.reads) {
      if (r.first == BackwardRead::kOutGrad && n_out > 1) continue;
      EXPECT_TRUE(declared.count(r)) << "the gradient reads " << ReadName({BackwardRead::Kind(r.first), r.second})
                                     << " but Backward() does not declare it";
    }
    for (const auto& r : declared) {
      EXPECT_TRUE(built.reads.count(r)) << "Backward() declares " << ReadName({BackwardRead::Kind(r.first), r.second})
                                        << " but the gradient does not read it";
    }
    // The gradients have their inputs' shapes.
    InferShapes(&g, shapes);
    for (size_t k = 0; k < xs.size(); ++k)
      if (grads[k].valid()) { EXPECT_EQ(g.shape(grads[k]), s.in[k]) << "gradient of input " << k; }
    ++checked;
  }
  EXPECT_GE(checked, 35);
  for (const OpDef* op : OpRegistry::Get().All())
    if (IsBackwardOp(*op)) { EXPECT_TRUE(reached.count(op->name())) << op->name() << " is no op's gradient"; }
  if (!unsampled.empty()) {
    std::string list;
    for (const auto& n : unsampled) list += " " + n;
    std::cout << "ops without a contract sample (range checks only):" << list << "\n";
  }
}

}  // namespace
}  // namespace frugal
