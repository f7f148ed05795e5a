// add_n on the GPU: y = x_0 + ... + x_{n-1}, in the CPU's order (src/ops/add_n.cc).
#include "ops/cuda/cuda_op_util.h"

namespace frugal {
namespace {

// Inputs go to the kernel by value, eight at a time; more inputs add in
// further passes (y += x_8 + ...), the same left-to-right sum up to rounding.
struct Ptrs {
  const float* x[8];
  int n;
};

void AddNForwardCuda(const KernelCtx& c) {
  const int n = static_cast<int>(c.in.size());
  OpReq req = c.req[0];
  for (int k0 = 0; k0 < n && req != OpReq::kNull; k0 += 8) {
    Ptrs p{};
    p.n = std::min(8, n - k0);
    for (int k = 0; k < p.n; ++k) p.x[k] = c.in[k0 + k].f();
    cuda::Map(cuda::Stream(c), c.out[0].size(), Out(c, 0), req, [p] __device__(int64_t i) {
      float s = p.x[0][i];
      for (int k = 1; k < p.n; ++k) s += p.x[k][i];
      return s;
    });
    req = OpReq::kAdd;
  }
}

}  // namespace

void RegisterCuda_add_n(OpRegistry* r) { r->Existing("add_n").CudaKernel(AddNForwardCuda); }

}  // namespace frugal
