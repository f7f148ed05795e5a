// relu:  y = max(x, 0)                  x, y: any shape
// grad:  dx = dy * (y > 0)              reads y, not x, so forward may run in place
#include "ops/op_util.h"

namespace frugal {
namespace {

void ReluForward(const KernelCtx& c) {
  const float* x = c.in[0].f();
  ForEach(c.out[0].size(), Out(c, 0), c.req[0], [x](int64_t i) { return x[i] > 0 ? x[i] : 0.f; });
}

// inputs: dy, y   output: dx
void ReluBackward(const KernelCtx& c) {
  const float* dy = c.in[0].f();
  const float* y = c.in[1].f();
  ForEach(c.out[0].size(), Out(c, 0), c.req[0], [=](int64_t i) { return y[i] > 0 ? dy[i] : 0.f; });
}

}  // namespace

void Register_relu(OpRegistry* r) {
  r->Add("relu")
      .Doc("Rectified linear unit: y = max(x, 0).")
      .Inputs({{"x"}})
      .Outputs({"y"})
      .InferShape(InferSameShape)
      .Backward({OutGrad(0), Output(0)}, "_backward_relu")
      .Inplace({{0, 0}})
      .Recompute(Cost::kCheap)
      .CpuKernel(ReluForward);
  r->Add("_backward_relu")
      .Doc("Gradient of relu: dx = dy * (y > 0).")
      .Inputs({{"dy"}, {"y"}})
      .Outputs({"dx"})
      .InferShape(InferAsForwardInputs)
      .NoGradient()
      .Inplace({{0, 0}})
      .Recompute(Cost::kCheap)
      .CpuKernel(ReluBackward);
}

}  // namespace frugal
