// make_loss:  y = x, and x is a loss: its gradient is a constant
//   dx = grad_scale / norm  (every element)
//   normalization: "null" (norm = 1, the default), "batch" (norm = x.shape[0])
//   or "valid" (norm = the number of elements of x above valid_thresh, at
//   least 1), as MXNet's MakeLoss. So the loss differentiated is
//   grad_scale / norm * sum(x).
//   a loss head: reads y (= x; only "valid" uses its values, but the reads
//   are declared per op, not per attribute). Reading y rather than x lets the
//   forward run in place.
#include <algorithm>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

// inputs: y    output: dx = grad_scale / norm
void MakeLossBackward(const KernelCtx& c) {
  const auto& p = c.params<MakeLossParams>();
  const Tensor& y = c.in[0];
  double norm = 1;
  if (p.normalization == "batch") norm = static_cast<double>(y.shape()[0]);
  if (p.normalization == "valid") {
    const float* v = y.f();
    const double valid = SumOf(y.size(), [&](int64_t i) { return v[i] > p.valid_thresh ? 1.0 : 0.0; });
    norm = std::max(valid, 1.0);
  }
  const float g = static_cast<float>(p.grad_scale / norm);
  ForEach(c.out[0].size(), Out(c, 0), c.req[0], [=](int64_t) { return g; });
}

}  // namespace

MakeLossParams MakeLossParams::Parse(AttrReader& a) {
  MakeLossParams p;
  p.grad_scale = a.Float("grad_scale", 1.0);
  p.normalization = a.Choice("normalization", "null", {"null", "batch", "valid"});
  p.valid_thresh = static_cast<float>(a.Float("valid_thresh", 0.0));
  return p;
}

void Register_make_loss(OpRegistry* r) {
  OpDef& fwd = r->Add("make_loss")
                   .Doc("Makes x a loss head: y = x; dx = grad_scale / norm (normalization null, batch or valid).")
                   .Elementwise()
                   .Params<MakeLossParams>()
                   .Loss()
                   .Recompute(Cost::kFree)
                   .CpuKernel([](const KernelCtx& c) { CopyInto(c.in[0], c.out[0], c.req[0]); });
  AddBackward(r, fwd, {Output(0)}, "dx = grad_scale / norm.")
      .Inplace({{0, 0}})
      .Recompute(Cost::kCheap)
      .CpuKernel(MakeLossBackward);
}

}  // namespace frugal
