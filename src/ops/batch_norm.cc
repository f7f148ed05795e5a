// batch_norm: per-channel normalisation over every axis but 1 (MXNet's
// BatchNorm with its defaults: eps 1e-3, momentum 0.9, fix_gamma true).
//   x, y: (N, C, ...)   gamma, beta, moving_mean, moving_var, mean, var: (C,)
//   training:   mean = E[x], var = E[(x - mean)^2] over (N, ...) per channel
//               moving_mean = momentum moving_mean + (1 - momentum) mean   (once per step,
//               moving_var  = momentum moving_var  + (1 - momentum) var     not when recomputing)
//   inference, or use_global_stats: mean, var = moving_mean, moving_var
//   y = gamma (x - mean) / sqrt(var + eps) + beta      gamma taken as 1 when fix_gamma
//   outputs: y, and hidden mean and var (what the statistics were) for the backward pass
// grad (batch statistics), with xhat = (x - mean) inv, inv = 1 / sqrt(var + eps), M = N * H * W:
//   dx = gamma inv (dy - sum(dy) / M - xhat sum(dy xhat) / M)
//   dgamma = sum(dy xhat) (0 when fix_gamma)        dbeta = sum(dy)
// grad (use_global_stats: the statistics are constants):  dx = gamma inv dy
//   reads dy, x, gamma and the saved mean and var. It reads x rather than
//   recovering xhat = (y - beta) / gamma from y: gamma may be (near) zero,
//   and in the usual conv -> batch_norm -> relu chain relu overwrites y in
//   place, so reading y would keep an extra tensor alive instead of saving one.
//   The moving statistics get no gradient.
// Kernels: plain loops, one channel per task. oneDNN's batch normalization
// on plain NCHW (ncsp_bnorm) measured 3x slower forward and no faster
// backward here (docs/benchmarks.md), and its blocked one needs reorders.
#include <cmath>
#include <vector>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

void BnInferShape(ShapeCtx& c) {
  const Shape& x = c.in[0];
  if (!x.known() || x.ndim() < 2) c.Fail(Fmt("x has shape ", x, "; expected (N, C, ...)"));
  const Shape ch{x[1]};
  static const char* names[] = {"", "gamma", "beta", "moving_mean", "moving_var"};
  for (int k = 1; k < 5; ++k) {
    if (!c.in[k].known()) c.in[k] = ch;
    if (c.in[k] != ch) c.Fail(Fmt(names[k], " has shape ", c.in[k], " but x ", x, " has ", x[1], " channels"));
  }
  c.out[0] = x;
  c.out[1] = c.out[2] = ch;
}

// x as (outer N, channels C, inner S): channel ch of sample i starts at (i C + ch) S.
struct Layout {
  int64_t n, c, s;
  explicit Layout(const Shape& x) : n(x[0]), c(x[1]), s(x.Prod(2, x.ndim())) {}
  int64_t count() const { return n * s; }
};

// Mean and (biased) variance of one channel, two passes in double.
void ChannelStats(const float* x, const Layout& l, int64_t ch, double* mean, double* var) {
  double sum = 0;
  for (int64_t i = 0; i < l.n; ++i) {
    const float* p = x + (i * l.c + ch) * l.s;
    float part = 0;
#pragma omp simd reduction(+ : part)
    for (int64_t j = 0; j < l.s; ++j) part += p[j];
    sum += part;
  }
  const double m = sum / l.count();
  double sq = 0;
  const float mf = static_cast<float>(m);
  for (int64_t i = 0; i < l.n; ++i) {
    const float* p = x + (i * l.c + ch) * l.s;
    float part = 0;
#pragma omp simd reduction(+ : part)
    for (int64_t j = 0; j < l.s; ++j) part += (p[j] - mf) * (p[j] - mf);
    sq += part;
  }
  *mean = m;
  *var = sq / l.count();
}

// inputs: x, gamma, beta, moving_mean, moving_var (the last two updated)   outputs: y, mean, var
void BnForward(const KernelCtx& c) {
  const auto& p = c.params<BnParams>();
  const Layout l(c.in[0].shape());
  const float* x = c.in[0].f();
  const float *gamma = c.in[1].f(), *beta = c.in[2].f();
  float *moving_mean = c.in[3].f(), *moving_var = c.in[4].f();
  const bool batch_stats = c.is_train && !p.use_global_stats;
  const bool update = batch_stats && !c.is_recompute;
  float* y = c.req[0] == OpReq::kNull ? nullptr : c.out[0].f();
#pragma omp parallel for schedule(dynamic, 1) if (l.c > 1 && l.n * l.c * l.s > 32768)
  for (int64_t ch = 0; ch < l.c; ++ch) {
    double mean = moving_mean[ch], var = moving_var[ch];
    if (batch_stats) ChannelStats(x, l, ch, &mean, &var);
    if (update) {
      moving_mean[ch] = static_cast<float>(p.momentum * moving_mean[ch] + (1 - p.momentum) * mean);
      moving_var[ch] = static_cast<float>(p.momentum * moving_var[ch] + (1 - p.momentum) * var);
    }
    if (c.req[1] != OpReq::kNull) Assign(c.out[1].f() + ch, c.req[1], static_cast<float>(mean));
    if (c.req[2] != OpReq::kNull) Assign(c.out[2].f() + ch, c.req[2], static_cast<float>(var));
    if (!y) continue;
    // y = a x + b with a = gamma inv, b = beta - mean a; x and y may alias.
    const double inv = 1 / std::sqrt(var + p.eps);
    const float a = static_cast<float>((p.fix_gamma ? 1.0 : gamma[ch]) * inv);
    const float b = static_cast<float>(beta[ch] - mean * a);
    for (int64_t i = 0; i < l.n; ++i) {
      const float* xp = x + (i * l.c + ch) * l.s;
      float* yp = y + (i * l.c + ch) * l.s;
      if (c.req[0] == OpReq::kAdd) {
#pragma omp simd
        for (int64_t j = 0; j < l.s; ++j) yp[j] += a * xp[j] + b;
      } else {
#pragma omp simd
        for (int64_t j = 0; j < l.s; ++j) yp[j] = a * xp[j] + b;
      }
    }
  }
}

// inputs: dy, x, gamma, mean, var   outputs: dx, dgamma, dbeta, dmoving_mean, dmoving_var
void BnBackward(const KernelCtx& c) {
  const auto& p = c.params<BnParams>();
  const Layout l(c.in[1].shape());
  const float *dy = c.in[0].f(), *x = c.in[1].f(), *gamma = c.in[2].f();
  const float *saved_mean = c.in[3].f(), *saved_var = c.in[4].f();
  float* dx = c.req[0] == OpReq::kNull ? nullptr : c.out[0].f();
#pragma omp parallel for schedule(dynamic, 1) if (l.c > 1 && l.n * l.c * l.s > 32768)
  for (int64_t ch = 0; ch < l.c; ++ch) {
    const float m = saved_mean[ch];
    const double inv = 1 / std::sqrt(static_cast<double>(saved_var[ch]) + p.eps);
    double sum_dy = 0, sum_dy_xm = 0;  // sum(dy), sum(dy (x - mean))
    for (int64_t i = 0; i < l.n; ++i) {
      const float* xp = x + (i * l.c + ch) * l.s;
      const float* dyp = dy + (i * l.c + ch) * l.s;
      float s1 = 0, s2 = 0;
#pragma omp simd reduction(+ : s1, s2)
      for (int64_t j = 0; j < l.s; ++j) {
        s1 += dyp[j];
        s2 += dyp[j] * (xp[j] - m);
      }
      sum_dy += s1;
      sum_dy_xm += s2;
    }
    const double sum_dy_xhat = sum_dy_xm * inv;
    if (c.req[1] != OpReq::kNull) Assign(c.out[1].f() + ch, c.req[1], p.fix_gamma ? 0.f : static_cast<float>(sum_dy_xhat));
    if (c.req[2] != OpReq::kNull) Assign(c.out[2].f() + ch, c.req[2], static_cast<float>(sum_dy));
    if (!dx) continue;
    // dx = k (dy - mean_dy - (x - mean) q) with k = gamma inv, q = inv sum(dy xhat) / M.
    const double g = p.fix_gamma ? 1.0 : gamma[ch];
    const float k = static_cast<float>(g * inv);
    const float mean_dy = p.use_global_stats ? 0.f : static_cast<float>(sum_dy / l.count());
    const float q = p.use_global_stats ? 0.f : static_cast<float>(sum_dy_xhat * inv / l.count());
    for (int64_t i = 0; i < l.n; ++i) {
      const float* xp = x + (i * l.c + ch) * l.s;
      const float* dyp = dy + (i * l.c + ch) * l.s;
      float* dxp = dx + (i * l.c + ch) * l.s;  // may alias dy: each element is read before it is written
      if (c.req[0] == OpReq::kAdd) {
#pragma omp simd
        for (int64_t j = 0; j < l.s; ++j) dxp[j] += k * (dyp[j] - mean_dy - (xp[j] - m) * q);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < l.s; ++j) dxp[j] = k * (dyp[j] - mean_dy - (xp[j] - m) * q);
      }
    }
  }
  for (int k = 3; k < 5; ++k) {  // the moving statistics get no gradient
    if (c.req[k] != OpReq::kNull) ForEach(l.c, c.out[k].f(), c.req[k], [](int64_t) { return 0.f; });
  }
}

}  // namespace

void Register_batch_norm(OpRegistry* r) {
  r->Add("batch_norm")
      .Doc("Batch normalisation over axis 1: eps, momentum, fix_gamma, use_global_stats (MXNet's defaults).")
      .Inputs({{"x"},
               {"gamma", VarKind::kParam, "one"},
               {"beta", VarKind::kParam, "zero"},
               {"moving_mean", VarKind::kAux, "zero"},
               {"moving_var", VarKind::kAux, "one"}})
      .Outputs({"y", "mean", "var"})
      .VisibleOutputs(1)
      .Params([](AttrReader& a) {
        BnParams p;
        p.eps = a.Float("eps", 1e-3);
        p.momentum = a.Float("momentum", 0.9);
        p.fix_gamma = a.Bool("fix_gamma", true);
        p.use_global_stats = a.Bool("use_global_stats", false);
        FRUGAL_REQUIRE(p.eps > 0, a.where(), ": eps must be positive, got ", p.eps);
        FRUGAL_REQUIRE(p.momentum >= 0 && p.momentum <= 1, a.where(), ": momentum must be in [0, 1], got ",
                       p.momentum);
        return std::any(p);
      })
      .InferShape(BnInferShape)
      .Backward({OutGrad(0), Input(0), Input(1), Output(1), Output(2)}, "_backward_batch_norm")
      .Mutates({3, 4})
      .Inplace({{0, 0}})
      .Recompute(Cost::kCheap)
      .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
        return 8.0 * in[0].Size();  // statistics (3 per element) and normalise-scale-shift (5)
      })
      .CpuKernel(BnForward);
  r->Add("_backward_batch_norm")
      .Doc("Gradient of batch_norm: dx, dgamma (0 with fix_gamma), dbeta; none for the moving statistics.")
      .Inputs({{"dy"}, {"x"}, {"gamma"}, {"mean"}, {"var"}})
      .Outputs({"dx", "dgamma", "dbeta", "dmoving_mean", "dmoving_var"})
      .InferShape(InferAsForwardInputs)
      .NoGradient()
      .Inplace({{0, 0}})
      .Recompute(Cost::kCheap)
      .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
        return 12.0 * in[0].Size();  // two reductions over dy and dy*xhat, then dx
      })
      .CpuKernel(BnBackward);
}

}  // namespace frugal
