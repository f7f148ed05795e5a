#include "ops/cpu/blas.h"

#include <glog/logging.h>
#include <oneapi/dnnl/dnnl.h>

namespace frugal::cpu {

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
          float beta, float* c) {
  const int64_t lda = trans_a ? m : k;
  const int64_t ldb = trans_b ? k : n;
  // Row-major, on the calling thread's OpenMP team (its kernel threads).
  const dnnl_status_t st =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, n);
  CHECK_EQ(st, dnnl_success) << "dnnl_sgemm " << m << "x" << n << "x" << k << " failed";
}

}  // namespace frugal::cpu
