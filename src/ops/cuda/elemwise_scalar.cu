// add/sub/rsub/mul/div/rdiv_scalar on the GPU, and rdiv's gradient
// (src/ops/elemwise_scalar.cc; the other gradients are these ops again).
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

struct AddS {
  __device__ static float F(float x, float s) { return x + s; }
};
struct SubS {
  __device__ static float F(float x, float s) { return x - s; }
};
struct RSubS {
  __device__ static float F(float x, float s) { return s - x; }
};
struct MulS {
  __device__ static float F(float x, float s) { return x * s; }
};
struct DivS {
  __device__ static float F(float x, float s) { return x / s; }
};
struct RDivS {
  __device__ static float F(float x, float s) { return s / x; }
};

template <typename Op>
void ScalarForwardCuda(const KernelCtx& c) {
  const float* x = c.in[0].f();
  const float s = c.params<ScalarParams>().scalar;
  cuda::Map(c, 0, [=] __device__(int64_t i) { return Op::F(x[i], s); });
}

// inputs: dy, x    output: dx = -dy * s / x^2
void RDivScalarBackwardCuda(const KernelCtx& c) {
  const float *dy = c.in[0].f(), *x = c.in[1].f();
  const float s = c.params<ScalarParams>().scalar;
  cuda::Map(c, 0, [=] __device__(int64_t i) { return -dy[i] * s / (x[i] * x[i]); });
}

}  // namespace

void RegisterCuda_elemwise_scalar(OpRegistry* r) {
  r->Existing("add_scalar").CudaKernel(ScalarForwardCuda<AddS>);
  r->Existing("sub_scalar").CudaKernel(ScalarForwardCuda<SubS>);
  r->Existing("rsub_scalar").CudaKernel(ScalarForwardCuda<RSubS>);
  r->Existing("mul_scalar").CudaKernel(ScalarForwardCuda<MulS>);
  r->Existing("div_scalar").CudaKernel(ScalarForwardCuda<DivS>);
  SetCudaKernels(r, "rdiv_scalar", ScalarForwardCuda<RDivS>, RDivScalarBackwardCuda);
}

}  // namespace frugal
