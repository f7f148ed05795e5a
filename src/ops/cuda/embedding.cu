// embedding on the GPU (src/ops/embedding.cc):  y[i, :] = W[index i, :]
//   dW[k, :] = sum of dy[i, :] over the positions i whose index is k; ddata = 0
// As on the CPU, an index that is not a row of W is an error naming the
// node: the forward records it in the GPU's fault slot and the launch fails
// when the GPU is done with it (backend/cuda/cuda_util.h, Fault); meanwhile
// that position gets y = 0 and adds nothing to dW.
// The backward runs one thread per column, visiting positions in order: the
// CPU's summation order, deterministic and free of atomics.
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

__device__ inline int64_t RowOf(float v, int64_t rows) {
  return v >= 0.f && v < static_cast<float>(rows) && v == floorf(v) ? static_cast<int64_t>(v) : -1;
}

__global__ void EmbeddingGradKernel(const float* dy, const float* data, int64_t positions, int64_t rows, int64_t d,
                                    float* dw) {
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < d;
       j += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    for (int64_t i = 0; i < positions; ++i) {
      const int64_t k = RowOf(data[i], rows);
      if (k >= 0) dw[k * d + j] += dy[i * d + j];
    }
  }
}

void EmbeddingForwardCuda(const KernelCtx& c) {
  const auto& p = c.params<EmbeddingParams>();
  const float* data = c.in[0].f();
  const float* w = c.in[1].f();
  const int64_t d = p.output_dim, rows = p.input_dim;
  cuda::Fault* fault = cuda::Ctx(c).fault;
  const uint64_t launch = cuda::Ctx(c).launch;
  cuda::Map(c, 0, [=] __device__(int64_t e) {
    const int64_t k = RowOf(data[e / d], rows);
    if (k < 0 && e % d == 0) cuda::RaiseFault(fault, launch, cuda::kBadIndex, data[e / d], e / d, rows);
    return k >= 0 ? w[k * d + e % d] : 0.f;
  });
}

// inputs: dy, data    outputs: ddata (zeros), dweight
void EmbeddingBackwardCuda(const KernelCtx& c) {
  const auto& p = c.params<EmbeddingParams>();
  cudaStream_t s = cuda::Stream(c);
  if (c.req[0] == OpReq::kWrite) FRUGAL_CUDA_CHECK(cudaMemsetAsync(c.out[0].raw(), 0, c.out[0].bytes(), s));
  if (c.req[1] == OpReq::kNull) return;
  if (c.req[1] == OpReq::kWrite) FRUGAL_CUDA_CHECK(cudaMemsetAsync(c.out[1].raw(), 0, c.out[1].bytes(), s));
  EmbeddingGradKernel<<<cuda::Blocks(p.output_dim), cuda::kThreads, 0, s>>>(c.in[0].f(), c.in[1].f(), c.in[1].size(),
                                                                            p.input_dim, p.output_dim, c.out[1].f());
  FRUGAL_CUDA_LAUNCHED();
}

}  // namespace

void RegisterCuda_embedding(OpRegistry* r) {
  SetCudaKernels(r, "embedding", EmbeddingForwardCuda, EmbeddingBackwardCuda);
}

}  // namespace frugal
