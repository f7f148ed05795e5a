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
// Channels-last (Layout::kNhwc, 4-D only; x, y, dy and dx share one layout,
// ChannelsLast tied): x seen as N H W rows of C contiguous channels, and
// vec.h's column kernels vectorised across channels. Each channel's per-
// sample float sums keep the plain path's 16 lanes (row h W + w in lane
// (h W + w) % 16, as sum puts element h W + w), the samples are added in
// double in order, and y and dx are the same float expressions: the same
// bits as the plain layout, on every ISA and thread count. Parallel over
// (sample, channel block) for the sums, over row ranges for y and dx, in
// one OpenMP region per call with spinning barriers between the passes.
#include <algorithm>
#include <cmath>
#include <vector>
#include "backend/cpu/parallel.h"
#include "ops/cpu/vec.h"
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

// Channel ch's statistics of this run: the moving ones updated where they
// are the batch's, and both written to the hidden outputs mean and var.
void SaveChannelStats(const KernelCtx& c, const BnParams& p, bool batch_stats, int64_t ch, double mean, double var) {
  if (batch_stats) {
    float *moving_mean = c.in[3].f(), *moving_var = c.in[4].f();
    moving_mean[ch] = static_cast<float>(p.momentum * moving_mean[ch] + (1 - p.momentum) * mean);
    moving_var[ch] = static_cast<float>(p.momentum * moving_var[ch] + (1 - p.momentum) * var);
  }
  if (c.req[1] != OpReq::kNull) Assign(c.out[1].f() + ch, c.req[1], static_cast<float>(mean));
  if (c.req[2] != OpReq::kNull) Assign(c.out[2].f() + ch, c.req[2], static_cast<float>(var));
}

// Channels-last (kNhwc) x: N samples of S = H W rows of C channels. The
// column kernels (vec.h) give each channel the plain path's bits: per
// sample the float lanes sum and sq_dev_sum keep on that channel's S
// values, across samples in double in sample order; then the same float
// expressions for y and dx. The sums run in parallel over (sample, channel
// block) tasks, each writing its own slots of a per-sample buffer that is
// then reduced in a fixed order, the elementwise passes over row ranges:
// the bits do not depend on the number of threads.
struct RowDims {
  int64_t n, c, s;  // samples, channels, rows per sample
  explicit RowDims(const Shape& x) : n(x[0]), c(x[1]), s(x[2] * x[3]) {}
  int64_t count() const { return n * s; }
  int64_t size() const { return n * s * c; }
};

// f(i) for this thread's share of [0, n): thread t of nt takes a
// contiguous share, the shares in thread order, backwards where
// `backwards`. The passes over x alternate directions so that each begins
// with the rows the previous one left in its thread's cache (the shares of
// passes over samples and over rows roughly agree).
template <typename F>
void Share(int64_t n, int t, int nt, bool backwards, F f) {
  const int64_t begin = n * t / nt, end = n * (t + 1) / nt;
  if (backwards) {
    for (int64_t i = end - 1; i >= begin; --i) f(i);
  } else {
    for (int64_t i = begin; i < end; ++i) f(i);
  }
}

// Sum tasks: a sample's channels in blocks of this many (several per
// sample only where there are many channels).
constexpr int64_t kNhwcChannelBlock = 256;

// f(sample, first channel, channels) for this thread's share of the (sample, channel block) tasks.
template <typename F>
void SampleBlocks(const RowDims& l, int t, int nt, bool backwards, F f) {
  const int64_t blocks = (l.c + kNhwcChannelBlock - 1) / kNhwcChannelBlock;
  Share(l.n * blocks, t, nt, backwards, [&](int64_t i) {
    const int64_t c0 = i % blocks * kNhwcChannelBlock;
    f(i / blocks, c0, std::min(kNhwcChannelBlock, l.c - c0));
  });
}

// f(first row, rows) for this thread's share of the N S rows, in ranges of about 8192 elements.
template <typename F>
void RowRanges(const RowDims& l, int t, int nt, bool backwards, F f) {
  const int64_t rows = l.count();
  const int64_t per = std::max<int64_t>(1, 8192 / std::max<int64_t>(l.c, 1));
  const int64_t ranges = (rows + per - 1) / per;
  Share(ranges, t, nt, backwards, [&](int64_t r) { f(r * per, std::min(per, rows - r * per)); });
}

// sum over samples (in order, in double) of part[i C + ch], for every channel.
std::vector<double> SumSamples(const std::vector<float>& part, const RowDims& l) {
  std::vector<double> sum(l.c, 0.0);
  for (int64_t i = 0; i < l.n; ++i) {
    for (int64_t ch = 0; ch < l.c; ++ch) sum[ch] += part[i * l.c + ch];
  }
  return sum;
}

// BnForwardT (below) on channels-last x and y: each channel's arithmetic the same, in the same order.
template <typename T>
void BnForwardNhwc(const KernelCtx& c) {
  const auto& p = c.params<BnParams>();
  const RowDims l(c.in[0].shape());
  const T* x = Elems<T>(c.in[0]);
  const float *gamma = c.in[1].f(), *beta = c.in[2].f();
  const float *moving_mean = c.in[3].f(), *moving_var = c.in[4].f();
  const bool batch_stats = c.is_train && !p.use_global_stats && !c.is_recompute;
  T* y = Out<T>(c, 0);
  const bool add = c.req[0] == OpReq::kAdd;
  const cpu::ActKernels<T>& v = cpu::Vec().act<T>();
  // Per-sample partial sums, each (sample, channel) written by one thread;
  // every thread then reduces them itself, in the same order.
  std::vector<float> part(batch_stats ? l.n * l.c : 0), part_sq(part.size());
  const int64_t sample = l.s * l.c;
  InOneRegion(l.size() > kParallelGrain, [&](int t, int nt, auto sync) {
    std::vector<double> mean(moving_mean, moving_mean + l.c), var(moving_var, moving_var + l.c);
    if (batch_stats) {
      SampleBlocks(l, t, nt, /*backwards=*/false, [&](int64_t i, int64_t c0, int64_t cb) {
        v.col_sum(x + i * sample + c0, l.s, cb, l.c, part.data() + i * l.c + c0);
      });
      sync();
      mean = SumSamples(part, l);
      std::vector<float> mean_f(l.c);
      for (int64_t ch = 0; ch < l.c; ++ch) {
        mean[ch] /= l.count();
        mean_f[ch] = static_cast<float>(mean[ch]);
      }
      SampleBlocks(l, t, nt, /*backwards=*/true, [&](int64_t i, int64_t c0, int64_t cb) {
        v.col_sq_dev_sum(x + i * sample + c0, mean_f.data() + c0, l.s, cb, l.c, part_sq.data() + i * l.c + c0);
      });
      sync();
      var = SumSamples(part_sq, l);
      for (int64_t ch = 0; ch < l.c; ++ch) var[ch] /= l.count();
    }
    std::vector<float> a(l.c), b(l.c);
    for (int64_t ch = 0; ch < l.c; ++ch) {
      const float mean_f = static_cast<float>(mean[ch]), var_f = static_cast<float>(var[ch]);
      const ChannelAffine affine(p, gamma, beta, ch, mean_f, var_f);
      a[ch] = affine.a;
      b[ch] = affine.b;
      if (t == 0) SaveChannelStats(c, p, batch_stats, ch, mean[ch], var[ch]);  // one thread writes them
    }
    if (!y) return;
    RowRanges(l, t, nt, /*backwards=*/false, [&](int64_t r0, int64_t rows) {  // x and y may alias
      v.col_affine(x + r0 * l.c, a.data(), b.data(), p.relu, y + r0 * l.c, rows, l.c, l.c, add);
    });
  });
}

// inputs: x, gamma, beta, moving_mean, moving_var (the last two updated)   outputs: y, mean, var
template <typename T>
void BnForwardT(const KernelCtx& c) {
  const auto& p = c.params<BnParams>();
  const ChannelDims l(c.in[0].shape());
  const T* x = Elems<T>(c.in[0]);
  const float *gamma = c.in[1].f(), *beta = c.in[2].f();
  const float *moving_mean = c.in[3].f(), *moving_var = c.in[4].f();
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
    SaveChannelStats(c, p, batch_stats, ch, mean, var);
    const float mean_f = static_cast<float>(mean), var_f = static_cast<float>(var);
    if (!y) continue;
    const ChannelAffine t(p, gamma, beta, ch, mean_f, var_f);
    for (int64_t i = 0; i < l.n; ++i) {
      const int64_t at = (i * l.c + ch) * l.s;
      v.affine(x + at, t.a, t.b, p.relu, y + at, l.s, add);  // x and y may alias
    }
  }
}

// BnBackwardT (below) on channels-last dy, x and dx: each channel's arithmetic the same, in the same order.
template <typename T>
void BnBackwardNhwc(const KernelCtx& c) {
  const auto& p = c.params<BnParams>();
  const RowDims l(c.in[1].shape());
  const T *dy = Elems<T>(c.in[0]), *x = Elems<T>(c.in[1]);
  const float *gamma = c.in[2].f(), *beta = c.in[3].f();
  const float *saved_mean = c.in[4].f(), *saved_var = c.in[5].f();
  T* dx = Out<T>(c, 0);
  const bool add = c.req[0] == OpReq::kAdd;
  const cpu::ActKernels<T>& v = cpu::Vec().act<T>();
  std::vector<float> a(l.c), b(l.c);
  std::vector<double> inv(l.c);
  for (int64_t ch = 0; ch < l.c; ++ch) {
    const ChannelAffine t(p, gamma, beta, ch, saved_mean[ch], saved_var[ch]);
    a[ch] = t.a;
    b[ch] = t.b;
    inv[ch] = t.inv;
  }
  // sum(g), sum(g (x - mean)) per sample, then over samples (by every thread, in the same order)
  std::vector<float> part_g(l.n * l.c), part_gx(l.n * l.c);
  const int64_t sample = l.s * l.c;
  InOneRegion(l.size() > kParallelGrain, [&](int t, int nt, auto sync) {
    SampleBlocks(l, t, nt, /*backwards=*/false, [&](int64_t i, int64_t c0, int64_t cb) {
      const int64_t at = i * sample + c0;
      v.col_affine_grad_sums(dy + at, x + at, saved_mean + c0, p.relu, a.data() + c0, b.data() + c0, l.s, cb, l.c,
                             part_g.data() + i * l.c + c0, part_gx.data() + i * l.c + c0);
    });
    sync();
    const std::vector<double> sum_g = SumSamples(part_g, l), sum_gx = SumSamples(part_gx, l);
    std::vector<float> k(l.c), mean_g(l.c), q(l.c);
    for (int64_t ch = 0; ch < l.c; ++ch) {
      const double sum_g_xhat = sum_gx[ch] * inv[ch];
      const double gm = p.fix_gamma ? 1.0 : gamma[ch];
      k[ch] = static_cast<float>(gm * inv[ch]);
      mean_g[ch] = p.use_global_stats ? 0.f : static_cast<float>(sum_g[ch] / l.count());
      q[ch] = p.use_global_stats ? 0.f : static_cast<float>(sum_g_xhat * inv[ch] / l.count());
      if (t != 0) continue;  // one thread writes dgamma and dbeta
      if (c.req[1] != OpReq::kNull) {
        Assign(c.out[1].f() + ch, c.req[1], p.fix_gamma ? 0.f : static_cast<float>(sum_g_xhat));
      }
      if (c.req[2] != OpReq::kNull) Assign(c.out[2].f() + ch, c.req[2], static_cast<float>(sum_g[ch]));
    }
    if (!dx) return;
    RowRanges(l, t, nt, /*backwards=*/true, [&](int64_t r0, int64_t rows) {  // dx may alias dy
      const int64_t at = r0 * l.c;
      v.col_affine_grad(dy + at, x + at, saved_mean, p.relu, a.data(), b.data(), k.data(), mean_g.data(), q.data(),
                        dx + at, rows, l.c, l.c, add);
    });
  });
  for (int j = 3; j < 5; ++j) {  // the moving statistics get no gradient
    if (c.req[j] != OpReq::kNull) ForEach(l.c, c.out[j].f(), c.req[j], [](int64_t) { return 0.f; });
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

// Whether the activations (tied: one layout) are channels-last; checks
// that the requested activation output agrees.
bool IsNhwc(const KernelCtx& c, int in) {
  const Layout l = c.in[in].layout();
  FRUGAL_REQUIRE(c.req[0] == OpReq::kNull || c.out[0].layout() == l, c.node.Where(), ": input ", in, " is ",
                 LayoutName(l), " but output 0 ", LayoutName(c.out[0].layout()), " (batch_norm ties them)");
  FRUGAL_REQUIRE(in == 0 || c.in[0].layout() == l, c.node.Where(), ": dy is ", LayoutName(c.in[0].layout()), " but x ",
                 LayoutName(l), " (batch_norm ties them)");
  return l == Layout::kNhwc;
}

// float32 unless x is bfloat16 (Elems fails loudly on other dtypes).
void BnForward(const KernelCtx& c) {
  const bool bf16 = c.in[0].dtype() == DType::kBFloat16;
  if (IsNhwc(c, 0)) return bf16 ? BnForwardNhwc<uint16_t>(c) : BnForwardNhwc<float>(c);
  bf16 ? BnForwardT<uint16_t>(c) : BnForwardT<float>(c);
}
void BnBackward(const KernelCtx& c) {
  const bool bf16 = c.in[1].dtype() == DType::kBFloat16;
  if (IsNhwc(c, 1)) return bf16 ? BnBackwardNhwc<uint16_t>(c) : BnBackwardNhwc<float>(c);
  bf16 ? BnBackwardT<uint16_t>(c) : BnBackwardT<float>(c);
}

}  // namespace

BnParams BnParams::Parse(AttrReader& a) {
  BnParams p;
  p.eps = a.Float("eps", 1e-3);
  p.momentum = a.Float("momentum", 0.9);
  p.fix_gamma = a.Bool("fix_gamma", true);
  p.use_global_stats = a.Bool("use_global_stats", false);
  const std::string act = a.Str("act_type", "");
  FRUGAL_REQUIRE(act.empty() || act == "relu", a.where(), ": act_type must be \"relu\" or left out, got \"", act, "\"");
  p.relu = act == "relu";
  FRUGAL_REQUIRE(p.eps > 0, a.where(), ": eps must be positive, got ", p.eps);
  FRUGAL_REQUIRE(p.momentum >= 0 && p.momentum <= 1, a.where(), ": momentum must be in [0, 1], got ", p.momentum);
  return p;
}

void Register_batch_norm(OpRegistry* r) {
  OpDef& fwd =
      r->Add("batch_norm")
          .Doc("Batch normalisation over axis 1: eps, momentum, fix_gamma, use_global_stats (MXNet's defaults).")
          .Inputs({{"x"},
                   {"gamma", VarKind::kParam, "one"},
                   {"beta", VarKind::kParam, "zero"},
                   {"moving_mean", VarKind::kAux, "zero"},
                   {"moving_var", VarKind::kAux, "one"}})
          .Outputs({"y", "mean", "var"})
          .VisibleOutputs(1)
          .FusesActivation({"relu"})
          .Params<BnParams>()
          .InferShape(BnInferShape)
          .Mutates({3, 4})
          .MirrorReads({{3, 1}, {4, 2}})
          .Inplace({{0, 0}})
          .Recompute(Cost::kCheap)
          .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
            return 8.0 * in[0].Size();  // statistics (3 per element) and normalise-scale-shift (5; the ReLU too)
          })
          .Bf16()
          .ChannelsLast({0}, {0}, /*tied=*/true)
          .CpuKernel(BnForward);
  AddBackward(r, fwd, {OutGrad(0), Input(0), Input(1), Input(2), Output(1), Output(2)},
              "dx, dgamma (0 with fix_gamma), dbeta; none for the moving statistics.")
      .Inplace({{0, 0}})
      .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
        return 12.0 * in[0].Size();  // two reductions over dy and dy*xhat, then dx
      })
      .ChannelsLast({0, 1}, {0}, /*tied=*/true)
      .CpuKernel(BnBackward);
}

}  // namespace frugal
