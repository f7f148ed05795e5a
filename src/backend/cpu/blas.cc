#include "backend/cpu/blas.h"

#include <cblas.h>

#include "backend/cpu/parallel.h"

namespace frugal::cpu {

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  SetBlasThreads(KernelThreads());  // the engine's share of the cores for this kernel
  const int64_t lda = trans_a ? m : k;
  const int64_t ldb = trans_b ? k : n;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(n));
}

}  // namespace frugal::cpu
