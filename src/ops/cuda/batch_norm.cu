// batch_norm on the GPU (src/ops/batch_norm.cc): the CPU op's contract, which
// saves the batch mean and *variance* and whose backward reads x, so own
// kernels rather than cuDNN's (which saves the inverse std and updates the
// moving variance with the unbiased estimate). One block per channel; the
// block's threads stride over the channel's N * S elements.
//   training: mean, var over (N, S), moving stats updated; recomputing: the saved
//   statistics, which the mirror reads in place of the moving ones
//   y = gamma (x - mean) / sqrt(var + eps) + beta, then max(y, 0) with act_type relu
//   dx = gamma inv (g - sum(g) / M - (x - mean) inv^2 sum(g (x - mean)) / M),
//   g = dy, or with relu dy where the normalised x (recomputed from x, as the
//   forward computed it) was positive and 0 elsewhere
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

struct BnShape {
  int64_t n, c, s;
  __device__ int64_t At(int64_t ch, int64_t e) const { return ((e / s) * c + ch) * s + e % s; }
  __device__ int64_t count() const { return n * s; }
};

// y = a x + b, written once so that forward and backward round alike.
__device__ inline float Affine(float a, float x, float b) { return __fmaf_rn(a, x, b); }

struct BnFwd {
  BnShape l;
  float eps, momentum;
  bool fix_gamma, batch_stats, relu;  // batch_stats: computed, and the moving ones updated
  OpReq req_y, req_mean, req_var;
};

__device__ inline void Put(float* p, OpReq req, float v) {
  if (req == OpReq::kAdd)
    *p += v;
  else
    *p = v;
}

// inputs: x, gamma, beta, moving_mean, moving_var   outputs: y, mean, var
__global__ void BnForwardKernel(BnFwd f, const float* x, const float* gamma, const float* beta, float* moving_mean,
                                float* moving_var, float* y, float* mean_out, float* var_out) {
  const int64_t ch = blockIdx.x;
  const BnShape& l = f.l;
  float mean = moving_mean[ch], var = moving_var[ch];
  if (f.batch_stats) {
    float s = 0;
    for (int64_t e = threadIdx.x; e < l.count(); e += blockDim.x) s += x[l.At(ch, e)];
    mean = cuda::BlockSum(s) / static_cast<float>(l.count());
    float q = 0;
    for (int64_t e = threadIdx.x; e < l.count(); e += blockDim.x) {
      const float d = x[l.At(ch, e)] - mean;
      q += d * d;
    }
    var = cuda::BlockSum(q) / static_cast<float>(l.count());
  }
  if (threadIdx.x == 0) {
    if (f.batch_stats) {
      moving_mean[ch] = f.momentum * moving_mean[ch] + (1 - f.momentum) * mean;
      moving_var[ch] = f.momentum * moving_var[ch] + (1 - f.momentum) * var;
    }
    if (f.req_mean != OpReq::kNull) Put(mean_out + ch, f.req_mean, mean);
    if (f.req_var != OpReq::kNull) Put(var_out + ch, f.req_var, var);
  }
  if (f.req_y == OpReq::kNull) return;
  const float a = (f.fix_gamma ? 1.f : gamma[ch]) * rsqrtf(var + f.eps);
  const float b = __fmaf_rn(-mean, a, beta[ch]);  // as the backward computes it
  for (int64_t e = threadIdx.x; e < l.count(); e += blockDim.x) {
    const int64_t i = l.At(ch, e);
    const float v = Affine(a, x[i], b);
    Put(y + i, f.req_y, f.relu ? fmaxf(v, 0.f) : v);  // x and y may alias
  }
}

struct BnBwd {
  BnShape l;
  float eps;
  bool fix_gamma, global_stats, relu;
  OpReq req_dx, req_dgamma, req_dbeta;
};

// inputs: dy, x, gamma, beta, mean, var   outputs: dx, dgamma, dbeta
__global__ void BnBackwardKernel(BnBwd f, const float* dy, const float* x, const float* gamma, const float* beta,
                                 const float* mean, const float* var, float* dx, float* dgamma, float* dbeta) {
  const int64_t ch = blockIdx.x;
  const BnShape& l = f.l;
  const float m = mean[ch], inv = rsqrtf(var[ch] + f.eps);
  // The forward's a and b, to recompute where its ReLU passed the gradient.
  const float a = (f.fix_gamma ? 1.f : gamma[ch]) * inv;
  const float b = __fmaf_rn(-m, a, beta[ch]);
  auto g = [&](int64_t i) { return !f.relu || Affine(a, x[i], b) > 0.f ? dy[i] : 0.f; };
  float s1 = 0, s2 = 0;
  for (int64_t e = threadIdx.x; e < l.count(); e += blockDim.x) {
    const int64_t i = l.At(ch, e);
    const float gi = g(i);
    s1 += gi;
    s2 += gi * (x[i] - m);
  }
  const float sum_dy = cuda::BlockSum(s1);
  const float sum_dy_xhat = cuda::BlockSum(s2) * inv;
  if (threadIdx.x == 0) {
    if (f.req_dgamma != OpReq::kNull) Put(dgamma + ch, f.req_dgamma, f.fix_gamma ? 0.f : sum_dy_xhat);
    if (f.req_dbeta != OpReq::kNull) Put(dbeta + ch, f.req_dbeta, sum_dy);
  }
  if (f.req_dx == OpReq::kNull) return;
  const float k = (f.fix_gamma ? 1.f : gamma[ch]) * inv;
  const float mean_dy = f.global_stats ? 0.f : sum_dy / l.count();
  const float q = f.global_stats ? 0.f : sum_dy_xhat * inv / l.count();
  for (int64_t e = threadIdx.x; e < l.count(); e += blockDim.x) {
    const int64_t i = l.At(ch, e);
    Put(dx + i, f.req_dx, k * (g(i) - mean_dy - (x[i] - m) * q));  // dx may alias dy
  }
}

BnShape ShapeOf(const Shape& x) { return {x[0], x[1], x.Prod(2, x.ndim())}; }

float* OutOrNull(const KernelCtx& c, int k) { return Out(c, k); }

void BnForwardCuda(const KernelCtx& c) {
  const auto& p = c.params<BnParams>();
  // A mirror's in[3] and in[4] are the saved statistics (MirrorReads), not the moving ones.
  const bool batch_stats = c.is_train && !p.use_global_stats && !c.is_recompute;
  const BnFwd f{ShapeOf(c.in[0].shape()),
                static_cast<float>(p.eps),
                static_cast<float>(p.momentum),
                p.fix_gamma,
                batch_stats,
                p.relu,
                c.req[0],
                c.req[1],
                c.req[2]};
  BnForwardKernel<<<static_cast<unsigned>(f.l.c), 512, 0, cuda::Stream(c)>>>(f, c.in[0].f(), c.in[1].f(), c.in[2].f(),
                                                                             c.in[3].f(), c.in[4].f(), OutOrNull(c, 0),
                                                                             OutOrNull(c, 1), OutOrNull(c, 2));
  FRUGAL_CUDA_LAUNCHED();
}

void BnBackwardCuda(const KernelCtx& c) {
  const auto& p = c.params<BnParams>();
  const BnBwd f{ShapeOf(c.in[1].shape()),
                static_cast<float>(p.eps),
                p.fix_gamma,
                p.use_global_stats,
                p.relu,
                c.req[0],
                c.req[1],
                c.req[2]};
  BnBackwardKernel<<<static_cast<unsigned>(f.l.c), 512, 0, cuda::Stream(c)>>>(
      f, c.in[0].f(), c.in[1].f(), c.in[2].f(), c.in[3].f(), c.in[4].f(), c.in[5].f(), OutOrNull(c, 0), OutOrNull(c, 1),
      OutOrNull(c, 2));
  FRUGAL_CUDA_LAUNCHED();
  for (int k = 3; k < 5; ++k) {  // the moving statistics get no gradient
    if (c.req[k] == OpReq::kWrite)
      FRUGAL_CUDA_CHECK(cudaMemsetAsync(c.out[k].raw(), 0, c.out[k].bytes(), cuda::Stream(c)));
  }
}

}  // namespace

void RegisterCuda_batch_norm(OpRegistry* r) { SetCudaKernels(r, "batch_norm", BnForwardCuda, BnBackwardCuda); }

}  // namespace frugal
