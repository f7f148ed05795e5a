// identity, block_grad and zeros_like on the GPU (src/ops/identity.cc), and
// the copy the ops that copy their input share (CopyForwardCuda).
#include "ops/cuda/cuda_op_util.h"

namespace frugal {

void CopyForwardCuda(const KernelCtx& c) {
  const float* x = c.in[0].f();
  if (c.req[0] == OpReq::kWrite && x == Out(c, 0)) return;  // in place
  cuda::Map(c, 0, [x] __device__(int64_t i) { return x[i]; });
}

namespace {

void ZerosForwardCuda(const KernelCtx& c) {
  if (c.req[0] != OpReq::kWrite) return;  // kAdd: adding zero
  FRUGAL_CUDA_CHECK(cudaMemsetAsync(c.out[0].raw(), 0, c.out[0].bytes(), cuda::Stream(c)));
}

}  // namespace

void RegisterCuda_identity(OpRegistry* r) {
  r->Existing("identity").CudaKernel(CopyForwardCuda);
  r->Existing("block_grad").CudaKernel(CopyForwardCuda);
  r->Existing("zeros_like").CudaKernel(ZerosForwardCuda);
}

}  // namespace frugal
