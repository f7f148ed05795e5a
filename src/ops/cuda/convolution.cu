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

using cuda::AlgosFor;
using cuda::ConvAlgos;
using cuda::ConvDescs;
using cuda::WorkspaceOf;

// inputs: x, W[, b]   output: y
void ConvForwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const auto& p = c.params<ConvParams>();
  cudnnHandle_t h = cuda::Ctx(c).cudnn;
  const ConvDescs d(p, p.pad, c.in[0].shape(), c.out[0].shape());
  size_t ws_bytes;
  void* ws = WorkspaceOf(c, &ws_bytes);
  const ConvAlgos& a = AlgosFor(h, d, Fmt("conv", c.in[0].shape(), p.Key()), ws_bytes, false);
  const float one = 1.f, beta = cuda::Beta(c.req[0]);
  FRUGAL_CUDNN_CHECK(cudnnConvolutionForward(h, &one, d.x, c.in[0].raw(), d.w, c.in[1].raw(), d.conv, a.fwd, ws,
                                             ws_bytes, &beta, d.y, c.out[0].raw()));
  if (!p.no_bias) FRUGAL_CUDNN_CHECK(cudnnAddTensor(h, &one, d.b_y, c.in[2].raw(), &one, d.y, c.out[0].raw()));
}

// inputs: dy, x, W   outputs: dx, dW[, db]
void ConvBackwardCuda(const KernelCtx& c) {
  const auto& p = c.params<ConvParams>();
  cudnnHandle_t h = cuda::Ctx(c).cudnn;
  const ConvDescs d(p, p.pad, c.in[1].shape(), c.in[0].shape());
  size_t ws_bytes;
  void* ws = WorkspaceOf(c, &ws_bytes);
  const ConvAlgos& a = AlgosFor(h, d, Fmt("conv", c.in[1].shape(), p.Key()), ws_bytes, true);
  const float one = 1.f;
  if (c.req[1] != OpReq::kNull) {
    const float beta = cuda::Beta(c.req[1]);
    FRUGAL_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &one, d.x, c.in[1].raw(), d.y, c.in[0].raw(), d.conv,
                                                      a.bwd_filter, ws, ws_bytes, &beta, d.w, c.out[1].raw()));
  }
  if (!p.no_bias && c.req[2] != OpReq::kNull) {
    const float beta = cuda::Beta(c.req[2]);
    FRUGAL_CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &one, d.y, c.in[0].raw(), &beta, d.b_y, c.out[2].raw()));
  }
  if (c.req[0] != OpReq::kNull) {
    const float beta = cuda::Beta(c.req[0]);
    FRUGAL_CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, d.w, c.in[2].raw(), d.y, c.in[0].raw(), d.conv,
                                                    a.bwd_data, ws, ws_bytes, &beta, d.x, c.out[0].raw()));
  }
}

}  // namespace

void RegisterCuda_convolution(OpRegistry* r) { SetCudaKernels(r, "convolution", ConvForwardCuda, ConvBackwardCuda); }

}  // namespace frugal
