// softmax and log_softmax on the GPU along one axis (src/ops/softmax.cc),
// the tensor seen as (outer, L, inner):
//   softmax:      y = exp(x - max) / sum exp(x - max)     dx = y (dy - sum(dy y))
//   log_softmax:  y = x - max - log sum exp(x - max)      dx = dy - exp(y) sum(dy)
// inner == 1 (the last axis): one block per row; otherwise one thread per
// (outer, inner) column, looping over the axis.
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

struct Geom {
  int64_t outer, len, inner;
  bool log, add;
};

// Element j of the line of column `col`: x[At(col, j)].
__device__ inline int64_t At(const Geom& g, int64_t col, int64_t j) {
  return (col / g.inner) * g.len * g.inner + j * g.inner + col % g.inner;
}

__device__ inline void Put(float* p, bool add, float v) { *p = add ? *p + v : v; }

__global__ void SoftmaxRowsKernel(Geom g, const float* x, float* y) {
  const float* xi = x + blockIdx.x * g.len;
  float* yi = y + blockIdx.x * g.len;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < g.len; j += blockDim.x) mx = fmaxf(mx, xi[j]);
  mx = cuda::BlockMax(mx);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < g.len; j += blockDim.x) sum += expf(xi[j] - mx);
  sum = cuda::BlockSum(sum);
  const float log_sum = logf(sum);
  for (int64_t j = threadIdx.x; j < g.len; j += blockDim.x) {
    const float v = g.log ? xi[j] - mx - log_sum : expf(xi[j] - mx) / sum;
    Put(yi + j, g.add, v);  // x and y may alias: read before written, by the same thread
  }
}

__global__ void SoftmaxColumnsKernel(Geom g, const float* x, float* y) {
  for (int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; col < g.outer * g.inner;
       col += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    float mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < g.len; ++j) mx = fmaxf(mx, x[At(g, col, j)]);
    for (int64_t j = 0; j < g.len; ++j) sum += expf(x[At(g, col, j)] - mx);
    const float log_sum = logf(sum);
    for (int64_t j = 0; j < g.len; ++j) {
      const int64_t i = At(g, col, j);
      Put(y + i, g.add, g.log ? x[i] - mx - log_sum : expf(x[i] - mx) / sum);
    }
  }
}

// s = sum(dy y) (softmax) or sum(dy) (log_softmax) per line, then dx.
__global__ void SoftmaxGradRowsKernel(Geom g, const float* dy, const float* y, float* dx) {
  const int64_t base = blockIdx.x * g.len;
  float s = 0;
  for (int64_t j = threadIdx.x; j < g.len; j += blockDim.x) s += g.log ? dy[base + j] : dy[base + j] * y[base + j];
  s = cuda::BlockSum(s);
  for (int64_t j = threadIdx.x; j < g.len; j += blockDim.x) {
    const int64_t i = base + j;
    Put(dx + i, g.add, g.log ? dy[i] - expf(y[i]) * s : y[i] * (dy[i] - s));
  }
}

__global__ void SoftmaxGradColumnsKernel(Geom g, const float* dy, const float* y, float* dx) {
  for (int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; col < g.outer * g.inner;
       col += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    float s = 0;
    for (int64_t j = 0; j < g.len; ++j) {
      const int64_t i = At(g, col, j);
      s += g.log ? dy[i] : dy[i] * y[i];
    }
    for (int64_t j = 0; j < g.len; ++j) {
      const int64_t i = At(g, col, j);
      Put(dx + i, g.add, g.log ? dy[i] - expf(y[i]) * s : y[i] * (dy[i] - s));
    }
  }
}

Geom GeomOf(const KernelCtx& c, const Shape& x) {
  const auto& p = c.params<SoftmaxParams>();
  const int a = static_cast<int>(p.axis < 0 ? p.axis + x.ndim() : p.axis);
  return {x.Prod(0, a), x[a], x.Prod(a + 1, x.ndim()), p.log, c.req[0] == OpReq::kAdd};
}

void SoftmaxForwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull || c.in[0].size() == 0) return;
  const Geom g = GeomOf(c, c.in[0].shape());
  if (g.inner == 1) {
    SoftmaxRowsKernel<<<static_cast<unsigned>(g.outer), cuda::kThreads, 0, cuda::Stream(c)>>>(g, c.in[0].f(),
                                                                                              c.out[0].f());
  } else {
    SoftmaxColumnsKernel<<<cuda::Blocks(g.outer * g.inner), cuda::kThreads, 0, cuda::Stream(c)>>>(g, c.in[0].f(),
                                                                                                  c.out[0].f());
  }
  FRUGAL_CUDA_LAUNCHED();
}

// inputs: dy, y   output: dx
void SoftmaxBackwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull || c.in[0].size() == 0) return;
  const Geom g = GeomOf(c, c.in[0].shape());
  if (g.inner == 1) {
    SoftmaxGradRowsKernel<<<static_cast<unsigned>(g.outer), cuda::kThreads, 0, cuda::Stream(c)>>>(
        g, c.in[0].f(), c.in[1].f(), c.out[0].f());
  } else {
    SoftmaxGradColumnsKernel<<<cuda::Blocks(g.outer * g.inner), cuda::kThreads, 0, cuda::Stream(c)>>>(
        g, c.in[0].f(), c.in[1].f(), c.out[0].f());
  }
  FRUGAL_CUDA_LAUNCHED();
}

}  // namespace

void RegisterCuda_softmax(OpRegistry* r) {
  for (const char* op : {"softmax", "log_softmax"}) SetCudaKernels(r, op, SoftmaxForwardCuda, SoftmaxBackwardCuda);
}

}  // namespace frugal
