// Row-major matrix products on oneDNN's sgemm. It runs on the calling
// thread's OpenMP team, like every other kernel: OpenBLAS's own thread pool
// (pthreads) fought the OpenMP threads for the cores and measured 2-4x
// slower here (fully_connected 4096x4096 b128, the LSTM's 32x256x1024).
#pragma once

#include <cstdint>

namespace frugal::cpu {

// c = alpha * op(a) * op(b) + beta * c, all row-major: op(a) is m x k,
// op(b) is k x n, c is m x n; lda, ldb and ldc are the strides between the
// rows of a, b and c as stored (a row of a holds k elements, or m where
// transposed), so a block of a wider matrix is an operand as it lies.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The same on contiguous matrices.
inline void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 const float* b, float beta, float* c) {
  Gemm(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}

}  // namespace frugal::cpu
