// The ONNX -> frugal op table, rule by rule: attribute conversion, what is
// unsupported (and why), pads, and the choice of lowering by which frugal
// ops exist. Rules are called directly, so these tests hold for the ops
// that are mapped but not registered yet.
#include <gtest/gtest.h>

#include <limits>

#include "onnx.pb.h"
#include "onnx/op_table.h"

namespace frugal::onnx_map {
namespace {

struct NodeBuilder {
  onnx::NodeProto n;
  NodeBuilder(const std::string& op, std::vector<std::string> in, std::vector<std::string> out = {"y"}) {
    n.set_op_type(op);
    for (auto& s : in) n.add_input(s);
    for (auto& s : out) n.add_output(s);
  }
  NodeBuilder& Int(const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::INT), a->set_i(v);
    return *this;
  }
  NodeBuilder& Float(const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::FLOAT), a->set_f(v);
    return *this;
  }
  NodeBuilder& Str(const std::string& name, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::STRING), a->set_s(v);
    return *this;
  }
  NodeBuilder& Ints(const std::string& name, std::vector<int64_t> v) {
    auto* a = n.add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
    return *this;
  }
};

ValueFacts Facts(Shape s) { return {s, nullptr, false}; }
ValueFacts Known(const OnnxTensor& t, bool init = false) { return {t.shape(), &t, init}; }
OnnxTensor IntsTensor(std::vector<int64_t> v) {
  OnnxTensor t;
  t.kind = OnnxTensor::Kind::kInt, t.type_name = "INT64", t.dims = {static_cast<int64_t>(v.size())}, t.i = v;
  return t;
}
OnnxTensor FloatTensor(std::vector<int64_t> dims, std::vector<float> v) {
  OnnxTensor t;
  t.kind = OnnxTensor::Kind::kFloat, t.type_name = "FLOAT", t.dims = dims, t.f = v;
  return t;
}

// Lowers with every frugal op available (or only those in `ops`).
Lowering Lower(const NodeBuilder& b, int64_t opset, std::vector<ValueFacts> facts,
               std::vector<std::string> ops = {}) {
  const OpMapping* m = FindMapping(b.n.op_type());
  EXPECT_NE(m, nullptr) << b.n.op_type();
  if (!m) return Unsupported("no mapping");
  facts.resize(b.n.input_size());
  OpAvailableFn avail = [ops](const std::string& op) {
    return ops.empty() || std::find(ops.begin(), ops.end(), op) != ops.end();
  };
  return m->rule(NodeView(b.n, opset, facts, avail));
}

// The single node of a lowering (fails the test otherwise).
NewNode Single(const Lowering& l) {
  EXPECT_EQ(l.unsupported, "");
  EXPECT_EQ(l.nodes.size(), 1u);
  return l.nodes.empty() ? NewNode{} : l.nodes[0];
}

TEST(OnnxTable, LookupFindsEveryLine) {
  for (const OpMapping& m : OpTable()) {
    const OpMapping* found = FindMapping(m.onnx_op);
    ASSERT_NE(found, nullptr) << m.onnx_op;
    EXPECT_STREQ(found->onnx_op, m.onnx_op);
  }
  EXPECT_EQ(FindMapping("NoSuchOp"), nullptr);
  EXPECT_GE(OpTable().size(), 39u);
}

TEST(OnnxMap, ValueForms) {
  EXPECT_EQ(TupleStr({2, 2}), "(2,2)");
  EXPECT_EQ(TupleStr({}), "()");
  EXPECT_EQ(FloatStr(0.5), "0.5");
  EXPECT_EQ(FloatStr(static_cast<float>(0.1)), "0.100000001");  // the float itself, round-trippable
  EXPECT_EQ(BoolStr(false), "false");
}

TEST(OnnxMap, ConvAttributes) {
  NodeBuilder b("Conv", {"x", "w", "b"});
  b.Ints("kernel_shape", {3, 3}).Ints("pads", {1, 1, 1, 1}).Ints("strides", {2, 2}).Int("group", 1);
  NewNode n = Single(Lower(b, 11, {Facts(Shape{1, 3, 8, 8}), Facts(Shape{8, 3, 3, 3}), Facts(Shape{8})}));
  EXPECT_EQ(n.op, "convolution");
  EXPECT_EQ(n.attrs, (AttrMap{{"kernel", "(3,3)"}, {"stride", "(2,2)"}, {"pad", "(1,1)"}, {"dilate", "(1,1)"},
                              {"num_filter", "8"}, {"num_group", "1"}, {"no_bias", "false"}}));
  ASSERT_EQ(n.inputs.size(), 3u);
  EXPECT_EQ(n.inputs[2].kind, Operand::kInput);
  EXPECT_EQ(n.inputs[2].index, 2);
}

TEST(OnnxMap, ConvKernelFromWeightWithoutBias) {
  NodeBuilder b("Conv", {"x", "w"});
  b.Ints("dilations", {2, 1}).Int("group", 4);
  NewNode n = Single(Lower(b, 11, {Facts(Shape{1, 8, 9, 9}), Facts(Shape{16, 2, 5, 3})}));
  EXPECT_EQ(n.attrs.at("kernel"), "(5,3)");
  EXPECT_EQ(n.attrs.at("dilate"), "(2,1)");
  EXPECT_EQ(n.attrs.at("pad"), "(0,0)");
  EXPECT_EQ(n.attrs.at("num_group"), "4");
  EXPECT_EQ(n.attrs.at("no_bias"), "true");
  EXPECT_EQ(n.inputs.size(), 2u);
}

TEST(OnnxMap, AsymmetricPadsAreUnsupported) {
  NodeBuilder b("Conv", {"x", "w"});
  b.Ints("pads", {0, 0, 1, 1});
  Lowering l = Lower(b, 11, {Facts(Shape{1, 1, 5, 5}), Facts(Shape{1, 1, 3, 3})});
  EXPECT_TRUE(l.nodes.empty());
  EXPECT_NE(l.unsupported.find("pads (0,0,1,1) differ at the start and end"), std::string::npos) << l.unsupported;
}

TEST(OnnxMap, SamePaddingIsSymmetricOrUnsupported) {
  NodeBuilder even("Conv", {"x", "w"});
  even.Str("auto_pad", "SAME_UPPER");
  NewNode n = Single(Lower(even, 11, {Facts(Shape{1, 1, 5, 5}), Facts(Shape{1, 1, 3, 3})}));
  EXPECT_EQ(n.attrs.at("pad"), "(1,1)");  // out 5: total pad 2 = 1 + 1

  NodeBuilder odd("Conv", {"x", "w"});
  odd.Str("auto_pad", "SAME_LOWER").Ints("strides", {2, 2});
  Lowering l = Lower(odd, 11, {Facts(Shape{1, 1, 4, 4}), Facts(Shape{1, 1, 3, 3})});  // total (2-1)*2+3-4 = 1
  EXPECT_NE(l.unsupported.find("pads spatial dim 0 by 1"), std::string::npos) << l.unsupported;

  Lowering unknown = Lower(even, 11, {Facts(Shape()), Facts(Shape{1, 1, 3, 3})});
  EXPECT_NE(unknown.unsupported.find("needs the input's shape"), std::string::npos) << unknown.unsupported;

  NodeBuilder valid("Conv", {"x", "w"});
  valid.Str("auto_pad", "VALID");
  EXPECT_EQ(Single(Lower(valid, 11, {Facts(Shape()), Facts(Shape{1, 1, 3, 3})})).attrs.at("pad"), "(0,0)");
}

TEST(OnnxMap, ConvTranspose) {
  NodeBuilder b("ConvTranspose", {"x", "w"});
  b.Ints("strides", {2, 2}).Ints("pads", {1, 1, 1, 1}).Ints("output_padding", {1, 1}).Int("group", 2);
  NewNode n = Single(Lower(b, 11, {Facts(Shape{1, 4, 3, 3}), Facts(Shape{4, 3, 3, 3})}));
  EXPECT_EQ(n.op, "deconvolution");
  EXPECT_EQ(n.attrs.at("num_filter"), "6");  // W (C, M/group, ...)
  EXPECT_EQ(n.attrs.at("adj"), "(1,1)");
  // frugal's adj trims padding (oneDNN pads the right side by pad - adj).
  // Beyond that: the full transposed convolution, cropped or extended with zeros.
  NodeBuilder beyond("ConvTranspose", {"x", "w", "b"});
  beyond.Ints("strides", {2, 2}).Ints("output_padding", {1, 1});
  Lowering l = Lower(beyond, 11, {Facts(Shape{1, 4, 3, 3}), Facts(Shape{4, 3, 3, 3}), Facts(Shape{3})});
  ASSERT_EQ(l.unsupported, "");
  EXPECT_EQ(l.nodes[0].op, "deconvolution");
  EXPECT_EQ(l.nodes[0].attrs.at("pad"), "(0,0)");
  EXPECT_EQ(l.nodes[0].attrs.at("no_bias"), "true");
  EXPECT_EQ(l.nodes.back().op, "add") << "the bias after the crop";
  const Tensor& at = l.constants[1].value;  // (1,3,8,8) from the full (1,3,7,7) and a zero at 147
  EXPECT_EQ(at.size(), 192);
  EXPECT_EQ(at.f()[6 * 8 + 6], 6 * 7 + 6);
  EXPECT_EQ(at.f()[7 * 8 + 7], 147);
  // output_shape past the full size: the extra row at the end (ONNX's floor division of -1).
  NodeBuilder shaped("ConvTranspose", {"x", "w"});
  shaped.Ints("output_shape", {10}).Ints("strides", {3});
  Lowering s = Lower(shaped, 11, {Facts(Shape{1, 1, 3}), Facts(Shape{1, 1, 3})});
  ASSERT_EQ(s.unsupported, "");
  const Tensor& rows = s.constants[1].value;
  EXPECT_EQ(std::vector<float>(rows.f(), rows.f() + rows.size()), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(s.nodes.back().attrs.at("shape"), "(1,1,10)");
}

TEST(OnnxMap, Pooling) {
  NodeBuilder max("MaxPool", {"x"});
  max.Ints("kernel_shape", {2, 2}).Ints("strides", {2, 2});
  NewNode m = Single(Lower(max, 12, {Facts(Shape{1, 1, 4, 4})}));
  EXPECT_EQ(m.op, "pooling");
  EXPECT_EQ(m.attrs, (AttrMap{{"pool_type", "max"}, {"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"pad", "(0,0)"}}));

  NodeBuilder avg("AveragePool", {"x"});
  avg.Ints("kernel_shape", {3, 3}).Ints("pads", {1, 1, 1, 1});
  NewNode a = Single(Lower(avg, 11, {Facts(Shape{1, 1, 4, 4})}));
  EXPECT_EQ(a.attrs.at("pool_type"), "avg");
  EXPECT_EQ(a.attrs.at("count_include_pad"), "false");  // ONNX's default, not MXNet's
  avg.Int("count_include_pad", 1);
  EXPECT_EQ(Single(Lower(avg, 11, {Facts(Shape{1, 1, 4, 4})})).attrs.at("count_include_pad"), "true");

  // What frugal's pooling lacks: every window copied to a last axis, then reduced.
  NodeBuilder ceil("MaxPool", {"x"});
  ceil.Ints("kernel_shape", {2, 2}).Ints("strides", {2, 2}).Int("ceil_mode", 1);
  Lowering c = Lower(ceil, 12, {Facts(Shape{1, 1, 5, 5})});
  ASSERT_EQ(c.unsupported, "");
  ASSERT_EQ(c.constants.size(), 2u);
  EXPECT_EQ(c.constants[0].value.f()[0], -std::numeric_limits<float>::infinity()) << "max pads with -inf";
  const Tensor& at = c.constants[1].value;  // (1,1,3,3,4): the last window reads row and column 4 and the pad (25)
  EXPECT_EQ(at.shape(), (Shape{36}));
  EXPECT_EQ(std::vector<float>(at.f() + 32, at.f() + 36), (std::vector<float>{24, 25, 25, 25}));
  EXPECT_EQ(c.nodes.back().op, "max");
  EXPECT_EQ(c.nodes.back().attrs.at("axis"), "4");
  NodeBuilder lower("AveragePool", {"x"});
  lower.Ints("kernel_shape", {2}).Str("auto_pad", "SAME_LOWER");
  Lowering s = Lower(lower, 12, {Facts(Shape{1, 1, 3})});
  ASSERT_EQ(s.unsupported, "");
  ASSERT_EQ(s.constants.size(), 3u);
  const Tensor& count = s.constants[2].value;  // the pad goes first: the first window holds one element
  EXPECT_EQ(std::vector<float>(count.f(), count.f() + count.size()), (std::vector<float>{1, 2, 2}));
  EXPECT_EQ(s.nodes.back().op, "div");
  lower.Int("count_include_pad", 1);
  EXPECT_NE(Lower(lower, 12, {Facts(Shape{1, 1, 3})}).unsupported.find("count_include_pad"), std::string::npos);
  NodeBuilder indices("MaxPool", {"x"}, {"y", "i"});
  indices.Ints("kernel_shape", {2, 2});
  EXPECT_NE(Lower(indices, 12, {Facts(Shape{1, 1, 4, 4})}).unsupported.find("Indices"), std::string::npos);

  NewNode g = Single(Lower(NodeBuilder("GlobalAveragePool", {"x"}), 11, {Facts(Shape{1, 3, 4, 4})}));
  EXPECT_EQ(g.attrs, (AttrMap{{"pool_type", "avg"}, {"global_pool", "true"}}));
}

TEST(OnnxMap, BatchNorm) {
  NodeBuilder b("BatchNormalization", {"x", "s", "b", "m", "v"});
  b.Float("epsilon", 1e-3f);
  NewNode n = Single(Lower(b, 14, {}));
  EXPECT_EQ(n.op, "batch_norm");
  EXPECT_EQ(n.attrs, (AttrMap{{"eps", "0.00100000005"}, {"momentum", "0.9"}, {"fix_gamma", "false"}}));
  EXPECT_EQ(n.inputs.size(), 5u);
  b.Int("training_mode", 1);
  EXPECT_NE(Lower(b, 14, {}).unsupported.find("shape"), std::string::npos) << "training mode needs x's shape";
  // Training mode: the batch's statistics over (0, 2), and the running ones as outputs 1 and 2.
  NodeBuilder t("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y", "mean", "var"});
  t.Int("training_mode", 1).Float("momentum", 0.75f);
  Lowering l = Lower(t, 15, {Facts(Shape{2, 3, 4})});
  ASSERT_EQ(l.unsupported, "");
  EXPECT_EQ(l.nodes[0].op, "mean");
  EXPECT_EQ(l.nodes[0].attrs.at("axis"), "(0,2)");
  ASSERT_EQ(l.outputs.size(), 3u);
  const NewNode& running = l.nodes[l.outputs[1].index];
  EXPECT_EQ(running.op, "add");
  EXPECT_EQ(l.nodes[running.inputs[0].index].attrs.at("scalar"), "0.75") << "the input mean times momentum";
  EXPECT_EQ(l.nodes[running.inputs[1].index].attrs.at("scalar"), "0.25") << "the batch's times 1 - momentum";
  EXPECT_NE(Lower(t, 9, {Facts(Shape{2, 3, 4})}).unsupported.find("before opset 14"), std::string::npos);
}

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
  EXPECT_NE(Lower(NodeBuilder("Clip", {"x", "lo"}), 13, {Facts(Shape{2}), Facts(Shape{})}).unsupported.find(
                "must be known at import"),
            std::string::npos);
}

TEST(OnnxMap, GemmLowerings) {
  // transB=1, C (N,): one fully_connected reading A, B, C.
  NodeBuilder tb("Gemm", {"a", "b", "c"});
  tb.Int("transB", 1);
  NewNode fc = Single(Lower(tb, 13, {Facts(Shape{2, 7}), Facts(Shape{4, 7}), Facts(Shape{4})}));
  EXPECT_EQ(fc.op, "fully_connected");
  EXPECT_EQ(fc.attrs, (AttrMap{{"num_hidden", "4"}, {"flatten", "true"}}));
  EXPECT_EQ(fc.inputs.size(), 3u);

  // transB=0 with B an initializer: B^T becomes a new parameter.
  OnnxTensor b = FloatTensor({2, 3}, {1, 2, 3, 4, 5, 6});
  Lowering l = Lower(NodeBuilder("Gemm", {"a", "b"}), 13, {Facts(Shape{1, 2}), Known(b, true)});
  ASSERT_EQ(l.unsupported, "");
  ASSERT_EQ(l.constants.size(), 1u);
  EXPECT_EQ(l.constants[0].value.shape(), (Shape{3, 2}));
  std::vector<float> bt(l.constants[0].value.f(), l.constants[0].value.f() + 6);
  EXPECT_EQ(bt, (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(Single(l).attrs.at("no_bias"), "true");
  EXPECT_EQ(Single(l).inputs[1].kind, Operand::kConst);

  // transB=0 with B a data input: a transpose node, or unsupported without one.
  std::vector<ValueFacts> data_b = {Facts(Shape{1, 2}), Facts(Shape{2, 3})};
  Lowering none = Lower(NodeBuilder("Gemm", {"a", "b"}), 13, data_b, {"fully_connected"});
  EXPECT_NE(none.unsupported.find("transpose"), std::string::npos);
  Lowering with = Lower(NodeBuilder("Gemm", {"a", "b"}), 13, data_b, {"fully_connected", "transpose"});
  ASSERT_EQ(with.nodes.size(), 2u);
  EXPECT_EQ(with.nodes[0].op, "transpose");
  EXPECT_EQ(with.nodes[1].inputs[1].kind, Operand::kNode);

  // C of shape (M, N): fully_connected without bias, then a broadcasting add.
  NodeBuilder full("Gemm", {"a", "b", "c"});
  full.Int("transB", 1);
  std::vector<ValueFacts> mn = {Facts(Shape{2, 7}), Facts(Shape{4, 7}), Facts(Shape{2, 4})};
  Lowering add = Lower(full, 13, mn, {"fully_connected", "add"});
  ASSERT_EQ(add.nodes.size(), 2u);
  EXPECT_EQ(add.nodes[1].op, "add");
  EXPECT_NE(Lower(full, 13, mn, {"fully_connected"}).unsupported.find("add"), std::string::npos);

  NodeBuilder alpha("Gemm", {"a", "b"});
  alpha.Float("alpha", 2).Int("transB", 1);
  Lowering scaled = Lower(alpha, 13, {Facts(Shape{2, 7}), Facts(Shape{4, 7})});
  ASSERT_EQ(scaled.nodes.size(), 2u);
  EXPECT_EQ(scaled.nodes[1].op, "mul_scalar");  // no C: alpha alone
}

TEST(OnnxMap, MatMul) {
  OnnxTensor b = FloatTensor({3, 2}, {1, 2, 3, 4, 5, 6});
  Lowering fc = Lower(NodeBuilder("MatMul", {"a", "b"}), 13, {Facts(Shape{4, 5, 3}), Known(b, true)});
  EXPECT_EQ(Single(fc).attrs, (AttrMap{{"num_hidden", "2"}, {"flatten", "false"}, {"no_bias", "true"}}));
  EXPECT_EQ(fc.constants.at(0).value.shape(), (Shape{2, 3}));
  std::vector<ValueFacts> data = {Facts(Shape{4, 3}), Facts(Shape{3, 2})};
  EXPECT_EQ(Single(Lower(NodeBuilder("MatMul", {"a", "b"}), 13, data, {"matmul"})).op, "matmul");
  EXPECT_NE(Lower(NodeBuilder("MatMul", {"a", "b"}), 13, data, {"fully_connected"}).unsupported, "");
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
  EXPECT_TRUE(Lower(NodeBuilder("Dropout", {"x", "r", "t"}), 13, {Facts(Shape{2}), Known(none), Known(yes)})
                  .alias.has_value())
      << "training with ratio 0 drops nothing";
}

// The value a lowering folded (fails the test when it made nodes instead).
OnnxTensor Value(const Lowering& l) {
  EXPECT_EQ(l.unsupported, "");
  EXPECT_TRUE(l.nodes.empty());
  EXPECT_TRUE(l.value.has_value());
  return l.value.value_or(OnnxTensor{});
}

TEST(OnnxMap, ShapeArithmeticFolds) {
  NodeBuilder shape("Shape", {"x"});
  shape.Int("start", 1);
  OnnxTensor s = Value(Lower(shape, 15, {Facts(Shape{2, 3, 4})}));
  EXPECT_EQ(s.type_name, "INT64");
  EXPECT_EQ(s.dims, (std::vector<int64_t>{2}));
  EXPECT_EQ(s.i, (std::vector<int64_t>{3, 4}));
  EXPECT_NE(Lower(NodeBuilder("Shape", {"x"}), 15, {Facts(Shape())}).unsupported.find("shape"), std::string::npos);
  OnnxTensor size = Value(Lower(NodeBuilder("Size", {"x"}), 13, {Facts(Shape{2, 3, 4})}));
  EXPECT_EQ(size.dims, std::vector<int64_t>{});
  EXPECT_EQ(size.i, std::vector<int64_t>{24});

  OnnxTensor dims = IntsTensor({2, 3, 4}), idx = IntsTensor({-1, 0});
  EXPECT_EQ(Value(Lower(NodeBuilder("Gather", {"d", "i"}), 13, {Known(dims), Known(idx)})).i,
            (std::vector<int64_t>{4, 2}));
  OnnxTensor bad = IntsTensor({3});
  EXPECT_NE(Lower(NodeBuilder("Gather", {"d", "i"}), 13, {Known(dims), Known(bad)}).unsupported.find("index 3"),
            std::string::npos);
  EXPECT_NE(Lower(NodeBuilder("Gather", {"d", "i"}), 13, {Facts(Shape()), Known(idx)}).unsupported.find("shape"),
            std::string::npos);

  OnnxTensor head = IntsTensor({2}), rest = IntsTensor({-1});
  NodeBuilder cat("Concat", {"a", "b"});
  cat.Int("axis", 0);
  OnnxTensor joined = Value(Lower(cat, 13, {Known(head), Known(rest)}));
  EXPECT_EQ(joined.i, (std::vector<int64_t>{2, -1}));
  EXPECT_EQ(joined.dims, (std::vector<int64_t>{2}));

  OnnxTensor zero = IntsTensor({0}), one = IntsTensor({1}), two = IntsTensor({2}), minus = IntsTensor({-1});
  EXPECT_EQ(Value(Lower(NodeBuilder("Slice", {"x", "s", "e"}), 13, {Known(dims), Known(one), Known(minus)})).i,
            (std::vector<int64_t>{3}));
  OnnxTensor empty = Value(Lower(NodeBuilder("Slice", {"x", "s", "e"}), 13, {Known(dims), Known(zero), Known(zero)}));
  EXPECT_EQ(empty.dims, (std::vector<int64_t>{0})) << "an empty value is fine at import";
  OnnxTensor back = Value(Lower(NodeBuilder("Slice", {"x", "s", "e", "a", "t"}), 13,
                                {Known(dims), Known(minus), Known(IntsTensor({-10})), Known(zero), Known(minus)}));
  EXPECT_EQ(back.i, (std::vector<int64_t>{4, 3, 2}));

  OnnxTensor scalar = IntsTensor({5});
  scalar.dims = {};
  OnnxTensor u = Value(Lower(NodeBuilder("Unsqueeze", {"x", "a"}), 13, {Known(scalar), Known(zero)}));
  EXPECT_EQ(u.dims, (std::vector<int64_t>{1}));
  EXPECT_EQ(Value(Lower(NodeBuilder("Neg", {"x"}), 13, {Known(dims)})).i, (std::vector<int64_t>{-2, -3, -4}));
  EXPECT_EQ(Single(Lower(NodeBuilder("Neg", {"x"}), 13, {Facts(Shape{3})})).op, "negative");
  OnnxTensor tens = IntsTensor({10});
  EXPECT_EQ(Value(Lower(NodeBuilder("Add", {"a", "b"}), 13, {Known(dims), Known(tens)})).i,
            (std::vector<int64_t>{12, 13, 14}));
  EXPECT_EQ(Value(Lower(NodeBuilder("Div", {"a", "b"}), 13, {Known(IntsTensor({8, 6})), Known(two)})).i,
            (std::vector<int64_t>{4, 3}));
  EXPECT_NE(Lower(NodeBuilder("Div", {"a", "b"}), 13, {Known(dims), Known(two)}).unsupported.find("exact"),
            std::string::npos);
  EXPECT_NE(Lower(NodeBuilder("Mul", {"a", "b"}), 13, {Known(dims), Known(IntsTensor({1, 2}))}).unsupported.find(
                "broadcast"),
            std::string::npos);

  OnnxTensor sq = IntsTensor({7});
  sq.dims = {1, 1};
  EXPECT_EQ(Value(Lower(NodeBuilder("Squeeze", {"x"}), 13, {Known(sq)})).dims, std::vector<int64_t>{});
  EXPECT_EQ(Single(Lower(NodeBuilder("Squeeze", {"x"}), 13, {Facts(Shape{1, 3, 1})})).attrs,
            (AttrMap{{"shape", "(3)"}}));
  EXPECT_NE(Lower(NodeBuilder("Squeeze", {"x", "a"}), 13, {Facts(Shape{1, 3}), Known(one)}).unsupported.find(
                "not of size 1"),
            std::string::npos);
}

TEST(OnnxMap, ValuesMadeAtImport) {
  OnnxTensor shape = IntsTensor({2, 3});
  OnnxTensor zeros = Value(Lower(NodeBuilder("ConstantOfShape", {"s"}), 13, {Known(shape)}));
  EXPECT_EQ(zeros.kind, OnnxTensor::Kind::kFloat);
  EXPECT_EQ(zeros.f, std::vector<float>(6, 0.f));
  OnnxTensor negative = IntsTensor({2, -3});
  EXPECT_NE(Lower(NodeBuilder("ConstantOfShape", {"s"}), 13, {Known(negative)}).unsupported.find("negative"),
            std::string::npos);
  OnnxTensor huge = IntsTensor({1 << 20, 1 << 20});
  EXPECT_NE(Lower(NodeBuilder("ConstantOfShape", {"s"}), 13, {Known(huge)}).unsupported.find("too large"),
            std::string::npos);

  OnnxTensor one = IntsTensor({1}), seven = IntsTensor({7}), two = IntsTensor({2});
  for (OnnxTensor* t : {&one, &seven, &two}) t->dims = {};
  EXPECT_EQ(Value(Lower(NodeBuilder("Range", {"a", "b", "c"}), 13, {Known(one), Known(seven), Known(two)})).i,
            (std::vector<int64_t>{1, 3, 5}));
  OnnxTensor f0 = FloatTensor({}, {0.f}), f1 = FloatTensor({}, {1.f}), step = FloatTensor({}, {-0.25f});
  EXPECT_EQ(Value(Lower(NodeBuilder("Range", {"a", "b", "c"}), 13, {Known(f1), Known(f0), Known(step)})).f,
            (std::vector<float>{1.f, 0.75f, 0.5f, 0.25f}));
  EXPECT_NE(Lower(NodeBuilder("Range", {"a", "b", "c"}), 13, {Known(one), Known(f0), Known(two)}).unsupported, "");

  NodeBuilder to_float("Cast", {"x"});
  to_float.Int("to", onnx::TensorProto::FLOAT);
  OnnxTensor f = Value(Lower(to_float, 13, {Known(seven)}));
  EXPECT_EQ(f.kind, OnnxTensor::Kind::kFloat);
  EXPECT_EQ(f.f, std::vector<float>{7.f});
  EXPECT_TRUE(Lower(to_float, 13, {Facts(Shape{3})}).alias.has_value()) << "a float tensor stays itself";
  NodeBuilder to_int("Cast", {"x"});
  to_int.Int("to", onnx::TensorProto::INT32);
  OnnxTensor trunc = FloatTensor({2}, {2.7f, -2.7f});
  EXPECT_EQ(Value(Lower(to_int, 13, {Known(trunc)})).i, (std::vector<int64_t>{2, -2}));
  OnnxTensor big = FloatTensor({1}, {1e10f});
  EXPECT_NE(Lower(to_int, 13, {Known(big)}).unsupported.find("range"), std::string::npos);
  EXPECT_NE(Lower(to_int, 13, {Facts(Shape{3})}).unsupported.find("not known"), std::string::npos);
  // A test file may hold a bfloat16 input as UINT16 values: not folded as integers.
  OnnxTensor stored = IntsTensor({16117});
  stored.type_name = "UINT16";
  ValueFacts bf16 = Known(stored);
  bf16.type_name = "BFLOAT16";
  EXPECT_TRUE(Lower(to_float, 13, {bf16}).alias.has_value());
  NodeBuilder like("CastLike", {"x", "t"});
  ValueFacts int_like = Facts(Shape{1});
  int_like.type_name = "INT64";
  EXPECT_EQ(Value(Lower(like, 15, {Known(trunc), int_like})).i, (std::vector<int64_t>{2, -2}));
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

// The positions a Take lowering copies (its one constant).
std::vector<float> Positions(const Lowering& l) {
  EXPECT_EQ(l.unsupported, "");
  EXPECT_EQ(l.constants.size(), 1u);
  if (l.constants.empty()) return {};
  EXPECT_FALSE(l.constants[0].learned);
  const Tensor& t = l.constants[0].value;
  return std::vector<float>(t.f(), t.f() + t.size());
}

TEST(OnnxMap, GatherAndWhereCopyKnownPositions) {
  OnnxTensor rows = IntsTensor({2, -3});
  Lowering g = Lower(NodeBuilder("Gather", {"x", "i"}), 13, {Facts(Shape{3, 2}), Known(rows)});
  EXPECT_EQ(Positions(g), (std::vector<float>{4, 5, 0, 1}));
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[1].op, "embedding");
  EXPECT_EQ(g.nodes[1].attrs, (AttrMap{{"input_dim", "6"}, {"output_dim", "1"}}));
  EXPECT_EQ(g.nodes[2].attrs.at("shape"), "(2,2)");
  NodeBuilder cols("Gather", {"x", "i"});
  cols.Int("axis", 1);
  OnnxTensor one = IntsTensor({1});
  one.dims = {};
  Lowering c = Lower(cols, 13, {Facts(Shape{3, 2}), Known(one)});
  EXPECT_EQ(Positions(c), (std::vector<float>{1, 3, 5}));
  EXPECT_EQ(c.nodes[2].attrs.at("shape"), "(3)");
  OnnxTensor far = IntsTensor({3});
  EXPECT_NE(Lower(NodeBuilder("Gather", {"x", "i"}), 13, {Facts(Shape{3, 2}), Known(far)}).unsupported.find("index 3"),
            std::string::npos);

  NodeBuilder elements("GatherElements", {"x", "i"});
  elements.Int("axis", 1);
  OnnxTensor picks = IntsTensor({0, 0, 1, 0});
  picks.dims = {2, 2};
  EXPECT_EQ(Positions(Lower(elements, 13, {Facts(Shape{2, 2}), Known(picks)})), (std::vector<float>{0, 0, 3, 2}));
  EXPECT_NE(Lower(elements, 13, {Facts(Shape{2, 2, 1}), Known(picks)}).unsupported.find("rank"), std::string::npos);

  OnnxTensor cond = IntsTensor({1, 0, 1});
  cond.type_name = "BOOL";
  Lowering w = Lower(NodeBuilder("Where", {"c", "a", "b"}), 13, {Known(cond), Facts(Shape{3}), Facts(Shape())});
  EXPECT_NE(w.unsupported.find("shapes"), std::string::npos) << "an unknown shape is refused";
  Lowering ws = Lower(NodeBuilder("Where", {"c", "a", "b"}), 13, {Known(cond), Facts(Shape{3}), Facts(Shape({}))});
  EXPECT_EQ(Positions(ws), (std::vector<float>{0, 3, 2})) << "b (a scalar) is stacked after a's 3 elements";
  EXPECT_NE(Lower(NodeBuilder("Where", {"c", "a", "b"}), 13, {Facts(Shape{3}), Facts(Shape{3}), Facts(Shape{3})})
                .unsupported.find("known at import"),
            std::string::npos);

  OnnxTensor pair = IntsTensor({1, 2}), two = IntsTensor({2});
  OnnxTensor eq = Value(Lower(NodeBuilder("Equal", {"a", "b"}), 13, {Known(pair), Known(two)}));
  EXPECT_EQ(eq.type_name, "BOOL");
  EXPECT_EQ(eq.i, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(Value(Lower(NodeBuilder("Where", {"c", "a", "b"}), 13, {Known(eq), Known(pair), Known(two)})).i,
            (std::vector<int64_t>{2, 2}));
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

TEST(OnnxMap, LayoutOpsCopyKnownPositions) {
  OnnxTensor reps = IntsTensor({1, 2});
  EXPECT_EQ(Positions(Lower(NodeBuilder("Tile", {"x", "r"}), 13, {Facts(Shape{2, 2}), Known(reps)})),
            (std::vector<float>{0, 1, 0, 1, 2, 3, 2, 3}));
  OnnxTensor to = IntsTensor({2, 1, 3});
  Lowering e = Lower(NodeBuilder("Expand", {"x", "s"}), 13, {Facts(Shape{2, 1}), Known(to)});
  EXPECT_EQ(Positions(e), (std::vector<float>{0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(e.nodes.back().attrs.at("shape"), "(2,2,3)");

  // (1, 4, 1, 1) <-> (1, 1, 2, 2): DCR reads channel (i b + j) C' + c, CRD c b^2 + i b + j.
  NodeBuilder d2s("DepthToSpace", {"x"});
  d2s.Int("blocksize", 2);
  EXPECT_EQ(Positions(Lower(d2s, 13, {Facts(Shape{1, 8, 1, 1})})), (std::vector<float>{0, 2, 4, 6, 1, 3, 5, 7}));
  d2s.Str("mode", "CRD");
  EXPECT_EQ(Positions(Lower(d2s, 13, {Facts(Shape{1, 8, 1, 1})})), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
  NodeBuilder s2d("SpaceToDepth", {"x"});
  s2d.Int("blocksize", 2);
  EXPECT_EQ(Positions(Lower(s2d, 13, {Facts(Shape{1, 1, 2, 4})})), (std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7}));
  EXPECT_NE(Lower(s2d, 13, {Facts(Shape{1, 1, 3, 4})}).unsupported.find("divide"), std::string::npos);

  NodeBuilder split("Split", {"x", "s"}, {"a", "b"});
  split.Int("axis", 1);
  OnnxTensor parts = IntsTensor({1, 3});
  Lowering sl = Lower(split, 13, {Facts(Shape{2, 4}), Known(parts)});
  ASSERT_EQ(sl.unsupported, "");
  ASSERT_EQ(sl.outputs.size(), 2u);
  EXPECT_EQ(sl.nodes[0].attrs.at("end"), "(2,1)");
  EXPECT_EQ(sl.nodes[1].attrs.at("begin"), "(0,1)");
  EXPECT_EQ(sl.outputs[1].index, 1);
  OnnxTensor short_parts = IntsTensor({1, 2});
  EXPECT_NE(Lower(split, 13, {Facts(Shape{2, 4}), Known(short_parts)}).unsupported.find("do not cut"),
            std::string::npos);
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
            (std::vector<float>{0, 0, 1, 0, 0, 1})) << "(3, 2): -1 is class 2";
  OnnxTensor half = FloatTensor({1}, {0.5f});
  EXPECT_NE(Lower(onehot, 13, {Known(half), Known(depth), Facts(Shape{2})}).unsupported.find("whole"),
            std::string::npos);

  Lowering mm = Lower(NodeBuilder("MatMul", {"a", "b"}), 13, {Facts(Shape{1, 2, 3, 4}), Facts(Shape{1, 2, 4, 5})});
  ASSERT_EQ(mm.nodes.size(), 4u);
  EXPECT_EQ(mm.nodes[2].op, "batch_dot");
  EXPECT_EQ(mm.nodes[3].attrs.at("shape"), "(1,2,3,5)");
  EXPECT_NE(Lower(NodeBuilder("MatMul", {"a", "b"}), 13, {Facts(Shape{1, 2, 3, 4}), Facts(Shape{2, 1, 4, 5})})
                .unsupported,
            "");
}

TEST(OnnxMap, ResizeWeightsFollowTheReference) {
  // Nearest, asymmetric, floor (Upsample's): a copy.
  OnnxTensor twice = FloatTensor({2}, {1.f, 2.f});
  NodeBuilder up("Upsample", {"x", "s"});
  up.Str("mode", "nearest");
  EXPECT_EQ(Positions(Lower(up, 9, {Facts(Shape{1, 2}), Known(twice)})), (std::vector<float>{0, 0, 1, 1}));

  // Linear, align_corners, (3) -> (5): x = o / 2.
  OnnxTensor sizes = IntsTensor({5});
  NodeBuilder lin("Resize", {"x", "", "", "s"});
  lin.Str("mode", "linear").Str("coordinate_transformation_mode", "align_corners");
  Lowering l = Lower(lin, 13, {Facts(Shape{3}), {}, {}, Known(sizes)});
  ASSERT_EQ(l.unsupported, "");
  ASSERT_EQ(l.constants.size(), 1u) << "no extrapolation: no bias";
  const Tensor& m = l.constants[0].value;
  EXPECT_EQ(std::vector<float>(m.f(), m.f() + m.size()),
            (std::vector<float>{1, 0, 0, .5f, .5f, 0, 0, 1, 0, 0, .5f, .5f, 0, 0, 1}));
  EXPECT_EQ(l.nodes[1].op, "fully_connected");
  EXPECT_EQ(l.nodes[2].attrs.at("shape"), "(5)");

  // tf_crop_and_resize: coordinates outside the roi's input are the extrapolation value (the bias).
  OnnxTensor roi = FloatTensor({2}, {0.5f, 1.5f}), three = IntsTensor({3});
  NodeBuilder crop("Resize", {"x", "r", "", "s"});
  crop.Str("mode", "linear").Str("coordinate_transformation_mode", "tf_crop_and_resize");
  crop.Float("extrapolation_value", 7);
  Lowering c = Lower(crop, 13, {Facts(Shape{3}), Known(roi), {}, Known(three)});
  ASSERT_EQ(c.constants.size(), 2u);
  const Tensor& b = c.constants[1].value;
  EXPECT_EQ(std::vector<float>(b.f(), b.f() + b.size()), (std::vector<float>{0, 0, 7})) << "x = 1, 2, 3 of 0..2";

  NodeBuilder odd("Resize", {"x", "", "", "s"});
  odd.Str("coordinate_transformation_mode", "half_pixel_symmetric");
  EXPECT_NE(Lower(odd, 19, {Facts(Shape{3}), {}, {}, Known(sizes)}).unsupported.find("half_pixel_symmetric"),
            std::string::npos);
}

TEST(OnnxMap, PadGatherNDPowAndNormalisations) {
  // x (3) and the pad value stacked: position 3 is the value.
  OnnxTensor pads = IntsTensor({1, 2});
  NodeBuilder pad("Pad", {"x", "p"});
  Lowering p = Lower(pad, 13, {Facts(Shape{3}), Known(pads)});
  ASSERT_EQ(p.constants.size(), 2u);
  EXPECT_EQ(p.constants[0].value.f()[0], 0.f) << "no constant_value: 0";
  const Tensor& from = p.constants[1].value;
  EXPECT_EQ(std::vector<float>(from.f(), from.f() + from.size()), (std::vector<float>{3, 0, 1, 2, 3, 3}));
  pad.Str("mode", "reflect");
  Lowering r = Lower(pad, 13, {Facts(Shape{3}), Known(pads)});
  ASSERT_EQ(r.unsupported, "");
  const Tensor& at = r.constants[1].value;  // [0] is the unused pad value
  EXPECT_EQ(std::vector<float>(at.f(), at.f() + at.size()), (std::vector<float>{1, 0, 1, 2, 1, 0}));

  OnnxTensor tuples = IntsTensor({1, 0, 0, 1});
  tuples.dims = {2, 2};
  EXPECT_EQ(Positions(Lower(NodeBuilder("GatherND", {"x", "i"}), 13, {Facts(Shape{2, 2, 2}), Known(tuples)})),
            (std::vector<float>{4, 5, 2, 3}));

  OnnxTensor exponents = IntsTensor({2, 3});
  Lowering pw = Lower(NodeBuilder("Pow", {"x", "y"}), 13, {Facts(Shape{2}), Known(exponents)});
  ASSERT_EQ(pw.constants.size(), 1u);
  EXPECT_EQ(std::vector<float>(pw.constants[0].value.f(), pw.constants[0].value.f() + 2), (std::vector<float>{2, 3}));
  EXPECT_EQ(Single(pw).op, "power");

  Lowering in = Lower(NodeBuilder("InstanceNormalization", {"x", "s", "b"}), 6,
                      {Facts(Shape{1, 2, 3, 4}), Facts(Shape{2}), Facts(Shape{2})});
  ASSERT_EQ(in.unsupported, "");
  EXPECT_EQ(in.nodes[0].op, "layer_norm");
  EXPECT_EQ(in.nodes[0].attrs.at("axis"), "2");
  EXPECT_EQ(in.constants[0].value.shape(), (Shape{3, 4}));
  EXPECT_EQ(in.nodes[1].attrs.at("shape"), "(1,2,1,1)");
  NodeBuilder lrn("LRN", {"x"});
  lrn.Int("size", 4);
  EXPECT_NE(Lower(lrn, 13, {Facts(Shape{1, 5, 2, 2})}).unsupported.find("odd"), std::string::npos);
}

TEST(OnnxMap, RecurrentLayersUnrollOverTime) {
  NodeBuilder gru("GRU", {"x", "w", "r"}, {"y", "y_h"});
  gru.Int("hidden_size", 2);
  Lowering g = Lower(gru, 14, {Facts(Shape{3, 1, 4}), Facts(Shape{1, 6, 4}), Facts(Shape{1, 6, 2})});
  ASSERT_EQ(g.unsupported, "");
  EXPECT_EQ(g.nodes[1].op, "fully_connected") << "X W^T for every step at once";
  EXPECT_EQ(g.nodes[1].attrs.at("num_hidden"), "6");
  ASSERT_EQ(g.constants.size(), 1u) << "no initial_h: zeros";
  EXPECT_EQ(g.constants[0].value.shape(), (Shape{1, 2}));
  int steps = 0, ones = 0;
  for (const NewNode& n : g.nodes) {
    steps += n.op == "concat";
    ones += n.op == "rsub_scalar";  // GRU's 1 - z, once a step
  }
  EXPECT_EQ(steps, 1);
  EXPECT_EQ(ones, 3);
  ASSERT_EQ(g.outputs.size(), 2u);
  EXPECT_EQ(g.nodes[g.outputs[0].index].attrs.at("shape"), "(3,1,1,2)");
  EXPECT_EQ(g.nodes[g.outputs[1].index].attrs.at("shape"), "(1,1,2)");

  NodeBuilder lstm("LSTM", {"x", "w", "r"}, {"y", "y_h", "y_c"});
  lstm.Int("hidden_size", 2).Int("layout", 1);
  Lowering l = Lower(lstm, 14, {Facts(Shape{1, 3, 4}), Facts(Shape{1, 8, 4}), Facts(Shape{1, 8, 2})});
  ASSERT_EQ(l.unsupported, "");
  EXPECT_EQ(l.nodes[0].op, "transpose") << "batch-major X to (T, B, I)";
  ASSERT_EQ(l.outputs.size(), 3u);
  EXPECT_EQ(l.nodes[l.outputs[0].index].attrs.at("shape"), "(1,3,1,2)");
  EXPECT_EQ(l.nodes[l.outputs[2].index].attrs.at("shape"), "(1,1,2)");

  NodeBuilder back("RNN", {"x", "w", "r"});
  back.Int("hidden_size", 2).Str("direction", "bidirectional");
  EXPECT_NE(Lower(back, 14, {Facts(Shape{3, 1, 4}), Facts(Shape{2, 2, 4}), Facts(Shape{2, 2, 2})})
                .unsupported.find("direction"),
            std::string::npos);
  NodeBuilder wrong("RNN", {"x", "w", "r"});
  wrong.Int("hidden_size", 3);
  EXPECT_NE(Lower(wrong, 14, {Facts(Shape{3, 1, 4}), Facts(Shape{1, 2, 4}), Facts(Shape{1, 2, 2})}).unsupported, "");
}

TEST(OnnxMap, ReduceProdWindowsAndMvn) {
  // x (2,3), axes (0): the two rows of each column copied to a last axis, then multiplied.
  NodeBuilder prod("ReduceProd", {"x"});
  prod.Ints("axes", {0}).Int("keepdims", 0);
  Lowering p = Lower(prod, 13, {Facts(Shape{2, 3})});
  EXPECT_EQ(Positions(p), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  int muls = 0;
  for (const NewNode& n : p.nodes) muls += n.op == "mul";
  EXPECT_EQ(muls, 1);
  EXPECT_EQ(p.nodes.back().attrs.at("shape"), "(3)");
  NodeBuilder all("ReduceProd", {"x"});
  EXPECT_EQ(Lower(all, 13, {Facts(Shape{2, 3})}).nodes.back().attrs.at("shape"), "(1,1)");

  OnnxTensor five = IntsTensor({5});
  five.dims = {};
  OnnxTensor hann = Value(Lower(NodeBuilder("HannWindow", {"n"}), 17, {Known(five)}));
  ASSERT_EQ(hann.f.size(), 5u);
  EXPECT_FLOAT_EQ(hann.f[0], 0.f);
  EXPECT_FLOAT_EQ(hann.f[1], 0.3454915f);  // 0.5 - 0.5 cos(2 pi / 5)
  NodeBuilder symmetric("BlackmanWindow", {"n"});
  symmetric.Int("periodic", 0);
  OnnxTensor b = Value(Lower(symmetric, 17, {Known(five)}));
  EXPECT_FLOAT_EQ(b.f[2], 1.f) << "the middle of a symmetric window";
  EXPECT_NE(Lower(NodeBuilder("HammingWindow", {"n"}), 17, {Facts(Shape({}))}).unsupported.find("known"),
            std::string::npos);

  Lowering m = Lower(NodeBuilder("MeanVarianceNormalization", {"x"}), 13, {Facts(Shape{1, 2, 3, 3})});
  ASSERT_EQ(m.unsupported, "");
  EXPECT_EQ(m.nodes[0].attrs.at("axis"), "(0,2,3)");
  EXPECT_EQ(m.nodes.back().op, "div");
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
  Lowering a = Lower(adagrad, 1, {Known(rate), Known(three), Facts(Shape{2}), Facts(Shape{3}), Facts(Shape{2}),
                                  Facts(Shape{3}), Facts(Shape{2}), Facts(Shape{3})});
  ASSERT_EQ(a.unsupported, "");
  ASSERT_EQ(a.outputs.size(), 4u);
  bool rate_seen = false;
  for (const NewNode& n : a.nodes) rate_seen = rate_seen || (n.op == "mul_scalar" && n.attrs.at("scalar") == "0.125");
  EXPECT_TRUE(rate_seen) << "R / (1 + T decay) = 0.5 / 4";
  NodeBuilder adam("Adam", {"r", "t", "x", "g", "v", "h"}, {"x_new", "v_new", "h_new"});
  EXPECT_NE(Lower(adam, 1, {Known(rate), Known(count), Facts(Shape{2}), Facts(Shape{2}), Facts(Shape{2}),
                            Facts(Shape{2})})
                .unsupported.find("epsilon"),
            std::string::npos);
}

}  // namespace
}  // namespace frugal::onnx_map
