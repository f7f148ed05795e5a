// leaky_relu:  y = f(x) elementwise, x and y any shape (MXNet's LeakyReLU)
//   leaky  f = x > 0 ? x : slope x                 f' = y > 0 ? 1 : slope
//   elu    f = x > 0 ? x : slope (exp(x) - 1)      f' = y > 0 ? 1 : y + slope
//   slope defaults to 0.25 (MXNet) and must be >= 0: then y > 0 exactly
//   where x > 0, so f' is a function of y.
// grad:  dx = dy f'(y): reads dy and y, so forward and backward may run in place.
// Kernels: leaky forward and both backwards are loops (memory-bound, as
// fast as oneDNN's eltwise); elu forward is oneDNN eltwise (vectorised exp).
#include <algorithm>

#include "ops/cpu/dnnl.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

void LeakyForward(const KernelCtx& c) {
  const auto& p = c.params<LeakyParams>();
  const float* x = c.in[0].f();
  float* y = c.req[0] == OpReq::kNull ? nullptr : c.out[0].f();
  const int64_t n = c.in[0].size();
  const float s = p.slope;
  if (p.elu) {
    void* ws = Workspace(c);
    cpu::Eltwise(dnnl::algorithm::eltwise_elu, s, 0, x, y, n, c.req[0], ws);
  } else {
    ForEach(n, y, c.req[0], [=](int64_t i) { return std::max(x[i], 0.f) + s * std::min(x[i], 0.f); });
  }
}

// inputs: dy, y   output: dx
void LeakyBackward(const KernelCtx& c) {
  const auto& p = c.params<LeakyParams>();
  const float *dy = c.in[0].f(), *y = c.in[1].f();
  float* dx = c.req[0] == OpReq::kNull ? nullptr : c.out[0].f();
  const float s = p.slope;
  if (p.elu) {
    ForEach(c.in[0].size(), dx, c.req[0], [=](int64_t i) { return y[i] > 0 ? dy[i] : dy[i] * (y[i] + s); });
  } else {
    ForEach(c.in[0].size(), dx, c.req[0], [=](int64_t i) { return dy[i] * (y[i] > 0 ? 1.f : s); });
  }
}

}  // namespace

LeakyParams LeakyParams::Parse(AttrReader& a) {
  LeakyParams p;
  p.elu = a.Choice("act_type", "leaky", {"leaky", "elu"}) == "elu";
  p.slope = static_cast<float>(a.Float("slope", 0.25));
  FRUGAL_REQUIRE(p.slope >= 0, a.where(), ": slope is ", p.slope,
                 "; it must be >= 0 (the backward reads y, and a negative slope makes x > 0 and x < 0 "
                 "indistinguishable there)");
  return p;
}

void Register_leaky_relu(OpRegistry* r) {
  OpDef& fwd = r->Add("leaky_relu")
                   .Doc("Leaky ReLU or ELU: act_type leaky (default) or elu, slope (default 0.25, >= 0).")
                   .Elementwise()
                   .Params<LeakyParams>()
                   .Recompute(Cost::kCheap)
                   .Workspace([](const WorkspaceCtx& c) {
                     return c.params<LeakyParams>().elu ? cpu::EltwiseWorkspaceBytes() : int64_t{0};
                   })
                   .CpuKernel(LeakyForward);
  AddBackward(r, fwd, {OutGrad(0), Output(0)}, "dx = dy f'(y).").Inplace({{0, 0}}).CpuKernel(LeakyBackward);
}

}  // namespace frugal
