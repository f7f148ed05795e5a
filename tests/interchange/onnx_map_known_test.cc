// The ONNX -> frugal op table for values known at import (rules_known.cc):
// shape arithmetic folded to constants; and copies from known positions,
// Resize (rules_copy.cc).
#include "interchange/onnx_map_util.h"

namespace frugal::onnx_map {
namespace {

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
  EXPECT_NE(
      Lower(NodeBuilder("Mul", {"a", "b"}), 13, {Known(dims), Known(IntsTensor({1, 2}))}).unsupported.find("broadcast"),
      std::string::npos);

  OnnxTensor sq = IntsTensor({7});
  sq.dims = {1, 1};
  EXPECT_EQ(Value(Lower(NodeBuilder("Squeeze", {"x"}), 13, {Known(sq)})).dims, std::vector<int64_t>{});
  // A reshape that holds no batch size: 0 copies the dims before the first
  // squeezed, -1 stands for the first kept after it.
  EXPECT_EQ(Single(Lower(NodeBuilder("Squeeze", {"x"}), 13, {Facts(Shape{1, 3, 1})})).attrs,
            (AttrMap{{"shape", "(-1)"}}));
  EXPECT_EQ(Single(Lower(NodeBuilder("Squeeze", {"x", "a"}), 13, {Facts(Shape{2, 1, 3, 4}), Known(one)})).attrs,
            (AttrMap{{"shape", "(0,-1,4)"}}));
  EXPECT_NE(
      Lower(NodeBuilder("Squeeze", {"x", "a"}), 13, {Facts(Shape{1, 3}), Known(one)}).unsupported.find("not of size 1"),
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

}  // namespace
}  // namespace frugal::onnx_map
