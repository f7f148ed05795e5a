// grad_accumulate and rescale_clip on the GPU (src/ops/grad_combine.cc): the
// global norm is summed per chunk of kNormChunk elements in a fixed tree
// order, the chunks in order, into the node's workspace, and never leaves
// the GPU.
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

constexpr int kNormThreads = 256;

void GradAccumulateCuda(const KernelCtx& c) {
  const int64_t n_micro = c.params<GradAccumulateParams>().iter_size, micro = c.step % n_micro;
  float* sum = c.in[0].f();
  float* g = c.in[1].f();
  const int64_t n = c.in[0].size();
  cudaStream_t s = cuda::Stream(c);
  if (micro == 0) {
    if (n > 0) FRUGAL_CUDA_CHECK(cudaMemcpyAsync(sum, g, c.in[0].bytes(), cudaMemcpyDeviceToDevice, s));
    return;
  }
  float* y = micro == n_micro - 1 ? g : sum;
  cuda::Map(s, n, y, OpReq::kWrite, [sum, g] __device__(int64_t i) { return sum[i] + g[i]; });
}

// Squares of one tensor summed per chunk: block b sums chunk b in a fixed
// tree order into part[b].
__global__ void ChunkSquaresKernel(const float* g, int64_t n, double* part) {
  __shared__ double acc[kNormThreads];
  const int64_t begin = blockIdx.x * kNormChunk;
  const int64_t end = begin + kNormChunk < n ? begin + kNormChunk : n;
  double s = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) s += static_cast<double>(g[i]) * g[i];
  acc[threadIdx.x] = s;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) acc[threadIdx.x] += acc[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) part[blockIdx.x] = acc[0];
}

// One thread: the parts in order, then the factor every gradient is scaled by.
__global__ void ClipScaleKernel(const double* part, int64_t parts, float rescale, float max_norm, float* scale) {
  double total = 0;
  for (int64_t i = 0; i < parts; ++i) total += part[i];
  const double norm = fabs(static_cast<double>(rescale)) * sqrt(total);
  double k = rescale;
  if (norm > max_norm) k *= max_norm / norm;
  *scale = static_cast<float>(k);
}

void RescaleClipCuda(const KernelCtx& c) {
  const RescaleClipParams& p = c.params<RescaleClipParams>();
  cudaStream_t s = cuda::Stream(c);
  if (p.max_norm <= 0) {
    if (p.rescale == 1.f) return;
    for (const Tensor& t : c.in) {
      float* g = t.f();
      cuda::Map(s, t.size(), g, OpReq::kWrite, [g, k = p.rescale] __device__(int64_t i) { return g[i] * k; });
    }
    return;
  }
  // The workspace: one double per chunk, then the factor.
  double* part = reinterpret_cast<double*>(c.workspace.raw());
  int64_t at = 0;
  for (const Tensor& t : c.in) {
    const int64_t chunks = (t.size() + kNormChunk - 1) / kNormChunk;
    if (chunks == 0) continue;
    ChunkSquaresKernel<<<static_cast<unsigned>(chunks), kNormThreads, 0, s>>>(t.f(), t.size(), part + at);
    FRUGAL_CUDA_LAUNCHED();
    at += chunks;
  }
  float* scale = reinterpret_cast<float*>(part + at);
  ClipScaleKernel<<<1, 1, 0, s>>>(part, at, p.rescale, p.max_norm, scale);
  FRUGAL_CUDA_LAUNCHED();
  for (const Tensor& t : c.in) {
    float* g = t.f();
    cuda::Map(s, t.size(), g, OpReq::kWrite, [g, scale] __device__(int64_t i) { return g[i] * *scale; });
  }
}

}  // namespace

void RegisterCuda_grad_combine(OpRegistry* r) {
  r->Existing("grad_accumulate").CudaKernel(GradAccumulateCuda);
  r->Existing("rescale_clip").CudaKernel(RescaleClipCuda);
}

}  // namespace frugal
