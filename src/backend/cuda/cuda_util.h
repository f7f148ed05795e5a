// The CUDA backend's shared pieces, for src/backend/cuda and src/ops/cuda:
// error checks that throw frugal::Error, the per-device Context that a CUDA
// kernel receives (KernelCtx::cuda), and launch helpers.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <string>

#include "frugal/base.h"

namespace frugal::cuda {

// A bad input that a kernel finds (a label that is not a class index, an
// index that is not a row of the table). Checking on the host would stop
// the stream to read the data; instead the kernel records the first one in
// its GPU's fault slot, host memory the GPU writes directly (mapped, pinned),
// tagged with the launch that found it, and the completion of that launch
// fails it with an Error (backend/cuda/device.cc, FaultMessage). So a bad
// label ends training with the node named, as on the CPU, without a sync.
enum FaultCode : int { kNoFault = 0, kBadLabel = 1, kBadIndex = 2 };
struct Fault {
  int code;          // FaultCode
  float value;       // the bad label or index
  int64_t position;  // its sample or position
  int64_t limit;     // the classes or the table's rows
  uint64_t launch;   // the launch whose kernel found it
};

// What a CUDA kernel gets in KernelCtx::cuda: its GPU's stream and handles,
// both bound to that stream, the fault slot and the number of the current
// launch. One per GPU, made on first use.
struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  Fault* fault = nullptr;  // device pointer to the mapped slot
  uint64_t launch = 0;
};

#ifdef __CUDACC__
// Records the first bad input of a launch (see Fault).
__device__ inline void RaiseFault(Fault* f, uint64_t launch, int code, float value, int64_t position, int64_t limit) {
  if (atomicCAS(&f->code, kNoFault, -1) == kNoFault) {
    f->value = value;
    f->position = position;
    f->limit = limit;
    f->launch = launch;
    __threadfence_system();
    atomicExch(&f->code, code);
  }
}
#endif

[[noreturn]] void ThrowCuda(const char* expr, const char* file, int line, const char* message);

// cuBLAS is opened on first use (dlopen), not linked: linking it maps
// libcublasLt into every process, about 150 MiB resident, CPU-only runs
// included. These are the entry points frugal calls (the header's names
// are macros for the _v2 symbols, so decltype and FRUGAL_CUBLAS_SYMBOL see
// the real ones).
struct CublasApi {
  decltype(&cublasCreate) create;
  decltype(&cublasSetStream) set_stream;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;
  decltype(&cublasGetStatusString) status_string;
};
// Opens libcublas.so.<major> once; throws Error naming the library and the
// loader's reason when it cannot.
const CublasApi& Cublas();
// The Error message of a fault ("label 9 of sample 0 is not a class index in [0, 4) ...").
std::string FaultMessage(const Fault& f);

#define FRUGAL_CUDA_CHECK(expr)                                                                                      \
  do {                                                                                                               \
    const cudaError_t frugal_e = (expr);                                                                             \
    if (frugal_e != cudaSuccess) ::frugal::cuda::ThrowCuda(#expr, __FILE__, __LINE__, cudaGetErrorString(frugal_e)); \
  } while (0)
#define FRUGAL_CUBLAS_CHECK(expr)                                                                             \
  do {                                                                                                        \
    const cublasStatus_t frugal_s = (expr);                                                                   \
    if (frugal_s != CUBLAS_STATUS_SUCCESS)                                                                    \
      ::frugal::cuda::ThrowCuda(#expr, __FILE__, __LINE__, ::frugal::cuda::Cublas().status_string(frugal_s)); \
  } while (0)
#define FRUGAL_CUDNN_CHECK(expr)                                                           \
  do {                                                                                     \
    const cudnnStatus_t frugal_s = (expr);                                                 \
    if (frugal_s != CUDNN_STATUS_SUCCESS)                                                  \
      ::frugal::cuda::ThrowCuda(#expr, __FILE__, __LINE__, cudnnGetErrorString(frugal_s)); \
  } while (0)
// After a kernel launch: a bad configuration shows here, a fault later, at
// the completion event.
#define FRUGAL_CUDA_LAUNCHED() FRUGAL_CUDA_CHECK(cudaGetLastError())

// The direction of a copy between two devices, at least one of them a GPU.
inline cudaMemcpyKind CopyKind(Device dst, Device src) {
  const bool to_gpu = dst.type == DeviceType::kCUDA, from_gpu = src.type == DeviceType::kCUDA;
  if (!to_gpu && !from_gpu) throw Error("a CUDA copy between two host buffers");
  return to_gpu && from_gpu ? cudaMemcpyDeviceToDevice : to_gpu ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
}

// Blocks of 256 threads covering n elements (grid-stride loops cover the rest).
constexpr int kThreads = 256;
inline unsigned Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

}  // namespace frugal::cuda
