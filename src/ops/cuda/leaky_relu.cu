// leaky_relu (leaky, elu) on the GPU and its gradient, written in y
// (src/ops/leaky_relu.cc).
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

void LeakyForwardCuda(const KernelCtx& c) {
  const auto& p = c.params<LeakyParams>();
  const float* x = c.in[0].f();
  const float s = p.slope;
  if (p.elu) return cuda::Map(c, 0, [=] __device__(int64_t i) { return x[i] > 0.f ? x[i] : s * expm1f(x[i]); });
  cuda::Map(c, 0, [=] __device__(int64_t i) { return fmaxf(x[i], 0.f) + s * fminf(x[i], 0.f); });
}

// inputs: dy, y   output: dx
void LeakyBackwardCuda(const KernelCtx& c) {
  const auto& p = c.params<LeakyParams>();
  const float *dy = c.in[0].f(), *y = c.in[1].f();
  const float s = p.slope;
  if (p.elu) return cuda::Map(c, 0, [=] __device__(int64_t i) { return y[i] > 0.f ? dy[i] : dy[i] * (y[i] + s); });
  cuda::Map(c, 0, [=] __device__(int64_t i) { return dy[i] * (y[i] > 0.f ? 1.f : s); });
}

}  // namespace

void RegisterCuda_leaky_relu(OpRegistry* r) { SetCudaKernels(r, "leaky_relu", LeakyForwardCuda, LeakyBackwardCuda); }

}  // namespace frugal
