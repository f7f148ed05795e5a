// Helpers for the ops' CUDA kernels (src/ops/cuda/*.cu): elementwise maps
// that honour OpReq, launched on the kernel's stream.
#pragma once

#include "backend/cuda/cuda_util.h"
#include "frugal/op.h"

namespace frugal::cuda {

// Output k's data, or nullptr when nobody reads it (OpReq::kNull).
inline float* Out(const KernelCtx& c, int k) { return c.req[k] == OpReq::kNull ? nullptr : c.out[k].f(); }

template <typename F>
__global__ void MapKernel(int64_t n, float* y, bool add, F f) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const float v = f(i);
    y[i] = add ? y[i] + v : v;
  }
}

// y[i] = f(i) (or y[i] += f(i) for kAdd) for i in [0, n); nothing for kNull.
// f is a __device__ lambda; it may read y's own buffer at index i (in place).
template <typename F>
void Map(cudaStream_t s, int64_t n, float* y, OpReq req, F f) {
  if (req == OpReq::kNull || n == 0) return;
  MapKernel<<<Blocks(n), kThreads, 0, s>>>(n, y, req == OpReq::kAdd, f);
  FRUGAL_CUDA_LAUNCHED();
}

// Row-major C (m, n) = op(A) op(B) + beta C with op(A) (m, k), op(B) (k, n),
// for `batch` matrices each `stride_*` floats apart (cuBLAS is column-major:
// it computes C^T = op(B)^T op(A)^T). Plain FP32 (cuBLAS's default math).
inline void GemmRowMajor(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                         const float* b, float beta, float* c, int64_t batch = 1, int64_t stride_a = 0,
                         int64_t stride_b = 0, int64_t stride_c = 0) {
  const float alpha = 1.f;
  const int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k);
  FRUGAL_CUBLAS_CHECK(cublasSgemmStridedBatched(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, in,
                                                im, ik, &alpha, b, tb ? ik : in, stride_b, a, ta ? im : ik, stride_a,
                                                &beta, c, in, stride_c, static_cast<int>(batch)));
}

// The same for output k of a kernel, over its size.
template <typename F>
void Map(const KernelCtx& c, int k, F f) {
  Map(Stream(c), c.out[k].size(), Out(c, k), c.req[k], f);
}

}  // namespace frugal::cuda

namespace frugal::cuda {

// Sum of v over the threads of a block (blockDim.x a multiple of 32, at most
// 1024); every thread gets the result. Uses 33 floats of shared memory.
__device__ inline float BlockSum(float v) {
  __shared__ float part[33];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // part may still be read by an earlier call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? part[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    if (lane == 0) part[32] = v;
  }
  __syncthreads();
  return part[32];
}

// Max of v over the threads of a block, likewise.
__device__ inline float BlockMax(float v) {
  __shared__ float part[33];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? part[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    if (lane == 0) part[32] = v;
  }
  __syncthreads();
  return part[32];
}

}  // namespace frugal::cuda
