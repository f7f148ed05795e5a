// The CUDA backend's shared pieces, for src/backend/cuda and src/ops/cuda:
// error checks that throw frugal::Error, the per-device Context that a CUDA
// kernel receives (KernelCtx::cuda), and launch helpers.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "frugal/op.h"

namespace frugal::cuda {

// What a CUDA kernel gets in KernelCtx::cuda: its GPU's stream and handles,
// both bound to that stream. One per GPU, made on first use.
struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
};

inline Context& Ctx(const KernelCtx& c) { return *static_cast<Context*>(c.cuda); }
inline cudaStream_t Stream(const KernelCtx& c) { return Ctx(c).stream; }

[[noreturn]] void ThrowCuda(const char* expr, const char* file, int line, const char* message);

#define FRUGAL_CUDA_CHECK(expr)                                                         \
  do {                                                                                  \
    const cudaError_t frugal_e = (expr);                                                \
    if (frugal_e != cudaSuccess)                                                        \
      ::frugal::cuda::ThrowCuda(#expr, __FILE__, __LINE__, cudaGetErrorString(frugal_e)); \
  } while (0)
#define FRUGAL_CUBLAS_CHECK(expr)                                                              \
  do {                                                                                         \
    const cublasStatus_t frugal_s = (expr);                                                    \
    if (frugal_s != CUBLAS_STATUS_SUCCESS)                                                     \
      ::frugal::cuda::ThrowCuda(#expr, __FILE__, __LINE__, cublasGetStatusString(frugal_s));   \
  } while (0)
#define FRUGAL_CUDNN_CHECK(expr)                                                            \
  do {                                                                                      \
    const cudnnStatus_t frugal_s = (expr);                                                  \
    if (frugal_s != CUDNN_STATUS_SUCCESS)                                                   \
      ::frugal::cuda::ThrowCuda(#expr, __FILE__, __LINE__, cudnnGetErrorString(frugal_s));  \
  } while (0)
// After a kernel launch: a bad configuration shows here, a fault later, at
// the completion event.
#define FRUGAL_CUDA_LAUNCHED() FRUGAL_CUDA_CHECK(cudaGetLastError())

// Blocks of 256 threads covering n elements (grid-stride loops cover the rest).
constexpr int kThreads = 256;
inline unsigned Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

// beta for cuBLAS / cuDNN from a request: kAdd accumulates, kWrite overwrites.
inline float Beta(OpReq req) { return req == OpReq::kAdd ? 1.f : 0.f; }

}  // namespace frugal::cuda
