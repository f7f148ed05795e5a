// The gradient combination before the optimizer updates (src/train/step.cc):
//
// grad_accumulate(sum, grad), one shape: the sum of the gradients of
//   iter_size micro-batches. Run `step` (the micro-batch count) is micro-batch
//   micro = step % iter_size of its update:
//     micro 0:                 sum = grad
//     0 < micro < iter_size-1: sum = sum + grad
//     the last:                grad = sum + grad   (the total, where the update reads it)
//   Mutates both; no outputs.
// rescale_clip(g_0, ..., g_{n-1}): every gradient times `rescale` (1 /
//   iter_size), then, if max_norm > 0 and the global L2 norm of the rescaled
//   gradients exceeds it, times max_norm / norm, in one pass:
//     norm = |rescale| * sqrt(sum_i g_i^2);  k = rescale * min(1, max_norm / norm)
//   The squares are summed in double per chunk of kNormChunk elements, the
//   chunks in order (the workspace holds the partial sums), so the bits do not
//   depend on the thread count; the CUDA kernel sums the same way.
//   Mutates every input; no outputs.
// Neither has a gradient.
#include <algorithm>
#include <cmath>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {

int64_t NormChunks(const std::vector<Shape>& grads) {
  int64_t chunks = 0;
  for (const Shape& s : grads) chunks += (s.Size() + kNormChunk - 1) / kNormChunk;
  return chunks;
}

namespace {

constexpr int64_t kOmpMin = 32768;  // elements below which a loop stays serial

void GradAccumulateCpu(const KernelCtx& c) {
  const int64_t n_micro = c.params<GradAccumulateParams>().iter_size, micro = c.step % n_micro;
  float* sum = c.in[0].f();
  float* g = c.in[1].f();
  const int64_t n = c.in[0].size();
  if (micro == 0) {
    Tensor s = c.in[0];  // a view of the same bytes
    return s.CopyFrom(c.in[1]);
  }
  float* y = micro == n_micro - 1 ? g : sum;
#pragma omp parallel for if (n > kOmpMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = sum[i] + g[i];
}

void RescaleClipCpu(const KernelCtx& c) {
  const RescaleClipParams& p = c.params<RescaleClipParams>();
  double scale = p.rescale;
  if (p.max_norm > 0) {
    double* part = reinterpret_cast<double*>(c.workspace.raw());
    int64_t at = 0;
    for (const Tensor& t : c.in) {
      const float* g = t.f();
      const int64_t n = t.size(), chunks = (n + kNormChunk - 1) / kNormChunk;
#pragma omp parallel for if (chunks > 1) schedule(static)
      for (int64_t k = 0; k < chunks; ++k) {
        double acc = 0;
        for (int64_t i = k * kNormChunk; i < std::min(n, (k + 1) * kNormChunk); ++i)
          acc += static_cast<double>(g[i]) * g[i];
        part[at + k] = acc;
      }
      at += chunks;
    }
    double total = 0;
    for (int64_t k = 0; k < at; ++k) total += part[k];
    const double norm = std::abs(p.rescale) * std::sqrt(total);
    if (norm > p.max_norm) scale *= p.max_norm / norm;
  }
  if (scale == 1.0) return;
  const float k = static_cast<float>(scale);
  for (const Tensor& t : c.in) {
    float* g = t.f();
    const int64_t n = t.size();
#pragma omp parallel for if (n > kOmpMin) schedule(static)
    for (int64_t i = 0; i < n; ++i) g[i] *= k;
  }
}

}  // namespace

GradAccumulateParams GradAccumulateParams::Parse(AttrReader& a) {
  GradAccumulateParams p;
  p.iter_size = a.Int("iter_size");
  FRUGAL_REQUIRE(p.iter_size >= 2, a.where(), ": iter_size must be at least 2, got ", p.iter_size);
  return p;
}

RescaleClipParams RescaleClipParams::Parse(AttrReader& a) {
  RescaleClipParams p;
  p.num_args = a.Int("num_args", 1);
  p.rescale = static_cast<float>(a.Float("rescale", 1.0));
  p.max_norm = static_cast<float>(a.Float("max_norm", 0.0));
  FRUGAL_REQUIRE(p.num_args >= 1, a.where(), ": num_args must be at least 1, got ", p.num_args);
  FRUGAL_REQUIRE(p.max_norm >= 0, a.where(), ": max_norm must not be negative, got ", p.max_norm);
  return p;
}

void Register_grad_combine(OpRegistry* r) {
  r->Add("grad_accumulate")
      .Doc(
          "The sum of iter_size micro-batches' gradients: sum = grad, sum += grad, then grad = sum + grad "
          "on the last (micro-batch step % iter_size).")
      .Inputs({{"sum"}, {"grad"}})
      .Params<GradAccumulateParams>()
      .InferShape([](ShapeCtx& c) {
        if (c.in[0] != c.in[1]) c.Fail(Fmt("sum has shape ", c.in[0], " but grad has ", c.in[1]));
      })
      .Mutates({0, 1})
      .NoGradient()
      .CpuKernel(GradAccumulateCpu);
  r->Add("rescale_clip")
      .Doc("Every gradient times rescale, then all clipped to a global L2 norm of max_norm (0: no clipping).")
      .Inputs({{"grad"}})
      .Params<RescaleClipParams>()
      .NumInputsFn(
          [](const std::any& p) { return static_cast<int>(std::any_cast<const RescaleClipParams&>(p).num_args); })
      .InferShape([](ShapeCtx&) {})
      .MutatesAll()
      .Workspace([](const WorkspaceCtx& c) -> int64_t {
        if (c.params<RescaleClipParams>().max_norm <= 0) return 0;
        return (NormChunks(c.in) + 1) * static_cast<int64_t>(sizeof(double));
      })
      .NoGradient()
      .CpuKernel(RescaleClipCpu);
}

}  // namespace frugal
