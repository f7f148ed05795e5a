// fully_connected on the GPU with cuBLAS (src/ops/fully_connected.cc):
//   y = x W^T + b        dx = dy W        dW = dy^T x        db = sum over rows of dy
// cuBLAS is column-major: a row-major (r, c) matrix is its transpose, so
// y^T (M, N) = W (M, K) x^T (K, N) is gemm(op(W) = W^T as stored, x as stored).
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

void RowsCols(const FcParams& p, const Shape& x, int64_t* n, int64_t* k) {
  const int split = p.flatten ? 1 : x.ndim() - 1;
  *n = x.Prod(0, split);
  *k = x.Prod(split, x.ndim());
}

// db[j] (+)= sum_i dy[i, j]: one thread per column, rows in order.
__global__ void ColumnSums(const float* dy, int64_t n, int64_t m, float* db, bool add) {
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < m;
       j += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += dy[i * m + j];
    db[j] = add ? db[j] + s : s;
  }
}

void FcForwardCuda(const KernelCtx& c) {
  const auto& p = c.params<FcParams>();
  if (c.req[0] == OpReq::kNull) return;
  int64_t n, k;
  RowsCols(p, c.in[0].shape(), &n, &k);
  const int64_t m = p.num_hidden;
  float* y = c.out[0].f();
  cuda::GemmRowMajor(cuda::Ctx(c).cublas, false, true, n, m, k, c.in[0].f(), c.in[1].f(), cuda::Beta(c.req[0]), y);
  if (p.no_bias) return;
  const float* b = c.in[2].f();
  cuda::Map(cuda::Stream(c), n * m, y, OpReq::kAdd, [b, m] __device__(int64_t i) { return b[i % m]; });
}

// inputs: dy (N,M), x (N,K), W (M,K)    outputs: dx, dW[, db]
void FcBackwardCuda(const KernelCtx& c) {
  const auto& p = c.params<FcParams>();
  int64_t n, k;
  RowsCols(p, c.in[1].shape(), &n, &k);
  const int64_t m = p.num_hidden;
  const float* dy = c.in[0].f();
  cublasHandle_t h = cuda::Ctx(c).cublas;
  // dW and db first: dx may overwrite dy (in place).
  if (c.req[1] != OpReq::kNull)
    cuda::GemmRowMajor(h, true, false, m, k, n, dy, c.in[1].f(), cuda::Beta(c.req[1]), c.out[1].f());
  if (!p.no_bias && c.req[2] != OpReq::kNull) {
    ColumnSums<<<cuda::Blocks(m), cuda::kThreads, 0, cuda::Stream(c)>>>(dy, n, m, c.out[2].f(),
                                                                        c.req[2] == OpReq::kAdd);
    FRUGAL_CUDA_LAUNCHED();
  }
  if (c.req[0] != OpReq::kNull)
    cuda::GemmRowMajor(h, false, false, n, k, m, dy, c.in[2].f(), cuda::Beta(c.req[0]), c.out[0].f());
}

}  // namespace

void RegisterCuda_fully_connected(OpRegistry* r) {
  SetCudaKernels(r, "fully_connected", FcForwardCuda, FcBackwardCuda);
}

}  // namespace frugal
