// make_loss on the GPU (src/ops/make_loss.cc): y = x; dx = grad_scale / norm.
// "valid" counts the elements above valid_thresh in one block first.
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

// One block: dx (+)= grad_scale / norm, norm = max(1, #{y > thresh}) when valid.
__global__ void MakeLossGradKernel(const float* y, int64_t n, float* dx, int64_t n_dx, double scale, bool valid,
                                   float thresh, bool add) {
  double norm = 1;
  if (valid) {
    float count = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) count += y[i] > thresh ? 1.f : 0.f;
    count = cuda::BlockSum(count);
    norm = count < 1 ? 1.0 : static_cast<double>(count);
  }
  const float g = static_cast<float>(scale / norm);
  for (int64_t i = threadIdx.x; i < n_dx; i += blockDim.x) dx[i] = add ? dx[i] + g : g;
}

// inputs: y    output: dx
void MakeLossBackwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const auto& p = c.params<MakeLossParams>();
  const Tensor& y = c.in[0];
  const double scale = p.grad_scale / (p.normalization == "batch" ? static_cast<double>(y.shape()[0]) : 1.0);
  MakeLossGradKernel<<<1, 1024, 0, cuda::Stream(c)>>>(y.f(), y.size(), c.out[0].f(), c.out[0].size(), scale,
                                                      p.normalization == "valid", p.valid_thresh,
                                                      c.req[0] == OpReq::kAdd);
  FRUGAL_CUDA_LAUNCHED();
}

}  // namespace

void RegisterCuda_make_loss(OpRegistry* r) { SetCudaKernels(r, "make_loss", CopyForwardCuda, MakeLossBackwardCuda); }

}  // namespace frugal
