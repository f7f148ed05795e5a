// concat and split on the GPU (src/ops/concat_split.cc): copies between a
// whole tensor (outer, sum n_k, inner) and its parts (outer, n_k, inner),
// one kernel per part.
#include <vector>

#include "ops/cuda/cuda_op_util.h"
#include "ops/concat_split.h"

namespace frugal {
namespace {

// whole[o, off + i] (+)= part[o, i] for the part's (outer, len) elements.
__global__ void GatherPart(const float* part, int64_t outer, int64_t len, int64_t row, int64_t off, float* whole,
                           bool add) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < outer * len;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    float* w = whole + (e / len) * row + off + e % len;
    *w = add ? *w + part[e] : part[e];
  }
}

// Runs a PartsCopy (ops/concat_split.h): one kernel per written part.
void CopyPartsCuda(const KernelCtx& c, const PartsCopy& p) {
  int64_t at = 0;
  for (size_t k = 0; k < p.parts.size(); ++k) {
    const int64_t len = p.n[k] * p.inner, off = at * p.inner, row = p.total * p.inner, outer = p.outer;
    at += p.n[k];
    const OpReq req = p.gather ? p.whole_req : p.part_req[k];
    if (req == OpReq::kNull || len == 0) continue;
    if (p.gather) {
      GatherPart<<<cuda::Blocks(outer * len), cuda::kThreads, 0, cuda::Stream(c)>>>(p.parts[k], outer, len, row, off,
                                                                                    p.whole, req == OpReq::kAdd);
      FRUGAL_CUDA_LAUNCHED();
    } else {
      const float* w = p.whole;
      cuda::Map(cuda::Stream(c), outer * len, p.parts[k], req,
                [=] __device__(int64_t e) { return w[(e / len) * row + off + e % len]; });
    }
  }
}

void ConcatForwardCuda(const KernelCtx& c) { CopyPartsCuda(c, ConcatCopy(c)); }

// inputs: dy    outputs: dx_0 .. dx_{n-1}
void ConcatBackwardCuda(const KernelCtx& c) { CopyPartsCuda(c, ConcatGradCopy(c)); }

void SplitForwardCuda(const KernelCtx& c) { CopyPartsCuda(c, SplitCopy(c)); }

// inputs: dy_0 .. dy_{n-1}    output: dx
void SplitBackwardCuda(const KernelCtx& c) { CopyPartsCuda(c, SplitGradCopy(c)); }

}  // namespace

void RegisterCuda_concat_split(OpRegistry* r) {
  SetCudaKernels(r, "concat", ConcatForwardCuda, ConcatBackwardCuda);
  r->Existing("split").CudaKernel(SplitForwardCuda);
  r->Existing("slice_channel").CudaKernel(SplitForwardCuda);
  r->Existing("_backward_split").CudaKernel(SplitBackwardCuda);
}

}  // namespace frugal
