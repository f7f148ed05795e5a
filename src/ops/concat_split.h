// concat and split (ops/concat_split.cc): their params and the copies their
// kernels make, as host code shared by the CPU kernels and the CUDA ones
// (ops/cuda/concat_split.cu), which differ only in how a PartsCopy is run.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/op_util.h"

namespace frugal {

struct ConcatParams {
  int64_t num_args = 2;
  int64_t dim = 1;
  static ConcatParams Parse(AttrReader& a);
};
struct SplitParams {
  int64_t num_outputs = 0;
  int64_t axis = 1;
  bool squeeze_axis = false;
  static SplitParams Parse(AttrReader& a);
};

// A copy between a whole tensor (outer, total, inner) and its parts (outer,
// n_k, inner): gather = parts -> whole, else whole -> parts. A part that is
// not written (req kNull, no tensor) may have length 0 in n.
struct PartsCopy {
  bool gather = false;
  float* whole = nullptr;
  OpReq whole_req = OpReq::kNull;
  std::vector<float*> parts;
  std::vector<OpReq> part_req;
  std::vector<int64_t> n;
  int64_t total = 0, outer = 0, inner = 0;

  // The sizes of a copy along `axis` (negative counts from the end) of whole.
  static PartsCopy Along(const Shape& whole, int64_t axis) {
    const int ax = static_cast<int>(axis < 0 ? axis + whole.ndim() : axis);
    PartsCopy p;
    p.total = whole[ax];
    p.outer = whole.Prod(0, ax);
    p.inner = whole.Prod(ax + 1, whole.ndim());
    return p;
  }
};

// The inputs joined along `axis` of output 0 (negative counts from the end):
// concat, and split's gradient (dx = the dy_k joined).
inline PartsCopy JoinInputs(const KernelCtx& c, int64_t axis) {
  if (c.req[0] == OpReq::kNull) return {};  // output 0 has no tensor: nothing to copy
  PartsCopy p = PartsCopy::Along(c.out[0].shape(), axis);
  p.gather = true;
  p.whole = Out(c, 0);
  p.whole_req = c.req[0];
  for (const Tensor& t : c.in) {
    p.parts.push_back(t.f());
    p.n.push_back(t.size() / (p.outer * p.inner));
  }
  return p;
}

// Input 0 cut along `axis` into the outputs, of lengths n: split, and
// concat's gradient (dx_k = dy's part). An output nobody reads (an unused
// part of a split) is nullptr and skipped.
inline PartsCopy CutInput(const KernelCtx& c, int64_t axis, std::vector<int64_t> n) {
  PartsCopy p = PartsCopy::Along(c.in[0].shape(), axis);
  p.whole = c.in[0].f();
  for (size_t k = 0; k < c.out.size(); ++k) p.parts.push_back(Out(c, static_cast<int>(k)));
  p.part_req = c.req;
  p.n = std::move(n);
  return p;
}

inline PartsCopy ConcatCopy(const KernelCtx& c) { return JoinInputs(c, c.params<ConcatParams>().dim); }

// A gradient of concat that nobody reads has no memory and no shape; its
// length is deduced from the others when at most one is unknown or when only
// unread parts follow the unknown ones (they are skipped, so their lengths
// do not matter).
inline PartsCopy ConcatGradCopy(const KernelCtx& c) {
  const int64_t dim = c.params<ConcatParams>().dim;
  const PartsCopy whole = PartsCopy::Along(c.in[0].shape(), dim);
  std::vector<int64_t> n(c.out.size(), -1);
  int unknown = 0, last_read = -1;
  int64_t known = 0;
  for (size_t k = 0; k < c.out.size(); ++k) {
    if (c.req[k] == OpReq::kNull) {
      ++unknown;
      continue;
    }
    known += n[k] = c.out[k].size() / (whole.outer * whole.inner);
    last_read = static_cast<int>(k);
  }
  int unknown_before = 0;
  for (int k = 0; k < last_read; ++k) unknown_before += n[k] < 0;
  FRUGAL_REQUIRE(unknown <= 1 || unknown_before == 0, c.node.Where(), ": the gradients of ", unknown,
                 " inputs of concat are unused and their sizes are unknown to the kernel; put inputs without a",
                 " gradient last in the concat (a limitation of this build)");
  for (int64_t& nk : n)
    if (nk < 0) nk = unknown == 1 ? whole.total - known : 0;
  return CutInput(c, dim, std::move(n));
}

// Parts are equal, so their lengths come from x and the params (an unused
// part has no tensor to measure).
inline PartsCopy SplitCopy(const KernelCtx& c) {
  const auto& sp = c.params<SplitParams>();
  const int64_t total = PartsCopy::Along(c.in[0].shape(), sp.axis).total;
  return CutInput(c, sp.axis, std::vector<int64_t>(sp.num_outputs, total / sp.num_outputs));
}

inline PartsCopy SplitGradCopy(const KernelCtx& c) { return JoinInputs(c, c.params<SplitParams>().axis); }

}  // namespace frugal
