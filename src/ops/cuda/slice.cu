// slice on the GPU (src/ops/slice.cc): y[i] = x[base + map(i)];
// dx = 0 then dy at the sliced positions (distinct, so no atomics).
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

void SliceForwardCuda(const KernelCtx& c) {
  int64_t base;
  StridedIndex map;
  SliceMap(c.params<SliceParams>(), c.in[0].shape(), &base, &map);
  const cuda::DevIndex m = cuda::ToDevice(c, map);
  const float* x = c.in[0].f() + base;
  cuda::Map(c, 0, [=] __device__(int64_t i) { return x[m(i)]; });
}

__global__ void ScatterAdd(const float* dy, int64_t n, cuda::DevIndex m, float* dx) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    dx[m(i)] += dy[i];
}

// inputs: dy    output: dx
void SliceBackwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  int64_t base;
  StridedIndex map;
  SliceMap(c.params<SliceParams>(), c.out[0].shape(), &base, &map);
  cudaStream_t s = cuda::Stream(c);
  if (c.req[0] == OpReq::kWrite) FRUGAL_CUDA_CHECK(cudaMemsetAsync(c.out[0].raw(), 0, c.out[0].bytes(), s));
  const int64_t n = c.in[0].size();
  ScatterAdd<<<cuda::Blocks(n), cuda::kThreads, 0, s>>>(c.in[0].f(), n, cuda::ToDevice(c, map), c.out[0].f() + base);
  FRUGAL_CUDA_LAUNCHED();
}

}  // namespace

void RegisterCuda_slice(OpRegistry* r) { SetCudaKernels(r, "slice", SliceForwardCuda, SliceBackwardCuda); }

}  // namespace frugal
