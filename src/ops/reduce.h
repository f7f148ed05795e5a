// sum, mean, max, min (ops/reduce.cc): their params and the index maps of a
// reduction, host code shared by the CPU kernels and the CUDA ones
// (ops/cuda/reduce.cu).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/op_util.h"

namespace frugal {

struct ReduceParams {
  std::vector<int64_t> axes;  // empty: all
  bool keepdims = false;

  // fold[d]: axis d of an ndim-dim input is reduced. Axes are checked by
  // shape inference.
  std::vector<bool> Folds(int ndim) const {
    std::vector<bool> fold(ndim, axes.empty());
    for (int64_t a : axes) fold[a < 0 ? a + ndim : a] = true;
    return fold;
  }
  static ReduceParams Parse(AttrReader& a);
};

// The groups of x that the node reduces: kept(j) is the offset of group j's
// first element, folded(r) that of its r-th element from there.
inline Reduction ReductionOf(const KernelCtx& c, const Shape& x) {
  return MakeReduction(x, c.params<ReduceParams>().Folds(x.ndim()));
}

// For each element of x, the index of its group (its element of y).
inline StridedIndex GroupIndex(const KernelCtx& c, const Shape& x) {
  const std::vector<bool> fold = c.params<ReduceParams>().Folds(x.ndim());
  std::vector<int64_t> kept = x.dims();  // y's layout with reduced axes as 1
  for (int d = 0; d < x.ndim(); ++d)
    if (fold[d]) kept[d] = 1;
  return BroadcastIndex(Shape(kept), x);
}

}  // namespace frugal
