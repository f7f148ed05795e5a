// Row-major matrix products on OpenBLAS.
#pragma once

#include <cstdint>

namespace frugal::cpu {

// c = alpha * op(a) * op(b) + beta * c, all row-major and contiguous:
// op(a) is m x k, op(b) is k x n, c is m x n.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c);

}  // namespace frugal::cpu
