// concat and split (alias slice_channel): joining and cutting along one axis.
//   concat:  y = [x_0, x_1, ..., x_{n-1}] along `dim` (default 1; num_args
//            inputs, default 2); the x_k agree on every other dim.
//            grad: dx_k = the part of dy that x_k filled        reads dy
//            (an unused dx_k has no tensor, so its length is unknown to the
//            kernel: it is deduced when only one is unused, else the unused
//            ones must come last; otherwise an Error says so)
//   split:   y_k = the k-th of num_outputs equal parts of x along `axis`
//            (default 1); squeeze_axis drops the axis when each part has
//            size 1 there (x[axis] == num_outputs).
//            grad: dx = [dy_0, ..., dy_{n-1}] along axis       reads every dy_k
//            (a part whose gradient is missing gets zeros from the gradient
//            pass; OpDef::Backward lists OutGrad(0) only, since the count of
//            outputs depends on num_outputs).
// Both are copies (Cost::kFree). The memory layout of a tensor seen as
// (outer, axis, inner) is what both move; squeeze_axis changes no layout.
#include <cstring>

#include "ops/concat_split.h"

namespace frugal {
namespace {

// Runs a PartsCopy (ops/concat_split.h) row by row.
void CopyParts(const PartsCopy& c) {
#pragma omp parallel for if (c.outer * c.total * c.inner > kParallelGrain) schedule(static)
  for (int64_t o = 0; o < c.outer; ++o) {
    int64_t start = 0;
    for (size_t k = 0; k < c.parts.size(); ++k) {
      const int64_t len = c.n[k] * c.inner, at = start;
      start += c.n[k];
      const OpReq req = c.gather ? c.whole_req : c.part_req[k];
      if (req == OpReq::kNull) continue;
      float* w = c.whole + (o * c.total + at) * c.inner;
      float* p = c.parts[k] + o * len;
      float* dst = c.gather ? w : p;
      const float* src = c.gather ? p : w;
      if (req == OpReq::kAdd) {
        for (int64_t i = 0; i < len; ++i) dst[i] += src[i];
      } else {
        std::memcpy(dst, src, len * sizeof(float));
      }
    }
  }
}

// ------------------------------------------------------------------ concat

void ConcatInferShape(ShapeCtx& c) {
  const auto& p = c.params<ConcatParams>();
  for (size_t k = 0; k < c.in.size(); ++k)
    if (!c.in[k].known()) c.Fail(Fmt("the shape of input ", k, " is unknown"));
  const Shape& x0 = c.in[0];
  const int ax = NormalizeAxis(c, p.dim, x0.ndim(), "dim");
  std::vector<int64_t> y = x0.dims();
  y[ax] = 0;
  for (size_t k = 0; k < c.in.size(); ++k) {
    const Shape& xk = c.in[k];
    bool ok = xk.ndim() == x0.ndim();
    for (int d = 0; ok && d < x0.ndim(); ++d) ok = d == ax || xk[d] == x0[d];
    if (!ok) c.Fail(Fmt("input ", k, " has shape ", xk, " but input 0 has ", x0, "; they may differ only in dim ", ax));
    y[ax] += xk[ax];
  }
  c.out[0] = Shape(y);
}

void ConcatForward(const KernelCtx& c) { CopyParts(ConcatCopy(c)); }

// inputs: dy    outputs: dx_0 .. dx_{n-1}
void ConcatBackward(const KernelCtx& c) { CopyParts(ConcatGradCopy(c)); }

// ------------------------------------------------------------------- split

void SplitInferShape(ShapeCtx& c) {
  const auto& p = c.params<SplitParams>();
  const Shape& x = c.in[0];
  if (!x.known()) c.Fail("the shape of input x is unknown");
  const int ax = NormalizeAxis(c, p.axis, x.ndim());
  if (x[ax] % p.num_outputs != 0) {
    c.Fail(Fmt("cannot split axis ", ax, " of ", x, " (size ", x[ax], ") into ", p.num_outputs, " equal parts"));
  }
  std::vector<int64_t> y = x.dims();
  y[ax] /= p.num_outputs;
  if (p.squeeze_axis) {
    if (y[ax] != 1) c.Fail(Fmt("squeeze_axis needs parts of size 1 on axis ", ax, ", but they have ", y[ax]));
    y.erase(y.begin() + ax);
  }
  for (Shape& o : c.out) o = Shape(y);
}

void SplitForward(const KernelCtx& c) { CopyParts(SplitCopy(c)); }

// inputs: dy_0 .. dy_{n-1}    output: dx
void SplitBackward(const KernelCtx& c) { CopyParts(SplitGradCopy(c)); }

// One _backward_split node reading every output gradient.
std::vector<Entry> SplitGradient(Graph& g, const GradCtx& c) {
  Node b = BackwardNode(g, c, "_backward_split");
  b.inputs = c.out_grads;
  return {{g.AddNode(std::move(b)), 0}};
}

}  // namespace

SplitParams SplitParams::Parse(AttrReader& a) {
  SplitParams p;
  p.num_outputs = a.Int("num_outputs");
  p.axis = a.Int("axis", 1);
  p.squeeze_axis = a.Bool("squeeze_axis", false);
  FRUGAL_REQUIRE(p.num_outputs >= 1, a.where(), ": num_outputs must be at least 1, got ", p.num_outputs);
  return p;
}

namespace {

int NumParts(const std::any& p) { return static_cast<int>(std::any_cast<const SplitParams&>(p).num_outputs); }

OpDef& RegisterSplit(OpRegistry* r, const std::string& name) {
  return r->Add(name)
      .Doc("Cuts x into num_outputs equal parts along axis (default 1); squeeze_axis drops a size-1 axis.")
      .Unary()
      .Params<SplitParams>()
      .NumOutputsFn(NumParts)
      .InferShape(SplitInferShape)
      .Backward({OutGrad(0)})
      .Gradient(SplitGradient)
      .Recompute(Cost::kFree)
      .CpuKernel(SplitForward);
}

}  // namespace

ConcatParams ConcatParams::Parse(AttrReader& a) {
  ConcatParams p;
  p.num_args = a.Int("num_args", 2);
  p.dim = a.Int("dim", 1);
  FRUGAL_REQUIRE(p.num_args >= 1, a.where(), ": num_args must be at least 1, got ", p.num_args);
  return p;
}

void Register_concat_split(OpRegistry* r) {
  auto num_args = [](const std::any& p) { return static_cast<int>(std::any_cast<const ConcatParams&>(p).num_args); };
  OpDef& concat = r->Add("concat")
                      .Doc("Joins num_args inputs (default 2) along dim (default 1).")
                      .Unary()
                      .Params<ConcatParams>()
                      .NumInputsFn(num_args)
                      .InferShape(ConcatInferShape)
                      .Recompute(Cost::kFree)
                      .CpuKernel(ConcatForward);
  AddBackward(r, concat, {OutGrad(0)}, "dx_k = the part of dy that x_k filled.").CpuKernel(ConcatBackward);
  // Its gradient node reads every output's gradient (SplitGradient).
  OpDef& split = RegisterSplit(r, "split");
  RegisterSplit(r, "slice_channel").Backward({OutGrad(0)}, "_backward_split");
  AddBackward(r, split, {OutGrad(0)}, "dx = the dy_k joined along the axis (of slice_channel too).")
      .NumInputsFn(NumParts)
      .CpuKernel(SplitBackward);
}

}  // namespace frugal
