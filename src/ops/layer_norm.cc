// layer_norm: normalisation over the trailing axes [axis, ndim) of each row
// (Ba et al. 2016; ONNX's LayerNormalization, PyTorch's nn.LayerNorm).
//   x, y: (d0, ..., d_{axis-1}, d_axis, ..., d_{n-1}) = R rows of D elements
//   gamma, beta: (d_axis, ..., d_{n-1})   (beta left out with no_bias)
//   mean, inv_std: (d0, ..., d_{axis-1}, 1, ..., 1), hidden: saved for backward
//   per row: mean = E[x], var = E[(x - mean)^2], inv_std = 1 / sqrt(var + eps)
//   y = gamma (x - mean) inv_std + beta
// grad, with xhat = (x - mean) inv_std and g = gamma dy:
//   dx = inv_std (g - mean(g) - xhat mean(g xhat))    (means over the row)
//   dgamma = sum over rows of dy xhat    dbeta = sum over rows of dy
//   reads dy, x, gamma and the saved mean and inv_std, not y: y may be
//   overwritten in place, and a recomputed y is never needed.
// No state, no randomness: a recomputation gives the same bits. Statistics
// per row in double; the parameter gradients summed over rows in a fixed
// order of row blocks, so the bits do not depend on the thread count.
// Kernels: float32, one row per task (CUDA: one block per row, the
// parameter gradients one thread per column over the rows in order).
#include <cmath>
#include <vector>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

void LayerNormInferShape(ShapeCtx& c) {
  const auto& p = c.params<LayerNormParams>();
  const Shape& x = c.in[0];
  if (!x.known() || x.ndim() < 1) c.Fail(Fmt("x has shape ", x, "; expected at least one dimension"));
  const int64_t axis = p.Axis(x);
  if (axis < 0 || axis >= x.ndim()) {
    c.Fail(Fmt("axis ", p.axis, " is outside x's ", x.ndim(), " dimensions ", x, " (use -", x.ndim(), " to ",
               x.ndim() - 1, ")"));
  }
  std::vector<int64_t> normalized, stats;
  for (int k = 0; k < x.ndim(); ++k) {
    if (k >= axis) normalized.push_back(x[k]);
    stats.push_back(k < axis ? x[k] : 1);
  }
  static const char* names[] = {"", "gamma", "beta"};
  for (int k = 1; k < static_cast<int>(c.in.size()); ++k) {
    if (!c.in[k].known()) c.in[k] = Shape(normalized);
    if (c.in[k] != Shape(normalized)) {
      c.Fail(Fmt(names[k], " has shape ", c.in[k], " but x ", x, " normalises over ", Shape(normalized), " (axis ",
                 p.axis, ")"));
    }
  }
  c.out[0] = x;
  c.out[1] = c.out[2] = Shape(stats);
}

// inputs: x, gamma[, beta]   outputs: y, mean, inv_std
void LayerNormForward(const KernelCtx& c) {
  const auto& p = c.params<LayerNormParams>();
  const LayerNormRows l(c.in[0].shape(), p.Axis(c.in[0].shape()));
  const float *x = c.in[0].f(), *gamma = c.in[1].f(), *beta = p.no_bias ? nullptr : c.in[2].f();
  float* y = Out(c, 0);
  const bool add = c.req[0] == OpReq::kAdd;
#pragma omp parallel for schedule(static) if (l.r > 1 && l.r * l.d > kParallelGrain)
  for (int64_t i = 0; i < l.r; ++i) {
    const float* xi = x + i * l.d;
    double sum = 0;
    for (int64_t j = 0; j < l.d; ++j) sum += xi[j];
    const double mean = sum / l.d;
    double sq = 0;
    for (int64_t j = 0; j < l.d; ++j) sq += (xi[j] - mean) * (xi[j] - mean);
    const float mean_f = static_cast<float>(mean);
    const float inv = static_cast<float>(1 / std::sqrt(sq / l.d + p.eps));
    if (c.req[1] != OpReq::kNull) Assign(c.out[1].f() + i, c.req[1], mean_f);
    if (c.req[2] != OpReq::kNull) Assign(c.out[2].f() + i, c.req[2], inv);
    if (!y) continue;
    float* yi = y + i * l.d;  // may be xi: each element read before it is written
    for (int64_t j = 0; j < l.d; ++j) {
      const float v = gamma[j] * ((xi[j] - mean_f) * inv) + (beta ? beta[j] : 0.f);
      yi[j] = add ? yi[j] + v : v;
    }
  }
}

// Rows per block of the parameter gradients' sums: each block sums its
// rows in order, the blocks are added in order.
constexpr int64_t kRowBlock = 64;

// inputs: dy, x, gamma, mean, inv_std   outputs: dx, dgamma[, dbeta]
void LayerNormBackward(const KernelCtx& c) {
  const auto& p = c.params<LayerNormParams>();
  const LayerNormRows l(c.in[1].shape(), p.Axis(c.in[1].shape()));
  const float *dy = c.in[0].f(), *x = c.in[1].f(), *gamma = c.in[2].f();
  const float *mean = c.in[3].f(), *inv = c.in[4].f();
  float* dx = Out(c, 0);
  const bool add = c.req[0] == OpReq::kAdd;
  const bool want_dgamma = c.req[1] != OpReq::kNull, want_dbeta = !p.no_bias && c.req[2] != OpReq::kNull;
  const int64_t blocks = (l.r + kRowBlock - 1) / kRowBlock;
  std::vector<double> part_gamma(want_dgamma ? blocks * l.d : 0), part_beta(want_dbeta ? blocks * l.d : 0);
#pragma omp parallel for schedule(static) if (blocks > 1 && l.r * l.d > kParallelGrain)
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t i = b * kRowBlock; i < std::min(l.r, (b + 1) * kRowBlock); ++i) {
      const float *dyi = dy + i * l.d, *xi = x + i * l.d;
      const float m = mean[i], s = inv[i];
      for (int64_t j = 0; j < l.d; ++j) {
        if (want_dgamma) part_gamma[b * l.d + j] += static_cast<double>(dyi[j]) * ((xi[j] - m) * s);
        if (want_dbeta) part_beta[b * l.d + j] += dyi[j];
      }
      if (!dx) continue;
      double sum_g = 0, sum_gx = 0;  // g = gamma dy
      for (int64_t j = 0; j < l.d; ++j) {
        const double g = static_cast<double>(gamma[j]) * dyi[j];
        sum_g += g;
        sum_gx += g * ((xi[j] - m) * s);
      }
      const float mean_g = static_cast<float>(sum_g / l.d), mean_gx = static_cast<float>(sum_gx / l.d);
      float* dxi = dx + i * l.d;  // may be dyi: each element read before it is written
      for (int64_t j = 0; j < l.d; ++j) {
        const float v = s * (gamma[j] * dyi[j] - mean_g - (xi[j] - m) * s * mean_gx);
        dxi[j] = add ? dxi[j] + v : v;
      }
    }
  }
  auto reduce = [&](const std::vector<double>& part, int k) {
    for (int64_t j = 0; j < l.d; ++j) {
      double s = 0;
      for (int64_t b = 0; b < blocks; ++b) s += part[b * l.d + j];
      Assign(c.out[k].f() + j, c.req[k], static_cast<float>(s));
    }
  };
  if (want_dgamma) reduce(part_gamma, 1);
  if (want_dbeta) reduce(part_beta, 2);
}

int NumInputs(const std::any& p) { return std::any_cast<const LayerNormParams&>(p).no_bias ? 2 : 3; }

}  // namespace

LayerNormParams LayerNormParams::Parse(AttrReader& a) {
  LayerNormParams p;
  p.axis = a.Int("axis", -1);
  p.eps = a.Float("eps", 1e-5);
  p.no_bias = a.Bool("no_bias", false);
  FRUGAL_REQUIRE(p.eps > 0 && std::isfinite(p.eps), a.where(), ": eps must be a positive number, got ", p.eps);
  return p;
}

void Register_layer_norm(OpRegistry* r) {
  OpDef& fwd = r->Add("layer_norm")
                   .Doc("Layer normalisation over the axes from axis on: axis (default -1), eps (1e-5), no_bias.")
                   .Inputs({{"x"}, {"gamma", VarKind::kParam, "one"}, {"beta", VarKind::kParam, "zero"}})
                   .Outputs({"y", "mean", "inv_std"})
                   .VisibleOutputs(1)
                   .Params<LayerNormParams>()
                   .NumInputsFn(NumInputs)
                   .InferShape(LayerNormInferShape)
                   .Inplace({{0, 0}})
                   .Recompute(Cost::kCheap)
                   .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
                     return 8.0 * in[0].Size();  // statistics (3 per element), normalise, scale and shift (5)
                   })
                   .CpuKernel(LayerNormForward);
  AddBackward(r, fwd, {OutGrad(0), Input(0), Input(1), Output(1), Output(2)}, "dx, dgamma, dbeta.")
      .Inplace({{0, 0}})
      .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
        return 12.0 * in[0].Size();  // two row sums, dx, and the parameter gradients
      })
      .CpuKernel(LayerNormBackward);
}

}  // namespace frugal
