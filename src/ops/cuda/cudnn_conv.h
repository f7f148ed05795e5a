// cuDNN convolution pieces shared by src/ops/cuda/convolution.cu and
// deconvolution.cu: descriptors per call, and the algorithms of a shape
// chosen once: cuDNN's heuristic order, the first *deterministic* algorithm
// whose workspace fits the workspace the memory plan gave the node (so the
// plan stays exact and a recomputation gives the same bits). Tensor cores
// are off (CUDNN_FMA_MATH: plain FP32, no TF32).
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal::cuda {

// The descriptors of one convolution x (N, C, H, W) -> y (N, K, OH, OW) with
// filter (K, C / groups, kh, kw), made per call (host-only calls). b_x, b_y:
// a bias over x's or y's channels (deconvolution adds its bias to the
// convolution's x).
struct ConvDescs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b_x = nullptr, b_y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ConvDescs(const ConvParams& p, const Pair& pad, const Shape& xs, const Shape& ys) {
    FRUGAL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    FRUGAL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    FRUGAL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&b_x));
    FRUGAL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&b_y));
    FRUGAL_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    FRUGAL_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    auto i = [](int64_t v) { return static_cast<int>(v); };
    FRUGAL_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(xs[0]), i(xs[1]), i(xs[2]), i(xs[3])));
    FRUGAL_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(ys[0]), i(ys[1]), i(ys[2]), i(ys[3])));
    FRUGAL_CUDNN_CHECK(cudnnSetTensor4dDescriptor(b_x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, i(xs[1]), 1, 1));
    FRUGAL_CUDNN_CHECK(cudnnSetTensor4dDescriptor(b_y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, i(ys[1]), 1, 1));
    FRUGAL_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, i(ys[1]),
                                                  i(xs[1] / p.num_group), i(p.kernel[0]), i(p.kernel[1])));
    FRUGAL_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, i(pad[0]), i(pad[1]), i(p.stride[0]), i(p.stride[1]),
                                                       i(p.dilate[0]), i(p.dilate[1]), CUDNN_CROSS_CORRELATION,
                                                       CUDNN_DATA_FLOAT));
    FRUGAL_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, i(p.num_group)));
    FRUGAL_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH));
  }
  ~ConvDescs() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(b_x);
    cudnnDestroyTensorDescriptor(b_y);
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
    if (perf[k].status == CUDNN_STATUS_SUCCESS && perf[k].determinism == CUDNN_DETERMINISTIC && perf[k].memory <= limit)
      return perf[k].algo;
  }
  return fallback;
}

inline const ConvAlgos& AlgosFor(cudnnHandle_t h, const ConvDescs& d, const std::string& key, size_t limit,
                                 bool backward) {
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

// One convolution x -> y as a kernel runs it: its descriptors, the node's
// workspace, and per call the algorithms of its shape (`key`, cached). Each
// call writes or adds to its result as req says, and does nothing for kNull.
class CudnnConv {
 public:
  CudnnConv(const KernelCtx& c, const ConvParams& p, const Pair& pad, const Shape& xs, const Shape& ys, std::string key)
      : h_(Ctx(c).cudnn), d_(p, pad, xs, ys), key_(std::move(key)) {
    ws_bytes_ = c.workspace.defined() ? static_cast<size_t>(c.workspace.bytes()) : 0;
    ws_ = ws_bytes_ ? c.workspace.raw() : nullptr;
  }

  // y = conv(x, W)
  void Forward(const void* x, const void* w, OpReq req, void* y) const {
    if (req == OpReq::kNull) return;
    const float one = 1.f, beta = Beta(req);
    FRUGAL_CUDNN_CHECK(
        cudnnConvolutionForward(h_, &one, d_.x, x, d_.w, w, d_.conv, Algos(false).fwd, ws_, ws_bytes_, &beta, d_.y, y));
  }
  // dx = conv_transpose(dy, W)
  void BackwardData(const void* w, const void* dy, OpReq req, void* dx) const {
    if (req == OpReq::kNull) return;
    const float one = 1.f, beta = Beta(req);
    FRUGAL_CUDNN_CHECK(cudnnConvolutionBackwardData(h_, &one, d_.w, w, d_.y, dy, d_.conv, Algos(true).bwd_data, ws_,
                                                    ws_bytes_, &beta, d_.x, dx));
  }
  // dW = corr(x, dy)
  void BackwardFilter(const void* x, const void* dy, OpReq req, void* dw) const {
    if (req == OpReq::kNull) return;
    const float one = 1.f, beta = Beta(req);
    FRUGAL_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h_, &one, d_.x, x, d_.y, dy, d_.conv, Algos(true).bwd_filter, ws_,
                                                      ws_bytes_, &beta, d_.w, dw));
  }
  // t += b over t's channels; t has y's shape, or x's (on_x: deconvolution
  // adds its bias to the convolution's x).
  void AddBias(bool on_x, const void* b, void* t) const {
    const float one = 1.f;
    FRUGAL_CUDNN_CHECK(cudnnAddTensor(h_, &one, on_x ? d_.b_x : d_.b_y, b, &one, on_x ? d_.x : d_.y, t));
  }
  // db = dt summed over all but its channels; dt has y's shape, or x's (on_x).
  void BackwardBias(bool on_x, const void* dt, OpReq req, void* db) const {
    if (req == OpReq::kNull) return;
    const float one = 1.f, beta = Beta(req);
    FRUGAL_CUDNN_CHECK(
        cudnnConvolutionBackwardBias(h_, &one, on_x ? d_.x : d_.y, dt, &beta, on_x ? d_.b_x : d_.b_y, db));
  }

 private:
  const ConvAlgos& Algos(bool backward) const { return AlgosFor(h_, d_, key_, ws_bytes_, backward); }

  cudnnHandle_t h_;
  ConvDescs d_;
  std::string key_;
  void* ws_ = nullptr;
  size_t ws_bytes_ = 0;
};

}  // namespace frugal::cuda
