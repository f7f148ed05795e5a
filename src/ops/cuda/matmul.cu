// matmul and batch_dot on the GPU with cuBLAS (src/ops/matmul.cc): one
// strided-batched SGEMM per product.
//   y = op(a) op(b)      da = dy op(b)^T (transpose_a: op(b) dy^T)      db = op(a)^T dy (transpose_b: dy^T op(a))
#include "ops/cuda/cuda_op_util.h"
#include "ops/matmul.h"

namespace frugal {
namespace {

void MatmulForwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const auto& p = c.params<MatmulParams>();
  const GemmDims d = DimsOf(p, c.in[0].shape(), c.in[1].shape());
  cuda::GemmRowMajor(cuda::Ctx(c).cublas, p.transpose_a, p.transpose_b, d.m, d.n, d.k, c.in[0].f(), c.in[1].f(),
                     cuda::Beta(c.req[0]), c.out[0].f(), d.batch, d.m * d.k, d.k * d.n, d.m * d.n);
}

// inputs: dy, a, b    outputs: da, db
void MatmulBackwardCuda(const KernelCtx& c) {
  const auto& p = c.params<MatmulParams>();
  const GemmDims d = DimsOf(p, c.in[1].shape(), c.in[2].shape());
  const bool ta = p.transpose_a, tb = p.transpose_b;
  cublasHandle_t h = cuda::Ctx(c).cublas;
  const float *dy = c.in[0].f(), *a = c.in[1].f(), *b = c.in[2].f();
  const int64_t sy = d.m * d.n, sa = d.m * d.k, sb = d.k * d.n;
  if (c.req[0] != OpReq::kNull) {
    const float beta = cuda::Beta(c.req[0]);
    if (!ta)
      cuda::GemmRowMajor(h, false, !tb, d.m, d.k, d.n, dy, b, beta, c.out[0].f(), d.batch, sy, sb, sa);
    else
      cuda::GemmRowMajor(h, tb, true, d.k, d.m, d.n, b, dy, beta, c.out[0].f(), d.batch, sb, sy, sa);
  }
  if (c.req[1] != OpReq::kNull) {
    const float beta = cuda::Beta(c.req[1]);
    if (!tb)
      cuda::GemmRowMajor(h, !ta, false, d.k, d.n, d.m, a, dy, beta, c.out[1].f(), d.batch, sa, sy, sb);
    else
      cuda::GemmRowMajor(h, true, ta, d.n, d.k, d.m, dy, a, beta, c.out[1].f(), d.batch, sy, sa, sb);
  }
}

}  // namespace

void RegisterCuda_matmul(OpRegistry* r) {
  for (const char* op : {"matmul", "batch_dot"}) SetCudaKernels(r, op, MatmulForwardCuda, MatmulBackwardCuda);
}

}  // namespace frugal
