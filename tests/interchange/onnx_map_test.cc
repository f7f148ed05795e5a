// The ONNX -> frugal op table, rule by rule, for the layers (rules_nn.cc):
// attribute conversion, what is unsupported (and why), pads, and the choice
// of lowering by which frugal ops exist; and the table itself.
#include "interchange/onnx_map_util.h"

namespace frugal::onnx_map {
namespace {

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
  EXPECT_EQ(n.attrs, (AttrMap{{"kernel", "(3,3)"},
                              {"stride", "(2,2)"},
                              {"pad", "(1,1)"},
                              {"dilate", "(1,1)"},
                              {"num_filter", "8"},
                              {"num_group", "1"},
                              {"no_bias", "false"}}));
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

  // An LSTM without peepholes is one lstm node over all its steps, batch
  // first, its weights' gate blocks (i, o, f, c) joined in lstm's order.
  for (int layout : {0, 1}) {
    SCOPED_TRACE(Fmt("layout ", layout));
    NodeBuilder lstm("LSTM", {"x", "w", "r"}, {"y", "y_h", "y_c"});
    lstm.Int("hidden_size", 2).Int("layout", layout);
    const Shape x = layout ? Shape{1, 3, 4} : Shape{3, 1, 4};  // 3 steps of a batch of 1
    Lowering l = Lower(lstm, 14, {Facts(x), Facts(Shape{1, 8, 4}), Facts(Shape{1, 8, 2})});
    ASSERT_EQ(l.unsupported, "");
    int layers = 0, transposes = 0;
    std::vector<std::string> w_rows;  // the slices of W, in the order concat joins them
    for (const NewNode& n : l.nodes) {
      layers += n.op == "lstm";
      transposes += n.op == "transpose";
      if (n.op == "slice" && n.inputs[0].kind == Operand::kNode && l.nodes[n.inputs[0].index].attrs.count("shape") &&
          l.nodes[n.inputs[0].index].attrs.at("shape") == "(8,4)")
        w_rows.push_back(n.attrs.at("begin"));
    }
    EXPECT_EQ(layers, 1);
    EXPECT_EQ(transposes, layout ? 0 : 2) << "time-major X to batch first, and y back";
    EXPECT_EQ(w_rows, (std::vector<std::string>{"(0)", "(4)", "(6)", "(2)"})) << "i, f, c, o of ONNX's i, o, f, c";
    ASSERT_EQ(l.constants.size(), 4u) << "no initial_h, initial_c or B: zeros";
    ASSERT_EQ(l.outputs.size(), 3u);
    EXPECT_EQ(l.nodes[l.outputs[0].index].attrs.at("shape"), layout ? "(1,3,1,2)" : "(3,1,1,2)");
    const NewNode& y_c = l.nodes[l.outputs[2].index];
    EXPECT_EQ(layout ? y_c.attrs.at("begin") : y_c.attrs.at("shape"), layout ? "(0,2)" : "(1,1,2)");
  }

  NodeBuilder back("RNN", {"x", "w", "r"});
  back.Int("hidden_size", 2).Str("direction", "bidirectional");
  EXPECT_NE(Lower(back, 14, {Facts(Shape{3, 1, 4}), Facts(Shape{2, 2, 4}), Facts(Shape{2, 2, 2})})
                .unsupported.find("direction"),
            std::string::npos);
  NodeBuilder wrong("RNN", {"x", "w", "r"});
  wrong.Int("hidden_size", 3);
  EXPECT_NE(Lower(wrong, 14, {Facts(Shape{3, 1, 4}), Facts(Shape{1, 2, 4}), Facts(Shape{1, 2, 2})}).unsupported, "");
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

}  // namespace
}  // namespace frugal::onnx_map
