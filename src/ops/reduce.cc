// Reductions over axes:  sum, mean, max, min
//   x: any shape; axis: a list of axes (negative counts from the end; absent
//   or () = all axes); keepdims: keep reduced axes as size 1.
//   y: x without the reduced axes, or (1,) when every axis is reduced.
//   sum:   y[j] = sum over its group of x          dx = dy broadcast back           reads dy
//   mean:  y[j] = sum / n  (n = group size)        dx = dy / n broadcast back       reads dy
//   max:   y[j] = max over its group of x          dx = dy at the FIRST maximal
//          element of each group (in row-major order), 0 elsewhere;              reads dy, x
//          ties therefore send the whole gradient to one element, as a
//          subgradient should.
//   min:   likewise, at the first minimal element
// Sums accumulate in double, in a fixed order (bits independent of threads).
#include <algorithm>

#include "ops/reduce.h"

namespace frugal {
namespace {

void ReduceInferShape(ShapeCtx& c) {
  const auto& p = c.params<ReduceParams>();
  const Shape& x = c.in[0];
  if (!x.known() || x.ndim() == 0) c.Fail(Fmt("cannot reduce an input of shape ", x));
  std::vector<bool> seen(x.ndim(), false);
  for (int64_t a : p.axes) {
    int d = NormalizeAxis(c, a, x.ndim());
    if (seen[d]) c.Fail(Fmt("axis ", a, " is given twice"));
    seen[d] = true;
  }
  const std::vector<bool> fold = p.Folds(x.ndim());
  std::vector<int64_t> dims;
  for (int d = 0; d < x.ndim(); ++d) {
    if (!fold[d])
      dims.push_back(x[d]);
    else if (p.keepdims)
      dims.push_back(1);
  }
  if (dims.empty()) dims.push_back(1);
  c.out[0] = Shape(dims);
}

// inputs: x    output: y[j] = of_group(x, red, j) for each group j of x
template <typename OfGroup>
void ReduceForward(const KernelCtx& c, OfGroup of_group) {
  if (c.req[0] == OpReq::kNull) return;
  const Reduction red = ReductionOf(c, c.in[0].shape());
  const float* x = c.in[0].f();
  ForEach(red.kept.size(), Out(c, 0), c.req[0], [&](int64_t j) { return of_group(x, red, j); });
}

template <bool kMean>
void SumForward(const KernelCtx& c) {
  ReduceForward(c, [](const float* x, const Reduction& red, int64_t j) {
    const double scale = kMean ? 1.0 / red.folded.size() : 1.0;
    const int64_t base = red.kept(j);
    return static_cast<float>(scale * SumOf(red.folded.size(), [&](int64_t r) { return x[base + red.folded(r)]; }));
  });
}

// inputs: dy    output: dx[i] = dy[group of i] * scale
template <bool kMean>
void SumBackward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const Shape& xs = c.out[0].shape();
  const StridedIndex group = GroupIndex(c, xs);
  const float scale = kMean ? static_cast<float>(c.in[0].size()) / static_cast<float>(xs.Size()) : 1.f;
  const float* dy = c.in[0].f();
  ForEach(xs.Size(), Out(c, 0), c.req[0], [&](int64_t i) { return dy[group(i)] * scale; });
}

// Offset in x of the first maximal (kMin: minimal) element of group j.
template <bool kMin>
int64_t ArgBest(const float* x, const Reduction& red, int64_t j) {
  const int64_t base = red.kept(j);
  int64_t best = base;
  for (int64_t r = 1; r < red.folded.size(); ++r) {
    const int64_t o = base + red.folded(r);
    if (kMin ? x[o] < x[best] : x[o] > x[best]) best = o;
  }
  return best;
}

template <bool kMin>
void MaxForward(const KernelCtx& c) {
  ReduceForward(c, [](const float* x, const Reduction& red, int64_t j) { return x[ArgBest<kMin>(x, red, j)]; });
}

// inputs: dy, x    output: dx = dy at each group's first maximum (kMin:
// minimum), else 0. Groups are disjoint, so each thread writes its own groups.
template <bool kMin>
void MaxBackward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const Shape& xs = c.in[1].shape();
  const Reduction red = ReductionOf(c, xs);
  const float* dy = c.in[0].f();
  const float* x = c.in[1].f();
  float* dx = Out(c, 0);
  const OpReq req = c.req[0];
#pragma omp parallel for if (xs.Size() > kParallelGrain) schedule(static)
  for (int64_t j = 0; j < red.kept.size(); ++j) {
    const int64_t best = ArgBest<kMin>(x, red, j), base = red.kept(j);
    for (int64_t r = 0; r < red.folded.size(); ++r) {
      const int64_t o = base + red.folded(r);
      Assign(dx + o, req, o == best ? dy[j] : 0.f);
    }
  }
}

void RegisterReduce(OpRegistry* r, const std::string& name, const std::string& doc, Kernel fwd,
                    std::vector<BackwardRead> reads, Kernel bwd, const std::string& grad_doc) {
  OpDef& op = r->Add(name)
                  .Doc(doc + " over `axis` (a list; default all), keepdims keeps them as size 1.")
                  .Unary()
                  .Params<ReduceParams>()
                  .InferShape(ReduceInferShape)
                  .Recompute(Cost::kCheap)
                  .CpuKernel(fwd);
  AddBackward(r, op, std::move(reads), grad_doc + ".").CpuKernel(bwd);
}

}  // namespace

ReduceParams ReduceParams::Parse(AttrReader& a) {
  ReduceParams p;
  if (!a.Str("axis", "").empty()) p.axes = a.Ints("axis");
  p.keepdims = a.Bool("keepdims", false);
  return p;
}

void Register_reduce(OpRegistry* r) {
  RegisterReduce(r, "sum", "Sum", SumForward<false>, {OutGrad(0)}, SumBackward<false>, "dx = dy broadcast back");
  RegisterReduce(r, "mean", "Mean", SumForward<true>, {OutGrad(0)}, SumBackward<true>,
                 "dx = dy / n broadcast back (n elements per group)");
  RegisterReduce(r, "max", "Maximum", MaxForward<false>, {OutGrad(0), Input(0)}, MaxBackward<false>,
                 "dx = dy at the first maximal element of each group, 0 elsewhere");
  RegisterReduce(r, "min", "Minimum", MaxForward<true>, {OutGrad(0), Input(0)}, MaxBackward<true>,
                 "dx = dy at the first minimal element of each group, 0 elsewhere");
}

}  // namespace frugal
