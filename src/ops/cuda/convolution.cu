// convolution on the GPU with cuDNN (src/ops/convolution.cc):
//   y = conv(x, W) + b      dx = conv_transpose(dy, W)      dW = corr(x, dy)      db = sum dy
// The algorithms are cuDNN's, chosen by its heuristics among the
// deterministic ones whose workspace fits the workspace the memory plan gave
// this node (the op's Workspace, which the plan counts), so a recomputation
// gives the same bits and the plan stays exact on the device. Tensor cores
// are off (CUDNN_FMA_MATH: plain FP32, no TF32) so that results agree with
// the CPU kernel within FP32 tolerances. Choices are cached per shape and
// workspace size.
#include <map>
#include <mutex>
#include <string>

#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

// The descriptors of one convolution shape, made per call (host-only calls).
struct ConvDescs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ConvDescs(const ConvParams& p, const Shape& xs, const Shape& ys) {
    FRUGAL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    FRUGAL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    FRUGAL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&b));
    FRUGAL_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    FRUGAL_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    auto i = [](int64_t v) { return static_cast<int>(v); };
    FRUGAL_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(xs[0]), i(xs[1]), i(xs[2]), i(xs[3])));
    FRUGAL_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(ys[0]), i(ys[1]), i(ys[2]), i(ys[3])));
    FRUGAL_CUDNN_CHECK(cudnnSetTensor4dDescriptor(b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, i(p.num_filter), 1, 1));
    FRUGAL_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, i(p.num_filter),
                                                  i(xs[1] / p.num_group), i(p.kernel[0]), i(p.kernel[1])));
    FRUGAL_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, i(p.pad[0]), i(p.pad[1]), i(p.stride[0]), i(p.stride[1]),
                                                       i(p.dilate[0]), i(p.dilate[1]), CUDNN_CROSS_CORRELATION,
                                                       CUDNN_DATA_FLOAT));
    FRUGAL_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, i(p.num_group)));
    FRUGAL_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH));
  }
  ~ConvDescs() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(b);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
  }
  ConvDescs(const ConvDescs&) = delete;
  ConvDescs& operator=(const ConvDescs&) = delete;
};

// The three algorithms of one shape under one workspace limit.
struct ConvAlgos {
  cudnnConvolutionFwdAlgo_t fwd = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t bwd_data = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  cudnnConvolutionBwdFilterAlgo_t bwd_filter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
};

// The first (fastest by cuDNN's heuristics) deterministic result that fits.
template <typename Perf, typename Algo>
Algo Pick(const Perf* perf, int count, size_t limit, Algo fallback) {
  for (int k = 0; k < count; ++k) {
    if (perf[k].status == CUDNN_STATUS_SUCCESS && perf[k].determinism == CUDNN_DETERMINISTIC &&
        perf[k].memory <= limit)
      return perf[k].algo;
  }
  return fallback;
}

const ConvAlgos& AlgosFor(cudnnHandle_t h, const ConvDescs& d, const std::string& key, size_t limit, bool backward) {
  static std::mutex mu;
  static auto* cache = new std::map<std::string, ConvAlgos>();  // never destroyed
  const std::string k = Fmt(key, backward ? "b" : "f", limit);
  std::lock_guard<std::mutex> cache_lock(mu);
  auto it = cache->find(k);
  if (it != cache->end()) return it->second;
  ConvAlgos a;
  constexpr int kMax = 16;
  int count = 0;
  if (!backward) {
    cudnnConvolutionFwdAlgoPerf_t perf[kMax];
    FRUGAL_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, kMax, &count, perf));
    a.fwd = Pick(perf, count, limit, a.fwd);
  } else {
    cudnnConvolutionBwdDataAlgoPerf_t data[kMax];
    FRUGAL_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, kMax, &count, data));
    a.bwd_data = Pick(data, count, limit, a.bwd_data);
    cudnnConvolutionBwdFilterAlgoPerf_t filter[kMax];
    FRUGAL_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, kMax, &count, filter));
    a.bwd_filter = Pick(filter, count, limit, a.bwd_filter);
  }
  return cache->emplace(k, a).first->second;
}

std::string ShapeKey(const ConvParams& p, const Shape& x) { return Fmt("conv", x, p.Key()); }

void* WorkspaceOf(const KernelCtx& c, size_t* bytes) {
  *bytes = c.workspace.defined() ? static_cast<size_t>(c.workspace.bytes()) : 0;
  return *bytes ? c.workspace.raw() : nullptr;
}

// inputs: x, W[, b]   output: y
void ConvForwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const auto& p = c.params<ConvParams>();
  cudnnHandle_t h = cuda::Ctx(c).cudnn;
  const ConvDescs d(p, c.in[0].shape(), c.out[0].shape());
  size_t ws_bytes;
  void* ws = WorkspaceOf(c, &ws_bytes);
  const ConvAlgos& a = AlgosFor(h, d, ShapeKey(p, c.in[0].shape()), ws_bytes, false);
  const float one = 1.f, beta = cuda::Beta(c.req[0]);
  FRUGAL_CUDNN_CHECK(cudnnConvolutionForward(h, &one, d.x, c.in[0].raw(), d.w, c.in[1].raw(), d.conv, a.fwd, ws,
                                             ws_bytes, &beta, d.y, c.out[0].raw()));
  if (!p.no_bias) FRUGAL_CUDNN_CHECK(cudnnAddTensor(h, &one, d.b, c.in[2].raw(), &one, d.y, c.out[0].raw()));
}

// inputs: dy, x, W   outputs: dx, dW[, db]
void ConvBackwardCuda(const KernelCtx& c) {
  const auto& p = c.params<ConvParams>();
  cudnnHandle_t h = cuda::Ctx(c).cudnn;
  const ConvDescs d(p, c.in[1].shape(), c.in[0].shape());
  size_t ws_bytes;
  void* ws = WorkspaceOf(c, &ws_bytes);
  const ConvAlgos& a = AlgosFor(h, d, ShapeKey(p, c.in[1].shape()), ws_bytes, true);
  const float one = 1.f;
  if (c.req[1] != OpReq::kNull) {
    const float beta = cuda::Beta(c.req[1]);
    FRUGAL_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &one, d.x, c.in[1].raw(), d.y, c.in[0].raw(), d.conv,
                                                      a.bwd_filter, ws, ws_bytes, &beta, d.w, c.out[1].raw()));
  }
  if (!p.no_bias && c.req[2] != OpReq::kNull) {
    const float beta = cuda::Beta(c.req[2]);
    FRUGAL_CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &one, d.y, c.in[0].raw(), &beta, d.b, c.out[2].raw()));
  }
  if (c.req[0] != OpReq::kNull) {
    const float beta = cuda::Beta(c.req[0]);
    FRUGAL_CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, d.w, c.in[2].raw(), d.y, c.in[0].raw(), d.conv,
                                                    a.bwd_data, ws, ws_bytes, &beta, d.x, c.out[0].raw()));
  }
}

}  // namespace

void RegisterCuda_convolution(OpRegistry* r) {
  r->Existing("convolution").CudaKernel(ConvForwardCuda);
  r->Existing("_backward_convolution").CudaKernel(ConvBackwardCuda);
}

}  // namespace frugal
