// Network ops through the one harness (tests/ops/op_harness.h): dropout,
// embedding, the loss heads, identity, block_grad, zeros_like.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "frugal/passes/gradient.h"
#include "ops/cpu/philox.h"
#include "ops/cpu/vec.h"
#include "ops/unary_math.h"
#include "ops/op_test_util.h"
#include "test_util.h"

namespace frugal::test {
namespace {

// ----------------------------------------------------------------- dropout

// The documented mask: word i of the (seed, name, step) stream >= p * 2^32.
std::vector<bool> Mask(uint64_t seed, const std::string& name, int64_t step, float p, int64_t n) {
  cpu::CounterStream s(seed, StableHash(name), step);
  const double threshold = std::ldexp(static_cast<double>(p), 32);
  std::vector<bool> keep(n);
  for (int64_t i = 0; i < n; ++i) keep[i] = s.Block(i / 4)[i % 4] >= threshold;
  return keep;
}

TEST(OpsNn, DropoutThroughTheHarness) {
  OpCase c;
  c.op = "dropout";
  c.attrs = {{"p", "0.3"}};
  c.in_shapes = {Shape{4, 50}};
  c.differentiable = {true};
  c.reference = [](const Values& in) {  // the harness runs seed 7, step 0, node "op"
    std::vector<bool> keep = Mask(7, "op", 0, 0.3f, 200);
    Values out{in[0]};
    for (int i = 0; i < 200; ++i) out[0][i] = keep[i] ? in[0][i] / 0.7f : 0.f;
    return out;
  };
  OpReport r = CheckOp(c);
  ExpectCovered(r);
  EXPECT_GE(r.inplace_checked, 2);
}

Graph DropoutGraph(const std::vector<std::string>& names, float p = 0.25f) {
  Graph g;
  Entry x{g.AddVariable("x", VarKind::kInput), 0};
  for (const std::string& n : names) x = {g.AddOp("dropout", n, {{"p", std::to_string(p)}}, {x}), 0};
  g.outputs = {x};
  return g;
}

std::vector<float> RunDropout(const Graph& g, int64_t n, bool train, int64_t step, uint64_t seed) {
  return RunGraph(g, {{"x", {Shape{n}, std::vector<float>(n, 1.f)}}}, train, step, seed).outputs[0];
}

TEST(OpsNn, DropoutMaskIsAPureFunctionOfSeedNodeStepAndIndex) {
  const int64_t n = 200000;
  const Graph g = DropoutGraph({"drop"});
  std::vector<float> y = RunDropout(g, n, true, 3, 11);
  int64_t dropped = 0;
  for (float v : y) {
    ASSERT_TRUE(v == 0.f || v == 1.f / 0.75f) << v;
    dropped += v == 0.f;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, 0.25, 0.005);         // 5 sigma
  EXPECT_EQ(RunDropout(g, n, true, 3, 11), y);                        // bit for bit
  EXPECT_NE(RunDropout(g, n, true, 4, 11), y);                        // another step
  EXPECT_NE(RunDropout(g, n, true, 3, 12), y);                        // another seed
  EXPECT_NE(RunDropout(DropoutGraph({"drop2"}), n, true, 3, 11), y);  // another node
  // More nodes in the graph (before it) do not change this node's mask.
  Graph more;
  Entry x{more.AddVariable("x", VarKind::kInput), 0};
  x = {more.AddOp("identity", "pre1", {}, {x}), 0};
  x = {more.AddOp("identity", "pre2", {}, {x}), 0};
  more.outputs = {{more.AddOp("dropout", "drop", {{"p", "0.25"}}, {x}), 0}};
  EXPECT_EQ(RunDropout(more, n, true, 3, 11), y);
  // Outside training dropout is the identity.
  EXPECT_EQ(RunDropout(g, n, false, 3, 11), std::vector<float>(n, 1.f));
}

// A data-parallel rank holds one part of the global batch: its masks are
// that part of one process's mask over the whole batch, so ranks never share
// a mask (they did: every rank drew words 0..n-1). An odd part size puts the
// second part's first word inside a Philox block.
TEST(OpsNn, DropoutPartsOfTheBatchDrawThePartsOfOneMask) {
  const Graph g = DropoutGraph({"drop"}, 0.5f);
  for (int64_t n : {1000, 1001}) {
    auto run = [&](int64_t size, int64_t part) {
      return RunGraph(g, {{"x", {Shape{size}, std::vector<float>(size, 1.f)}}}, true, 3, 11, MemoryStrategy::kNone,
                      part)
          .outputs[0];
    };
    const std::vector<float> whole = run(2 * n, 0), first = run(n, 0), second = run(n, 1);
    EXPECT_EQ(first, std::vector<float>(whole.begin(), whole.begin() + n)) << n;
    EXPECT_EQ(second, std::vector<float>(whole.begin() + n, whole.end())) << n;
    EXPECT_NE(first, second) << n;
  }
}

TEST(OpsNn, DropoutBackwardRegeneratesTheForwardMask) {
  // x -> dropout; dx for dy = 1 must be mask / (1 - p), the same mask as y / x.
  Graph g;
  Entry x{g.AddVariable("x", VarKind::kInput), 0}, dy{g.AddVariable("dy", VarKind::kInput), 0};
  int d = g.AddOp("dropout", "d", {{"p", "0.5"}}, {x});
  std::vector<Entry> dx = g.node(d).op->BuildGradient(g, GradCtx{d, {x}, {{d, 0}}, {dy}});
  g.outputs = {{d, 0}, dx[0]};
  const int64_t n = 1000;
  std::vector<float> xv(n);
  for (int64_t i = 0; i < n; ++i) xv[i] = 0.5f + static_cast<float>(i % 7);
  auto r = RunGraph(g, {{"x", {Shape{n}, xv}}, {"dy", {Shape{n}, std::vector<float>(n, 1.f)}}}, true, 9, 5);
  int kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(r.outputs[1][i], r.outputs[0][i] / xv[i]) << i;
    kept += r.outputs[1][i] != 0;
  }
  EXPECT_GT(kept, 400);
  EXPECT_LT(kept, 600);
}

TEST(OpsNn, DropoutRejectsBadAttributes) {
  EXPECT_THROW(OutShapes("dropout", {{"p", "1"}}, {Shape{2}}), Error);
  EXPECT_THROW(OutShapes("dropout", {{"mode", "always"}}, {Shape{2}}), Error);
}

// --------------------------------------------------------------- embedding

TEST(OpsNn, Embedding) {
  OpCase c;
  c.op = "embedding";
  c.attrs = {{"input_dim", "5"}, {"output_dim", "4"}};
  c.in_shapes = {Shape{2, 3}, Shape{5, 4}};
  c.differentiable = {false, true};
  c.fill = [](int k, std::vector<float>* v) {
    if (k == 0)
      *v = {0, 2, 2, 4, 0, 1};  // repeated rows accumulate
    else
      *v = AwayFromZero(v->size(), 0.1f, 1.f, true);
  };
  c.reference = [](const Values& in) {
    Values out{{}};
    for (float idx : in[0])
      for (int j = 0; j < 4; ++j) out[0].push_back(in[1][static_cast<int>(idx) * 4 + j]);
    return out;
  };
  ExpectCovered(CheckOp(c));
  EXPECT_EQ(OutShapes("embedding", c.attrs, {Shape{2, 3}, Shape{5, 4}})[0], (Shape{2, 3, 4}));
  EXPECT_THROW(OutShapes("embedding", c.attrs, {Shape{2, 3}, Shape{4, 5}}), Error);
}

TEST(OpsNn, EmbeddingOutOfRangeIndexNamesTheNode) {
  OpCase c;
  c.op = "embedding";
  c.attrs = {{"input_dim", "5"}, {"output_dim", "2"}};
  c.in_shapes = {Shape{3}, Shape{5, 2}};
  c.differentiable = {false, true};
  c.fill = [](int k, std::vector<float>* v) {
    if (k == 0) *v = {1, 5, 0};
  };
  c.reference = [](const Values&) { return Values{}; };
  try {
    CheckOp(c);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("node 'op' (embedding)"), std::string::npos) << m;
    EXPECT_NE(m.find("index 5 at position 1"), std::string::npos) << m;
  }
}

// ------------------------------------------------------------------ losses

TEST(OpsNn, SoftmaxCrossEntropyIgnoreLabel) {
  for (const char* norm : {"valid", "batch", "null"}) {
    SCOPED_TRACE(norm);
    OpCase c;
    c.op = "softmax_cross_entropy";
    c.attrs = {{"ignore_label", "-1"}, {"normalization", norm}};
    c.in_shapes = {Shape{5, 4}, Shape{5}};
    c.differentiable = {true, false};
    c.fill = [](int k, std::vector<float>* v) {
      if (k == 1)
        *v = {2, -1, 0, -1, 3};
      else
        for (size_t i = 0; i < v->size(); ++i) (*v)[i] = std::sin(2.1f * i);
    };
    c.reference = [](const Values& in) {
      Values out{std::vector<float>(20)};
      for (int i = 0; i < 5; ++i) {
        double z = 0;
        for (int j = 0; j < 4; ++j) z += std::exp(in[0][i * 4 + j]);
        for (int j = 0; j < 4; ++j) out[0][i * 4 + j] = static_cast<float>(std::exp(in[0][i * 4 + j]) / z);
      }
      return out;
    };
    std::string nm = norm;
    c.loss = [nm](const Values& in, const Values& out) { return SceLoss(in, out, -1, nm); };
    c.fd_eps = 1e-3;
    ExpectCovered(CheckOp(c));
  }
  // Without ignore_label, -1 is a bad label.
  OpCase bad;
  bad.op = "softmax_cross_entropy";
  bad.in_shapes = {Shape{2, 3}, Shape{2}};
  bad.differentiable = {true, false};
  bad.fill = [](int k, std::vector<float>* v) {
    if (k == 1) *v = {0.f, -1.f};
  };
  bad.reference = [](const Values&) { return Values{}; };
  bad.loss = [](const Values& in, const Values& out) { return SceLoss(in, out, -99, "batch"); };
  EXPECT_THROW(CheckOp(bad), Error);
}

void CheckRegression(const std::string& op, const Shape& x, const Shape& label, double grad_scale) {
  SCOPED_TRACE(op + " " + x.ToString() + " " + label.ToString());
  const bool logistic = op == "logistic_regression_output";
  OpCase c;
  c.op = op;
  c.attrs = {{"grad_scale", std::to_string(grad_scale)}};
  c.in_shapes = {x, label};
  c.differentiable = {true, false};
  c.fill = [logistic](int k, std::vector<float>* v) {
    for (size_t i = 0; i < v->size(); ++i)
      (*v)[i] = k == 0 ? std::sin(1.3f * i) : (logistic ? 0.1f + 0.8f * (i % 2) : std::cos(0.7f * i));
  };
  c.reference = [logistic](const Values& in) {
    Values out{in[0]};
    if (logistic)
      for (float& v : out[0]) v = 1.f / (1.f + std::exp(-v));
    return out;
  };
  const double m = static_cast<double>(label.Size() / label[0]);  // MXNet: outputs per sample
  c.loss = [=](const Values& in, const Values& out) {
    double l = 0;
    for (size_t i = 0; i < out[0].size(); ++i) {
      const double y = out[0][i], t = in[1][i];
      l += logistic ? -(t * std::log(y) + (1 - t) * std::log(1 - y)) : (y - t) * (y - t) / 2;
    }
    return l * grad_scale / m;
  };
  ExpectCovered(CheckOp(c));
}

TEST(OpsNn, RegressionOutputs) {
  for (const char* op : {"linear_regression_output", "logistic_regression_output"}) {
    CheckRegression(op, Shape{4, 3}, Shape{4, 3}, 1.0);
    CheckRegression(op, Shape{5, 1}, Shape{5}, 2.0);
  }
  EXPECT_EQ(OutShapes("linear_regression_output", {}, {Shape{5, 1}, Shape{5}})[0], (Shape{5, 1}));
  EXPECT_THROW(OutShapes("linear_regression_output", {}, {Shape{4, 3}, Shape{4}}), Error);
}

TEST(OpsNn, MakeLoss) {
  for (const char* norm : {"null", "batch", "valid"}) {
    SCOPED_TRACE(norm);
    OpCase c;
    c.op = "make_loss";
    c.attrs = {{"normalization", norm}, {"grad_scale", "3"}, {"valid_thresh", "0.1"}};
    c.in_shapes = {Shape{4, 5}};
    c.differentiable = {true};
    c.fill = [](int, std::vector<float>* v) { *v = AwayFromZero(v->size(), 0.3f, 1.f, true); };
    c.reference = [](const Values& in) { return in; };
    std::string nm = norm;
    c.loss = [nm](const Values& in, const Values&) {
      double s = 0, valid = 0;
      for (float v : in[0]) {
        s += v;
        valid += v > 0.1f;
      }
      return 3 * s / (nm == "null" ? 1.0 : nm == "batch" ? 4.0 : std::max(valid, 1.0));
    };
    OpReport r = CheckOp(c);
    ExpectCovered(r);
    EXPECT_GE(r.inplace_checked, 2);
  }
}

// -------------------------------------------- identity, block_grad, zeros

TEST(OpsNn, Identity) {
  OpCase c;
  c.op = "identity";
  c.in_shapes = {Shape{3, 4}};
  c.differentiable = {true};
  c.reference = [](const Values& in) { return in; };
  ExpectCovered(CheckOp(c));
}

TEST(OpsNn, BlockGradAndZerosLikeForward) {
  for (const char* op : {"block_grad", "zeros_like"}) {
    OpCase c;
    c.op = op;
    c.in_shapes = {Shape{3, 4}};
    c.differentiable = {false};  // neither has a gradient
    const bool zeros = std::string(op) == "zeros_like";
    c.reference = [zeros](const Values& in) { return zeros ? Values{std::vector<float>(12, 0.f)} : in; };
    ExpectCovered(CheckOp(c), false);
  }
  EXPECT_THROW(OutShapes("zeros_like", {{"like_output", "0"}}, {}), Error);  // only for the gradient pass
}

// A small model: y = fc(x), loss = make_loss(y + extra) where extra is
// block_grad(y) or nothing; returns the gradient of fc's weight.
std::vector<float> WeightGradient(bool with_blocked_branch) {
  Graph g;
  Entry x{g.AddVariable("x", VarKind::kInput), 0};
  Entry w{g.AddVariable("w", VarKind::kParam), 0};
  Entry y{g.AddOp("fully_connected", "fc", {{"num_hidden", "3"}, {"no_bias", "true"}}, {x, w}), 0};
  if (with_blocked_branch) {
    Entry stop{g.AddOp("block_grad", "stop", {}, {y}), 0};
    y = {g.AddOp("add", "sum", {}, {y, stop}), 0};
  }
  g.outputs = {{g.AddOp("make_loss", "loss", {}, {y}), 0}};
  Gradient(&g);
  EXPECT_TRUE(g.grad_of[g.FindNode("w")].valid());
  return RunGraph(g, {{"x", {Shape{2, 4}, AwayFromZero(8, 0.1f, 1.f, true)}},
                      {"w", {Shape{3, 4}, AwayFromZero(12, 0.1f, 1.f, true, 1)}}})
      .grads.at("w");
}

TEST(OpsNn, BlockGradStopsTheGradient) {
  EXPECT_EQ(WeightGradient(true), WeightGradient(false));
  // A parameter reached only through block_grad gets no gradient at all.
  Graph g;
  Entry w{g.AddVariable("w", VarKind::kParam), 0};
  Entry v{g.AddVariable("v", VarKind::kParam), 0};
  Entry s{g.AddOp("block_grad", "stop", {}, {w}), 0};
  g.outputs = {{g.AddOp("make_loss", "loss", {}, {{g.AddOp("mul", "m", {}, {s, v}), 0}}), 0}};
  Gradient(&g);
  EXPECT_FALSE(g.grad_of[g.FindNode("w")].valid());
  EXPECT_TRUE(g.grad_of[g.FindNode("v")].valid());
}

// erf and both forms of gelu: forward against the standard library's erf
// and tanh (in double), gradients by finite differences.
TEST(OpsNn, ErfAndGeluThroughTheHarness) {
  const double sqrt2_over_pi = std::sqrt(2 / M_PI);
  const std::vector<std::pair<AttrMap, std::function<double(double)>>> cases{
      {{}, [](double x) { return std::erf(x); }},
      {{{"approximate", "none"}}, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {{{"approximate", "tanh"}},
       [sqrt2_over_pi](double x) { return 0.5 * x * (1 + std::tanh(sqrt2_over_pi * (x + 0.044715 * x * x * x))); }},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    const auto& [attrs, f] = cases[k];
    OpCase c;
    c.op = k == 0 ? "erf" : "gelu";
    c.attrs = attrs;
    SCOPED_TRACE(c.op + (attrs.empty() ? "" : " " + attrs.begin()->second));
    c.in_shapes = {Shape{3, 7}};
    c.differentiable = {true};
    c.fill = [](int, std::vector<float>* v) {
      for (size_t i = 0; i < v->size(); ++i) (*v)[i] = std::sin(1.3f * i) * 3;
    };
    c.reference = [f = f](const Values& in) {
      Values out{std::vector<float>(in[0].size())};
      for (size_t i = 0; i < in[0].size(); ++i) out[0][i] = static_cast<float>(f(in[0][i]));
      return out;
    };
    c.fd_eps = 1e-3;
    c.fd_tol = 2e-3;
    ExpectCovered(CheckOp(c));
  }
}

// The trigonometric, hyperbolic and step functions: forward against the
// standard library in double inside each domain, gradients by finite
// differences (0 for the steps, away from their jumps).
TEST(OpsNn, TrigonometricAndStepFunctionsThroughTheHarness) {
  struct Fn {
    const char* op;
    double (*f)(double);
    double lo, hi;  // inputs spread over [lo, hi]
  };
  const Fn fns[] = {
      {"sin", [](double x) { return std::sin(x); }, -3, 3},
      {"cos", [](double x) { return std::cos(x); }, -3, 3},
      {"tan", [](double x) { return std::tan(x); }, -1.2, 1.2},
      {"arcsin", [](double x) { return std::asin(x); }, -0.9, 0.9},
      {"arccos", [](double x) { return std::acos(x); }, -0.9, 0.9},
      {"arctan", [](double x) { return std::atan(x); }, -4, 4},
      {"sinh", [](double x) { return std::sinh(x); }, -3, 3},
      {"arcsinh", [](double x) { return std::asinh(x); }, -4, 4},
      {"arccosh", [](double x) { return std::acosh(x); }, 1.2, 5},
      {"arctanh", [](double x) { return std::atanh(x); }, -0.9, 0.9},
      {"floor", [](double x) { return std::floor(x); }, -2.7, 2.7},
      {"ceil", [](double x) { return std::ceil(x); }, -2.7, 2.7},
      {"round", [](double x) { return std::nearbyint(x); }, -2.7, 2.7},
      {"sign", [](double x) { return static_cast<double>((x > 0) - (x < 0)); }, -2.7, 2.7},
  };
  for (const Fn& fn : fns) {
    SCOPED_TRACE(fn.op);
    OpCase c;
    c.op = fn.op;
    c.in_shapes = {Shape{3, 7}};
    c.differentiable = {true};
    c.fill = [fn](int, std::vector<float>* v) {  // 21 points, none on a jump of the steps
      for (size_t i = 0; i < v->size(); ++i)
        (*v)[i] = static_cast<float>(fn.lo + (fn.hi - fn.lo) * (i + 0.37) / v->size());
    };
    c.reference = [fn](const Values& in) {
      Values out{std::vector<float>(in[0].size())};
      for (size_t i = 0; i < in[0].size(); ++i) out[0][i] = static_cast<float>(fn.f(in[0][i]));
      return out;
    };
    c.fd_eps = 1e-3;
    c.fd_tol = 5e-3;
    ExpectCovered(CheckOp(c));
  }
  // round halves to even, sign keeps 0 and NaN.
  EXPECT_EQ(unary::Round::F(2.5f, {}), 2.f);
  EXPECT_EQ(unary::Round::F(-1.5f, {}), -2.f);
  EXPECT_EQ(unary::Sign::F(0.f, {}), 0.f);
  EXPECT_TRUE(std::isnan(unary::Sign::F(NAN, {})));
}

// The exact gelu keeps its relative precision where Phi(x) is tiny (x Phi(x)
// from 1 + erf(x / sqrt 2) in float is 0 below about x = -5.5, and off by
// percents from -3 on), in the functions the CUDA kernels run and in the
// CPU's vectorised kernels of every instruction set.
TEST(OpsNn, GeluIsPreciseInItsTail) {
  const std::vector<float> xs{-3.f, -5.f, -7.f, -9.f, -12.f, -0.5f, 0.3f, 0.9f, 1.5f, 4.f};
  std::vector<double> y(xs.size()), d(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], phi = 0.5 * std::erfc(-x / std::sqrt(2.0));
    y[i] = x * phi;
    d[i] = phi + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    EXPECT_NEAR(unary::Gelu::F(xs[i], GeluParams{}) / y[i], 1, 1e-5) << x;
    EXPECT_NEAR(unary::Gelu::D(1, xs[i], GeluParams{}) / d[i], 1, 1e-4) << x;
  }
  int isas = 0;
  for (const char* isa : {"avx512", "avx2", "sse2"}) {
    const cpu::VecKernels* k = cpu::VecFor(isa);
    if (!k) continue;
    ++isas;
    std::vector<float> out(xs.size()), grad(xs.size()), ones(xs.size(), 1.f);
    k->gelu(xs.data(), out.data(), static_cast<int64_t>(xs.size()), false, false);
    k->gelu_grad(ones.data(), xs.data(), grad.data(), static_cast<int64_t>(xs.size()), false, false);
    for (size_t i = 0; i < xs.size(); ++i) {
      EXPECT_NEAR(out[i] / y[i], 1, 1e-5) << isa << " " << xs[i];
      EXPECT_NEAR(grad[i] / d[i], 1, 1e-4) << isa << " " << xs[i];
    }
  }
  EXPECT_GE(isas, 1);
}

// layer_norm over the axes from `axis` on: forward against the formula,
// gradients by finite differences (x, gamma, beta), write/add, in place.
TEST(OpsNn, LayerNormThroughTheHarness) {
  for (const auto& [axis, no_bias] : std::vector<std::pair<int, bool>>{{-1, false}, {1, false}, {2, true}}) {
    SCOPED_TRACE(Fmt("axis ", axis, no_bias ? " no_bias" : ""));
    const Shape x{2, 3, 5};
    const int64_t a = axis < 0 ? axis + 3 : axis;
    int64_t rows = 1, d = 1;
    for (int k = 0; k < 3; ++k) (k < a ? rows : d) *= x[k];
    std::vector<int64_t> norm_dims(x.dims().begin() + a, x.dims().end());
    OpCase c;
    c.op = "layer_norm";
    c.attrs = {{"axis", std::to_string(axis)}, {"eps", "0.01"}};
    if (no_bias) c.attrs["no_bias"] = "true";
    c.in_shapes = {x, Shape(norm_dims)};
    if (!no_bias) c.in_shapes.push_back(Shape(norm_dims));
    c.differentiable = std::vector<bool>(c.in_shapes.size(), true);
    c.fill = [](int k, std::vector<float>* v) {
      for (size_t i = 0; i < v->size(); ++i) (*v)[i] = k == 0 ? std::sin(1.7f * i) * 2 : 0.5f + 0.1f * k * i;
    };
    c.reference = [rows, d, no_bias](const Values& in) {
      Values out{std::vector<float>(rows * d), std::vector<float>(rows), std::vector<float>(rows)};
      for (int64_t i = 0; i < rows; ++i) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < d; ++j) m += in[0][i * d + j];
        m /= d;
        for (int64_t j = 0; j < d; ++j) v += (in[0][i * d + j] - m) * (in[0][i * d + j] - m);
        const double inv = 1 / std::sqrt(v / d + 0.01);
        for (int64_t j = 0; j < d; ++j) {
          out[0][i * d + j] = static_cast<float>(in[1][j] * (in[0][i * d + j] - m) * inv + (no_bias ? 0.0 : in[2][j]));
        }
        out[1][i] = static_cast<float>(m);
        out[2][i] = static_cast<float>(inv);
      }
      return out;
    };
    c.fd_eps = 1e-3;
    c.fd_tol = 2e-3;
    ExpectCovered(CheckOp(c));
  }
}

TEST(OpsNn, LayerNormRejectsABadAxisNamingTheNode) {
  OpCase c;
  c.op = "layer_norm";
  c.attrs = {{"axis", "3"}};
  c.in_shapes = {Shape{2, 3, 5}, Shape{5}, Shape{5}};
  c.differentiable = {true, true, true};
  c.reference = [](const Values&) { return Values{}; };
  ExpectError([&] { CheckOp(c); }, {"axis 3 is outside x's 3 dimensions", "use -3 to 2"});
}

}  // namespace
}  // namespace frugal::test
