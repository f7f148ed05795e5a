// The ONNX -> frugal op table for arithmetic, layout and reductions
// (rules_tensor.cc) and for training losses and optimizers
// (rules_training.cc).
#include "interchange/onnx_map_util.h"

namespace frugal::onnx_map {
namespace {

TEST(OnnxMap, SimpleRulesConvertAndRejectUnknownAttributes) {
  EXPECT_EQ(Single(Lower(NodeBuilder("LeakyRelu", {"x"}), 6, {})).attrs, (AttrMap{{"slope", "0.01"}}));
  NodeBuilder lrelu("LeakyRelu", {"x"});
  lrelu.Float("alpha", 0.25f);
  EXPECT_EQ(Single(Lower(lrelu, 6, {})).attrs, (AttrMap{{"slope", "0.25"}}));
  EXPECT_EQ(Single(Lower(NodeBuilder("Sigmoid", {"x"}), 13, {})).attrs, (AttrMap{{"act_type", "sigmoid"}}));
  EXPECT_EQ(Single(Lower(NodeBuilder("Softplus", {"x"}), 1, {})).attrs, (AttrMap{{"act_type", "softrelu"}}));
  EXPECT_EQ(Single(Lower(NodeBuilder("Neg", {"x"}), 13, {})).op, "negative");
  NodeBuilder perm("Transpose", {"x"});
  perm.Ints("perm", {0, 2, 1});
  EXPECT_EQ(Single(Lower(perm, 13, {})).attrs, (AttrMap{{"axes", "(0,2,1)"}}));
  NodeBuilder odd("Relu", {"x"});
  odd.Int("unknown_knob", 1);
  EXPECT_EQ(Lower(odd, 14, {}).unsupported, "attribute 'unknown_knob' is not supported");
}

TEST(OnnxMap, Clip) {
  NodeBuilder old("Clip", {"x"});
  old.Float("min", -1).Float("max", 2);
  EXPECT_EQ(Single(Lower(old, 6, {})).attrs, (AttrMap{{"a_min", "-1"}, {"a_max", "2"}}));
  OnnxTensor lo = FloatTensor({}, {-0.5f});
  NewNode n = Single(Lower(NodeBuilder("Clip", {"x", "lo"}), 13, {Facts(Shape{2}), Known(lo)}));
  EXPECT_EQ(n.attrs.at("a_min"), "-0.5");
  EXPECT_EQ(static_cast<float>(std::stod(n.attrs.at("a_max"))), std::numeric_limits<float>::max());
  EXPECT_EQ(n.inputs.size(), 1u);
  EXPECT_NE(Lower(NodeBuilder("Clip", {"x", "lo"}), 13, {Facts(Shape{2}), Facts(Shape{})})
                .unsupported.find("must be known at import"),
            std::string::npos);
}

TEST(OnnxMap, FlattenAndReshape) {
  std::vector<ValueFacts> x = {Facts(Shape{2, 3, 4, 5})};
  NodeBuilder f2("Flatten", {"x"});
  f2.Int("axis", 2);
  EXPECT_EQ(Single(Lower(f2, 13, x)).attrs, (AttrMap{{"shape", "(-1,20)"}}));
  NodeBuilder f0("Flatten", {"x"});
  f0.Int("axis", 0);
  EXPECT_EQ(Single(Lower(f0, 13, x)).attrs, (AttrMap{{"shape", "(1,-1)"}}));
  NodeBuilder fneg("Flatten", {"x"});
  fneg.Int("axis", -3);
  EXPECT_EQ(Single(Lower(fneg, 13, x)).op, "flatten");

  OnnxTensor shape = IntsTensor({2, 0, -1});
  EXPECT_EQ(Single(Lower(NodeBuilder("Reshape", {"x", "s"}), 14, {x[0], Known(shape)})).attrs,
            (AttrMap{{"shape", "(2,0,-1)"}}));
  EXPECT_NE(Lower(NodeBuilder("Reshape", {"x", "s"}), 14, {x[0], Facts(Shape{3})}).unsupported, "");
  NodeBuilder zero("Reshape", {"x", "s"});
  zero.Int("allowzero", 1);
  EXPECT_NE(Lower(zero, 14, {x[0], Known(shape)}).unsupported.find("allowzero"), std::string::npos);
}

TEST(OnnxMap, SoftmaxOldOpsetCoercesTo2D) {
  NewNode s = Single(Lower(NodeBuilder("Softmax", {"x"}), 13, {Facts(Shape{2, 3, 4})}));
  EXPECT_EQ(s.attrs, (AttrMap{{"axis", "2"}}));
  NodeBuilder old("LogSoftmax", {"x"});
  old.Int("axis", 1);
  Lowering l = Lower(old, 11, {Facts(Shape{2, 3, 4})});
  ASSERT_EQ(l.nodes.size(), 3u);
  EXPECT_EQ(l.nodes[0].attrs.at("shape"), "(0,-1)");
  EXPECT_EQ(l.nodes[1].op, "log_softmax");
  EXPECT_EQ(l.nodes[1].attrs.at("axis"), "-1");
  EXPECT_EQ(l.nodes[2].attrs.at("shape"), "(0,3,4)");
  EXPECT_EQ(Single(Lower(NodeBuilder("Softmax", {"x"}), 11, {Facts(Shape{2, 3})})).attrs.at("axis"), "1");
}

TEST(OnnxMap, SumAndAdd) {
  std::vector<ValueFacts> same = {Facts(Shape{3}), Facts(Shape{3}), Facts(Shape{3})};
  EXPECT_EQ(Single(Lower(NodeBuilder("Sum", {"a", "b", "c"}), 13, same)).attrs, (AttrMap{{"num_args", "3"}}));
  EXPECT_TRUE(Lower(NodeBuilder("Sum", {"a"}), 13, {Facts(Shape{3})}).alias.has_value());
  std::vector<ValueFacts> bcast = {Facts(Shape{2, 3}), Facts(Shape{3})};
  EXPECT_NE(Lower(NodeBuilder("Sum", {"a", "b"}), 13, bcast, {"add_n"}).unsupported, "");
  EXPECT_EQ(Lower(NodeBuilder("Sum", {"a", "b"}), 13, bcast, {"add_n", "add"}).nodes.at(0).op, "add");
  EXPECT_EQ(Single(Lower(NodeBuilder("Add", {"a", "b"}), 13, same, {"add_n"})).op, "add_n");
  EXPECT_EQ(Single(Lower(NodeBuilder("Add", {"a", "b"}), 13, same, {"add_n", "add"})).op, "add");
  EXPECT_EQ(Single(Lower(NodeBuilder("Add", {"a", "b"}), 13, bcast, {"add_n"})).op, "add");  // waits for add
  NodeBuilder legacy("Mul", {"a", "b"});
  legacy.Int("broadcast", 1).Int("axis", 0);
  EXPECT_NE(Lower(legacy, 6, bcast).unsupported.find("axis"), std::string::npos);
}

TEST(OnnxMap, ConcatSplitSlice) {
  NodeBuilder cat("Concat", {"a", "b"});
  cat.Int("axis", -1);
  EXPECT_EQ(Single(Lower(cat, 13, {Facts(Shape{2, 3, 4}), Facts(Shape{2, 3, 5})})).attrs,
            (AttrMap{{"dim", "2"}, {"num_args", "2"}}));

  NodeBuilder split("Split", {"x"}, {"a", "b", "c"});
  split.Int("axis", 1);
  EXPECT_EQ(Single(Lower(split, 11, {Facts(Shape{2, 6})})).attrs, (AttrMap{{"num_outputs", "3"}, {"axis", "1"}}));
  OnnxTensor parts = IntsTensor({2, 4});
  EXPECT_NE(Lower(NodeBuilder("Split", {"x", "s"}, {"a", "b"}), 13, {Facts(Shape()), Known(parts)})
                .unsupported.find("unequal"),
            std::string::npos);

  OnnxTensor starts = IntsTensor({1}), ends = IntsTensor({std::numeric_limits<int64_t>::max()}),
             axes = IntsTensor({-1}), steps = IntsTensor({2});
  NewNode s = Single(Lower(NodeBuilder("Slice", {"x", "s", "e", "a", "t"}), 13,
                           {Facts(Shape{3, 10}), Known(starts), Known(ends), Known(axes), Known(steps)}));
  EXPECT_EQ(s.attrs, (AttrMap{{"begin", "(0,1)"}, {"end", "(3,10)"}, {"step", "(1,2)"}}));
  EXPECT_EQ(s.inputs.size(), 1u);
  OnnxTensor back = IntsTensor({-1}), to_start = IntsTensor({std::numeric_limits<int64_t>::min()});
  Lowering rev = Lower(NodeBuilder("Slice", {"x", "s", "e", "a", "t"}), 13,
                       {Facts(Shape{3, 10}), Known(back), Known(to_start), Known(axes), Known(back)});
  EXPECT_NE(rev.unsupported.find("open end"), std::string::npos) << rev.unsupported;
}

TEST(OnnxMap, UnsqueezeReduceDropout) {
  OnnxTensor axes = IntsTensor({3, 0});
  Lowering u = Lower(NodeBuilder("Unsqueeze", {"x", "a"}), 13, {Facts(Shape{2, 3}), Known(axes)});
  ASSERT_EQ(u.nodes.size(), 2u);
  EXPECT_EQ(u.nodes[0].attrs.at("axis"), "0");
  EXPECT_EQ(u.nodes[1].attrs.at("axis"), "3");
  EXPECT_EQ(u.nodes[1].inputs[0].kind, Operand::kNode);

  NodeBuilder mean("ReduceMean", {"x"});
  mean.Ints("axes", {1, -1});
  EXPECT_EQ(Single(Lower(mean, 13, {})).attrs, (AttrMap{{"axis", "(1,-1)"}, {"keepdims", "true"}}));
  NodeBuilder noop("ReduceSum", {"x"});
  noop.Int("noop_with_empty_axes", 1).Int("keepdims", 0);
  EXPECT_TRUE(Lower(noop, 13, {}).alias.has_value());
  NodeBuilder all("ReduceMax", {"x"});
  all.Int("keepdims", 0);
  Lowering max = Lower(all, 13, {});
  ASSERT_EQ(max.nodes.size(), 2u) << "then reshaped to a scalar";
  EXPECT_EQ(max.nodes[0].attrs, (AttrMap{{"keepdims", "false"}}));

  OnnxTensor ratio = FloatTensor({}, {0.25f});
  EXPECT_EQ(Single(Lower(NodeBuilder("Dropout", {"x", "r"}), 13, {Facts(Shape{2}), Known(ratio)})).attrs,
            (AttrMap{{"p", "0.25"}}));
  EXPECT_NE(Lower(NodeBuilder("Dropout", {"x"}, {"y", "mask"}), 13, {}).unsupported.find("mask"), std::string::npos);
  OnnxTensor yes = IntsTensor({1});
  yes.dims = {};
  EXPECT_NE(Lower(NodeBuilder("Dropout", {"x", "r", "t"}), 13, {Facts(Shape{2}), Known(ratio), Known(yes)})
                .unsupported.find("training_mode"),
            std::string::npos);
  OnnxTensor none = FloatTensor({}, {0.f});
  EXPECT_TRUE(
      Lower(NodeBuilder("Dropout", {"x", "r", "t"}), 13, {Facts(Shape{2}), Known(none), Known(yes)}).alias.has_value())
      << "training with ratio 0 drops nothing";
}

TEST(OnnxMap, ComposedLowerings) {
  NodeBuilder gemm("Gemm", {"a", "b", "c"});
  gemm.Float("alpha", 0.5f).Float("beta", 2.f).Int("transB", 1);
  Lowering g = Lower(gemm, 13, {Facts(Shape{2, 3}), Facts(Shape{4, 3}), Facts(Shape{4})});
  ASSERT_EQ(g.unsupported, "");
  std::vector<std::string> ops;
  for (const NewNode& n : g.nodes) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"fully_connected", "mul_scalar", "mul_scalar", "add"}));
  EXPECT_EQ(g.nodes[1].attrs.at("scalar"), "0.5");

  Lowering l2 = Lower(NodeBuilder("ReduceL2", {"x"}), 13, {Facts(Shape{2, 3})});
  ASSERT_EQ(l2.nodes.size(), 3u);
  EXPECT_EQ(l2.nodes[0].op, "square");
  EXPECT_EQ(l2.nodes[1].op, "sum");
  EXPECT_EQ(l2.nodes[1].attrs.at("keepdims"), "true");
  EXPECT_EQ(l2.nodes[2].op, "sqrt");
  NodeBuilder noop("ReduceL1", {"x"});
  noop.Int("noop_with_empty_axes", 1);
  EXPECT_NE(Lower(noop, 18, {Facts(Shape{2})}).unsupported.find("noop"), std::string::npos);

  NodeBuilder elu("Elu", {"x"});
  elu.Float("alpha", -1.f);
  EXPECT_NE(Lower(elu, 13, {}).unsupported.find("slope"), std::string::npos);
  NodeBuilder selu("Selu", {"x"});
  selu.Float("alpha", 2.f).Float("gamma", 3.f);
  Lowering s = Lower(selu, 13, {});
  ASSERT_EQ(s.nodes.size(), 2u);
  EXPECT_EQ(s.nodes[0].attrs, (AttrMap{{"act_type", "elu"}, {"slope", "2"}}));
  EXPECT_EQ(s.nodes[1].attrs.at("scalar"), "3");

  Lowering mean = Lower(NodeBuilder("Mean", {"a", "b", "c"}), 13, {Facts(Shape{2}), Facts(Shape{2}), Facts(Shape{2})});
  ASSERT_EQ(mean.nodes.size(), 2u);
  EXPECT_EQ(mean.nodes[1].op, "div_scalar");
  EXPECT_EQ(mean.nodes[1].attrs.at("scalar"), "3");
}

TEST(OnnxMap, LossesPickTheTargetsWithAMask) {
  OnnxTensor target = IntsTensor({2, 1});  // sample 1 is ignored
  NodeBuilder nll("NegativeLogLikelihoodLoss", {"x", "t"}, {"loss"});
  nll.Int("ignore_index", 1);
  Lowering l = Lower(nll, 13, {Facts(Shape{2, 3}), Known(target)});
  ASSERT_EQ(l.unsupported, "");
  ASSERT_EQ(l.constants.size(), 1u);
  EXPECT_FALSE(l.constants[0].learned) << "the mask is aux state";
  const Tensor& mask = l.constants[0].value;
  EXPECT_EQ(std::vector<float>(mask.f(), mask.f() + mask.size()), (std::vector<float>{0, 0, 1, 0, 0, 0}));
  std::vector<std::string> ops;
  for (const NewNode& n : l.nodes) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"mul", "sum", "negative", "sum", "div_scalar", "reshape"}));
  EXPECT_EQ(l.nodes[4].attrs.at("scalar"), "1") << "the mean over the one sample not ignored";
  EXPECT_EQ(l.nodes[5].attrs.at("shape"), "()");

  OnnxTensor wild = IntsTensor({2, 3});
  EXPECT_NE(Lower(nll, 13, {Facts(Shape{2, 3}), Known(wild)}).unsupported.find("target 3"), std::string::npos);
  EXPECT_NE(Lower(nll, 13, {Facts(Shape{2, 3}), Facts(Shape{2})}).unsupported.find("known at import"),
            std::string::npos);
  OnnxTensor ignored = IntsTensor({1, 1});
  EXPECT_NE(Lower(nll, 13, {Facts(Shape{2, 3}), Known(ignored)}).unsupported.find("ignored"), std::string::npos);

  NodeBuilder sce("SoftmaxCrossEntropyLoss", {"x", "t", "w"}, {"loss", "log_prob"});
  sce.Str("reduction", "none");
  Lowering s = Lower(sce, 13, {Facts(Shape{2, 3}), Known(target), Facts(Shape{3})});
  ASSERT_EQ(s.unsupported, "");
  EXPECT_EQ(s.nodes[0].op, "log_softmax");
  EXPECT_EQ(s.nodes.back().op, "negative");
  ASSERT_EQ(s.outputs.size(), 2u);
  EXPECT_EQ(s.outputs[0].index, static_cast<int>(s.nodes.size()) - 1);
  EXPECT_EQ(s.outputs[1].index, 0) << "log_prob is log_softmax's output";
  EXPECT_NE(Lower(sce, 13, {Facts(Shape{2, 3}), Known(target), Facts(Shape{4})}).unsupported.find("weight"),
            std::string::npos);
}

TEST(OnnxMap, FullReductionsWithoutKeepdimsAreScalars) {
  NodeBuilder all("ReduceSum", {"x"});
  all.Int("keepdims", 0);
  Lowering l = Lower(all, 13, {Facts(Shape{2, 3})});
  ASSERT_EQ(l.nodes.size(), 2u);
  EXPECT_EQ(l.nodes[1].attrs.at("shape"), "()");
  NodeBuilder both("ReduceL2", {"x"});
  both.Int("keepdims", 0).Ints("axes", {-1, 0});
  Lowering l2 = Lower(both, 13, {Facts(Shape{2, 3})});
  ASSERT_EQ(l2.nodes.size(), 4u);
  EXPECT_EQ(l2.nodes[2].op, "sqrt");
  EXPECT_EQ(l2.nodes[3].attrs.at("shape"), "()");
  NodeBuilder one("ReduceMean", {"x"});
  one.Int("keepdims", 0).Ints("axes", {0});
  EXPECT_EQ(Lower(one, 13, {Facts(Shape{2, 3})}).nodes.size(), 1u);
}

TEST(OnnxMap, ScatterOneHotAndBatchedMatMul) {
  // data (2,2) stacked before updates (1,2): positions past 3 are updates'.
  NodeBuilder scatter("ScatterElements", {"x", "i", "u"});
  scatter.Int("axis", 1);
  OnnxTensor idx = IntsTensor({1, -2});
  idx.dims = {1, 2};
  EXPECT_EQ(Positions(Lower(scatter, 13, {Facts(Shape{2, 2}), Known(idx), Facts(Shape{1, 2})})),
            (std::vector<float>{5, 4, 2, 3}));
  OnnxTensor twice = IntsTensor({1, 1});
  twice.dims = {1, 2};
  EXPECT_NE(Lower(scatter, 13, {Facts(Shape{2, 2}), Known(twice), Facts(Shape{1, 2})}).unsupported.find("twice"),
            std::string::npos);
  OnnxTensor rows = IntsTensor({1});
  rows.dims = {1, 1};
  EXPECT_EQ(Positions(Lower(NodeBuilder("ScatterND", {"x", "i", "u"}), 13,
                            {Facts(Shape{2, 2}), Known(rows), Facts(Shape{1, 2})})),
            (std::vector<float>{0, 1, 4, 5}));

  NodeBuilder onehot("OneHot", {"i", "d", "v"});
  onehot.Int("axis", 0);
  OnnxTensor classes = IntsTensor({1, -1}), depth = IntsTensor({3});
  EXPECT_EQ(Positions(Lower(onehot, 13, {Known(classes), Known(depth), Facts(Shape{2})})),
            (std::vector<float>{0, 0, 1, 0, 0, 1}))
      << "(3, 2): -1 is class 2";
  OnnxTensor half = FloatTensor({1}, {0.5f});
  EXPECT_NE(Lower(onehot, 13, {Known(half), Known(depth), Facts(Shape{2})}).unsupported.find("whole"),
            std::string::npos);

  Lowering mm = Lower(NodeBuilder("MatMul", {"a", "b"}), 13, {Facts(Shape{1, 2, 3, 4}), Facts(Shape{1, 2, 4, 5})});
  ASSERT_EQ(mm.nodes.size(), 4u);
  EXPECT_EQ(mm.nodes[2].op, "batch_dot");
  EXPECT_EQ(mm.nodes[3].attrs.at("shape"), "(1,2,3,5)");
  EXPECT_NE(
      Lower(NodeBuilder("MatMul", {"a", "b"}), 13, {Facts(Shape{1, 2, 3, 4}), Facts(Shape{2, 1, 4, 5})}).unsupported,
      "");
}

TEST(OnnxMap, TrainingOptimizersAreElementwise) {
  OnnxTensor rate = FloatTensor({}, {0.5f}), count = IntsTensor({0});
  count.dims = {};
  NodeBuilder momentum("Momentum", {"r", "t", "x", "g", "v"}, {"x_new", "v_new"});
  momentum.Float("alpha", 0.25f).Float("beta", 0.5f).Str("mode", "nesterov");
  Lowering m = Lower(momentum, 1, {Known(rate), Known(count), Facts(Shape{2}), Facts(Shape{2}), Facts(Shape{2})});
  ASSERT_EQ(m.unsupported, "");
  ASSERT_EQ(m.outputs.size(), 2u);
  const NewNode& v_new = m.nodes[m.outputs[1].index];
  EXPECT_EQ(v_new.op, "add");
  EXPECT_EQ(m.nodes[v_new.inputs[1].index].attrs.at("scalar"), "1") << "T = 0: beta is taken as 1";
  EXPECT_EQ(m.nodes[m.outputs[0].index].op, "sub");
  EXPECT_NE(Lower(momentum, 1, {Facts(Shape()), Known(count), Facts(Shape{2}), Facts(Shape{2}), Facts(Shape{2})})
                .unsupported.find("R"),
            std::string::npos);

  NodeBuilder adagrad("Adagrad", {"r", "t", "x1", "x2", "g1", "g2", "h1", "h2"}, {"x1n", "x2n", "h1n", "h2n"});
  adagrad.Float("epsilon", 0.125f).Float("decay_factor", 1.f);
  OnnxTensor three = IntsTensor({3});
  three.dims = {};
  Lowering a = Lower(adagrad, 1,
                     {Known(rate), Known(three), Facts(Shape{2}), Facts(Shape{3}), Facts(Shape{2}), Facts(Shape{3}),
                      Facts(Shape{2}), Facts(Shape{3})});
  ASSERT_EQ(a.unsupported, "");
  ASSERT_EQ(a.outputs.size(), 4u);
  bool rate_seen = false;
  for (const NewNode& n : a.nodes) rate_seen = rate_seen || (n.op == "mul_scalar" && n.attrs.at("scalar") == "0.125");
  EXPECT_TRUE(rate_seen) << "R / (1 + T decay) = 0.5 / 4";
  NodeBuilder adam("Adam", {"r", "t", "x", "g", "v", "h"}, {"x_new", "v_new", "h_new"});
  EXPECT_NE(
      Lower(adam, 1, {Known(rate), Known(count), Facts(Shape{2}), Facts(Shape{2}), Facts(Shape{2}), Facts(Shape{2})})
          .unsupported.find("epsilon"),
      std::string::npos);
}

}  // namespace
}  // namespace frugal::onnx_map
