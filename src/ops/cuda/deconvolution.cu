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

using cuda::AlgosFor;
using cuda::ConvAlgos;
using cuda::ConvDescs;
using cuda::WorkspaceOf;

std::string Key(const ConvParams& p, const Shape& x) { return Fmt("deconv", x, p.Key()); }

// inputs: x, W[, b]   output: y
void DeconvForwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const auto& p = c.params<ConvParams>();
  Pair pad, adj;
  EffectivePad(p, c.in[0].shape(), &pad, &adj);
  cudnnHandle_t h = cuda::Ctx(c).cudnn;
  const ConvDescs d(p, pad, c.out[0].shape(), c.in[0].shape());
  size_t ws_bytes;
  void* ws = WorkspaceOf(c, &ws_bytes);
  const ConvAlgos& a = AlgosFor(h, d, Key(p, c.in[0].shape()), ws_bytes, true);
  const float one = 1.f, beta = cuda::Beta(c.req[0]);
  FRUGAL_CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, d.w, c.in[1].raw(), d.y, c.in[0].raw(), d.conv, a.bwd_data,
                                                  ws, ws_bytes, &beta, d.x, c.out[0].raw()));
  if (!p.no_bias) FRUGAL_CUDNN_CHECK(cudnnAddTensor(h, &one, d.b_x, c.in[2].raw(), &one, d.x, c.out[0].raw()));
}

// inputs: dy, x, W   outputs: dx, dW[, db]
void DeconvBackwardCuda(const KernelCtx& c) {
  const auto& p = c.params<ConvParams>();
  Pair pad, adj;
  EffectivePad(p, c.in[1].shape(), &pad, &adj);
  cudnnHandle_t h = cuda::Ctx(c).cudnn;
  const ConvDescs d(p, pad, c.in[0].shape(), c.in[1].shape());
  size_t ws_bytes;
  void* ws = WorkspaceOf(c, &ws_bytes);
  const ConvAlgos& fwd = AlgosFor(h, d, Key(p, c.in[1].shape()), ws_bytes, false);
  const ConvAlgos& bwd = AlgosFor(h, d, Key(p, c.in[1].shape()), ws_bytes, true);
  const float one = 1.f;
  if (c.req[1] != OpReq::kNull) {
    const float beta = cuda::Beta(c.req[1]);
    FRUGAL_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &one, d.x, c.in[0].raw(), d.y, c.in[1].raw(), d.conv,
                                                      bwd.bwd_filter, ws, ws_bytes, &beta, d.w, c.out[1].raw()));
  }
  if (!p.no_bias && c.req[2] != OpReq::kNull) {
    const float beta = cuda::Beta(c.req[2]);
    FRUGAL_CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &one, d.x, c.in[0].raw(), &beta, d.b_x, c.out[2].raw()));
  }
  if (c.req[0] != OpReq::kNull) {
    const float beta = cuda::Beta(c.req[0]);
    FRUGAL_CUDNN_CHECK(cudnnConvolutionForward(h, &one, d.x, c.in[0].raw(), d.w, c.in[2].raw(), d.conv, fwd.fwd, ws,
                                               ws_bytes, &beta, d.y, c.out[0].raw()));
  }
}

}  // namespace

void RegisterCuda_deconvolution(OpRegistry* r) {
  SetCudaKernels(r, "deconvolution", DeconvForwardCuda, DeconvBackwardCuda);
}

}  // namespace frugal
