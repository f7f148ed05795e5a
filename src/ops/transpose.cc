// transpose:  y = x with its axes permuted: y.shape[d] = x.shape[axes[d]]
//   axes: a permutation of 0..n-1 (negative counts from the end); default:
//   reversed, (n-1, ..., 0).
// grad:  dx = transpose(dy, inverse of axes)                 reads dy
// A strided copy (Cost::kFree): y[i] = x[map(i)], a row of y at a time.
#include <algorithm>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

// The permutation for an n-dim input; shape inference has checked it.
std::vector<int> Perm(const TransposeParams& p, int n) {
  std::vector<int> perm(n);
  for (int d = 0; d < n; ++d) {
    perm[d] = p.axes.empty() ? n - 1 - d : static_cast<int>(p.axes[d] < 0 ? p.axes[d] + n : p.axes[d]);
  }
  return perm;
}

void TransposeInferShape(ShapeCtx& c) {
  const auto& p = c.params<TransposeParams>();
  const Shape& x = c.in[0];
  if (!x.known()) c.Fail("the shape of input x is unknown");
  if (!p.axes.empty() && static_cast<int>(p.axes.size()) != x.ndim()) {
    c.Fail(Fmt("axes has ", p.axes.size(), " entries but x ", x, " has ", x.ndim(), " dims"));
  }
  std::vector<bool> seen(x.ndim(), false);
  for (int64_t a : p.axes) {
    int d = NormalizeAxis(c, a, x.ndim());
    if (seen[d]) c.Fail(Fmt("axes is not a permutation: axis ", a, " appears twice"));
    seen[d] = true;
  }
  std::vector<int64_t> y;
  for (int d : Perm(p, x.ndim())) y.push_back(x[d]);
  c.out[0] = Shape(y);
}

void TransposeForward(const KernelCtx& c) {
  const Shape& x = c.in[0].shape();
  const std::vector<int> perm = Perm(c.params<TransposeParams>(), x.ndim());
  const std::vector<int64_t> xs = Strides(x);
  std::vector<int64_t> dims, strides;
  for (int d : perm) {
    dims.push_back(x[d]);
    strides.push_back(xs[d]);
  }
  const StridedIndex map(dims, strides);
  float* y = Out(c, 0);
  if (!y) return;
  // A row of y's last (merged) dim at a time: one index computation a row,
  // then a run at one stride, a contiguous copy where the last axis stays
  // last (the heads of attention: (B, T, H, D) to (B, H, T, D)).
  const float* px = c.in[0].f();
  const int64_t n = map.dims().empty() ? 1 : map.dims().back();
  const int64_t step = map.dims().empty() ? 1 : map.strides().back();
  const int64_t rows = c.out[0].size() / n;
  const bool add = c.req[0] == OpReq::kAdd;
#pragma omp parallel for num_threads(cpu::KernelThreads()) if (c.out[0].size() > kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + map(r * n);
    float* yr = y + r * n;
    if (add) {
      for (int64_t k = 0; k < n; ++k) yr[k] += xr[k * step];
    } else if (step == 1) {
      std::copy(xr, xr + n, yr);
    } else {
      for (int64_t k = 0; k < n; ++k) yr[k] = xr[k * step];
    }
  }
}

// dx = transpose(dy, inverse permutation).
std::vector<Entry> TransposeGradient(Graph& g, const GradCtx& c) {
  const Node& f = g.node(c.fwd);
  const auto& p = std::any_cast<const TransposeParams&>(f.params);
  AttrMap attrs;  // the inverse of a reversal is a reversal: no axes
  if (!p.axes.empty()) {
    const int nd = static_cast<int>(p.axes.size());
    std::vector<int> perm = Perm(p, nd), inv(nd);
    for (int d = 0; d < nd; ++d) inv[perm[d]] = d;
    std::string text = "(";
    for (int d = 0; d < nd; ++d) text += (d ? "," : "") + std::to_string(inv[d]);
    attrs["axes"] = text + ")";
  }
  return {{g.AddOp("transpose", f.name + "_backward", attrs, {c.out_grads[0]}), 0}};
}

}  // namespace

TransposeParams TransposeParams::Parse(AttrReader& a) {
  TransposeParams p;
  if (!a.Str("axes", "").empty()) p.axes = a.Ints("axes");
  return p;
}

void Register_transpose(OpRegistry* r) {
  r->Add("transpose")
      .Doc("Permutes the axes of x (axes; default reversed).")
      .Unary()
      .Params<TransposeParams>()
      .InferShape(TransposeInferShape)
      .Backward({OutGrad(0)})
      .Gradient(TransposeGradient)
      .Recompute(Cost::kFree)
      .CpuKernel(TransposeForward);
}

}  // namespace frugal
