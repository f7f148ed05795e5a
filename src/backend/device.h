// What the rest of frugal sees of an accelerator backend: plain C++, no CUDA
// header. src/backend/cuda implements it where frugal is built with CUDA
// (FRUGAL_CUDA); src/backend/no_cuda otherwise, where every call that needs a
// GPU throws Error saying that frugal was built without CUDA.
//
// Device memory: Storage on a CUDA device calls DeviceAlloc/DeviceFree. The
// executor's arena (MemKind::kArena) is one cudaMalloc per GPU, made once
// from the plan; everything else (parameters, gradients, optimizer state,
// batches, small buffers) comes from a caching pool that rounds sizes up and
// keeps freed blocks for reuse. Never managed memory. Storage keeps the
// current and peak bytes per device (MemoryAccounting); the pool reports the
// bytes it holds from cudaMalloc beside them.
//
// Execution: one CUDA stream per GPU. LaunchAsync runs a launch function on
// the calling thread (an engine worker of that device) with the device's
// context, records a CUDA event after it on the stream and returns at once;
// the device's completion thread waits for the event and then calls done, so
// the engine releases the function's variables when the GPU has finished,
// without blocking a worker.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "frugal/base.h"

namespace frugal::backend {

// True when this build contains the CUDA backend.
bool BuiltWithCuda();
// Visible CUDA devices; 0 without a driver, a device or a CUDA build.
int CudaDeviceCount();
// Why there is no GPU to run on ("frugal was built without CUDA",
// "no CUDA device: <the runtime's reason>"), "" when there is one.
std::string NoCudaReason();
// Throws Error unless CUDA device `id` exists; `what` names the caller
// ("--gpus 0").
void RequireCudaDevice(int id, const std::string& what);

// Device memory (see above). is_arena: one dedicated cudaMalloc.
void* DeviceAlloc(int dev, int64_t bytes, bool is_arena);
void DeviceFree(int dev, void* p, int64_t bytes, bool is_arena);
// Bytes the pool of `dev` holds from cudaMalloc (in use or cached).
int64_t PoolReservedBytes(int dev);
// Bytes in use on the device as the driver sees it (total - free: every
// allocation of this process and others, the CUDA context, library
// workspaces); 0 without CUDA.
int64_t DeviceUsedBytes(int dev);
// Bytes free on the device as the driver sees it (cudaMemGetInfo).
int64_t DeviceFreeBytes(int dev);
// Page-locked host memory for batches that go to a GPU.
void* PinnedAlloc(int64_t bytes);
void PinnedFree(void* p);

// Copies bytes between two devices (CPU or CUDA), synchronously with
// respect to the device's stream: the copy is ordered after the work
// launched on it so far and finished on return.
void CopyBytes(void* dst, Device dst_dev, const void* src, Device src_dev, int64_t bytes);
void MemsetZero(void* dst, int dev, int64_t bytes);

// Runs launch(context) on this thread, where context is the device's
// cuda::Context (stream, cuDNN and cuBLAS handles); done is called from the
// device's completion thread once everything launched has finished on the
// GPU, with the error of a failed launch or kernel, if any (the engine's
// Done, frugal/engine.h, is such a function).
using Completion = std::function<void(std::exception_ptr error)>;
void LaunchAsync(int dev, const std::function<void(cuda::Context* context)>& launch, Completion done);
// Blocks until the stream of `dev` is idle.
void Synchronize(int dev);

// A copy queued on the stream of a LaunchAsync context (its argument), for
// the training loop around the graphs (batches and outputs): between the
// context's GPU and the host (pinned memory for overlap) or within the GPU.
void CopyAsync(cuda::Context* context, void* dst, Device dst_dev, const void* src, Device src_dev, int64_t bytes);

}  // namespace frugal::backend
