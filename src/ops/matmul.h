// matmul and batch_dot (ops/matmul.cc): their params and the GEMM sizes of a
// product, shared by the CPU kernels and the CUDA ones (ops/cuda/matmul.cu).
#pragma once

#include <cstdint>

#include "frugal/base.h"

namespace frugal {

class AttrReader;

struct MatmulParams {
  bool transpose_a = false, transpose_b = false;
  static MatmulParams Parse(AttrReader& a);
};

// Batch B, rows M, inner K and columns N of op(a) op(b).
struct GemmDims {
  int64_t batch, m, k, n;
};

inline GemmDims DimsOf(const MatmulParams& p, const Shape& a, const Shape& b) {
  const int r = a.ndim();
  return {r == 3 ? a[0] : 1, p.transpose_a ? a[r - 1] : a[r - 2], p.transpose_a ? a[r - 2] : a[r - 1],
          p.transpose_b ? b[r - 2] : b[r - 1]};
}

}  // namespace frugal
