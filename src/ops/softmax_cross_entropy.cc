// softmax_cross_entropy:  p = softmax(x) over the last axis; the loss is
//   L = -sum_i log p[i, label_i] / norm, and the op's output is p.
//   x: (N, C), label: (N,) class indices as floats, p: (N, C)
//   normalization: "batch" (norm = N) or "null" (norm = 1); grad_scale scales dx
// grad:  dx = (p - onehot(label)) * grad_scale / norm
//   a loss head: reads p and label, no output gradient; label gets none
#include <algorithm>
#include <cmath>

#include "ops/op_util.h"

namespace frugal {
namespace {

struct SceParams {
  double grad_scale = 1.0;
  bool normalize_by_batch = true;
};

void SceInferShape(ShapeCtx& c) {
  const Shape& x = c.in[0];
  if (!x.known() || x.ndim() != 2) c.Fail(Fmt("x must be (batch, classes), got ", x, " (add a flatten?)"));
  Shape label{x[0]};
  if (!c.in[1].known()) c.in[1] = label;
  if (c.in[1] != label) c.Fail(Fmt("label has shape ", c.in[1], " but x ", x, " needs ", label));
  c.out[0] = x;
}

void SceForward(const KernelCtx& c) {
  const int64_t n = c.in[0].shape()[0], k = c.in[0].shape()[1];
  const float* x = c.in[0].f();
  const float* label = c.in[1].f();
  float* p = c.out[0].f();
  for (int64_t i = 0; i < n; ++i) {
    FRUGAL_REQUIRE(label[i] >= 0 && label[i] < k && label[i] == std::floor(label[i]), "label ", label[i],
                   " of sample ", i, " is not a class index in [0, ", k, ")");
  }
  if (c.req[0] == OpReq::kNull) return;
#pragma omp parallel for if (n * k > 32768) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * k;
    float* pi = p + i * k;
    const float mx = *std::max_element(xi, xi + k);
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(xi[j] - mx);
    // x and p may alias (in place): each element is read before it is written.
    for (int64_t j = 0; j < k; ++j) Assign(pi + j, c.req[0], std::exp(xi[j] - mx) / sum);
  }
}

// inputs: p, label    outputs: dx, dlabel (never requested)
void SceBackward(const KernelCtx& c) {
  const auto& prm = c.params<SceParams>();
  const int64_t n = c.in[0].shape()[0], k = c.in[0].shape()[1];
  const float* p = c.in[0].f();
  const float* label = c.in[1].f();
  const float scale = static_cast<float>(prm.grad_scale / (prm.normalize_by_batch ? n : 1));
  ForEach(n * k, c.out[0].f(), c.req[0], [=](int64_t e) {
    int64_t i = e / k, j = e % k;
    return (p[e] - (static_cast<int64_t>(label[i]) == j ? 1.f : 0.f)) * scale;
  });
}

}  // namespace

void Register_softmax_cross_entropy(OpRegistry* r) {
  r->Add("softmax_cross_entropy")
      .Doc("Softmax over the last axis with a cross-entropy loss against class labels; outputs probabilities.")
      .Inputs({{"x"}, {"label"}})
      .Outputs({"prob"})
      .Params([](AttrReader& a) {
        SceParams p;
        p.grad_scale = a.Float("grad_scale", 1.0);
        p.normalize_by_batch = a.Choice("normalization", "batch", {"batch", "null"}) == "batch";
        return std::any(p);
      })
      .InferShape(SceInferShape)
      .Backward({Output(0), Input(1)}, "_backward_softmax_cross_entropy")
      .Loss()
      .Inplace({{0, 0}})
      .Recompute(Cost::kCheap)
      .CpuKernel(SceForward);
  r->Add("_backward_softmax_cross_entropy")
      .Doc("Gradient of softmax_cross_entropy: dx = (p - onehot(label)) * grad_scale / norm.")
      .Inputs({{"prob"}, {"label"}})
      .Outputs({"dx", "dlabel"})
      .InferShape(InferAsForwardInputs)
      .NoGradient()
      .Inplace({{0, 0}})
      .Recompute(Cost::kCheap)
      .CpuKernel(SceBackward);
}

}  // namespace frugal
