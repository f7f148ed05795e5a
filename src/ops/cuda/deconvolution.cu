// deconvolution on the GPU with cuDNN (src/ops/deconvolution.cc): the
// transposed convolution is cuDNN's convolution with the roles swapped.
// With the convolution x' = y (O channels), y' = x (C channels) and filter
// W (C, O/g, kh, kw):
//   y  = backward_data(W, x) + b          dx = forward(dy, W)
//   dW = backward_filter(x' = dy, dy' = x)     db = backward_bias(dy)
// Algorithms as for convolution (ops/cuda/cudnn_conv.h): deterministic,
// within the plan's workspace, plain FP32.
#include "ops/cuda/cudnn_conv.h"

namespace frugal {
namespace {

// The convolution whose backward_data this deconvolution of x is.
cuda::CudnnConv AsConvolution(const KernelCtx& c, const ConvParams& p, const Shape& x, const Shape& y) {
  Pair pad, adj;
  EffectivePad(p, x, &pad, &adj);
  return cuda::CudnnConv(c, p, pad, y, x, Fmt("deconv", x, p.Key()));
}

// inputs: x, W[, b]   output: y
void DeconvForwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const auto& p = c.params<ConvParams>();
  const cuda::CudnnConv k = AsConvolution(c, p, c.in[0].shape(), c.out[0].shape());
  k.BackwardData(c.in[1].raw(), c.in[0].raw(), c.req[0], c.out[0].raw());
  if (!p.no_bias) k.AddBias(true, c.in[2].raw(), c.out[0].raw());
}

// inputs: dy, x, W   outputs: dx, dW[, db]
void DeconvBackwardCuda(const KernelCtx& c) {
  const auto& p = c.params<ConvParams>();
  const cuda::CudnnConv k = AsConvolution(c, p, c.in[1].shape(), c.in[0].shape());
  const void* dy = c.in[0].raw();
  k.BackwardFilter(dy, c.in[1].raw(), c.req[1], c.out[1].raw());
  if (!p.no_bias) k.BackwardBias(true, dy, c.req[2], c.out[2].raw());
  k.Forward(dy, c.in[2].raw(), c.req[0], c.out[0].raw());
}

}  // namespace

void RegisterCuda_deconvolution(OpRegistry* r) {
  SetCudaKernels(r, "deconvolution", DeconvForwardCuda, DeconvBackwardCuda);
}

}  // namespace frugal
