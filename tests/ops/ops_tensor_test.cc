// Tensor ops through the one harness (tests/ops/op_harness.h): elementwise with
// broadcasting, scalar and unary ops, joins and cuts, reductions, matmul.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "frugal/executor.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/shapes.h"
#include "ops/op_test_util.h"

namespace frugal::test {
namespace {

// ------------------------------------------------------ binary, broadcasting

float Apply(const std::string& op, float a, float b) {
  if (op == "add") return a + b;
  if (op == "sub") return a - b;
  if (op == "mul") return a * b;
  if (op == "maximum") return std::max(a, b);
  if (op == "minimum") return std::min(a, b);
  if (op == "power") return std::pow(a, b);
  return a / b;
}

// positive_a: input a in [0.5, 1.5] (power's base), else either sign.
void CheckBinary(const std::string& op, const Shape& a, const Shape& b, const Shape& want, bool positive_a = false) {
  SCOPED_TRACE(op + " " + a.ToString() + " " + b.ToString());
  ASSERT_EQ(OutShapes(op, {}, {a, b})[0], want);
  OpCase c;
  c.op = op;
  c.in_shapes = {a, b};
  c.differentiable = {true, true};
  c.fill = [&](int k, std::vector<float>* v) { *v = AwayFromZero(v->size(), 0.5f, 1.5f, !(positive_a && k == 0), k); };
  c.reference = [&](const Values& in) {
    Values out{std::vector<float>(want.Size())};
    for (int64_t i = 0; i < want.Size(); ++i) {
      auto co = Coords(i, want);
      out[0][i] = Apply(op, in[0][BroadcastOffset(co, a)], in[1][BroadcastOffset(co, b)]);
    }
    return out;
  };
  OpReport r = CheckOp(c);
  ExpectCovered(r);
  if (a == want || b == want) { EXPECT_GE(r.inplace_checked, 1); }
}

TEST(OpsTensor, BinarySameShape) {
  for (const char* op : {"add", "sub", "mul", "div"}) CheckBinary(op, Shape{3, 4}, Shape{3, 4}, Shape{3, 4});
}

TEST(OpsTensor, BinaryBroadcastTrailing) {  // (2,3,4) + (3,1)
  for (const char* op : {"add", "sub", "mul", "div"}) CheckBinary(op, Shape{2, 3, 4}, Shape{3, 1}, Shape{2, 3, 4});
}

TEST(OpsTensor, BinaryBroadcastOneElement) {  // (1,) + (2,3), and the other way round
  for (const char* op : {"add", "sub", "mul", "div"}) {
    CheckBinary(op, Shape{1}, Shape{2, 3}, Shape{2, 3});
    CheckBinary(op, Shape{2, 3}, Shape{1}, Shape{2, 3});
  }
}

TEST(OpsTensor, BinaryBroadcastBothSides) {  // (2,1,3) * (4,1): both inputs grow
  for (const char* op : {"add", "sub", "mul", "div"}) CheckBinary(op, Shape{2, 1, 3}, Shape{4, 1}, Shape{2, 4, 3});
  CheckBinary("mul", Shape{5, 1}, Shape{1, 6}, Shape{5, 6});
}

TEST(OpsTensor, MaximumMinimumPowerBroadcast) {  // ONNX's Max, Min, Pow
  for (const char* op : {"maximum", "minimum"}) {
    CheckBinary(op, Shape{3, 4}, Shape{3, 4}, Shape{3, 4});
    CheckBinary(op, Shape{2, 1, 3}, Shape{4, 1}, Shape{2, 4, 3});
  }
  CheckBinary("power", Shape{3, 4}, Shape{3, 4}, Shape{3, 4}, /*positive_a=*/true);
  CheckBinary("power", Shape{2, 3, 4}, Shape{3, 1}, Shape{2, 3, 4}, true);
}

TEST(OpsTensor, BinaryLargeRunsParallelAndReduces) {  // above the parallel grain, with a reduction
  CheckBinary("mul", Shape{300, 129}, Shape{129}, Shape{300, 129});
}

TEST(OpsTensor, BinaryRejectsShapesThatDoNotBroadcast) {
  try {
    OutShapes("add", {}, {Shape{2, 3}, Shape{4}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot broadcast (2,3) with (4)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("node 'op'"), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------- scalar and unary

void CheckUnary(const std::string& op, const AttrMap& attrs, std::function<float(float)> f,
                std::function<void(std::vector<float>*)> fill = nullptr) {
  SCOPED_TRACE(op);
  OpCase c;
  c.op = op;
  c.attrs = attrs;
  c.in_shapes = {Shape{3, 5}};
  c.differentiable = {true};
  if (fill) c.fill = [fill](int, std::vector<float>* v) { fill(v); };
  c.reference = [f](const Values& in) {
    Values out{in[0]};
    for (float& v : out[0]) v = f(v);
    return out;
  };
  OpReport r = CheckOp(c);
  ExpectCovered(r);
  EXPECT_GE(r.inplace_checked, 1);
}

TEST(OpsTensor, ScalarOps) {
  const AttrMap s{{"scalar", "1.5"}};
  auto away = [](std::vector<float>* v) { *v = AwayFromZero(v->size(), 0.5f, 2.f, true); };
  CheckUnary("add_scalar", s, [](float x) { return x + 1.5f; });
  CheckUnary("sub_scalar", s, [](float x) { return x - 1.5f; });
  CheckUnary("rsub_scalar", s, [](float x) { return 1.5f - x; });
  CheckUnary("mul_scalar", s, [](float x) { return x * 1.5f; });
  CheckUnary("div_scalar", s, [](float x) { return x / 1.5f; });
  CheckUnary(
      "rdiv_scalar", s, [](float x) { return 1.5f / x; }, away);
}

TEST(OpsTensor, ScalarIsRequired) { EXPECT_THROW(OutShapes("mul_scalar", {}, {Shape{2}}), Error); }

TEST(OpsTensor, UnaryOps) {
  auto positive = [](std::vector<float>* v) { *v = AwayFromZero(v->size(), 0.5f, 2.f, false); };
  auto away = [](std::vector<float>* v) { *v = AwayFromZero(v->size(), 0.2f, 1.f, true); };
  CheckUnary("negative", {}, [](float x) { return -x; });
  CheckUnary("exp", {}, [](float x) { return std::exp(x); });
  CheckUnary(
      "log", {}, [](float x) { return std::log(x); }, positive);
  CheckUnary(
      "sqrt", {}, [](float x) { return std::sqrt(x); }, positive);
  CheckUnary("square", {}, [](float x) { return x * x; });
  CheckUnary(
      "abs", {}, [](float x) { return std::fabs(x); }, away);
  CheckUnary("clip", {{"a_min", "-0.5"}, {"a_max", "0.3"}}, [](float x) { return std::min(std::max(x, -0.5f), 0.3f); });
}

TEST(OpsTensor, ClipGradientIsZeroOutsideAndAtTheBounds) {
  OpCase c;
  c.op = "clip";
  c.attrs = {{"a_min", "-0.5"}, {"a_max", "0.5"}};
  c.in_shapes = {Shape{6}};
  c.differentiable = {true};
  c.fill = [](int, std::vector<float>* v) { *v = {-2.f, -0.2f, 0.f, 0.4f, 3.f, 0.9f}; };
  c.reference = [](const Values& in) {
    Values out{in[0]};
    for (float& v : out[0]) v = std::min(std::max(v, -0.5f), 0.5f);
    return out;
  };
  OpReport r = CheckOp(c);
  EXPECT_EQ(r.grads_checked, 6);  // no point near a bound: all smooth
  EXPECT_THROW(OutShapes("clip", {{"a_min", "1"}}, {Shape{2}}), Error);
  EXPECT_THROW(OutShapes("clip", {{"a_min", "1"}, {"a_max", "0"}}, {Shape{2}}), Error);
}

// ----------------------------------------------------- concat, split, slice

TEST(OpsTensor, Concat) {
  for (const char* dim : {"1", "-2"}) {
    OpCase c;
    c.op = "concat";
    c.attrs = {{"num_args", "3"}, {"dim", dim}};
    c.in_shapes = {Shape{2, 1, 3}, Shape{2, 2, 3}, Shape{2, 3, 3}};
    c.differentiable = {true, true, true};
    c.reference = [](const Values& in) {
      Values out{{}};
      for (int o = 0; o < 2; ++o)
        for (int k = 0; k < 3; ++k)
          for (int a = 0; a < k + 1; ++a)
            for (int i = 0; i < 3; ++i) out[0].push_back(in[k][(o * (k + 1) + a) * 3 + i]);
      return out;
    };
    ExpectCovered(CheckOp(c));
  }
  EXPECT_EQ(OutShapes("concat", {{"dim", "0"}}, {Shape{2, 3}, Shape{4, 3}})[0], (Shape{6, 3}));
  EXPECT_THROW(OutShapes("concat", {}, {Shape{2, 3}, Shape{3, 3}}), Error);
}

// y_k = part k of x (2, 6, 3) along axis 1.
Values SplitReference(const Values& in, int parts) {
  Values out(parts);
  const int len = 6 / parts;
  for (int o = 0; o < 2; ++o)
    for (int a = 0; a < 6; ++a)
      for (int i = 0; i < 3; ++i) out[a / len].push_back(in[0][(o * 6 + a) * 3 + i]);
  return out;
}

TEST(OpsTensor, SplitAndSliceChannel) {
  for (const char* op : {"split", "slice_channel"}) {
    OpCase c;
    c.op = op;
    c.attrs = {{"num_outputs", "3"}};
    c.in_shapes = {Shape{2, 6, 3}};
    c.differentiable = {true};
    c.reference = [](const Values& in) { return SplitReference(in, 3); };
    ExpectCovered(CheckOp(c));
    EXPECT_EQ(OutShapes(op, c.attrs, c.in_shapes), std::vector<Shape>(3, Shape{2, 2, 3}));
  }
}

TEST(OpsTensor, SplitSqueezeAxis) {
  OpCase c;
  c.op = "split";
  c.attrs = {{"num_outputs", "6"}, {"axis", "-2"}, {"squeeze_axis", "true"}};
  c.in_shapes = {Shape{2, 6, 3}};
  c.differentiable = {true};
  c.reference = [](const Values& in) { return SplitReference(in, 6); };
  ExpectCovered(CheckOp(c));
  EXPECT_EQ(OutShapes("split", c.attrs, c.in_shapes)[5], (Shape{2, 3}));
  EXPECT_THROW(OutShapes("split", {{"num_outputs", "4"}}, {Shape{2, 6}}), Error);
  EXPECT_THROW(OutShapes("split", {{"num_outputs", "3"}, {"squeeze_axis", "1"}}, {Shape{2, 6}}), Error);
}

// Python's slice semantics, written out: the indices of one axis.
std::vector<int64_t> PyRange(std::optional<int64_t> b, std::optional<int64_t> e, int64_t s, int64_t n) {
  auto norm = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v < 0 ? *v + n : *v;
    return s > 0 ? std::clamp<int64_t>(x, 0, n) : std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t lo = norm(b, s > 0 ? 0 : n - 1), hi = norm(e, s > 0 ? n : -1);
  std::vector<int64_t> r;
  for (int64_t i = lo; s > 0 ? i < hi : i > hi; i += s) r.push_back(i);
  return r;
}

void CheckSlice(const AttrMap& attrs, const Shape& x, const std::vector<std::vector<int64_t>>& idx) {
  SCOPED_TRACE(attrs.at("begin") + " " + attrs.at("end"));
  std::vector<int64_t> dims;
  for (const auto& v : idx) dims.push_back(static_cast<int64_t>(v.size()));
  ASSERT_EQ(OutShapes("slice", attrs, {x})[0], Shape(dims));
  OpCase c;
  c.op = "slice";
  c.attrs = attrs;
  c.in_shapes = {x};
  c.differentiable = {true};
  c.reference = [&](const Values& in) {
    const Shape y(dims);
    Values out{std::vector<float>(y.Size())};
    for (int64_t i = 0; i < y.Size(); ++i) {
      auto co = Coords(i, y);
      int64_t off = 0;
      for (int d = 0; d < x.ndim(); ++d) off = off * x[d] + idx[d][co[d]];
      out[0][i] = in[0][off];
    }
    return out;
  };
  ExpectCovered(CheckOp(c));
}

TEST(OpsTensor, Slice) {
  const Shape x{4, 5, 6};
  auto all = [](int64_t n) { return PyRange(std::nullopt, std::nullopt, 1, n); };
  CheckSlice({{"begin", "(1,None)"}, {"end", "(3,None)"}}, x, {PyRange(1, 3, 1, 4), all(5), all(6)});
  CheckSlice({{"begin", "(None,-4,-1)"}, {"end", "(None,5,0)"}, {"step", "(2,2,-2)"}}, x,
             {PyRange(std::nullopt, std::nullopt, 2, 4), PyRange(-4, 5, 2, 5), PyRange(-1, 0, -2, 6)});
  CheckSlice({{"begin", "(3,None,-100)"}, {"end", "(None,0,None)"}, {"step", "(-1,-1,1)"}}, x,
             {PyRange(3, std::nullopt, -1, 4), PyRange(std::nullopt, 0, -1, 5), PyRange(-100, std::nullopt, 1, 6)});
}

TEST(OpsTensor, SliceErrors) {
  EXPECT_THROW(OutShapes("slice", {{"begin", "(2,)"}, {"end", "(2,)"}}, {Shape{4}}), Error);  // empty
  EXPECT_THROW(OutShapes("slice", {{"begin", "(0,)"}, {"end", "(2,)"}, {"step", "(0,)"}}, {Shape{4}}), Error);
  EXPECT_THROW(OutShapes("slice", {{"begin", "(0,x)"}, {"end", "(2,3)"}}, {Shape{4, 4}}), Error);
  EXPECT_THROW(OutShapes("slice", {{"begin", "(0,0,0)"}, {"end", "(1,1,1)"}}, {Shape{4, 4}}), Error);
}

// ------------------------------------------------- transpose, expand_dims

void CheckTranspose(const AttrMap& attrs, const Shape& x, const std::vector<int>& perm) {
  std::vector<int64_t> dims;
  for (int d : perm) dims.push_back(x[d]);
  const Shape y(dims);
  ASSERT_EQ(OutShapes("transpose", attrs, {x})[0], y);
  OpCase c;
  c.op = "transpose";
  c.attrs = attrs;
  c.in_shapes = {x};
  c.differentiable = {true};
  c.reference = [&](const Values& in) {
    Values out{std::vector<float>(y.Size())};
    for (int64_t i = 0; i < y.Size(); ++i) {
      auto co = Coords(i, y);
      std::vector<int64_t> xc(x.ndim());
      for (int d = 0; d < x.ndim(); ++d) xc[perm[d]] = co[d];
      out[0][i] = in[0][BroadcastOffset(xc, x)];
    }
    return out;
  };
  ExpectCovered(CheckOp(c));
}

TEST(OpsTensor, Transpose) {
  CheckTranspose({}, Shape{2, 3, 4}, {2, 1, 0});
  CheckTranspose({{"axes", "(1,0,2)"}}, Shape{2, 3, 4}, {1, 0, 2});
  CheckTranspose({{"axes", "(-1,0,1)"}}, Shape{2, 3, 4}, {2, 0, 1});
  // Attention's heads, large enough for the rows to be split over threads.
  CheckTranspose({{"axes", "(0,2,1,3)"}}, Shape{4, 64, 4, 40}, {0, 2, 1, 3});
  EXPECT_THROW(OutShapes("transpose", {{"axes", "(0,0,1)"}}, {Shape{2, 3, 4}}), Error);
  EXPECT_THROW(OutShapes("transpose", {{"axes", "(0,1)"}}, {Shape{2, 3, 4}}), Error);
}

TEST(OpsTensor, ExpandDims) {
  EXPECT_EQ(OutShapes("expand_dims", {{"axis", "1"}}, {Shape{2, 3}})[0], (Shape{2, 1, 3}));
  EXPECT_EQ(OutShapes("expand_dims", {{"axis", "-1"}}, {Shape{2, 3}})[0], (Shape{2, 3, 1}));
  EXPECT_EQ(OutShapes("expand_dims", {{"axis", "2"}}, {Shape{2, 3}})[0], (Shape{2, 3, 1}));
  EXPECT_THROW(OutShapes("expand_dims", {{"axis", "3"}}, {Shape{2, 3}}), Error);
  OpCase c;
  c.op = "expand_dims";
  c.attrs = {{"axis", "0"}};
  c.in_shapes = {Shape{2, 3}};
  c.differentiable = {true};
  c.reference = [](const Values& in) { return in; };
  OpReport r = CheckOp(c);
  ExpectCovered(r);
  EXPECT_GE(r.inplace_checked, 2);
}

// ------------------------------------------------------------- reductions

// Reference reduction of x over the axes marked in fold; kind: sum, mean, max.
Values Reduce(const Values& in, const Shape& x, const std::vector<bool>& fold, const std::string& kind) {
  std::vector<int64_t> kept;
  for (int d = 0; d < x.ndim(); ++d) kept.push_back(fold[d] ? 1 : x[d]);
  const Shape ks(kept);
  std::vector<double> acc(ks.Size(), kind == "max" ? -1e30 : kind == "min" ? 1e30 : 0);
  std::vector<int64_t> count(ks.Size(), 0);
  for (int64_t i = 0; i < x.Size(); ++i) {
    int64_t j = BroadcastOffset(Coords(i, x), ks);
    acc[j] = kind == "max"   ? std::max<double>(acc[j], in[0][i])
             : kind == "min" ? std::min<double>(acc[j], in[0][i])
                             : acc[j] + in[0][i];
    ++count[j];
  }
  Values out{std::vector<float>(acc.size())};
  for (size_t j = 0; j < acc.size(); ++j) out[0][j] = static_cast<float>(kind == "mean" ? acc[j] / count[j] : acc[j]);
  return out;
}

void CheckReduce(const std::string& op, const AttrMap& attrs, const Shape& x, const std::vector<bool>& fold,
                 const Shape& want) {
  SCOPED_TRACE(op + " " + (attrs.count("axis") ? attrs.at("axis") : "all"));
  ASSERT_EQ(OutShapes(op, attrs, {x})[0], want);
  OpCase c;
  c.op = op;
  c.attrs = attrs;
  c.in_shapes = {x};
  c.differentiable = {true};
  c.reference = [=](const Values& in) { return Reduce(in, x, fold, op); };
  ExpectCovered(CheckOp(c));
}

TEST(OpsTensor, Reductions) {
  const Shape x{3, 4, 5};
  for (const char* op : {"sum", "mean", "max", "min"}) {
    CheckReduce(op, {{"axis", "1"}}, x, {false, true, false}, Shape{3, 5});
    CheckReduce(op, {{"axis", "(0,-1)"}, {"keepdims", "true"}}, x, {true, false, true}, Shape{1, 4, 1});
    CheckReduce(op, {}, x, {true, true, true}, Shape{1});
    CheckReduce(op, {{"axis", "()"}, {"keepdims", "1"}}, x, {true, true, true}, Shape{1, 1, 1});
  }
  CheckReduce("sum", {{"axis", "0"}}, Shape{40000, 2}, {true, false}, Shape{2});  // chunked parallel sum
  EXPECT_THROW(OutShapes("sum", {{"axis", "3"}}, {x}), Error);
  EXPECT_THROW(OutShapes("sum", {{"axis", "(1,1)"}}, {x}), Error);
}

TEST(OpsTensor, MaxGradientGoesToTheFirstMaximum) {
  OpCase c;
  c.op = "max";
  c.attrs = {{"axis", "1"}};
  c.in_shapes = {Shape{2, 4}};
  c.differentiable = {false};
  c.fill = [](int, std::vector<float>* v) { *v = {1, 3, 3, 2, 5, 0, 5, 5}; };
  c.reference = [](const Values&) { return Values{{3, 5}}; };
  CheckOp(c);
  // The gradient node on its own: dy = (10, 20) goes to elements 1 and 4.
  Graph g;
  Entry x{g.AddVariable("x", VarKind::kInput), 0}, dy{g.AddVariable("dy", VarKind::kInput), 0};
  int id = g.AddOp("max", "m", c.attrs, {x});
  g.outputs = g.node(id).op->BuildGradient(g, GradCtx{id, {x}, {{id, 0}}, {dy}});
  InferShapes(&g, {{"x", Shape{2, 4}}, {"dy", Shape{2}}});
  MemoryPlan plan = PlanMemory(g, MemoryStrategy::kNone);
  auto engine = MakeEngine("naive");
  Bindings b;
  b.vars["x"] = Tensor::Empty(Shape{2, 4});
  b.vars["dy"] = Tensor::Empty(Shape{2});
  std::vector<float> xv{1, 3, 3, 2, 5, 0, 5, 5}, dyv{10, 20};
  std::copy(xv.begin(), xv.end(), b.vars["x"].f());
  std::copy(dyv.begin(), dyv.end(), b.vars["dy"].f());
  Executor exec(g, plan, b, engine.get());
  exec.Run(true, 0, 1);
  const float* dx = exec.output(0).f();
  EXPECT_EQ(std::vector<float>(dx, dx + 8), (std::vector<float>{0, 10, 0, 0, 20, 0, 0, 0}));
}

// ---------------------------------------------------------------- matmul

// y = op(a) op(b) per batch item; a, b flat.
Values MatmulReference(const Values& in, int64_t batch, int64_t m, int64_t k, int64_t n, bool ta, bool tb) {
  Values out{std::vector<float>(batch * m * n)};
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < k; ++l) {
          float av = in[0][t * m * k + (ta ? l * m + i : i * k + l)];
          float bv = in[1][t * k * n + (tb ? j * k + l : l * n + j)];
          s += static_cast<double>(av) * bv;
        }
        out[0][(t * m + i) * n + j] = static_cast<float>(s);
      }
  return out;
}

TEST(OpsTensor, MatmulAllTransposes) {
  const int64_t m = 3, k = 4, n = 5;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(Fmt("transpose_a=", ta, " transpose_b=", tb));
      OpCase c;
      c.op = "matmul";
      c.attrs = {{"transpose_a", ta ? "true" : "false"}, {"transpose_b", tb ? "true" : "false"}};
      c.in_shapes = {ta ? Shape{k, m} : Shape{m, k}, tb ? Shape{n, k} : Shape{k, n}};
      c.differentiable = {true, true};
      c.reference = [=](const Values& in) { return MatmulReference(in, 1, m, k, n, ta, tb); };
      ExpectCovered(CheckOp(c));
    }
  EXPECT_THROW(OutShapes("matmul", {}, {Shape{3, 4}, Shape{5, 4}}), Error);
  EXPECT_THROW(OutShapes("matmul", {}, {Shape{2, 3, 4}, Shape{2, 4, 5}}), Error);
}

TEST(OpsTensor, BatchDot) {
  const int64_t bt = 2, m = 3, k = 4, n = 2;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      OpCase c;
      c.op = "batch_dot";
      c.attrs = {{"transpose_a", ta ? "1" : "0"}, {"transpose_b", tb ? "1" : "0"}};
      c.in_shapes = {ta ? Shape{bt, k, m} : Shape{bt, m, k}, tb ? Shape{bt, n, k} : Shape{bt, k, n}};
      c.differentiable = {true, true};
      c.reference = [=](const Values& in) { return MatmulReference(in, bt, m, k, n, ta, tb); };
      ExpectCovered(CheckOp(c));
    }
  EXPECT_THROW(OutShapes("batch_dot", {}, {Shape{2, 3, 4}, Shape{3, 4, 5}}), Error);
}

}  // namespace
}  // namespace frugal::test
