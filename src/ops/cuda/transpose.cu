// transpose on the GPU (src/ops/transpose.cc): y[i] = x[map(i)], map walking
// y's index space with x's strides permuted. Its gradient is a transpose.
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

void TransposeForwardCuda(const KernelCtx& c) {
  const auto& p = c.params<TransposeParams>();
  const Shape& x = c.in[0].shape();
  const int n = x.ndim();
  const std::vector<int64_t> xs = Strides(x);
  std::vector<int64_t> dims, strides;
  for (int d = 0; d < n; ++d) {
    const int from = p.axes.empty() ? n - 1 - d : static_cast<int>(p.axes[d] < 0 ? p.axes[d] + n : p.axes[d]);
    dims.push_back(x[from]);
    strides.push_back(xs[from]);
  }
  const cuda::DevIndex map = cuda::ToDevice(c, StridedIndex(dims, strides));
  const float* px = c.in[0].f();
  cuda::Map(c, 0, [=] __device__(int64_t i) { return px[map(i)]; });
}

}  // namespace

void RegisterCuda_transpose(OpRegistry* r) { r->Existing("transpose").CudaKernel(TransposeForwardCuda); }

}  // namespace frugal
