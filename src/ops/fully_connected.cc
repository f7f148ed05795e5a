// fully_connected:  y = x W^T + b
//   x: (N, K) after flattening (flatten=true: N = dim 0, K = the rest;
//      flatten=false: K = last dim, N = the rest), W: (M, K), b: (M,), y: (N, M)
// grad:  dx = dy W        dW = dy^T x        db = sum over rows of dy
//        reads dy, x and W (not b, not y)
#include <vector>

#include "backend/cpu/blas.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

// Rows N and columns K of x as the op sees it.
void RowsCols(const FcParams& p, const Shape& x, int64_t* n, int64_t* k) {
  int split = p.flatten ? 1 : x.ndim() - 1;
  *n = x.Prod(0, split);
  *k = x.Prod(split, x.ndim());
}

void FcInferShape(ShapeCtx& c) {
  const auto& p = c.params<FcParams>();
  const Shape& x = c.in[0];
  if (!x.known()) c.Fail("the shape of input x is unknown");
  if (x.ndim() < 1 || (!p.flatten && x.ndim() < 2)) c.Fail(Fmt("x has shape ", x, "; expected at least 2 dims"));
  int64_t n, k;
  RowsCols(p, x, &n, &k);
  Shape w{p.num_hidden, k};
  if (!c.in[1].known()) c.in[1] = w;
  if (c.in[1] != w) {
    c.Fail(Fmt("weight has shape ", c.in[1], " but x ", x, " needs ", w, " (num_hidden=", p.num_hidden,
               ", ", k, " input features)"));
  }
  if (!p.no_bias) {
    if (!c.in[2].known()) c.in[2] = Shape{p.num_hidden};
    if (c.in[2] != Shape{p.num_hidden}) c.Fail(Fmt("bias has shape ", c.in[2], " but num_hidden is ", p.num_hidden));
  }
  std::vector<int64_t> y = p.flatten ? std::vector<int64_t>{x[0]} : std::vector<int64_t>(x.dims().begin(), x.dims().end() - 1);
  y.push_back(p.num_hidden);
  c.out[0] = Shape(y);
}

void FcForward(const KernelCtx& c) {
  const auto& p = c.params<FcParams>();
  if (c.req[0] == OpReq::kNull) return;
  int64_t n, k;
  RowsCols(p, c.in[0].shape(), &n, &k);
  const int64_t m = p.num_hidden;
  float* y = Out(c, 0);
  float beta = c.req[0] == OpReq::kAdd ? 1.f : 0.f;
  cpu::Gemm(false, true, n, m, k, 1.f, c.in[0].f(), c.in[1].f(), beta, y);  // y (+)= x W^T
  if (p.no_bias) return;
  const float* b = c.in[2].f();
#pragma omp parallel for if (n * m > 32768) schedule(static)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) y[i * m + j] += b[j];
}

// inputs: dy (N,M), x (N,K), W (M,K)    outputs: dx, dW[, db]
void FcBackward(const KernelCtx& c) {
  const auto& p = c.params<FcParams>();
  int64_t n, k;
  RowsCols(p, c.in[1].shape(), &n, &k);
  const int64_t m = p.num_hidden;
  const float* dy = c.in[0].f();
  auto beta = [&](int i) { return c.req[i] == OpReq::kAdd ? 1.f : 0.f; };
  if (c.req[0] != OpReq::kNull) cpu::Gemm(false, false, n, k, m, 1.f, dy, c.in[2].f(), beta(0), Out(c, 0));
  if (c.req[1] != OpReq::kNull) cpu::Gemm(true, false, m, k, n, 1.f, dy, c.in[1].f(), beta(1), Out(c, 1));
  if (p.no_bias || c.req[2] == OpReq::kNull) return;
  // db = the column sums of dy, each over the rows in order, accumulated a
  // row at a time (contiguous, so the loop vectorises; a loop down each
  // column strides by m).
  std::vector<float> sum(m, 0.f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) sum[j] += dy[i * m + j];
  ForEach(m, Out(c, 2), c.req[2], [&](int64_t j) { return sum[j]; });
}

}  // namespace

void Register_fully_connected(OpRegistry* r) {
  auto num_inputs = [](const std::any& p) { return std::any_cast<const FcParams&>(p).no_bias ? 2 : 3; };
  r->Add("fully_connected")
      .Doc("Affine layer y = x W^T + b; num_hidden outputs, optional bias, flatten=true folds all but dim 0.")
      .Inputs({{"x"}, {"weight", VarKind::kParam, "xavier"}, {"bias", VarKind::kParam, "zero"}})
      .Outputs({"y"})
      .Params([](AttrReader& a) {
        FcParams p;
        p.num_hidden = a.Int("num_hidden");
        p.no_bias = a.Bool("no_bias", false);
        p.flatten = a.Bool("flatten", true);
        FRUGAL_REQUIRE(p.num_hidden > 0, a.where(), ": num_hidden must be positive, got ", p.num_hidden);
        return std::any(p);
      })
      .NumInputsFn(num_inputs)
      .InferShape(FcInferShape)
      .Backward({OutGrad(0), Input(0), Input(1)}, "_backward_fully_connected")
      .Recompute(Cost::kExpensive)
      .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>& out) {
        return 2.0 * out[0].Size() * in[1][1];  // N*M outputs, K multiply-adds each
      })
      .CpuKernel(FcForward);
  r->Add("_backward_fully_connected")
      .Doc("Gradient of fully_connected: dx = dy W, dW = dy^T x, db = sum(dy).")
      .Inputs({{"dy"}, {"x"}, {"weight"}})
      .Outputs({"dx", "dweight", "dbias"})
      .NumInputsFn([](const std::any&) { return 3; })
      .NumOutputsFn(num_inputs)
      .InferShape(InferAsForwardInputs)
      .NoGradient()
      .Recompute(Cost::kExpensive)
      .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
        return 4.0 * in[0].Size() * in[2][1];  // dx and dW: two products of N*M*K
      })
      .AddTo({0, 1, 2})
      .CpuKernel(FcBackward);
}

}  // namespace frugal
