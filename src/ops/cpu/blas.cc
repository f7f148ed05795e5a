#include "ops/cpu/blas.h"

#include <glog/logging.h>
#include <oneapi/dnnl/dnnl.h>

#include "ops/cpu/kernel_names.h"

namespace frugal::cpu {

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // Row-major, on the calling thread's OpenMP team (its kernel threads; one
  // thread inside a parallel region).
  NoteKernel("dnnl_sgemm");
  const dnnl_status_t st =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  CHECK_EQ(st, dnnl_success) << "dnnl_sgemm " << m << "x" << n << "x" << k << " failed";
}

}  // namespace frugal::cpu
