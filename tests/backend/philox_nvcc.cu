// ops/cpu/philox.h compiled by nvcc: its host code (checked against the
// g++ build in tests/backend/cuda_test.cc, on any machine) and its device code (on a
// GPU), so the CPU and CUDA dropout kernels draw the same words.
#include <cuda_runtime.h>

#include "ops/cpu/philox.h"

namespace frugal::test {

cpu::PhiloxCounter PhiloxHostByNvcc(uint64_t seed, uint64_t node_key, int64_t step, uint64_t block) {
  return cpu::CounterStream(seed, node_key, step).Block(block);
}

__global__ void PhiloxKernel(cpu::CounterStream stream, uint64_t block, uint32_t* out) {
  const cpu::PhiloxCounter w = stream.Block(block);
  for (int k = 0; k < 4; ++k) out[k] = w[k];
}

// False where there is no GPU to run on.
bool PhiloxDeviceByNvcc(uint64_t seed, uint64_t node_key, int64_t step, uint64_t block, cpu::PhiloxCounter* words) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return false;
  }
  uint32_t* d = nullptr;
  if (cudaMalloc(&d, 4 * sizeof(uint32_t)) != cudaSuccess) return false;
  PhiloxKernel<<<1, 1>>>(cpu::CounterStream(seed, node_key, step), block, d);
  const bool ok = cudaMemcpy(words->data(), d, 4 * sizeof(uint32_t), cudaMemcpyDeviceToHost) == cudaSuccess;
  cudaFree(d);
  return ok;
}

}  // namespace frugal::test
