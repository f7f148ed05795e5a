// layer_norm on the GPU (src/ops/layer_norm.cc): one block per row for the
// statistics, y and dx (row sums by cuda::BlockSum, in float); the parameter
// gradients one thread per column, over the rows in order (deterministic,
// no atomics), run before dx, which may overwrite dy.
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

__device__ inline void Put(float* p, OpReq req, float v) {
  if (req == OpReq::kAdd)
    *p += v;
  else
    *p = v;
}

// inputs: x, gamma[, beta]   outputs: y, mean, inv_std
__global__ void LnForwardKernel(int64_t d, float eps, const float* x, const float* gamma, const float* beta, float* y,
                                float* mean_out, float* inv_out, OpReq req_y, OpReq req_mean, OpReq req_inv) {
  const int64_t i = blockIdx.x;
  const float* xi = x + i * d;
  float s = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += xi[j];
  const float mean = cuda::BlockSum(s) / static_cast<float>(d);
  float q = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) q += (xi[j] - mean) * (xi[j] - mean);
  const float inv = rsqrtf(cuda::BlockSum(q) / static_cast<float>(d) + eps);
  if (threadIdx.x == 0) {
    if (req_mean != OpReq::kNull) Put(mean_out + i, req_mean, mean);
    if (req_inv != OpReq::kNull) Put(inv_out + i, req_inv, inv);
  }
  if (req_y == OpReq::kNull) return;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)  // y may be x: each element read, then written
    Put(y + i * d + j, req_y, gamma[j] * ((xi[j] - mean) * inv) + (beta ? beta[j] : 0.f));
}

void LayerNormForwardCuda(const KernelCtx& c) {
  const auto& p = c.params<LayerNormParams>();
  const LayerNormRows l(c.in[0].shape(), p.Axis(c.in[0].shape()));
  LnForwardKernel<<<static_cast<unsigned>(l.r), cuda::kThreads, 0, cuda::Stream(c)>>>(
      l.d, static_cast<float>(p.eps), c.in[0].f(), c.in[1].f(), p.no_bias ? nullptr : c.in[2].f(), Out(c, 0), Out(c, 1),
      Out(c, 2), c.req[0], c.req[1], c.req[2]);
  FRUGAL_CUDA_LAUNCHED();
}

// dgamma[j] = sum over rows of dy xhat, dbeta[j] = sum over rows of dy.
__global__ void LnParamGradKernel(int64_t r, int64_t d, const float* dy, const float* x, const float* mean,
                                  const float* inv, float* dgamma, float* dbeta, OpReq req_dgamma, OpReq req_dbeta) {
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < d;
       j += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    float sg = 0, sb = 0;
    for (int64_t i = 0; i < r; ++i) {
      const float g = dy[i * d + j];
      sg += g * ((x[i * d + j] - mean[i]) * inv[i]);
      sb += g;
    }
    if (dgamma) Put(dgamma + j, req_dgamma, sg);
    if (dbeta) Put(dbeta + j, req_dbeta, sb);
  }
}

// dx = inv (g - mean(g) - xhat mean(g xhat)), g = gamma dy.
__global__ void LnDataGradKernel(int64_t d, const float* dy, const float* x, const float* gamma, const float* mean,
                                 const float* inv, float* dx, OpReq req_dx) {
  const int64_t i = blockIdx.x;
  const float *dyi = dy + i * d, *xi = x + i * d;
  const float m = mean[i], s = inv[i];
  float sg = 0, sgx = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float g = gamma[j] * dyi[j];
    sg += g;
    sgx += g * ((xi[j] - m) * s);
  }
  const float mean_g = cuda::BlockSum(sg) / static_cast<float>(d);
  const float mean_gx = cuda::BlockSum(sgx) / static_cast<float>(d);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)  // dx may be dy: each element read, then written
    Put(dx + i * d + j, req_dx, s * (gamma[j] * dyi[j] - mean_g - (xi[j] - m) * s * mean_gx));
}

// inputs: dy, x, gamma, mean, inv_std   outputs: dx, dgamma[, dbeta]
void LayerNormBackwardCuda(const KernelCtx& c) {
  const auto& p = c.params<LayerNormParams>();
  const LayerNormRows l(c.in[1].shape(), p.Axis(c.in[1].shape()));
  const float *dy = c.in[0].f(), *x = c.in[1].f(), *gamma = c.in[2].f(), *mean = c.in[3].f(), *inv = c.in[4].f();
  float* dgamma = Out(c, 1);
  float* dbeta = p.no_bias ? nullptr : Out(c, 2);
  if (dgamma || dbeta) {
    LnParamGradKernel<<<cuda::Blocks(l.d), cuda::kThreads, 0, cuda::Stream(c)>>>(
        l.r, l.d, dy, x, mean, inv, dgamma, dbeta, c.req[1], p.no_bias ? OpReq::kNull : c.req[2]);
    FRUGAL_CUDA_LAUNCHED();
  }
  if (c.req[0] == OpReq::kNull) return;
  LnDataGradKernel<<<static_cast<unsigned>(l.r), cuda::kThreads, 0, cuda::Stream(c)>>>(l.d, dy, x, gamma, mean, inv,
                                                                                       Out(c, 0), c.req[0]);
  FRUGAL_CUDA_LAUNCHED();
}

}  // namespace

void RegisterCuda_layer_norm(OpRegistry* r) {
  SetCudaKernels(r, "layer_norm", LayerNormForwardCuda, LayerNormBackwardCuda);
}

}  // namespace frugal
