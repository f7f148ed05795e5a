// matmul:     y = op(a) op(b)               a, b 2-d; op(a): (M,K), op(b): (K,N), y: (M,N)
// batch_dot:  y[i] = op(a[i]) op(b[i])      a, b 3-d with the same batch B; y: (B,M,N)
//   op(t) = t^T when transpose_a / transpose_b is set, else t.
// grad (per batch item), reads dy, a, b:
//   da = dy op(b)^T         (transpose_a: da = op(b) dy^T)
//   db = op(a)^T dy         (transpose_b: db = dy^T op(a))
// sgemm (ops/cpu/blas.h) per batch item (Cost::kExpensive).
#include "ops/cpu/blas.h"
#include "ops/matmul.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

template <int kRank>
void MatmulInferShape(ShapeCtx& c) {
  const auto& p = c.params<MatmulParams>();
  const Shape &a = c.in[0], &b = c.in[1];
  if (!a.known() || !b.known()) c.Fail("the shapes of both inputs must be known");
  if (a.ndim() != kRank || b.ndim() != kRank) {
    c.Fail(Fmt("a ", a, " and b ", b, " must both have ", kRank, " dims",
               kRank == 2 ? " (use batch_dot for batches)" : " (batch, rows, columns)"));
  }
  if (kRank == 3 && a[0] != b[0]) c.Fail(Fmt("a ", a, " and b ", b, " have different batch sizes"));
  const GemmDims d = DimsOf(p, a, b);
  const int64_t kb = p.transpose_b ? b[kRank - 1] : b[kRank - 2];
  if (d.k != kb) {
    c.Fail(Fmt("op(a) has ", d.k, " columns but op(b) has ", kb, " rows (a ", a, ", b ", b,
               ", transpose_a=", p.transpose_a, ", transpose_b=", p.transpose_b, ")"));
  }
  c.out[0] = kRank == 3 ? Shape{d.batch, d.m, d.n} : Shape{d.m, d.n};
}

float Beta(OpReq req) { return req == OpReq::kAdd ? 1.f : 0.f; }

void MatmulForward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const auto& p = c.params<MatmulParams>();
  const GemmDims d = DimsOf(p, c.in[0].shape(), c.in[1].shape());
  for (int64_t i = 0; i < d.batch; ++i) {
    cpu::Gemm(p.transpose_a, p.transpose_b, d.m, d.n, d.k, 1.f, c.in[0].f() + i * d.m * d.k,
              c.in[1].f() + i * d.k * d.n, Beta(c.req[0]), Out(c, 0) + i * d.m * d.n);
  }
}

// inputs: dy, a, b    outputs: da, db
void MatmulBackward(const KernelCtx& c) {
  const auto& p = c.params<MatmulParams>();
  const GemmDims d = DimsOf(p, c.in[1].shape(), c.in[2].shape());
  const bool ta = p.transpose_a, tb = p.transpose_b;
  for (int64_t i = 0; i < d.batch; ++i) {
    const float* dy = c.in[0].f() + i * d.m * d.n;
    const float* a = c.in[1].f() + i * d.m * d.k;
    const float* b = c.in[2].f() + i * d.k * d.n;
    if (c.req[0] != OpReq::kNull) {
      float* da = Out(c, 0) + i * d.m * d.k;
      if (!ta)
        cpu::Gemm(false, !tb, d.m, d.k, d.n, 1.f, dy, b, Beta(c.req[0]), da);  // (M,N) x (N,K)
      else
        cpu::Gemm(tb, true, d.k, d.m, d.n, 1.f, b, dy, Beta(c.req[0]), da);  // (K,N) x (N,M)
    }
    if (c.req[1] != OpReq::kNull) {
      float* db = Out(c, 1) + i * d.k * d.n;
      if (!tb)
        cpu::Gemm(!ta, false, d.k, d.n, d.m, 1.f, a, dy, Beta(c.req[1]), db);  // (K,M) x (M,N)
      else
        cpu::Gemm(true, ta, d.n, d.k, d.m, 1.f, dy, a, Beta(c.req[1]), db);  // (N,M) x (M,K)
    }
  }
}

template <int kRank>
void RegisterMatmul(OpRegistry* r, const std::string& name, const std::string& doc) {
  OpDef& fwd = r->Add(name)
                   .Doc(doc)
                   .Inputs({{"a"}, {"b"}})
                   .Outputs({"y"})
                   .Params<MatmulParams>()
                   .InferShape(MatmulInferShape<kRank>)
                   .Recompute(Cost::kExpensive)
                   .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>& out) {
                     return 2.0 * in[0].Size() * out[0][out[0].ndim() - 1];  // batch*M*K*N multiply-adds
                   })
                   .CpuKernel(MatmulForward);
  AddBackward(r, fwd, {OutGrad(0), Input(0), Input(1)},
              "da = dy op(b)^T, db = op(a)^T dy (transposed back where asked).")
      .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
        return 4.0 * in[1].Size() * in[0][in[0].ndim() - 1];  // da and db: each as much as the forward
      })
      .CpuKernel(MatmulBackward);
}

}  // namespace

MatmulParams MatmulParams::Parse(AttrReader& a) {
  MatmulParams p;
  p.transpose_a = a.Bool("transpose_a", false);
  p.transpose_b = a.Bool("transpose_b", false);
  return p;
}

void Register_matmul(OpRegistry* r) {
  RegisterMatmul<2>(r, "matmul", "Matrix product y = op(a) op(b) of 2-d a and b (transpose_a, transpose_b).");
  RegisterMatmul<3>(r, "batch_dot", "Batched matrix product y[i] = op(a[i]) op(b[i]) of 3-d a and b.");
}

}  // namespace frugal
