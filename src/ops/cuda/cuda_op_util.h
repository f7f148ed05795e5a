// Helpers for the ops' CUDA kernels (src/ops/cuda/*.cu): elementwise maps
// that honour OpReq, launched on the kernel's stream; block reductions; index
// maps and GEMM. ops/op_util.h (Out, StridedIndex, ...) comes with it.
#pragma once

#include <glog/logging.h>

#include "backend/cuda/cuda_util.h"
#include "frugal/op.h"
#include "ops/op_util.h"

namespace frugal {
namespace cuda {

// A CUDA kernel's Context (KernelCtx::cuda) and its stream.
inline Context& Ctx(const KernelCtx& c) { return *c.cuda; }
inline cudaStream_t Stream(const KernelCtx& c) { return Ctx(c).stream; }
// beta for cuBLAS / cuDNN from a request: kAdd accumulates, kWrite overwrites.
inline float Beta(OpReq req) { return req == OpReq::kAdd ? 1.f : 0.f; }

}  // namespace cuda

// y = x, or y += x for kAdd; nothing where the planner ran the op in place
// (y is x's bytes): the kernel of the ops that copy their input (identity.cu).
void CopyForwardCuda(const KernelCtx& c);

// Gives op `name` and its backward op (OpDef::backward_op) their CUDA kernels.
inline void SetCudaKernels(OpRegistry* r, const std::string& name, Kernel forward, Kernel backward) {
  OpDef& op = r->Existing(name);
  CHECK(!op.backward_op().empty()) << "op " << name
                                   << " declares no backward op (its gradient is built from ops): "
                                      "register its backward kernel by the backward op's name";
  op.CudaKernel(std::move(forward));
  r->Existing(op.backward_op()).CudaKernel(std::move(backward));
}

}  // namespace frugal

namespace frugal::cuda {

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

// A StridedIndex (ops/op_util.h) by value, for device code: at most 8
// merged dims (more throws Error naming the node).
struct DevIndex {
  int nd = 0;
  int64_t dims[8] = {}, strides[8] = {};
  __device__ int64_t operator()(int64_t i) const {
    int64_t off = 0;
    for (int d = nd - 1; d > 0; --d) {
      off += (i % dims[d]) * strides[d];
      i /= dims[d];
    }
    return nd == 0 ? 0 : off + i * strides[0];
  }
};

inline DevIndex ToDevice(const KernelCtx& c, const StridedIndex& s) {
  DevIndex d;
  FRUGAL_REQUIRE(s.dims().size() <= 8, c.node.Where(),
                 ": the GPU kernel handles index maps of at most 8 dims, this "
                 "one has ",
                 s.dims().size());
  d.nd = static_cast<int>(s.dims().size());
  for (int k = 0; k < d.nd; ++k) {
    d.dims[k] = s.dims()[k];
    d.strides[k] = s.strides()[k];
  }
  return d;
}

// Row-major C (m, n) = op(A) op(B) + beta C with op(A) (m, k), op(B) (k, n),
// for `batch` matrices each `stride_*` floats apart (cuBLAS is column-major:
// it computes C^T = op(B)^T op(A)^T). Plain FP32 (cuBLAS's default math).
inline void GemmRowMajor(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                         const float* b, float beta, float* c, int64_t batch = 1, int64_t stride_a = 0,
                         int64_t stride_b = 0, int64_t stride_c = 0) {
  const float alpha = 1.f;
  const int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k);
  FRUGAL_CUBLAS_CHECK(Cublas().sgemm_strided_batched(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                     in, im, ik, &alpha, b, tb ? ik : in, stride_b, a, ta ? im : ik,
                                                     stride_a, &beta, c, in, stride_c, static_cast<int>(batch)));
}

// The same for output k of a kernel, over its size.
template <typename F>
void Map(const KernelCtx& c, int k, F f) {
  Map(Stream(c), c.out[k].size(), frugal::Out(c, k), c.req[k], f);
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
