// The training loop's work on a GPU (backend/device.h): copies, optimizer
// updates (the CPU's rule, frugal/update_rule.h), gradient sums, and
// rescaling with global-norm clipping whose norm stays on the device.
#include <vector>

#include "backend/device.h"
#include "ops/cuda/cuda_op_util.h"

namespace frugal {
namespace {

cudaStream_t StreamOf(void* context) { return static_cast<cuda::Context*>(context)->stream; }

__global__ void UpdateKernel(UpdateArgs a, float* w, const float* g, float* s0, float* s1, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    UpdateElement(a, i, w, g, s0, s1);
}

// Squares of one tensor summed per chunk of kChunk elements: block b sums
// chunk b in a fixed tree order into part[b].
constexpr int64_t kChunk = 1 << 16;
constexpr int kNormThreads = 256;

__global__ void ChunkSquaresKernel(const float* g, int64_t n, double* part) {
  __shared__ double acc[kNormThreads];
  const int64_t begin = blockIdx.x * kChunk;
  const int64_t end = begin + kChunk < n ? begin + kChunk : n;
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

}  // namespace

namespace backend {

void CopyAsync(void* context, void* dst, Device dst_dev, const void* src, Device src_dev, int64_t bytes) {
  if (bytes == 0) return;
  FRUGAL_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cuda::CopyKind(dst_dev, src_dev), StreamOf(context)));
}

void UpdateAsync(void* context, const UpdateArgs& a, float* w, const float* g, float* s0, float* s1, int64_t n) {
  if (n == 0) return;
  UpdateKernel<<<cuda::Blocks(n), cuda::kThreads, 0, StreamOf(context)>>>(a, w, g, s0, s1, n);
  FRUGAL_CUDA_LAUNCHED();
}

void AddAsync(void* context, float* sum, const float* g, int64_t n) {
  cuda::Map(StreamOf(context), n, sum, OpReq::kAdd, [g] __device__(int64_t i) { return g[i]; });
}

void RescaleAndClipAsync(void* context, const std::vector<std::pair<float*, int64_t>>& grads, float rescale,
                         float max_norm) {
  cudaStream_t s = StreamOf(context);
  if (max_norm <= 0) {
    if (rescale == 1.f) return;
    for (const auto& grad : grads) {
      float* g = grad.first;
      cuda::Map(s, grad.second, g, OpReq::kWrite, [g, rescale] __device__(int64_t i) { return g[i] * rescale; });
    }
    return;
  }
  int64_t parts = 0;
  for (const auto& [g, n] : grads) parts += (n + kChunk - 1) / kChunk;
  // Scratch from the stream-ordered allocator: the parts, then the factor.
  void* scratch = nullptr;
  FRUGAL_CUDA_CHECK(cudaMallocAsync(&scratch, (parts + 1) * sizeof(double), s));
  double* part = static_cast<double*>(scratch);
  float* scale = reinterpret_cast<float*>(part + parts);
  int64_t at = 0;
  for (const auto& [g, n] : grads) {
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    if (chunks == 0) continue;
    ChunkSquaresKernel<<<static_cast<unsigned>(chunks), kNormThreads, 0, s>>>(g, n, part + at);
    FRUGAL_CUDA_LAUNCHED();
    at += chunks;
  }
  ClipScaleKernel<<<1, 1, 0, s>>>(part, parts, rescale, max_norm, scale);
  FRUGAL_CUDA_LAUNCHED();
  for (const auto& grad : grads) {
    float* g = grad.first;
    cuda::Map(s, grad.second, g, OpReq::kWrite, [g, scale] __device__(int64_t i) { return g[i] * *scale; });
  }
  FRUGAL_CUDA_CHECK(cudaFreeAsync(scratch, s));
}

}  // namespace backend
}  // namespace frugal
