// batch_norm: per-channel normalisation over every axis but 1 (MXNet's
// BatchNorm with its defaults: eps 1e-3, momentum 0.9, fix_gamma true).
//   x, y: (N, C, ...)   gamma, beta, moving_mean, moving_var, mean, var: (C,)
//   training:   mean = E[x], var = E[(x - mean)^2] over (N, ...) per channel
//               moving_mean = momentum moving_mean + (1 - momentum) mean   (once per step,
//               moving_var  = momentum moving_var  + (1 - momentum) var     not when recomputing)
//   inference, or use_global_stats: mean, var = moving_mean, moving_var
//   recomputed (a mirror): mean, var = the original's saved statistics, which the
//   mirror reads in place of moving_mean and moving_var (MirrorReads): one pass
//   over x, and the same bits as the original
//   y = gamma (x - mean) / sqrt(var + eps) + beta      gamma taken as 1 when fix_gamma
//   act_type relu: y = max(y, 0) in the same pass (batch_norm + relu fused;
//   FuseBnRelu in src/passes/fuse.cc makes these from the config's pairs)
//   outputs: y, and hidden mean and var (what the statistics were) for the backward pass
// grad (batch statistics), with xhat = (x - mean) inv, inv = 1 / sqrt(var + eps), M = N * H * W:
//   dx = gamma inv (dy - sum(dy) / M - xhat sum(dy xhat) / M)
//   dgamma = sum(dy xhat) (0 when fix_gamma)        dbeta = sum(dy)
// grad (use_global_stats: the statistics are constants):  dx = gamma inv dy
//   reads dy, x, gamma, beta and the saved mean and var. It reads x rather than
//   recovering xhat = (y - beta) / gamma from y: gamma may be (near) zero,
//   and in the usual conv -> batch_norm -> relu chain relu overwrites y in
//   place, so reading y would keep an extra tensor alive instead of saving one.
//   The moving statistics get no gradient. With relu, dy is first masked
//   where y was 0: the mask is recomputed from x, gamma, beta and the saved
//   statistics exactly as the forward computed it, so the backward needs
//   neither y nor a stored mask.
// dtypes: x, y, dy and dx are float32 or bfloat16 (one dtype; a mixed-
//   precision graph's activations); gamma, beta, the moving and saved
//   statistics and every other gradient are float32 always. The statistics
//   are computed from the bfloat16 values exactly as from float32 ones (in
//   float and double), and only y and dx are rounded, when stored.
// Kernels: vec.h's loops (per ISA), one channel per task. oneDNN's batch normalization
// on plain NCHW (ncsp_bnorm) measured 3x slower forward and no faster
// backward here (docs/benchmarks.md), and its blocked one needs reorders.
#include <cmath>
#include <vector>

#include "backend/cpu/vec.h"
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
struct ChannelDims {
  int64_t n, c, s;
  explicit ChannelDims(const Shape& x) : n(x[0]), c(x[1]), s(x.Prod(2, x.ndim())) {}
  int64_t count() const { return n * s; }
};

// Mean and (biased) variance of one channel: per sample in float (vec.h's
// fixed lanes), across samples in double; two passes. T is the element
// type of x (float or uint16_t, bfloat16 bits), as in the kernels below.
template <typename T>
void ChannelStats(const T* x, const ChannelDims& l, int64_t ch, double* mean, double* var) {
  const cpu::ActKernels<T>& v = cpu::Vec().act<T>();
  double sum = 0;
  for (int64_t i = 0; i < l.n; ++i) sum += v.sum(x + (i * l.c + ch) * l.s, l.s);
  const double m = sum / l.count();
  double sq = 0;
  for (int64_t i = 0; i < l.n; ++i) sq += v.sq_dev_sum(x + (i * l.c + ch) * l.s, static_cast<float>(m), l.s);
  *mean = m;
  *var = sq / l.count();
}

// y = a x + b for one channel, from the statistics as saved (floats), so
// that the backward pass recomputes the same a and b (and with act_type
// relu, the same mask) bit for bit.
struct ChannelAffine {
  double inv;
  float a, b;
  ChannelAffine(const BnParams& p, const float* gamma, const float* beta, int64_t ch, float mean, float var)
      : inv(1 / std::sqrt(static_cast<double>(var) + p.eps)),
        a(static_cast<float>((p.fix_gamma ? 1.0 : gamma[ch]) * inv)),
        b(static_cast<float>(beta[ch] - static_cast<double>(mean) * a)) {}
};

// inputs: x, gamma, beta, moving_mean, moving_var (the last two updated)   outputs: y, mean, var
template <typename T>
void BnForwardT(const KernelCtx& c) {
  const auto& p = c.params<BnParams>();
  const ChannelDims l(c.in[0].shape());
  const T* x = Elems<T>(c.in[0]);
  const float *gamma = c.in[1].f(), *beta = c.in[2].f();
  float *moving_mean = c.in[3].f(), *moving_var = c.in[4].f();
  // Batch statistics are computed, and the moving ones updated, once per
  // step: a mirror's in[3] and in[4] are the saved statistics.
  const bool batch_stats = c.is_train && !p.use_global_stats && !c.is_recompute;
  T* y = Out<T>(c, 0);
  const bool add = c.req[0] == OpReq::kAdd;
  const cpu::ActKernels<T>& v = cpu::Vec().act<T>();
#pragma omp parallel for schedule(dynamic, 1) if (l.c > 1 && l.n * l.c * l.s > kParallelGrain)
  for (int64_t ch = 0; ch < l.c; ++ch) {
    double mean = moving_mean[ch], var = moving_var[ch];
    if (batch_stats) ChannelStats(x, l, ch, &mean, &var);
    if (batch_stats) {
      moving_mean[ch] = static_cast<float>(p.momentum * moving_mean[ch] + (1 - p.momentum) * mean);
      moving_var[ch] = static_cast<float>(p.momentum * moving_var[ch] + (1 - p.momentum) * var);
    }
    const float mean_f = static_cast<float>(mean), var_f = static_cast<float>(var);
    if (c.req[1] != OpReq::kNull) Assign(c.out[1].f() + ch, c.req[1], mean_f);
    if (c.req[2] != OpReq::kNull) Assign(c.out[2].f() + ch, c.req[2], var_f);
    if (!y) continue;
    const ChannelAffine t(p, gamma, beta, ch, mean_f, var_f);
    for (int64_t i = 0; i < l.n; ++i) {
      const int64_t at = (i * l.c + ch) * l.s;
      v.affine(x + at, t.a, t.b, p.relu, y + at, l.s, add);  // x and y may alias
    }
  }
}

// inputs: dy, x, gamma, beta, mean, var   outputs: dx, dgamma, dbeta, dmoving_mean, dmoving_var
template <typename T>
void BnBackwardT(const KernelCtx& c) {
  const auto& p = c.params<BnParams>();
  const ChannelDims l(c.in[1].shape());
  const T *dy = Elems<T>(c.in[0]), *x = Elems<T>(c.in[1]);
  const float *gamma = c.in[2].f(), *beta = c.in[3].f();
  const float *saved_mean = c.in[4].f(), *saved_var = c.in[5].f();
  T* dx = Out<T>(c, 0);
  const bool add = c.req[0] == OpReq::kAdd;
  const cpu::ActKernels<T>& v = cpu::Vec().act<T>();
#pragma omp parallel for schedule(dynamic, 1) if (l.c > 1 && l.n * l.c * l.s > kParallelGrain)
  for (int64_t ch = 0; ch < l.c; ++ch) {
    const float m = saved_mean[ch];
    const ChannelAffine t(p, gamma, beta, ch, m, saved_var[ch]);
    double sum_g = 0, sum_gx = 0;  // sum(g), sum(g (x - mean)); g = dy through the ReLU, if any
    for (int64_t i = 0; i < l.n; ++i) {
      const int64_t at = (i * l.c + ch) * l.s;
      float s1, s2;
      v.affine_grad_sums(dy + at, x + at, m, p.relu, t.a, t.b, l.s, &s1, &s2);
      sum_g += s1;
      sum_gx += s2;
    }
    const double sum_g_xhat = sum_gx * t.inv;
    if (c.req[1] != OpReq::kNull) {
      Assign(c.out[1].f() + ch, c.req[1], p.fix_gamma ? 0.f : static_cast<float>(sum_g_xhat));
    }
    if (c.req[2] != OpReq::kNull) Assign(c.out[2].f() + ch, c.req[2], static_cast<float>(sum_g));
    if (!dx) continue;
    // dx = k (g - mean_g - (x - mean) q) with k = gamma inv, q = inv sum(g xhat) / M.
    const double gm = p.fix_gamma ? 1.0 : gamma[ch];
    const float k = static_cast<float>(gm * t.inv);
    const float mean_g = p.use_global_stats ? 0.f : static_cast<float>(sum_g / l.count());
    const float q = p.use_global_stats ? 0.f : static_cast<float>(sum_g_xhat * t.inv / l.count());
    for (int64_t i = 0; i < l.n; ++i) {
      const int64_t at = (i * l.c + ch) * l.s;  // dx may alias dy: each element is read before it is written
      v.affine_grad(dy + at, x + at, m, p.relu, t.a, t.b, k, mean_g, q, dx + at, l.s, add);
    }
  }
  for (int k = 3; k < 5; ++k) {  // the moving statistics get no gradient
    if (c.req[k] != OpReq::kNull) ForEach(l.c, c.out[k].f(), c.req[k], [](int64_t) { return 0.f; });
  }
}

// float32 unless x is bfloat16 (Elems fails loudly on other dtypes).
void BnForward(const KernelCtx& c) {
  c.in[0].dtype() == DType::kBFloat16 ? BnForwardT<uint16_t>(c) : BnForwardT<float>(c);
}
void BnBackward(const KernelCtx& c) {
  c.in[1].dtype() == DType::kBFloat16 ? BnBackwardT<uint16_t>(c) : BnBackwardT<float>(c);
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
        const std::string act = a.Str("act_type", "");
        FRUGAL_REQUIRE(act.empty() || act == "relu", a.where(), ": act_type must be \"relu\" or left out, got \"",
                       act, "\"");
        p.relu = act == "relu";
        FRUGAL_REQUIRE(p.eps > 0, a.where(), ": eps must be positive, got ", p.eps);
        FRUGAL_REQUIRE(p.momentum >= 0 && p.momentum <= 1, a.where(), ": momentum must be in [0, 1], got ",
                       p.momentum);
        return std::any(p);
      })
      .InferShape(BnInferShape)
      .Backward({OutGrad(0), Input(0), Input(1), Input(2), Output(1), Output(2)}, "_backward_batch_norm")
      .Mutates({3, 4})
      .MirrorReads({{3, 1}, {4, 2}})
      .Inplace({{0, 0}})
      .Recompute(Cost::kCheap)
      .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
        return 8.0 * in[0].Size();  // statistics (3 per element) and normalise-scale-shift (5; the ReLU too)
      })
      .Bf16()
      .CpuKernel(BnForward);
  r->Add("_backward_batch_norm")
      .Doc("Gradient of batch_norm: dx, dgamma (0 with fix_gamma), dbeta; none for the moving statistics.")
      .Inputs({{"dy"}, {"x"}, {"gamma"}, {"beta"}, {"mean"}, {"var"}})
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
