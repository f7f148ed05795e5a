// linear_cross_entropy:  a classifier over a large vocabulary and its loss in
//   one op, computed a chunk of rows at a time, so the (N, V) logits never
//   exist in full (a language model's head: at batch 8, T 4,096 and GPT-2's
//   50,257 tokens they would be 6.1 GiB, and their gradient as much again).
//   z = x W^T + b, p = softmax(z) over the V classes of each row, and the loss
//   L = -sum_i log p[i, label_i] / norm.
//   x: (N, K), label: (N,) class indices as floats, W: (V, K), b: (V,)
//   score (the output): (N, 2), per row -log p[i, label_i] and the rank of
//     the label among the row's logits (0: the largest; a tie goes to the
//     lower class, as the accuracy metric's does), which the metrics read in
//     place of probabilities (frugal/metrics.h, OutputKind::kLossAndRank)
//   num_hidden: V; chunk: rows of logits at a time (0: as many as fit in
//     64 MiB, the declared workspace); normalization "batch" (norm = N) or
//     "null" (norm = 1); grad_scale scales the gradients.
// grad:  dz = (p - onehot(label)) * grad_scale / norm, dx = dz W, dW = dz^T x,
//   db = the column sums of dz: a loss head's gradients need no output
//   gradient, so the forward computes them chunk by chunk while it has p
//   (as Liger-Kernel's fused linear cross-entropy does) into hidden outputs
//   dx, dW, db, which only a training graph's backward reads; the backward
//   hands them on (in place where it can); dlabel = 0.
// predict (inference): p = softmax(x W^T + b), (N, V), as fully_connected and
//   softmax nodes: what the head classifies, without the label.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/cpu/blas.h"
#include "ops/cpu/vec.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

struct LceParams {
  int64_t num_hidden = 0;
  int64_t chunk = 0;
  bool batch_norm = true;  // normalization "batch"
  double grad_scale = 1;
  static LceParams Parse(AttrReader& a);
};

constexpr int64_t kChunkBytes = int64_t{64} << 20;

int64_t ChunkRows(const LceParams& p, int64_t n) {
  const int64_t fit = std::max<int64_t>(1, kChunkBytes / (static_cast<int64_t>(sizeof(float)) * p.num_hidden));
  return std::min(p.chunk > 0 ? p.chunk : fit, n);
}

void LceInferShape(ShapeCtx& c) {
  const auto& p = c.params<LceParams>();
  const Shape& x = c.in[0];
  if (!x.known() || x.ndim() != 2) c.Fail(Fmt("x must be (rows, features), got ", x, " (add a reshape?)"));
  const Shape label{x[0]}, w{p.num_hidden, x[1]}, b{p.num_hidden};
  if (!c.in[1].known()) c.in[1] = label;
  if (c.in[1] != label) c.Fail(Fmt("label has shape ", c.in[1], " but x ", x, " needs ", label, ", a class per row"));
  if (!c.in[2].known()) c.in[2] = w;
  if (c.in[2] != w) {
    c.Fail(Fmt("weight has shape ", c.in[2], " but x ", x, " needs ", w, " (num_hidden=", p.num_hidden, ", ", x[1],
               " input features)"));
  }
  if (!c.in[3].known()) c.in[3] = b;
  if (c.in[3] != b) c.Fail(Fmt("bias has shape ", c.in[3], " but num_hidden is ", p.num_hidden));
  c.out[0] = Shape{x[0], 2};
  c.out[1] = x;
  c.out[2] = w;
  c.out[3] = b;
}

struct Dims {
  int64_t n, k, v, chunk;
};

Dims DimsOf(const LceParams& p, const Shape& x) { return {x[0], x[1], p.num_hidden, ChunkRows(p, x[0])}; }

// For each chunk of rows: z = x W^T + b into the workspace, then
// row(i, z_i) for each of its rows i in parallel, then chunk(r0, rows, z).
template <typename RowFn, typename ChunkFn>
void Chunks(const KernelCtx& c, const Dims& d, RowFn row, ChunkFn chunk) {
  const float *x = c.in[0].f(), *w = c.in[2].f(), *b = c.in[3].f();
  float* z = static_cast<float*>(c.workspace.raw());
  for (int64_t r0 = 0; r0 < d.n; r0 += d.chunk) {
    const int64_t rows = std::min(d.chunk, d.n - r0);
    cpu::Gemm(false, true, rows, d.v, d.k, 1.f, x + r0 * d.k, w, 0.f, z);
#pragma omp parallel for num_threads(cpu::KernelThreads()) if (rows * d.v > kParallelGrain) schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      float* zi = z + i * d.v;
      for (int64_t j = 0; j < d.v; ++j) zi[j] += b[j];
      row(r0 + i, zi);
    }
    chunk(r0, rows, z);
  }
}

// The class of row i: a class index, or an error naming the node.
int64_t ClassOf(const KernelCtx& c, const float* label, int64_t i, int64_t v) {
  const float t = label[i];
  FRUGAL_REQUIRE(t >= 0 && t < v && t == std::floor(t), c.node.Where(), ": label ", t, " of row ", i,
                 " is not a class index in [0, ", v, ")");
  return static_cast<int64_t>(t);
}

// Logits ranked above the label's: larger ones, or equal ones at a lower
// class; a NaN ranks above every number (the accuracy metric's rule).
// Branch-free loops (z != z for NaN), which vectorise.
int64_t RankOf(const float* z, int64_t v, int64_t t) {
  const float zt = z[t];
  if (zt != zt) return v;
  int64_t rank = 0;
  for (int64_t j = 0; j < t; ++j) rank += (z[j] >= zt) | (z[j] != z[j]);
  for (int64_t j = t + 1; j < v; ++j) rank += (z[j] > zt) | (z[j] != z[j]);
  return rank;
}

float MaxOf(const float* z, int64_t v) {
  float top = z[0];
#pragma omp simd reduction(max : top)
  for (int64_t j = 1; j < v; ++j) top = std::max(top, z[j]);
  return top;
}

// inputs: x, label, W, b    outputs: score (N, 2); hidden, when training:
// dx (N, K), dW (V, K), db (V), computed here from each chunk's
// probabilities (a loss head reads no output gradient, so they are known
// now), which the backward only hands on: three products of the logits'
// size, as an unfused head's, where recomputing the logits in the backward
// would take four.
void LceForward(const KernelCtx& c) {
  const auto& p = c.params<LceParams>();
  const Dims d = DimsOf(p, c.in[0].shape());
  const float *x = c.in[0].f(), *label = c.in[1].f(), *w = c.in[2].f();
  for (int64_t i = 0; i < d.n; ++i) ClassOf(c, label, i, d.v);
  float* score = Out(c, 0);
  float *dx = Out(c, 1), *dw = Out(c, 2), *dbias = Out(c, 3);
  const bool grads = dx || dw || dbias;
  if (!score && !grads) return;
  const float scale = static_cast<float>(p.grad_scale / (p.batch_norm ? static_cast<double>(d.n) : 1.0));
  std::vector<float> db(grads ? d.v : 0, 0.f);
  const auto& vec = cpu::Vec();
  auto row = [&](int64_t i, float* zi) {  // the loss and rank; zi becomes dz_i = (p_i - onehot(label_i)) * scale
    const int64_t t = static_cast<int64_t>(label[i]);
    const float label_logit = zi[t], top = MaxOf(zi, d.v);
    const float rank = score ? static_cast<float>(RankOf(zi, d.v, t)) : 0.f;
    const float sum = vec.exp_shift(zi, top, zi, d.v);
    if (score) {
      Assign(score + 2 * i, c.req[0], top + std::log(sum) - label_logit);
      Assign(score + 2 * i + 1, c.req[0], rank);
    }
    if (!grads) return;
    const float k = scale / sum;
    for (int64_t j = 0; j < d.v; ++j) zi[j] *= k;
    zi[t] -= scale;
  };
  auto chunk = [&](int64_t r0, int64_t rows, const float* dz) {
    if (!grads) return;
    // Each chunk's rows of dx are its own; dW and db sum over the chunks.
    if (dx) cpu::Gemm(false, false, rows, d.k, d.v, 1.f, dz, w, c.req[1] == OpReq::kAdd ? 1.f : 0.f, dx + r0 * d.k);
    if (dw) {
      const bool first = r0 == 0 && c.req[2] == OpReq::kWrite;
      cpu::Gemm(true, false, d.v, d.k, rows, 1.f, dz, x + r0 * d.k, first ? 0.f : 1.f, dw);
    }
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < d.v; ++j) db[j] += dz[i * d.v + j];
  };
  Chunks(c, d, row, chunk);
  ForEach(d.v, dbias, c.req[3], [&](int64_t j) { return db[j]; });
}

// inputs: dx, dW, db (the forward's hidden outputs)    outputs: dx, dlabel (zeros), dW, db
void LceBackward(const KernelCtx& c) {
  CopyInto(c.in[0], c.out[0], c.req[0]);
  ForEach(c.out[1].defined() ? c.out[1].size() : 0, Out(c, 1), c.req[1], [](int64_t) { return 0.f; });
  CopyInto(c.in[1], c.out[2], c.req[2]);
  CopyInto(c.in[2], c.out[3], c.req[3]);
}

// One chunk of logits.
int64_t LceWorkspace(const WorkspaceCtx& c) {
  const Dims d = DimsOf(c.params<LceParams>(), c.in[0]);
  return d.chunk * d.v * static_cast<int64_t>(sizeof(float));
}

// The logits, the gradients' two products, and exp and the softmax per logit.
double LceFlops(const std::vector<Shape>& in) {
  const double rows = static_cast<double>(in[0][0]), classes = static_cast<double>(in[2][0]);
  return rows * classes * (6.0 * in[0][1] + 6);
}

}  // namespace

LceParams LceParams::Parse(AttrReader& a) {
  LceParams p;
  p.num_hidden = a.Int("num_hidden");
  p.chunk = a.Int("chunk", 0);
  p.batch_norm = a.Choice("normalization", "batch", {"batch", "null"}) == "batch";
  p.grad_scale = a.Float("grad_scale", 1.0);
  FRUGAL_REQUIRE(p.num_hidden > 0, a.where(), ": num_hidden must be positive, got ", p.num_hidden);
  FRUGAL_REQUIRE(p.chunk >= 0, a.where(), ": chunk must be a number of rows (0: as many as fit in 64 MiB), got ",
                 p.chunk);
  return p;
}

void Register_linear_cross_entropy(OpRegistry* r) {
  OpDef& fwd =
      r->Add("linear_cross_entropy")
          .Doc(
              "A fully connected layer of num_hidden classes with a softmax cross-entropy loss, computed chunk rows "
              "at a time so the logits never exist in full; outputs per row the loss and the label's rank.")
          .Inputs({{"x"}, {"label"}, {"weight", VarKind::kParam, "xavier"}, {"bias", VarKind::kParam, "zero"}})
          .Outputs({"score", "dx", "dweight", "dbias"})
          .VisibleOutputs(1)
          .Params<LceParams>()
          .InferShape(LceInferShape)
          .Loss()
          .OutputsLossAndRank()
          .Predicts([](Graph& g, const Node& n) {
            const int64_t v = std::any_cast<const LceParams&>(n.params).num_hidden;
            const int z = g.AddOp("fully_connected", n.name + "/logits", {{"num_hidden", std::to_string(v)}},
                                  {n.inputs[0], n.inputs[2], n.inputs[3]}, n.loc);
            return Entry{g.AddOp("softmax", n.name + "/prob", {}, {{z, 0}}, n.loc), 0};
          })
          .Recompute(Cost::kExpensive)
          .Workspace(LceWorkspace)
          .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) { return LceFlops(in); })
          .CpuKernel(LceForward);
  AddBackward(r, fwd, {Output(1), Output(2), Output(3)},
              "the gradients its forward computed (dx, dW, db), handed on; dlabel = 0.")
      .Inplace({{0, 0}, {1, 2}, {2, 3}})
      .Recompute(Cost::kCheap)
      .AddTo({0, 2, 3})
      .CpuKernel(LceBackward);
}

}  // namespace frugal
