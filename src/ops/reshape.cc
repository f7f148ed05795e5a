// reshape:  y = x seen with another shape (same elements, same order)
//   shape: target dims; 0 copies the input dim at that place, -1 is inferred
// flatten:  (N, d1, d2, ...) -> (N, d1*d2*...)
// expand_dims:  inserts a dim of size 1 at `axis` (in [-ndim-1, ndim])
// grad of all three:  dx = dy seen with x's shape; reads only dy
// In place, the output is the input's buffer and the kernel copies nothing.
// Any dtype (bfloat16 activations too): the kernel copies bytes.
#include "ops/op_util.h"

namespace frugal {
namespace {

struct ReshapeParams {
  std::vector<int64_t> shape;
  static ReshapeParams Parse(AttrReader& a) { return {a.Ints("shape")}; }
};

struct ExpandDimsParams {
  int64_t axis = 0;
  static ExpandDimsParams Parse(AttrReader& a) { return {a.Int("axis")}; }
};

void ReshapeInferShape(ShapeCtx& c) {
  const Shape& x = c.in[0];
  if (!x.known()) c.Fail("the shape of input x is unknown");
  const auto& target = c.params<ReshapeParams>().shape;
  std::vector<int64_t> dims;
  int infer_at = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0) {
      if (static_cast<int>(i) >= x.ndim()) c.Fail(Fmt("shape[", i, "] = 0 copies a dim that ", x, " lacks"));
      d = x[static_cast<int>(i)];
    } else if (d == -1) {
      if (infer_at >= 0) c.Fail("shape has more than one -1");
      infer_at = static_cast<int>(i);
      d = 1;
    } else if (d < 0) {
      c.Fail(Fmt("shape[", i, "] = ", d, " is invalid (use a size, 0 to copy, or -1 to infer)"));
    }
    dims.push_back(d);
  }
  Shape y(dims);
  if (infer_at >= 0 && y.Size() > 0 && x.Size() % y.Size() == 0) y[infer_at] = x.Size() / y.Size();
  if (y.Size() != x.Size()) c.Fail(Fmt("cannot reshape ", x, " (", x.Size(), " elements) to ", y));
  c.out[0] = y;
}

void FlattenInferShape(ShapeCtx& c) {
  const Shape& x = c.in[0];
  if (!x.known() || x.ndim() < 1) c.Fail(Fmt("cannot flatten input of shape ", x));
  c.out[0] = Shape{x[0], x.Prod(1, x.ndim())};
}

void ExpandDimsInferShape(ShapeCtx& c) {
  const Shape& x = c.in[0];
  if (!x.known()) c.Fail("the shape of input x is unknown");
  const int ax = NormalizeAxis(c, c.params<ExpandDimsParams>().axis, x.ndim() + 1);
  std::vector<int64_t> dims = x.dims();
  dims.insert(dims.begin() + ax, 1);
  c.out[0] = Shape(dims);
}

// Shared by reshape, flatten and their gradient: a copy unless in place, of
// any dtype (CopyInto).
void CopyKernel(const KernelCtx& c) { CopyInto(c.in[0], c.out[0], c.req[0]); }

}  // namespace

void Register_reshape(OpRegistry* r) {
  // Views of x with another shape: a copy unless in place; one gradient op.
  auto view = [r](const char* name, const char* doc, InferShapeFn infer) -> OpDef& {
    return r->Add(name)
        .Doc(doc)
        .Unary()
        .InferShape(std::move(infer))
        .Backward({OutGrad(0)}, "_backward_reshape")
        .Inplace({{0, 0}})
        .Recompute(Cost::kFree)
        .Bf16()
        .CpuKernel(CopyKernel);
  };
  OpDef& reshape =
      view("reshape", "View x with another shape: 0 copies the input dim, -1 is inferred.", ReshapeInferShape)
          .Params<ReshapeParams>();
  view("flatten", "Collapse all dims but the first: (N, d1, d2, ...) -> (N, d1*d2*...).", FlattenInferShape);
  view("expand_dims", "Inserts a dim of size 1 at axis (negative counts from the end).", ExpandDimsInferShape)
      .Params<ExpandDimsParams>();
  AddBackward(r, reshape, {OutGrad(0)}, "dx = dy seen with x's shape (of flatten and expand_dims too).")
      .Inplace({{0, 0}})
      .CpuKernel(CopyKernel);
}

}  // namespace frugal
