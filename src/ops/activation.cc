// activation:  y = f(x) elementwise, x and y any shape (MXNet's Activation)
//   relu      f = max(x, 0)             f' = (y > 0)   (dx = y > 0 ? dy : 0)
//   sigmoid   f = 1 / (1 + exp(-x))     f' = y (1 - y)
//   tanh      f = tanh(x)               f' = 1 - y^2
//   softrelu  f = log(1 + exp(x))       f' = sigmoid(x) = 1 - exp(-y)
// grad:  dx = dy f'(y): every f' is written in y, so the backward reads dy
//        and y, not x, and both forward and backward may run in place.
// Kernels: every forward on oneDNN eltwise: sigmoid, tanh and softrelu run
// 3x, 7x and 7x faster than a loop over std::exp / std::tanh here, and relu
// is branch-free there, where GCC -O2 compiles the loop's max to a branch
// that mispredicts on real (random-sign) data. relu's backward is the relu
// op's (vec.h's branch-free dx = y > 0 ? dy : 0; a loop over dy * (y > 0)
// compiled to a branch and took 2.4 ms for LeNet's 1M elements); the
// others are plain loops (two reads and one write per element).
// docs/benchmarks.md.
#include <algorithm>
#include <cmath>

#include "ops/cpu/dnnl.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

void ActForward(const KernelCtx& c) {
  const Act act = c.params<Act>();
  const float* x = c.in[0].f();
  float* y = c.req[0] == OpReq::kNull ? nullptr : c.out[0].f();
  const int64_t n = c.in[0].size();
  void* ws = Workspace(c);
  switch (act) {
    case Act::kRelu: cpu::Eltwise(dnnl::algorithm::eltwise_relu, 0, 0, x, y, n, c.req[0], ws); break;
    case Act::kSigmoid: cpu::Eltwise(dnnl::algorithm::eltwise_logistic, 0, 0, x, y, n, c.req[0], ws); break;
    case Act::kTanh: cpu::Eltwise(dnnl::algorithm::eltwise_tanh, 0, 0, x, y, n, c.req[0], ws); break;
    case Act::kSoftRelu: cpu::Eltwise(dnnl::algorithm::eltwise_soft_relu, 0, 0, x, y, n, c.req[0], ws); break;
  }
}

// inputs: dy, y   output: dx
void ActBackward(const KernelCtx& c) {
  const Act act = c.params<Act>();
  const float *dy = c.in[0].f(), *y = c.in[1].f();
  float* dx = c.req[0] == OpReq::kNull ? nullptr : c.out[0].f();
  const int64_t n = c.in[0].size();
  switch (act) {
    case Act::kRelu: ReluBackward(c); break;
    case Act::kSigmoid: ForEach(n, dx, c.req[0], [=](int64_t i) { return dy[i] * y[i] * (1 - y[i]); }); break;
    case Act::kTanh: ForEach(n, dx, c.req[0], [=](int64_t i) { return dy[i] * (1 - y[i] * y[i]); }); break;
    case Act::kSoftRelu: ForEach(n, dx, c.req[0], [=](int64_t i) { return -dy[i] * std::expm1(-y[i]); }); break;
  }
}

}  // namespace

void Register_activation(OpRegistry* r) {
  OpDef& fwd = r->Add("activation")
                   .Doc("Elementwise activation: act_type relu, sigmoid, tanh or softrelu.")
                   .Elementwise()
                   .Params([](AttrReader& a) {
                     const std::string t = a.Choice("act_type", "", {"relu", "sigmoid", "tanh", "softrelu"});
                     return std::any(t == "relu"      ? Act::kRelu
                                     : t == "sigmoid" ? Act::kSigmoid
                                     : t == "tanh"    ? Act::kTanh
                                                      : Act::kSoftRelu);
                   })
                   .Recompute(Cost::kCheap)
                   .Workspace([](const WorkspaceCtx&) { return cpu::EltwiseWorkspaceBytes(); })
                   .ChannelsLast({0}, {0}, /*tied=*/true)  // elementwise: any order of the bytes
                   .CpuKernel(ActForward);
  AddBackward(r, fwd, {OutGrad(0), Output(0)}, "dx = dy f'(y).")
      .Inplace({{0, 0}})
      .ChannelsLast({0, 1}, {0}, /*tied=*/true)
      .CpuKernel(ActBackward);
}

}  // namespace frugal
