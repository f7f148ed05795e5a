// linear_regression_output:    y = x
// logistic_regression_output:  y = sigmoid(x) = 1 / (1 + e^-x)
//   x: (N, ...); label: x's shape, or (N,) when x is (N, 1) (any shape with
//   N rows and x's size is accepted, as in MXNet).
// Loss heads with MXNet's gradient (regression_output-inl.h):
//   dx = (y - label) * grad_scale / m,   m = label size / N (outputs per sample)
// i.e. the gradient of grad_scale / m * sum (y - label)^2 / 2 (linear) or of
// the cross-entropy -grad_scale / m * sum [label log y + (1-label) log(1-y)]
// (logistic). Note: MXNet does not divide by the batch size here.
//   reads y and label; dlabel = 0
#include <cmath>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

void RegressionInferShape(ShapeCtx& c) {
  const Shape& x = c.in[0];
  if (!x.known() || x.ndim() < 1) c.Fail(Fmt("x must have a batch dim, got ", x));
  if (!c.in[1].known()) c.in[1] = x.ndim() == 2 && x[1] == 1 ? Shape{x[0]} : x;
  const Shape& label = c.in[1];
  if (label.ndim() < 1 || label[0] != x[0] || label.Size() != x.Size()) {
    c.Fail(Fmt("label has shape ", label, " but x has ", x, " (the label needs x's batch size and number of values)"));
  }
  c.out[0] = x;
}

template <bool kLogistic>
void RegressionForward(const KernelCtx& c) {
  const float* x = c.in[0].f();
  ForEach(c.out[0].size(), Out(c, 0), c.req[0],
          [=](int64_t i) { return kLogistic ? 1.f / (1.f + std::exp(-x[i])) : x[i]; });
}

// inputs: y, label    outputs: dx, dlabel (zeros)
void RegressionBackward(const KernelCtx& c) {
  const float* y = c.in[0].f();
  const float* label = c.in[1].f();
  const Shape& ls = c.in[1].shape();
  const float scale = static_cast<float>(c.params<RegressionParams>().grad_scale / (ls.Size() / ls[0]));
  ForEach(c.out[1].size(), Out(c, 1), c.req[1], [](int64_t) { return 0.f; });
  ForEach(c.out[0].size(), Out(c, 0), c.req[0], [=](int64_t i) { return (y[i] - label[i]) * scale; });
}

template <bool kLogistic>
void RegisterRegression(OpRegistry* r, const std::string& name, const std::string& doc) {
  OpDef& fwd = r->Add(name)
                   .Doc(doc)
                   .LabelLoss("y")
                   .Params<RegressionParams>()
                   .InferShape(RegressionInferShape)
                   .Recompute(Cost::kCheap)
                   .CpuKernel(RegressionForward<kLogistic>);
  AddBackward(r, fwd, {Output(0), Input(1)}, "dx = (y - label) * grad_scale / (outputs per sample).")
      .Inplace({{0, 0}})
      .CpuKernel(RegressionBackward);
}

}  // namespace

RegressionParams RegressionParams::Parse(AttrReader& a) { return {a.Float("grad_scale", 1.0)}; }

void Register_regression_output(OpRegistry* r) {
  RegisterRegression<false>(r, "linear_regression_output",
                            "Least-squares loss head: y = x; dx = (y - label) * grad_scale / m.");
  RegisterRegression<true>(r, "logistic_regression_output",
                           "Logistic loss head: y = sigmoid(x); dx = (y - label) * grad_scale / m.");
}

}  // namespace frugal
