// softmax_cross_entropy:  p = softmax(x) over the last axis; the loss is
//   L = -sum_i log p[i, label_i] / norm over the rows i that are not ignored,
//   and the op's output is p.
//   x: (N, C), label: (N,) class indices as floats, p: (N, C)
//   ignore_label (default: none): rows with this label add no loss and get
//     no gradient; their label need not be a class index.
//   normalization: "batch" (norm = N), "null" (norm = 1) or "valid" (norm =
//     the number of rows not ignored, at least 1); grad_scale scales dx.
// grad:  dx[i] = (p[i] - onehot(label_i)) * grad_scale / norm, 0 for ignored rows
//   a loss head: reads p and label, no output gradient; dlabel = 0
#include <algorithm>
#include <cmath>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

void SceInferShape(ShapeCtx& c) {
  const Shape& x = c.in[0];
  if (!x.known() || x.ndim() != 2) c.Fail(Fmt("x must be (batch, classes), got ", x, " (add a flatten?)"));
  Shape label{x[0]};
  if (!c.in[1].known()) c.in[1] = label;
  if (c.in[1] != label) c.Fail(Fmt("label has shape ", c.in[1], " but x ", x, " needs ", label));
  c.out[0] = x;
}

bool Ignored(const SceParams& p, float label) { return p.use_ignore && label == p.ignore_label; }

void SceForward(const KernelCtx& c) {
  const auto& prm = c.params<SceParams>();
  const int64_t n = c.in[0].shape()[0], k = c.in[0].shape()[1];
  const float* x = c.in[0].f();
  const float* label = c.in[1].f();
  float* p = Out(c, 0);
  for (int64_t i = 0; i < n; ++i) {
    FRUGAL_REQUIRE(Ignored(prm, label[i]) || (label[i] >= 0 && label[i] < k && label[i] == std::floor(label[i])),
                   c.node.Where(), ": label ", label[i], " of sample ", i, " is not a class index in [0, ", k, ")",
                   prm.use_ignore ? "" : " (set ignore_label to skip such rows)");
  }
  if (c.req[0] == OpReq::kNull) return;
#pragma omp parallel for if (n * k > kParallelGrain) schedule(static)
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

// inputs: p, label    outputs: dx, dlabel (zeros)
void SceBackward(const KernelCtx& c) {
  const auto& prm = c.params<SceParams>();
  const int64_t n = c.in[0].shape()[0], k = c.in[0].shape()[1];
  const float* p = c.in[0].f();
  const float* label = c.in[1].f();
  ForEach(c.out[1].size(), Out(c, 1), c.req[1], [](int64_t) { return 0.f; });
  double norm = 1;
  if (prm.normalization == "batch") norm = static_cast<double>(n);
  if (prm.normalization == "valid") {
    int64_t valid = 0;
    for (int64_t i = 0; i < n; ++i) valid += !Ignored(prm, label[i]);
    norm = static_cast<double>(std::max<int64_t>(valid, 1));
  }
  const float scale = static_cast<float>(prm.grad_scale / norm);
  ForEach(n * k, Out(c, 0), c.req[0], [&](int64_t e) {
    const int64_t i = e / k, j = e % k;
    if (Ignored(prm, label[i])) return 0.f;
    return (p[e] - (static_cast<int64_t>(label[i]) == j ? 1.f : 0.f)) * scale;
  });
}

}  // namespace

SceParams SceParams::Parse(AttrReader& a) {
  SceParams p;
  p.grad_scale = a.Float("grad_scale", 1.0);
  p.normalization = a.Choice("normalization", "batch", {"batch", "null", "valid"});
  const double ignore = a.Float("ignore_label", NAN);
  p.use_ignore = !std::isnan(ignore);
  p.ignore_label = static_cast<float>(ignore);
  return p;
}

void Register_softmax_cross_entropy(OpRegistry* r) {
  OpDef& fwd =
      r->Add("softmax_cross_entropy")
          .Doc("Softmax over the last axis with a cross-entropy loss against class labels; outputs probabilities.")
          .LabelLoss("prob")
          .Params<SceParams>()
          .InferShape(SceInferShape)
          .Recompute(Cost::kCheap)
          .CpuKernel(SceForward);
  AddBackward(r, fwd, {Output(0), Input(1)}, "dx = (p - onehot(label)) * grad_scale / norm, 0 on ignored rows.")
      .Inplace({{0, 0}})
      .CpuKernel(SceBackward);
}

}  // namespace frugal
