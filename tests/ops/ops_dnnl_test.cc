// The oneDNN-backed ops through the one harness (tests/ops/op_harness.h), each
// against a reference written here as plain loops.
#include <gtest/gtest.h>

#include <cmath>

#include "frugal/executor.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/shapes.h"
#include "ops/op_test_util.h"

namespace frugal::test {
namespace {

// ---------------------------------------------------------------- convolution

struct Conv {
  int64_t n, c, h, w, o, kh, kw, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, g = 1;
  bool bias = true;
  int64_t oh() const { return (h + 2 * ph - (dh * (kh - 1) + 1)) / sh + 1; }
  int64_t ow() const { return (w + 2 * pw - (dw * (kw - 1) + 1)) / sw + 1; }
  AttrMap Attrs() const {
    return {{"kernel", Fmt("(", kh, ",", kw, ")")},
            {"stride", Fmt("(", sh, ",", sw, ")")},
            {"pad", Fmt("(", ph, ",", pw, ")")},
            {"dilate", Fmt("(", dh, ",", dw, ")")},
            {"num_filter", Fmt(o)},
            {"num_group", Fmt(g)},
            {"no_bias", bias ? "false" : "true"}};
  }
  std::vector<Shape> InShapes() const {
    std::vector<Shape> s{Shape{n, c, h, w}, Shape{o, c / g, kh, kw}};
    if (bias) s.push_back(Shape{o});
    return s;
  }
  // y[n, o, i, j] = b[o] + sum W[o, ci, p, q] x[n, g0 + ci, i sh - ph + p dh, j sw - pw + q dw]
  Values Reference(const Values& in) const {
    const int64_t cg = c / g, og = o / g;
    std::vector<float> y(n * o * oh() * ow());
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oc = 0; oc < o; ++oc)
        for (int64_t i = 0; i < oh(); ++i)
          for (int64_t j = 0; j < ow(); ++j) {
            double s = bias ? in[2][oc] : 0;
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t p = 0; p < kh; ++p)
                for (int64_t q = 0; q < kw; ++q) {
                  int64_t yy = i * sh - ph + p * dh, xx = j * sw - pw + q * dw;
                  if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                  int64_t chan = oc / og * cg + ci;
                  s += static_cast<double>(in[1][((oc * cg + ci) * kh + p) * kw + q]) *
                       in[0][((b * c + chan) * h + yy) * w + xx];
                }
            y[((b * o + oc) * oh() + i) * ow() + j] = static_cast<float>(s);
          }
    return {y};
  }
};

OpReport CheckConv(const Conv& k) {
  OpCase c;
  c.op = "convolution";
  c.attrs = k.Attrs();
  c.in_shapes = k.InShapes();
  c.differentiable.assign(c.in_shapes.size(), true);
  c.reference = [k](const Values& in) { return k.Reference(in); };
  return CheckOp(c);
}

TEST(OpsNn, Convolution3x3Pad1) {
  Conv k{2, 3, 6, 6, 4, 3, 3};
  k.ph = k.pw = 1;
  ExpectCovered(CheckConv(k));
}

TEST(OpsNn, ConvolutionStrideDilatePadNoBias) {
  Conv k{2, 3, 9, 8, 5, 3, 2};
  k.sh = 2;
  k.sw = 1;
  k.ph = 1;
  k.pw = 0;
  k.dh = 2;
  k.dw = 3;
  k.bias = false;
  ExpectCovered(CheckConv(k));
}

TEST(OpsNn, ConvolutionGroups) {
  Conv k{2, 4, 5, 5, 6, 3, 3};
  k.g = 2;
  k.ph = k.pw = 1;
  k.sh = k.sw = 2;
  ExpectCovered(CheckConv(k));
}

// 16 channels: oneDNN picks its blocked layout (nChw16c), so the kernels
// reorder through the workspace, and kAdd goes through a summing reorder.
TEST(OpsNn, ConvolutionBlockedLayout) {
  Conv k{2, 16, 5, 5, 16, 3, 3};
  k.ph = k.pw = 1;
  ExpectCovered(CheckConv(k));
}

TEST(OpsNn, Convolution1x1) {
  Conv k{2, 32, 4, 4, 16, 1, 1};
  ExpectCovered(CheckConv(k));
}

// ----------------------------------------------------------------- batch_norm

// y, mean, var of batch_norm from x (N, C, S...), gamma, beta and (with
// global stats) the moving statistics.
Values BatchNormReference(const Values& in, const Shape& x, bool fix_gamma, bool global, bool relu = false,
                          double eps = 1e-3) {
  const int64_t n = x[0], c = x[1], s = x.Prod(2, x.ndim());
  Values out{std::vector<float>(in[0].size()), std::vector<float>(c), std::vector<float>(c)};
  for (int64_t ch = 0; ch < c; ++ch) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) mean += in[0][(i * c + ch) * s + j];
    mean /= n * s;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) var += std::pow(in[0][(i * c + ch) * s + j] - mean, 2);
    var /= n * s;
    if (global) {
      mean = in[3][ch];
      var = in[4][ch];
    }
    const double g = fix_gamma ? 1.0 : in[1][ch];
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) {
        const int64_t e = (i * c + ch) * s + j;
        out[0][e] = static_cast<float>(g * (in[0][e] - mean) / std::sqrt(var + eps) + in[2][ch]);
        if (relu) out[0][e] = std::max(out[0][e], 0.f);
      }
    out[1][ch] = static_cast<float>(mean);
    out[2][ch] = static_cast<float>(var);
  }
  return out;
}

OpCase BatchNormCase(const Shape& x, bool fix_gamma, bool global, bool relu = false) {
  OpCase c;
  c.op = "batch_norm";
  c.attrs = {{"fix_gamma", fix_gamma ? "true" : "false"}, {"use_global_stats", global ? "true" : "false"}};
  if (relu) c.attrs["act_type"] = "relu";
  const Shape ch{x[1]};
  c.in_shapes = {x, ch, ch, ch, ch};
  c.differentiable = {true, true, true, false, false};
  c.fill = [](int k, std::vector<float>* v) {
    for (size_t i = 0; i < v->size(); ++i) {
      const float t = static_cast<float>(i);
      (*v)[i] = k == 0   ? std::sin(1.7f * t) * 2 + 0.3f * (i % 3)  // x
                : k == 1 ? 0.5f + 0.25f * t                         // gamma
                : k == 2 ? 0.1f * t - 0.2f                          // beta
                : k == 3 ? 0.2f * t                                 // moving mean
                         : 0.5f + 0.3f * t;                         // moving var
    }
  };
  c.reference = [x, fix_gamma, global, relu](const Values& in) {
    return BatchNormReference(in, x, fix_gamma, global, relu);
  };
  c.fd_eps = 1e-2;
  c.fd_tol = 2e-3;
  return c;
}

TEST(OpsNn, BatchNormTrainingFixGamma) {
  OpReport r = CheckOp(BatchNormCase(Shape{3, 4, 2, 3}, true, false));
  ExpectCovered(r);
  EXPECT_GE(r.inplace_checked, 2);  // forward and backward both run in place
}

TEST(OpsNn, BatchNormTrainingLearnedGamma) { ExpectCovered(CheckOp(BatchNormCase(Shape{4, 3, 5}, false, false))); }

TEST(OpsNn, BatchNormGlobalStats) { ExpectCovered(CheckOp(BatchNormCase(Shape{2, 3, 2, 2}, false, true))); }

TEST(OpsNn, BatchNormReluFused) {  // act_type relu: the mask recomputed from x in the backward
  OpReport r = CheckOp(BatchNormCase(Shape{3, 4, 2, 3}, false, false, /*relu=*/true));
  ExpectCovered(r);
  EXPECT_GE(r.inplace_checked, 2);
  ExpectCovered(CheckOp(BatchNormCase(Shape{2, 3, 2, 2}, false, true, /*relu=*/true)));
}

TEST(OpsNn, BatchNorm2d) { ExpectCovered(CheckOp(BatchNormCase(Shape{6, 5}, false, false))); }

// Binds x -> batch_norm with its parameters and moving statistics as
// variables, so a test can run steps and look at the moving statistics.
struct BnNet {
  Graph g;
  MemoryPlan plan;
  std::unique_ptr<Engine> engine = MakeEngine("naive");
  std::unique_ptr<Executor> exec;
  Tensor x, gamma, beta, mmean, mvar;
  int bn = -1;
  explicit BnNet(const Shape& xs) {
    std::vector<Entry> in;
    in.push_back({g.AddVariable("x", VarKind::kInput), 0});
    in.push_back({g.AddVariable("bn_gamma", VarKind::kParam, "one"), 0});
    in.push_back({g.AddVariable("bn_beta", VarKind::kParam, "zero"), 0});
    in.push_back({g.AddVariable("bn_moving_mean", VarKind::kAux, "zero"), 0});
    in.push_back({g.AddVariable("bn_moving_var", VarKind::kAux, "one"), 0});
    bn = g.AddOp("batch_norm", "bn", {}, in);
    g.outputs.push_back({bn, 0});
    InferShapes(&g, {{"x", xs}});
    plan = PlanMemory(g, MemoryStrategy::kShare);
    const Shape ch{xs[1]};
    x = Tensor::Empty(xs);
    for (int64_t i = 0; i < x.size(); ++i) x.f()[i] = std::sin(0.7f * i) + 0.1f * (i % 5);
    gamma = Tensor::Empty(ch);
    gamma.Fill(1.f);
    beta = Tensor::Empty(ch);
    beta.Fill(0.f);
    mmean = Tensor::Empty(ch);
    mmean.Fill(0.f);
    mvar = Tensor::Empty(ch);
    mvar.Fill(1.f);
    Bindings b;
    b.vars = {{"x", x}, {"bn_gamma", gamma}, {"bn_beta", beta}, {"bn_moving_mean", mmean}, {"bn_moving_var", mvar}};
    exec = std::make_unique<Executor>(g, plan, b, engine.get());
  }
};

TEST(OpsNn, BatchNormMovingStatsUpdateOncePerStep) {
  const Shape xs{4, 3, 2, 2};
  BnNet net(xs);
  Values batch = BatchNormReference(
      {std::vector<float>(net.x.f(), net.x.f() + net.x.size()), std::vector<float>(3, 1.f), std::vector<float>(3, 0.f)},
      xs, true, false);
  net.exec->Run(/*is_train=*/true, 0, 1);
  net.exec->Run(/*is_train=*/true, 1, 1);
  for (int ch = 0; ch < 3; ++ch) {
    // Two updates from (0, 1) with momentum 0.9: m2 = 0.9 (0.1 mean) + 0.1 mean = 0.19 mean.
    EXPECT_NEAR(net.mmean.f()[ch], 0.19 * batch[1][ch], 1e-6) << "channel " << ch;
    EXPECT_NEAR(net.mvar.f()[ch], 0.81 + 0.19 * batch[2][ch], 1e-6) << "channel " << ch;
  }
  // A recomputation (a mirror) reads the original's saved statistics in
  // place of the moving ones: the same y, bit for bit, the same statistics
  // out, and no update of the moving statistics.
  const Node& n = net.g.node(net.bn);
  Tensor moving_mean = Tensor::Empty(Shape{3}), moving_var = Tensor::Empty(Shape{3});
  moving_mean.CopyFrom(net.mmean);
  moving_var.CopyFrom(net.mvar);
  std::vector<Tensor> orig{Tensor::Empty(xs), Tensor::Empty(Shape{3}), Tensor::Empty(Shape{3})};
  std::vector<OpReq> req(3, OpReq::kWrite);
  Tensor no_ws;
  std::vector<Tensor> in{net.x, net.gamma, net.beta, moving_mean, moving_var};
  n.op->cpu_kernel()(KernelCtx{n, in, orig, req, no_ws, /*is_train=*/true, /*is_recompute=*/false, 1, 2});
  const std::vector<float> saved_mean(orig[1].f(), orig[1].f() + 3), saved_var(orig[2].f(), orig[2].f() + 3);
  for (int ch = 0; ch < 3; ++ch) EXPECT_NEAR(saved_mean[ch], batch[1][ch], 1e-6) << "channel " << ch;
  std::vector<Tensor> mirror_in{net.x, net.gamma, net.beta, orig[1], orig[2]};
  std::vector<Tensor> out{Tensor::Empty(xs), Tensor::Empty(Shape{3}), Tensor::Empty(Shape{3})};
  n.op->cpu_kernel()(KernelCtx{n, mirror_in, out, req, no_ws, /*is_train=*/true, /*is_recompute=*/true, 1, 2});
  EXPECT_EQ(std::vector<float>(orig[1].f(), orig[1].f() + 3), saved_mean) << "the saved statistics are not updated";
  EXPECT_EQ(std::vector<float>(orig[2].f(), orig[2].f() + 3), saved_var);
  EXPECT_EQ(std::vector<float>(out[1].f(), out[1].f() + 3), saved_mean);
  EXPECT_EQ(std::vector<float>(out[2].f(), out[2].f() + 3), saved_var);
  for (int64_t i = 0; i < out[0].size(); ++i) ASSERT_EQ(out[0].f()[i], orig[0].f()[i]) << i;
}

TEST(OpsNn, BatchNormInferenceUsesMovingStats) {
  const Shape xs{2, 3, 2, 2};
  BnNet net(xs);
  for (int ch = 0; ch < 3; ++ch) {
    net.mmean.f()[ch] = 0.5f * ch;
    net.mvar.f()[ch] = 1.f + ch;
  }
  Values in{std::vector<float>(net.x.f(), net.x.f() + net.x.size()), std::vector<float>(3, 1.f),
            std::vector<float>(3, 0.f), std::vector<float>(net.mmean.f(), net.mmean.f() + 3),
            std::vector<float>(net.mvar.f(), net.mvar.f() + 3)};
  Values want = BatchNormReference(in, xs, true, /*global=*/true);
  net.exec->Run(/*is_train=*/false, 0, 1);
  const Tensor& y = net.exec->output(0);
  for (int64_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y.f()[i], want[0][i], 1e-5) << i;
  EXPECT_EQ(std::vector<float>(net.mmean.f(), net.mmean.f() + 3), in[3]);  // untouched
  EXPECT_EQ(std::vector<float>(net.mvar.f(), net.mvar.f() + 3), in[4]);
}

// -------------------------------------------------------------------- pooling

struct Pool {
  int64_t n, c, h, w, kh, kw, sh = 1, sw = 1, ph = 0, pw = 0;
  bool max = true, include_pad = true, full = false, global = false;
  int64_t Out(int64_t in, int64_t k, int64_t s, int64_t p) const {
    const int64_t room = in + 2 * p - k;
    return (full ? (room + s - 1) / s : room / s) + 1;
  }
  AttrMap Attrs() const {
    AttrMap a{{"pool_type", max ? "max" : "avg"},
              {"count_include_pad", include_pad ? "true" : "false"},
              {"pooling_convention", full ? "full" : "valid"}};
    if (global) {
      a["global_pool"] = "true";
      return a;
    }
    a["kernel"] = Fmt("(", kh, ",", kw, ")");
    a["stride"] = Fmt("(", sh, ",", sw, ")");
    a["pad"] = Fmt("(", ph, ",", pw, ")");
    return a;
  }
  Values Reference(const Values& in) const {
    const int64_t KH = global ? h : kh, KW = global ? w : kw, SH = global ? 1 : sh, SW = global ? 1 : sw;
    const int64_t PH = global ? 0 : ph, PW = global ? 0 : pw;
    const int64_t oh = Out(h, KH, SH, PH), ow = Out(w, KW, SW, PW);
    std::vector<float> y(n * c * oh * ow);
    for (int64_t b = 0; b < n * c; ++b)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double best = -1e30, sum = 0;
          int64_t inside = 0;
          for (int64_t p = 0; p < KH; ++p)
            for (int64_t q = 0; q < KW; ++q) {
              int64_t yy = i * SH - PH + p, xx = j * SW - PW + q;
              if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
              double v = in[0][(b * h + yy) * w + xx];
              best = std::max(best, v);
              sum += v;
              ++inside;
            }
          y[(b * oh + i) * ow + j] = static_cast<float>(max ? best : sum / (include_pad ? KH * KW : inside));
        }
    return {y};
  }
};

OpReport CheckPool(const Pool& k) {
  OpCase c;
  c.op = "pooling";
  c.attrs = k.Attrs();
  c.in_shapes = {Shape{k.n, k.c, k.h, k.w}};
  c.differentiable = {true};
  // Distinct values, so max pooling has no ties (a tie is a kink).
  c.fill = [](int, std::vector<float>* v) {
    for (size_t i = 0; i < v->size(); ++i) (*v)[i] = static_cast<float>((i * 37) % 101) / 50.f - 1.f;
  };
  c.reference = [k](const Values& in) { return k.Reference(in); };
  return CheckOp(c);
}

TEST(OpsNn, MaxPool2x2Stride2) { ExpectCovered(CheckPool(Pool{2, 3, 6, 6, 2, 2, 2, 2})); }

TEST(OpsNn, MaxPoolPadOverlapFull) {
  Pool k{2, 2, 7, 6, 3, 3, 2, 2, 1, 1};
  k.full = true;
  ExpectCovered(CheckPool(k));
}

TEST(OpsNn, AvgPoolCountIncludePad) {
  Pool k{2, 3, 5, 5, 3, 3, 2, 2, 1, 1};
  k.max = false;
  ExpectCovered(CheckPool(k));
}

TEST(OpsNn, AvgPoolCountExcludePad) {
  Pool k{2, 3, 5, 5, 3, 3, 2, 2, 1, 1};
  k.max = false;
  k.include_pad = false;
  ExpectCovered(CheckPool(k));
}

TEST(OpsNn, GlobalPoolMaxAndAvg) {
  Pool k{2, 3, 4, 5, 0, 0};
  k.global = true;
  ExpectCovered(CheckPool(k));
  k.max = false;
  ExpectCovered(CheckPool(k));
}

TEST(OpsNn, AvgPoolFullWithIncludePadIsAnError) {
  Graph g;
  Entry x{g.AddVariable("x", VarKind::kInput), 0};
  EXPECT_THROW(
      g.AddOp("pooling", "p", {{"kernel", "(2,2)"}, {"pool_type", "avg"}, {"pooling_convention", "full"}}, {x}), Error);
}

// ------------------------------------------------------------ activations

OpCase Elementwise(const std::string& op, AttrMap attrs, std::function<double(double)> f) {
  OpCase c;
  c.op = op;
  c.attrs = std::move(attrs);
  c.in_shapes = {Shape{3, 5, 7}};  // 105 elements
  c.differentiable = {true};
  c.fill = [](int, std::vector<float>* v) {
    for (size_t i = 0; i < v->size(); ++i) (*v)[i] = 3.f * std::sin(0.9f * i) + 0.01f;
  };
  c.reference = [f](const Values& in) {
    Values out{in[0]};
    for (float& v : out[0]) v = static_cast<float>(f(v));
    return out;
  };
  c.fd_eps = 1e-3;
  c.fd_tol = 2e-3;
  return c;
}

void CheckElementwise(const OpCase& c) {
  OpReport r = CheckOp(c);
  ExpectCovered(r);
  EXPECT_GE(r.inplace_checked, 2) << c.op << ": forward and backward both run in place";
}

TEST(OpsNn, ActivationRelu) {
  CheckElementwise(Elementwise("activation", {{"act_type", "relu"}}, [](double x) { return std::max(x, 0.0); }));
}
TEST(OpsNn, ActivationSigmoid) {
  CheckElementwise(
      Elementwise("activation", {{"act_type", "sigmoid"}}, [](double x) { return 1 / (1 + std::exp(-x)); }));
}
TEST(OpsNn, ActivationTanh) {
  CheckElementwise(Elementwise("activation", {{"act_type", "tanh"}}, [](double x) { return std::tanh(x); }));
}
TEST(OpsNn, ActivationSoftRelu) {
  CheckElementwise(
      Elementwise("activation", {{"act_type", "softrelu"}}, [](double x) { return std::log1p(std::exp(x)); }));
}
TEST(OpsNn, ActivationNeedsActType) {
  Graph g;
  Entry x{g.AddVariable("x", VarKind::kInput), 0};
  EXPECT_THROW(g.AddOp("activation", "a", {}, {x}), Error);
  EXPECT_THROW(g.AddOp("activation", "a", {{"act_type", "gelu"}}, {x}), Error);
}
TEST(OpsNn, LeakyRelu) {
  CheckElementwise(Elementwise("leaky_relu", {{"slope", "0.1"}}, [](double x) { return x > 0 ? x : 0.1 * x; }));
}
TEST(OpsNn, LeakyReluDefaultSlope) {
  CheckElementwise(Elementwise("leaky_relu", {}, [](double x) { return x > 0 ? x : 0.25 * x; }));
}
TEST(OpsNn, Elu) {
  CheckElementwise(Elementwise("leaky_relu", {{"act_type", "elu"}, {"slope", "0.7"}},
                               [](double x) { return x > 0 ? x : 0.7 * (std::exp(x) - 1); }));
}
TEST(OpsNn, LeakyReluRejectsNegativeSlope) {
  Graph g;
  Entry x{g.AddVariable("x", VarKind::kInput), 0};
  EXPECT_THROW(g.AddOp("leaky_relu", "a", {{"slope", "-0.1"}}, {x}), Error);
}

// A large tensor: the kAdd path runs in chunks through the workspace.
TEST(OpsNn, ActivationSigmoidChunkedAdd) {
  OpCase c = Elementwise("activation", {{"act_type", "sigmoid"}}, [](double x) { return 1 / (1 + std::exp(-x)); });
  c.in_shapes = {Shape{5, 7001}};  // 35005 elements: two full chunks and a partial one
  CheckElementwise(c);
}

// ------------------------------------------------------------------- softmax

// softmax (or log_softmax) of x viewed as (outer, len, inner) along len.
Values SoftmaxReference(const Values& in, int64_t outer, int64_t len, int64_t inner, bool log) {
  Values out{in[0]};
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double mx = -1e30, z = 0;
      for (int64_t k = 0; k < len; ++k) mx = std::max<double>(mx, in[0][(o * len + k) * inner + i]);
      for (int64_t k = 0; k < len; ++k) z += std::exp(in[0][(o * len + k) * inner + i] - mx);
      for (int64_t k = 0; k < len; ++k) {
        const int64_t e = (o * len + k) * inner + i;
        out[0][e] = static_cast<float>(log ? in[0][e] - mx - std::log(z) : std::exp(in[0][e] - mx) / z);
      }
    }
  return out;
}

OpCase SoftmaxCase(bool log, const Shape& x, int64_t axis, int64_t outer, int64_t len, int64_t inner) {
  OpCase c;
  c.op = log ? "log_softmax" : "softmax";
  if (axis != -1) c.attrs = {{"axis", Fmt(axis)}};
  c.in_shapes = {x};
  c.differentiable = {true};
  c.reference = [=](const Values& in) { return SoftmaxReference(in, outer, len, inner, log); };
  c.fd_eps = 1e-3;
  c.fd_tol = 2e-3;
  return c;
}

TEST(OpsNn, SoftmaxLastAxis) { CheckElementwise(SoftmaxCase(false, Shape{4, 6}, -1, 4, 6, 1)); }
TEST(OpsNn, SoftmaxMiddleAxis) { CheckElementwise(SoftmaxCase(false, Shape{2, 5, 3}, 1, 2, 5, 3)); }
TEST(OpsNn, LogSoftmaxLastAxis) { CheckElementwise(SoftmaxCase(true, Shape{3, 7}, -1, 3, 7, 1)); }
TEST(OpsNn, LogSoftmaxAxis0) { CheckElementwise(SoftmaxCase(true, Shape{4, 3, 2}, 0, 1, 4, 6)); }

// -------------------------------------------------------------- deconvolution

struct Deconv {
  int64_t n, c, h, w, o, kh, kw, sh = 1, sw = 1, ph = 0, pw = 0, ah = 0, aw = 0, g = 1;
  bool bias = true;
  int64_t oh() const { return sh * (h - 1) + kh - 2 * ph + ah; }
  int64_t ow() const { return sw * (w - 1) + kw - 2 * pw + aw; }
  // y[n, o, i sh - ph + p, j sw - pw + q] += W[ci, o % og, p, q] x[n, ci, i, j] for ci in o's group
  Values Reference(const Values& in) const {
    const int64_t cg = c / g, og = o / g;
    std::vector<double> y(n * o * oh() * ow(), 0.0);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ci = 0; ci < c; ++ci)
        for (int64_t oo = 0; oo < og; ++oo)
          for (int64_t i = 0; i < h; ++i)
            for (int64_t j = 0; j < w; ++j)
              for (int64_t p = 0; p < kh; ++p)
                for (int64_t q = 0; q < kw; ++q) {
                  const int64_t yy = i * sh - ph + p, xx = j * sw - pw + q, oc = ci / cg * og + oo;
                  if (yy < 0 || yy >= oh() || xx < 0 || xx >= ow()) continue;
                  y[((b * o + oc) * oh() + yy) * ow() + xx] +=
                      static_cast<double>(in[1][((ci * og + oo) * kh + p) * kw + q]) *
                      in[0][((b * c + ci) * h + i) * w + j];
                }
    std::vector<float> out(y.size());
    for (size_t e = 0; e < y.size(); ++e) out[e] = static_cast<float>(y[e] + (bias ? in[2][e / (oh() * ow()) % o] : 0));
    return {out};
  }
};

OpReport CheckDeconv(const Deconv& k, AttrMap extra = {}) {
  OpCase c;
  c.op = "deconvolution";
  c.attrs = {{"kernel", Fmt("(", k.kh, ",", k.kw, ")")},
             {"stride", Fmt("(", k.sh, ",", k.sw, ")")},
             {"pad", Fmt("(", k.ph, ",", k.pw, ")")},
             {"adj", Fmt("(", k.ah, ",", k.aw, ")")},
             {"num_filter", Fmt(k.o)},
             {"num_group", Fmt(k.g)},
             {"no_bias", k.bias ? "false" : "true"}};
  for (const auto& [key, v] : extra) c.attrs[key] = v;
  c.in_shapes = {Shape{k.n, k.c, k.h, k.w}, Shape{k.c, k.o / k.g, k.kh, k.kw}};
  if (k.bias) c.in_shapes.push_back(Shape{k.o});
  c.differentiable.assign(c.in_shapes.size(), true);
  c.reference = [k](const Values& in) { return k.Reference(in); };
  return CheckOp(c);
}

TEST(OpsNn, DeconvolutionStride2) {
  Deconv k{2, 3, 4, 4, 5, 4, 4, 2, 2, 1, 1};
  ExpectCovered(CheckDeconv(k));
}

TEST(OpsNn, DeconvolutionAdjGroupsNoBias) {
  Deconv k{2, 4, 3, 4, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2};
  k.bias = false;
  ExpectCovered(CheckDeconv(k));
}

TEST(OpsNn, DeconvolutionTargetShape) {
  // target (8, 8) from 4x4 with kernel 3 stride 2: total = 2*3 + 3 - 8 = 1, so adj 1, pad 1.
  Deconv k{1, 2, 4, 4, 3, 3, 3, 2, 2, 1, 1, 1, 1};
  ExpectCovered(CheckDeconv(k, {{"pad", "(0,0)"}, {"adj", "(0,0)"}, {"target_shape", "(8,8)"}}));
}

}  // namespace
}  // namespace frugal::test
