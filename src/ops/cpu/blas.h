// Row-major matrix products on oneDNN's sgemm. It runs on the calling
// thread's OpenMP team, like every other kernel: OpenBLAS's own thread pool
// (pthreads) fought the OpenMP threads for the cores and measured 2-4x
// slower here (fully_connected 4096x4096 b128, the LSTM's 32x256x1024).
#pragma once

#include <cstdint>

namespace frugal::cpu {

// c = alpha * op(a) * op(b) + beta * c, all row-major and contiguous:
// op(a) is m x k, op(b) is k x n, c is m x n.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
          float beta, float* c);

}  // namespace frugal::cpu
