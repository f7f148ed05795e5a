// pooling on the GPU (src/ops/pooling.cc): max and average over 2-D windows
// of NCHW. Own kernels, since the op's backward reads the saved argmax (not
// x and y, which cuDNN's backward needs). The GPU argmax is the index of the
// winner inside its window (row-major), one byte per element of y where the
// hidden output has room for only that (windows up to 255 elements), else
// four; its bytes mean nothing to the CPU kernel and the reverse, which is
// fine as one graph runs on one device.
// The backward gathers: each element of dx sums dy over the windows that
// contain it, in a fixed order, so it is deterministic (no atomics) and a
// recomputation gives the same bits.
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

struct PoolGeom {
  int64_t n, c, h, w, oh, ow;
  int kh, kw, sh, sw, ph, pw;  // ph, pw: the left / top pads
  bool max, include_pad, wide_argmax;
  OpReq req;
};

PoolGeom GeomFor(const PoolParams& p, const Shape& x, OpReq req) {
  const Window win = WindowFor(p, x);
  return {x[0],
          x[1],
          x[2],
          x[3],
          win.oh,
          win.ow,
          static_cast<int>(win.kernel[0]),
          static_cast<int>(win.kernel[1]),
          static_cast<int>(win.stride[0]),
          static_cast<int>(win.stride[1]),
          static_cast<int>(win.pad_l[0]),
          static_cast<int>(win.pad_l[1]),
          p.max,
          p.count_include_pad,
          false,
          req};
}

__device__ inline int WindowCount(const PoolGeom& g, int64_t hs, int64_t ws) {
  if (g.include_pad) return g.kh * g.kw;
  const int64_t h0 = max(hs, int64_t{0}), h1 = min(hs + g.kh, g.h);
  const int64_t w0 = max(ws, int64_t{0}), w1 = min(ws + g.kw, g.w);
  return static_cast<int>((h1 - h0) * (w1 - w0));
}

// One thread per element of y; argmax may be nullptr (inference).
__global__ void PoolForwardKernel(PoolGeom g, const float* x, float* y, void* argmax) {
  const int64_t total = g.n * g.c * g.oh * g.ow;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < total;
       o += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t j = o % g.ow, i = (o / g.ow) % g.oh, plane = o / (g.ow * g.oh);
    const float* xp = x + plane * g.h * g.w;
    const int64_t hs = i * g.sh - g.ph, ws = j * g.sw - g.pw;
    float v;
    if (g.max) {
      v = -INFINITY;
      int best = 0;
      for (int p = 0; p < g.kh; ++p) {
        const int64_t hh = hs + p;
        if (hh < 0 || hh >= g.h) continue;
        for (int q = 0; q < g.kw; ++q) {
          const int64_t ww = ws + q;
          if (ww < 0 || ww >= g.w) continue;
          const float xv = xp[hh * g.w + ww];
          if (xv > v) {
            v = xv;
            best = p * g.kw + q;
          }
        }
      }
      if (argmax) {
        if (g.wide_argmax)
          static_cast<int32_t*>(argmax)[o] = best;
        else
          static_cast<uint8_t*>(argmax)[o] = static_cast<uint8_t>(best);
      }
    } else {
      float s = 0;
      for (int p = 0; p < g.kh; ++p) {
        const int64_t hh = hs + p;
        if (hh < 0 || hh >= g.h) continue;
        for (int q = 0; q < g.kw; ++q) {
          const int64_t ww = ws + q;
          if (ww >= 0 && ww < g.w) s += xp[hh * g.w + ww];
        }
      }
      v = s / WindowCount(g, hs, ws);
    }
    y[o] = g.req == OpReq::kAdd ? y[o] + v : v;
  }
}

// One thread per element of dx: the windows containing (hh, ww) are those
// with i in [ceil((hh + ph - kh + 1) / sh), floor((hh + ph) / sh)] (and alike for j).
__global__ void PoolBackwardKernel(PoolGeom g, const float* dy, const void* argmax, float* dx) {
  const int64_t total = g.n * g.c * g.h * g.w;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t ww = e % g.w, hh = (e / g.w) % g.h, plane = e / (g.w * g.h);
    const int64_t i0 = max(int64_t{0}, (hh + g.ph - g.kh + g.sh) / g.sh), i1 = min(g.oh - 1, (hh + g.ph) / g.sh);
    const int64_t j0 = max(int64_t{0}, (ww + g.pw - g.kw + g.sw) / g.sw), j1 = min(g.ow - 1, (ww + g.pw) / g.sw);
    float s = 0;
    for (int64_t i = i0; i <= i1; ++i) {
      for (int64_t j = j0; j <= j1; ++j) {
        const int64_t o = (plane * g.oh + i) * g.ow + j;
        const int64_t hs = i * g.sh - g.ph, ws = j * g.sw - g.pw;
        if (g.max) {
          const int idx =
              g.wide_argmax ? static_cast<const int32_t*>(argmax)[o] : static_cast<const uint8_t*>(argmax)[o];
          if (idx == (hh - hs) * g.kw + (ww - ws)) s += dy[o];
        } else {
          s += dy[o] / WindowCount(g, hs, ws);
        }
      }
    }
    dx[e] = g.req == OpReq::kAdd ? dx[e] + s : s;
  }
}

// Where the argmax goes: wide (int32) when the hidden output has room for
// four bytes per element of y, else one byte, which needs windows of at most
// 255 elements.
bool WideArgmax(const KernelCtx& c, const Tensor& argmax, int64_t y_size, const PoolGeom& g) {
  if (argmax.bytes() >= 4 * y_size) return true;
  FRUGAL_REQUIRE(argmax.bytes() >= y_size && g.kh * g.kw <= 255, c.node.Where(),
                 ": max pooling on the GPU keeps one byte per output for windows of at most 255 elements; this ",
                 "window has ", g.kh * g.kw, " (use avg pooling or run on the CPU)");
  return false;
}

// inputs: x   outputs: y, argmax
void PoolForwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const auto& p = c.params<PoolParams>();
  PoolGeom g = GeomFor(p, c.in[0].shape(), c.req[0]);
  void* argmax = nullptr;
  if (p.max && c.is_train && c.req[1] != OpReq::kNull) {
    argmax = c.out[1].raw();
    g.wide_argmax = WideArgmax(c, c.out[1], c.out[0].size(), g);
  }
  PoolForwardKernel<<<cuda::Blocks(c.out[0].size()), cuda::kThreads, 0, cuda::Stream(c)>>>(g, c.in[0].f(), c.out[0].f(),
                                                                                           argmax);
  FRUGAL_CUDA_LAUNCHED();
}

// inputs: dy, argmax   output: dx
void PoolBackwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const auto& p = c.params<PoolParams>();
  PoolGeom g = GeomFor(p, c.out[0].shape(), c.req[0]);
  if (p.max) g.wide_argmax = WideArgmax(c, c.in[1], c.in[0].size(), g);
  PoolBackwardKernel<<<cuda::Blocks(c.out[0].size()), cuda::kThreads, 0, cuda::Stream(c)>>>(
      g, c.in[0].f(), p.max ? c.in[1].raw() : nullptr, c.out[0].f());
  FRUGAL_CUDA_LAUNCHED();
}

}  // namespace

void RegisterCuda_pooling(OpRegistry* r) { SetCudaKernels(r, "pooling", PoolForwardCuda, PoolBackwardCuda); }

}  // namespace frugal
