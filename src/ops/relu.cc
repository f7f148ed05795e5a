// relu:  y = max(x, 0)                  x, y: any shape
// grad:  dx = dy * (y > 0)              reads y, not x, so forward may run in place
// Kernels: vec.h's branch-free loops (per ISA), float32 or bfloat16 (x, y,
// dy, dx all one dtype; bfloat16 computed in float and rounded when stored).
// A relu right after a batch_norm is fused into it (src/passes/fuse.cc).
#include "ops/cpu/vec.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

// Written once over the element type T: float, or uint16_t for bfloat16
// activations (vec.h's ActKernels); x and y share one dtype.
template <typename T>
void ReluForwardT(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const T* x = Elems<T>(c.in[0]);
  T* y = Elems<T>(c.out[0]);
  const bool add = c.req[0] == OpReq::kAdd;
  ForEachRange(c.out[0].size(), [&](int64_t b, int64_t e) { cpu::Vec().act<T>().relu(x + b, y + b, e - b, add); });
}

// inputs: dy, y   output: dx (one dtype)
template <typename T>
void ReluBackwardT(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const T *dy = Elems<T>(c.in[0]), *y = Elems<T>(c.in[1]);
  T* dx = Elems<T>(c.out[0]);
  const bool add = c.req[0] == OpReq::kAdd;
  ForEachRange(c.out[0].size(),
               [&](int64_t b, int64_t e) { cpu::Vec().act<T>().relu_grad(dy + b, y + b, dx + b, e - b, add); });
}

// float32 unless bfloat16 (Elems fails loudly on other dtypes).
void ReluForward(const KernelCtx& c) {
  c.in[0].dtype() == DType::kBFloat16 ? ReluForwardT<uint16_t>(c) : ReluForwardT<float>(c);
}

}  // namespace

void ReluBackward(const KernelCtx& c) {
  c.in[0].dtype() == DType::kBFloat16 ? ReluBackwardT<uint16_t>(c) : ReluBackwardT<float>(c);
}

void Register_relu(OpRegistry* r) {
  OpDef& fwd = r->Add("relu")
                   .Doc("Rectified linear unit: y = max(x, 0).")
                   .Elementwise()
                   .Activation("relu")
                   .Recompute(Cost::kCheap)
                   .Bf16()
                   .ChannelsLast({0}, {0}, /*tied=*/true)  // elementwise: any order of the bytes
                   .CpuKernel(ReluForward);
  AddBackward(r, fwd, {OutGrad(0), Output(0)}, "dx = dy * (y > 0).")
      .ChannelsLast({0, 1}, {0}, /*tied=*/true)
      .Inplace({{0, 0}})
      .CpuKernel(ReluBackward);
}

}  // namespace frugal
