// relu on the GPU: y = max(x, 0); dx = dy * (y > 0).  See src/ops/relu.cc.
#include "ops/cuda/cuda_op_util.h"

namespace frugal {
namespace {

void ReluForwardCuda(const KernelCtx& c) {
  const float* x = c.in[0].f();
  cuda::Map(c, 0, [x] __device__(int64_t i) { return x[i] > 0.f ? x[i] : 0.f; });
}

void ReluBackwardCuda(const KernelCtx& c) {
  const float* dy = c.in[0].f();
  const float* y = c.in[1].f();
  cuda::Map(c, 0, [dy, y] __device__(int64_t i) { return y[i] > 0.f ? dy[i] : 0.f; });
}

}  // namespace

void RegisterCuda_relu(OpRegistry* r) { SetCudaKernels(r, "relu", ReluForwardCuda, ReluBackwardCuda); }

}  // namespace frugal
