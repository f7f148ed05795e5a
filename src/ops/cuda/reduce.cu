// sum, mean, max, min on the GPU (src/ops/reduce.cc). One thread per result
// element walks its group in row-major order: sums in double, the max's
// first maximal (minimal) element, as on the CPU; deterministic.
#include "ops/cuda/cuda_op_util.h"
#include "ops/reduce.h"

namespace frugal {
namespace {

struct Groups {
  cuda::DevIndex kept, folded;
  int64_t count, size;  // groups, elements per group
};

Groups GroupsOf(const KernelCtx& c, const Shape& x) {
  const Reduction red = ReductionOf(c, x);
  return {cuda::ToDevice(c, red.kept), cuda::ToDevice(c, red.folded), red.kept.size(), red.folded.size()};
}

template <bool kMin>
__device__ inline int64_t ArgBest(const float* x, const Groups& g, int64_t j) {
  const int64_t base = g.kept(j);
  int64_t best = base;
  for (int64_t r = 1; r < g.size; ++r) {
    const int64_t o = base + g.folded(r);
    if (kMin ? x[o] < x[best] : x[o] > x[best]) best = o;
  }
  return best;
}

template <bool kMean>
void SumForwardCuda(const KernelCtx& c) {
  const Groups g = GroupsOf(c, c.in[0].shape());
  const float* x = c.in[0].f();
  cuda::Map(c, 0, [=] __device__(int64_t j) {
    const int64_t base = g.kept(j);
    double s = 0;
    for (int64_t r = 0; r < g.size; ++r) s += x[base + g.folded(r)];
    return static_cast<float>(kMean ? s / g.size : s);
  });
}

// inputs: dy    output: dx[i] = dy[group of i] * scale
template <bool kMean>
void SumBackwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const Shape& xs = c.out[0].shape();
  const cuda::DevIndex group = cuda::ToDevice(c, GroupIndex(c, xs));
  const float scale = kMean ? static_cast<float>(c.in[0].size()) / static_cast<float>(xs.Size()) : 1.f;
  const float* dy = c.in[0].f();
  cuda::Map(c, 0, [=] __device__(int64_t i) { return dy[group(i)] * scale; });
}

template <bool kMin>
void MaxForwardCuda(const KernelCtx& c) {
  const Groups g = GroupsOf(c, c.in[0].shape());
  const float* x = c.in[0].f();
  cuda::Map(c, 0, [=] __device__(int64_t j) { return x[ArgBest<kMin>(x, g, j)]; });
}

template <bool kMin>
__global__ void MaxGradKernel(Groups g, const float* dy, const float* x, float* dx, bool add) {
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < g.count;
       j += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t best = ArgBest<kMin>(x, g, j), base = g.kept(j);
    for (int64_t r = 0; r < g.size; ++r) {
      const int64_t o = base + g.folded(r);
      const float v = o == best ? dy[j] : 0.f;
      dx[o] = add ? dx[o] + v : v;
    }
  }
}

// inputs: dy, x    output: dx
template <bool kMin>
void MaxBackwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const Groups g = GroupsOf(c, c.in[1].shape());
  MaxGradKernel<kMin><<<cuda::Blocks(g.count), cuda::kThreads, 0, cuda::Stream(c)>>>(
      g, c.in[0].f(), c.in[1].f(), c.out[0].f(), c.req[0] == OpReq::kAdd);
  FRUGAL_CUDA_LAUNCHED();
}

}  // namespace

void RegisterCuda_reduce(OpRegistry* r) {
  SetCudaKernels(r, "sum", SumForwardCuda<false>, SumBackwardCuda<false>);
  SetCudaKernels(r, "mean", SumForwardCuda<true>, SumBackwardCuda<true>);
  SetCudaKernels(r, "max", MaxForwardCuda<false>, MaxBackwardCuda<false>);
  SetCudaKernels(r, "min", MaxForwardCuda<true>, MaxBackwardCuda<true>);
}

}  // namespace frugal
