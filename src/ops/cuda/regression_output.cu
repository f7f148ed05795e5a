// linear_regression_output and logistic_regression_output on the GPU
// (src/ops/regression_output.cc): y = x or sigmoid(x);
// dx = (y - label) * grad_scale / (outputs per sample); dlabel = 0.
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

template <bool kLogistic>
void RegressionForwardCuda(const KernelCtx& c) {
  const float* x = c.in[0].f();
  cuda::Map(c, 0, [x] __device__(int64_t i) { return kLogistic ? 1.f / (1.f + expf(-x[i])) : x[i]; });
}

// inputs: y, label    outputs: dx, dlabel (zeros)
void RegressionBackwardCuda(const KernelCtx& c) {
  const float *y = c.in[0].f(), *label = c.in[1].f();
  const Shape& ls = c.in[1].shape();
  const float scale = static_cast<float>(c.params<RegressionParams>().grad_scale / (ls.Size() / ls[0]));
  if (c.req[1] == OpReq::kWrite)
    FRUGAL_CUDA_CHECK(cudaMemsetAsync(c.out[1].raw(), 0, c.out[1].bytes(), cuda::Stream(c)));
  cuda::Map(c, 0, [=] __device__(int64_t i) { return (y[i] - label[i]) * scale; });
}

}  // namespace

void RegisterCuda_regression_output(OpRegistry* r) {
  SetCudaKernels(r, "linear_regression_output", RegressionForwardCuda<false>, RegressionBackwardCuda);
  SetCudaKernels(r, "logistic_regression_output", RegressionForwardCuda<true>, RegressionBackwardCuda);
}

}  // namespace frugal
