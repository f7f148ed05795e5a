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

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

// Moves data between a whole tensor (outer, sum n_k, inner) and its parts
// (outer, n_k, inner): gather = parts -> whole, else whole -> parts.
// total: the whole's length on the axis; parts past the last one written
// may have length 0 here (they are not written).
void CopyParts(bool gather, float* whole, OpReq whole_req, const std::vector<float*>& parts,
               const std::vector<OpReq>& part_req, const std::vector<int64_t>& n, int64_t total, int64_t outer,
               int64_t inner) {
#pragma omp parallel for if (outer * total * inner > kParallelGrain) schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    int64_t start = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      const int64_t len = n[k] * inner, at = start;
      start += n[k];
      const OpReq req = gather ? whole_req : part_req[k];
      if (req == OpReq::kNull) continue;
      float* w = whole + (o * total + at) * inner;
      float* p = parts[k] + o * len;
      float* dst = gather ? w : p;
      const float* src = gather ? p : w;
      if (req == OpReq::kAdd) {
        for (int64_t i = 0; i < len; ++i) dst[i] += src[i];
      } else {
        std::memcpy(dst, src, len * sizeof(float));
      }
    }
  }
}

int Axis(int64_t axis, int ndim) { return static_cast<int>(axis < 0 ? axis + ndim : axis); }

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

// Outer and inner sizes of a concat or split along axis `ax` of whole.
void OuterInner(const Shape& whole, int ax, int64_t* outer, int64_t* inner) {
  *outer = whole.Prod(0, ax);
  *inner = whole.Prod(ax + 1, whole.ndim());
}

// The axis lengths of parts given as tensors (all defined: inputs).
std::vector<int64_t> PartLengths(const std::vector<Tensor>& parts, int64_t outer, int64_t inner) {
  std::vector<int64_t> n;
  for (const Tensor& t : parts) n.push_back(t.size() / (outer * inner));
  return n;
}

// The axis lengths of the gradients of concat's inputs. A gradient nobody
// reads has no memory and no shape; its length is deduced from the others
// when at most one is unknown or when only unread parts follow the unknown
// ones (they are skipped, so their lengths do not matter).
std::vector<int64_t> GradLengths(const KernelCtx& c, int64_t total, int64_t outer, int64_t inner) {
  std::vector<int64_t> n(c.out.size(), -1);
  int unknown = 0, last_read = -1;
  int64_t known = 0;
  for (size_t k = 0; k < c.out.size(); ++k) {
    if (c.req[k] == OpReq::kNull) { ++unknown; continue; }
    n[k] = c.out[k].size() / (outer * inner);
    known += n[k];
    last_read = static_cast<int>(k);
  }
  int unknown_before = 0;
  for (int k = 0; k < last_read; ++k) unknown_before += n[k] < 0;
  FRUGAL_REQUIRE(unknown <= 1 || unknown_before == 0, c.node.Where(), ": the gradients of ", unknown,
                 " inputs of concat are unused and their sizes are unknown to the kernel; put inputs without a",
                 " gradient last in the concat (a limitation of this build)");
  for (int64_t& nk : n)
    if (nk < 0) nk = unknown == 1 ? total - known : 0;
  return n;
}

std::vector<float*> Inputs(const KernelCtx& c) {
  std::vector<float*> p;
  for (const Tensor& t : c.in) p.push_back(t.f());
  return p;
}

// Outputs nobody reads (an unused part of a split) are nullptr and skipped.
std::vector<float*> Outputs(const KernelCtx& c) {
  std::vector<float*> p;
  for (size_t k = 0; k < c.out.size(); ++k) p.push_back(Out(c, static_cast<int>(k)));
  return p;
}

void ConcatForward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const Shape& y = c.out[0].shape();
  const int ax = Axis(c.params<ConcatParams>().dim, y.ndim());
  int64_t outer, inner;
  OuterInner(y, ax, &outer, &inner);
  CopyParts(true, Out(c, 0), c.req[0], Inputs(c), {}, PartLengths(c.in, outer, inner), y[ax], outer, inner);
}

// inputs: dy    outputs: dx_0 .. dx_{n-1}
void ConcatBackward(const KernelCtx& c) {
  const Shape& y = c.in[0].shape();
  const int ax = Axis(c.params<ConcatParams>().dim, y.ndim());
  int64_t outer, inner;
  OuterInner(y, ax, &outer, &inner);
  CopyParts(false, c.in[0].f(), OpReq::kNull, Outputs(c), c.req, GradLengths(c, y[ax], outer, inner), y[ax], outer,
            inner);
}

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

// Parts are equal, so their lengths come from x and the params (an unused
// part has no tensor to measure).
void SplitForward(const KernelCtx& c) {
  const auto& p = c.params<SplitParams>();
  const Shape& x = c.in[0].shape();
  const int ax = Axis(p.axis, x.ndim());
  int64_t outer, inner;
  OuterInner(x, ax, &outer, &inner);
  const std::vector<int64_t> n(p.num_outputs, x[ax] / p.num_outputs);
  CopyParts(false, c.in[0].f(), OpReq::kNull, Outputs(c), c.req, n, x[ax], outer, inner);
}

// inputs: dy_0 .. dy_{n-1}    output: dx
void SplitBackward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const Shape& x = c.out[0].shape();
  const int ax = Axis(c.params<SplitParams>().axis, x.ndim());
  int64_t outer, inner;
  OuterInner(x, ax, &outer, &inner);
  CopyParts(true, Out(c, 0), c.req[0], Inputs(c), {}, PartLengths(c.in, outer, inner), x[ax], outer, inner);
}

// One _backward_split node reading every output gradient.
std::vector<Entry> SplitGradient(Graph& g, const GradCtx& c) {
  const Node& f = g.node(c.fwd);
  Node b;
  b.name = f.name + "_backward";
  b.op = &OpRegistry::Get().Require("_backward_split", [&f] { return f.Where(); });
  b.params = f.params;
  b.attrs = f.attrs;
  b.fwd = c.fwd;
  b.loc = f.loc;
  b.inputs = c.out_grads;
  return {{g.AddNode(std::move(b)), 0}};
}

std::any ParseSplit(AttrReader& a) {
  SplitParams p;
  p.num_outputs = a.Int("num_outputs");
  p.axis = a.Int("axis", 1);
  p.squeeze_axis = a.Bool("squeeze_axis", false);
  FRUGAL_REQUIRE(p.num_outputs >= 1, a.where(), ": num_outputs must be at least 1, got ", p.num_outputs);
  return std::any(p);
}

int NumParts(const std::any& p) { return static_cast<int>(std::any_cast<const SplitParams&>(p).num_outputs); }

OpDef& RegisterSplit(OpRegistry* r, const std::string& name) {
  return r->Add(name)
      .Doc("Cuts x into num_outputs equal parts along axis (default 1); squeeze_axis drops a size-1 axis.")
      .Inputs({{"x"}})
      .Outputs({"y"})
      .Params(ParseSplit)
      .NumOutputsFn(NumParts)
      .InferShape(SplitInferShape)
      .Backward({OutGrad(0)})
      .Gradient(SplitGradient)
      .Recompute(Cost::kFree)
      .CpuKernel(SplitForward);
}

}  // namespace

void Register_concat_split(OpRegistry* r) {
  auto num_args = [](const std::any& p) { return static_cast<int>(std::any_cast<const ConcatParams&>(p).num_args); };
  OpDef& concat = r->Add("concat")
      .Doc("Joins num_args inputs (default 2) along dim (default 1).")
      .Inputs({{"x"}})
      .Outputs({"y"})
      .Params([](AttrReader& a) {
        ConcatParams p;
        p.num_args = a.Int("num_args", 2);
        p.dim = a.Int("dim", 1);
        FRUGAL_REQUIRE(p.num_args >= 1, a.where(), ": num_args must be at least 1, got ", p.num_args);
        return std::any(p);
      })
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
