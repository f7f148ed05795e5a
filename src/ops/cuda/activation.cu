// activation on the GPU (relu, sigmoid, tanh, softrelu) and its gradient,
// written in y as on the CPU (src/ops/activation.cc). Own kernels: cuDNN's
// activation would need x for softrelu's gradient, which the op does not keep.
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

void ActForwardCuda(const KernelCtx& c) {
  const float* x = c.in[0].f();
  switch (c.params<Act>()) {
    case Act::kRelu: return cuda::Map(c, 0, [x] __device__(int64_t i) { return fmaxf(x[i], 0.f); });
    case Act::kSigmoid: return cuda::Map(c, 0, [x] __device__(int64_t i) { return 1.f / (1.f + expf(-x[i])); });
    case Act::kTanh: return cuda::Map(c, 0, [x] __device__(int64_t i) { return tanhf(x[i]); });
    case Act::kSoftRelu:  // log(1 + e^x) without overflow
      return cuda::Map(c, 0, [x] __device__(int64_t i) { return fmaxf(x[i], 0.f) + log1pf(expf(-fabsf(x[i]))); });
  }
}

// inputs: dy, y   output: dx
void ActBackwardCuda(const KernelCtx& c) {
  const float *dy = c.in[0].f(), *y = c.in[1].f();
  switch (c.params<Act>()) {
    case Act::kRelu: return cuda::Map(c, 0, [=] __device__(int64_t i) { return y[i] > 0.f ? dy[i] : 0.f; });
    case Act::kSigmoid: return cuda::Map(c, 0, [=] __device__(int64_t i) { return dy[i] * y[i] * (1.f - y[i]); });
    case Act::kTanh: return cuda::Map(c, 0, [=] __device__(int64_t i) { return dy[i] * (1.f - y[i] * y[i]); });
    case Act::kSoftRelu: return cuda::Map(c, 0, [=] __device__(int64_t i) { return -dy[i] * expm1f(-y[i]); });
  }
}

}  // namespace

void RegisterCuda_activation(OpRegistry* r) { SetCudaKernels(r, "activation", ActForwardCuda, ActBackwardCuda); }

}  // namespace frugal
