// softmax_cross_entropy on the GPU (src/ops/softmax_cross_entropy.cc):
//   p = softmax(x) per row;   dx = (p - onehot(label)) grad_scale / norm, 0 for ignored rows
// One block per row. As on the CPU, a label that is not a class index (and
// not ignore_label) is an error naming the node: the forward records it in
// the GPU's fault slot and the launch fails when the GPU is done with it
// (backend/cuda/cuda_util.h, Fault).
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

struct LabelCheck {
  const float* label;
  bool use_ignore;
  float ignore_label;
  cuda::Fault* fault;
  uint64_t launch;
};

__global__ void SoftmaxRows(const float* x, float* p, int64_t k, bool add, LabelCheck lc) {
  if (threadIdx.x == 0) {
    const float l = lc.label[blockIdx.x];
    const bool ignored = lc.use_ignore && l == lc.ignore_label;
    if (!ignored && !(l >= 0.f && l < static_cast<float>(k) && l == floorf(l)))
      cuda::RaiseFault(lc.fault, lc.launch, cuda::kBadLabel, l, blockIdx.x, k);
  }
  const float* xi = x + blockIdx.x * k;
  float* pi = p + blockIdx.x * k;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) mx = fmaxf(mx, xi[j]);
  mx = cuda::BlockMax(mx);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) sum += expf(xi[j] - mx);
  sum = cuda::BlockSum(sum);
  // x and p may alias: each thread reads its elements before writing them.
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
    const float v = expf(xi[j] - mx) / sum;
    pi[j] = add ? pi[j] + v : v;
  }
}

struct SceGrad {
  int64_t n, k;
  double grad_scale;
  int normalization;  // 0 batch, 1 null, 2 valid
  bool use_ignore;
  float ignore_label;
  bool add;
};

__global__ void SceBackwardRows(const float* p, const float* label, float* dx, SceGrad g) {
  const int64_t i = blockIdx.x;
  double norm = g.normalization == 0 ? static_cast<double>(g.n) : 1.0;
  if (g.normalization == 2) {
    float valid = 0;
    for (int64_t r = threadIdx.x; r < g.n; r += blockDim.x) valid += !(g.use_ignore && label[r] == g.ignore_label);
    valid = cuda::BlockSum(valid);
    norm = valid < 1 ? 1.0 : static_cast<double>(valid);
  }
  const float scale = static_cast<float>(g.grad_scale / norm);
  const bool ignored = g.use_ignore && label[i] == g.ignore_label;
  const int64_t target = static_cast<int64_t>(label[i]);
  for (int64_t j = threadIdx.x; j < g.k; j += blockDim.x) {
    const int64_t e = i * g.k + j;
    const float v = ignored ? 0.f : (p[e] - (target == j ? 1.f : 0.f)) * scale;
    dx[e] = g.add ? dx[e] + v : v;
  }
}

void SceForwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const auto& prm = c.params<SceParams>();
  const int64_t n = c.in[0].shape()[0], k = c.in[0].shape()[1];
  if (n == 0) return;
  const LabelCheck lc{c.in[1].f(), prm.use_ignore, prm.ignore_label, cuda::Ctx(c).fault, cuda::Ctx(c).launch};
  SoftmaxRows<<<static_cast<unsigned>(n), cuda::kThreads, 0, cuda::Stream(c)>>>(c.in[0].f(), c.out[0].f(), k,
                                                                                c.req[0] == OpReq::kAdd, lc);
  FRUGAL_CUDA_LAUNCHED();
}

// inputs: p, label    outputs: dx, dlabel (zeros)
void SceBackwardCuda(const KernelCtx& c) {
  const auto& prm = c.params<SceParams>();
  const int64_t n = c.in[0].shape()[0], k = c.in[0].shape()[1];
  if (c.req[1] == OpReq::kWrite)
    FRUGAL_CUDA_CHECK(cudaMemsetAsync(c.out[1].raw(), 0, c.out[1].bytes(), cuda::Stream(c)));
  if (c.req[0] == OpReq::kNull || n == 0) return;
  const SceGrad g{n,
                  k,
                  prm.grad_scale,
                  prm.normalization == "batch"  ? 0
                  : prm.normalization == "null" ? 1
                                                : 2,
                  prm.use_ignore,
                  prm.ignore_label,
                  c.req[0] == OpReq::kAdd};
  SceBackwardRows<<<static_cast<unsigned>(n), cuda::kThreads, 0, cuda::Stream(c)>>>(c.in[0].f(), c.in[1].f(),
                                                                                    c.out[0].f(), g);
  FRUGAL_CUDA_LAUNCHED();
}

}  // namespace

void RegisterCuda_softmax_cross_entropy(OpRegistry* r) {
  SetCudaKernels(r, "softmax_cross_entropy", SceForwardCuda, SceBackwardCuda);
}

}  // namespace frugal
