// relu:  y = max(x, 0)                  x, y: any shape
// grad:  dx = dy * (y > 0)              reads y, not x, so forward may run in place
// Kernels: vec.h's branch-free loops (per ISA). A relu right after a
// batch_norm is fused into it (src/passes/fuse.cc).
#include "backend/cpu/vec.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

void ReluForward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const float* x = c.in[0].f();
  float* y = c.out[0].f();
  const bool add = c.req[0] == OpReq::kAdd;
  ForEachRange(c.out[0].size(), [&](int64_t b, int64_t e) { cpu::Vec().relu(x + b, y + b, e - b, add); });
}

// inputs: dy, y   output: dx
void ReluBackward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const float *dy = c.in[0].f(), *y = c.in[1].f();
  float* dx = c.out[0].f();
  const bool add = c.req[0] == OpReq::kAdd;
  ForEachRange(c.out[0].size(), [&](int64_t b, int64_t e) { cpu::Vec().relu_grad(dy + b, y + b, dx + b, e - b, add); });
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
