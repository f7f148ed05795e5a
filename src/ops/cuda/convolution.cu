// convolution on the GPU with cuDNN (src/ops/convolution.cc):
//   y = conv(x, W) + b      dx = conv_transpose(dy, W)      dW = corr(x, dy)      db = sum dy
// The algorithms are cuDNN's, chosen by its heuristics among the
// deterministic ones whose workspace fits the workspace the memory plan gave
// this node (the op's Workspace, which the plan counts), so a recomputation
// gives the same bits and the plan stays exact on the device. Tensor cores
// are off (CUDNN_FMA_MATH: plain FP32, no TF32) so that results agree with
// the CPU kernel within FP32 tolerances. Choices are cached per shape and
// workspace size.
#include "ops/cuda/cudnn_conv.h"

namespace frugal {
namespace {

// inputs: x, W[, b]   output: y
void ConvForwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const auto& p = c.params<ConvParams>();
  const Shape& x = c.in[0].shape();
  const cuda::CudnnConv k(c, p, p.pad, x, c.out[0].shape(), Fmt("conv", x, p.Key()));
  k.Forward(c.in[0].raw(), c.in[1].raw(), c.req[0], c.out[0].raw());
  if (!p.no_bias) k.AddBias(false, c.in[2].raw(), c.out[0].raw());
}

// inputs: dy, x, W   outputs: dx, dW[, db]
void ConvBackwardCuda(const KernelCtx& c) {
  const auto& p = c.params<ConvParams>();
  const Shape& x = c.in[1].shape();
  const cuda::CudnnConv k(c, p, p.pad, x, c.in[0].shape(), Fmt("conv", x, p.Key()));
  const void* dy = c.in[0].raw();
  k.BackwardFilter(c.in[1].raw(), dy, c.req[1], c.out[1].raw());
  if (!p.no_bias) k.BackwardBias(false, dy, c.req[2], c.out[2].raw());
  k.BackwardData(c.in[2].raw(), dy, c.req[0], c.out[0].raw());
}

}  // namespace

void RegisterCuda_convolution(OpRegistry* r) { SetCudaKernels(r, "convolution", ConvForwardCuda, ConvBackwardCuda); }

}  // namespace frugal
