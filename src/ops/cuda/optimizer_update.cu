// The optimizer updates on the GPU: the CPU's element (frugal/update_rule.h)
// with the CPU's scalars (UpdateArgsFor, src/ops/optimizer_update.cc), one
// thread per element, so the two agree to the rounding of sqrtf.
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

__global__ void UpdateKernel(UpdateArgs a, float* w, const float* g, float* s0, float* s1, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    UpdateElement(a, i, w, g, s0, s1);
}

void UpdateCuda(const KernelCtx& c) {
  FRUGAL_REQUIRE(c.step >= 1, c.node.Where(), ": an update runs with step >= 1 (updates count from 1), got ", c.step);
  const UpdateArgs a = UpdateArgsFor(c.params<UpdateParams>(), c.lr, c.step);
  const int64_t n = c.in[0].size();
  if (n == 0) return;
  float* s1 = c.in.size() > 3 ? c.in[3].f() : nullptr;
  UpdateKernel<<<cuda::Blocks(n), cuda::kThreads, 0, cuda::Stream(c)>>>(a, c.in[0].f(), c.in[1].f(), c.in[2].f(), s1,
                                                                        n);
  FRUGAL_CUDA_LAUNCHED();
}

}  // namespace

void RegisterCuda_optimizer_update(OpRegistry* r) {
  for (const char* op : {"sgd_mom_update", "nesterov_update", "adam_update", "adamw_update", "rmsprop_update"})
    r->Existing(op).CudaKernel(UpdateCuda);
}

}  // namespace frugal
