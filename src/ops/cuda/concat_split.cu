// concat and split on the GPU (src/ops/concat_split.cc): copies between a
// whole tensor (outer, sum n_k, inner) and its parts (outer, n_k, inner),
// one kernel per part.
#include <vector>

#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

int Axis(int64_t axis, int ndim) { return static_cast<int>(axis < 0 ? axis + ndim : axis); }

// whole[o, off + i] (+)= part[o, i] for the part's (outer, len) elements.
__global__ void GatherPart(const float* part, int64_t outer, int64_t len, int64_t row, int64_t off, float* whole,
                           bool add) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < outer * len;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    float* w = whole + (e / len) * row + off + e % len;
    *w = add ? *w + part[e] : part[e];
  }
}

// gather: parts -> whole, else whole -> parts. n: each part's length on the
// axis; parts that are not written may have length 0.
void CopyPartsCuda(const KernelCtx& c, bool gather, float* whole, OpReq whole_req, const std::vector<float*>& parts,
                   const std::vector<OpReq>& part_req, const std::vector<int64_t>& n, int64_t total, int64_t outer,
                   int64_t inner) {
  int64_t at = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const int64_t len = n[k] * inner, off = at * inner, row = total * inner;
    at += n[k];
    const OpReq req = gather ? whole_req : part_req[k];
    if (req == OpReq::kNull || len == 0) continue;
    if (gather) {
      GatherPart<<<cuda::Blocks(outer * len), cuda::kThreads, 0, cuda::Stream(c)>>>(parts[k], outer, len, row, off,
                                                                                  whole, req == OpReq::kAdd);
      FRUGAL_CUDA_LAUNCHED();
    } else {
      const float* w = whole;
      cuda::Map(cuda::Stream(c), outer * len, parts[k], req,
                [=] __device__(int64_t e) { return w[(e / len) * row + off + e % len]; });
    }
  }
}

void OuterInner(const Shape& whole, int ax, int64_t* outer, int64_t* inner) {
  *outer = whole.Prod(0, ax);
  *inner = whole.Prod(ax + 1, whole.ndim());
}

std::vector<float*> Inputs(const KernelCtx& c) {
  std::vector<float*> p;
  for (const Tensor& t : c.in) p.push_back(t.f());
  return p;
}

std::vector<float*> Outputs(const KernelCtx& c) {
  std::vector<float*> p;
  for (size_t k = 0; k < c.out.size(); ++k) p.push_back(Out(c, static_cast<int>(k)));
  return p;
}

std::vector<int64_t> InputLengths(const KernelCtx& c, int64_t outer, int64_t inner) {
  std::vector<int64_t> n;
  for (const Tensor& t : c.in) n.push_back(t.size() / (outer * inner));
  return n;
}

void ConcatForwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const Shape& y = c.out[0].shape();
  const int ax = Axis(c.params<ConcatParams>().dim, y.ndim());
  int64_t outer, inner;
  OuterInner(y, ax, &outer, &inner);
  CopyPartsCuda(c, true, c.out[0].f(), c.req[0], Inputs(c), {}, InputLengths(c, outer, inner), y[ax], outer, inner);
}

// inputs: dy    outputs: dx_0 .. dx_{n-1}. An unread gradient has no tensor:
// its length is deduced when it is the only one unknown, as on the CPU.
void ConcatBackwardCuda(const KernelCtx& c) {
  const Shape& y = c.in[0].shape();
  const int ax = Axis(c.params<ConcatParams>().dim, y.ndim());
  int64_t outer, inner;
  OuterInner(y, ax, &outer, &inner);
  std::vector<int64_t> n(c.out.size(), -1);
  int unknown = 0, last_read = -1;
  int64_t known = 0;
  for (size_t k = 0; k < c.out.size(); ++k) {
    if (c.req[k] == OpReq::kNull) { ++unknown; continue; }
    known += n[k] = c.out[k].size() / (outer * inner);
    last_read = static_cast<int>(k);
  }
  int unknown_before = 0;
  for (int k = 0; k < last_read; ++k) unknown_before += n[k] < 0;
  FRUGAL_REQUIRE(unknown <= 1 || unknown_before == 0, c.node.Where(), ": the gradients of ", unknown,
                 " inputs of concat are unused and their sizes are unknown to the kernel; put inputs without a",
                 " gradient last in the concat");
  for (int64_t& nk : n)
    if (nk < 0) nk = unknown == 1 ? y[ax] - known : 0;
  CopyPartsCuda(c, false, c.in[0].f(), OpReq::kNull, Outputs(c), c.req, n, y[ax], outer, inner);
}

void SplitForwardCuda(const KernelCtx& c) {
  const auto& p = c.params<SplitParams>();
  const Shape& x = c.in[0].shape();
  const int ax = Axis(p.axis, x.ndim());
  int64_t outer, inner;
  OuterInner(x, ax, &outer, &inner);
  const std::vector<int64_t> n(p.num_outputs, x[ax] / p.num_outputs);
  CopyPartsCuda(c, false, c.in[0].f(), OpReq::kNull, Outputs(c), c.req, n, x[ax], outer, inner);
}

// inputs: dy_0 .. dy_{n-1}    output: dx
void SplitBackwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const Shape& x = c.out[0].shape();
  const int ax = Axis(c.params<SplitParams>().axis, x.ndim());
  int64_t outer, inner;
  OuterInner(x, ax, &outer, &inner);
  CopyPartsCuda(c, true, c.out[0].f(), c.req[0], Inputs(c), {}, InputLengths(c, outer, inner), x[ax], outer, inner);
}

}  // namespace

void RegisterCuda_concat_split(OpRegistry* r) {
  r->Existing("concat").CudaKernel(ConcatForwardCuda);
  r->Existing("_backward_concat").CudaKernel(ConcatBackwardCuda);
  r->Existing("split").CudaKernel(SplitForwardCuda);
  r->Existing("slice_channel").CudaKernel(SplitForwardCuda);
  r->Existing("_backward_split").CudaKernel(SplitBackwardCuda);
}

}  // namespace frugal
