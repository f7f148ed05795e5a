// lstm_cell on the GPU (src/ops/lstm_cell.cc has the math): one thread per
// (row b, column j) of the state, reading the four gates' pre-activations at
// columns j, H + j, 2H + j, 3H + j of i2h and h2h, and writing the gates
// (hidden output 2) at the same columns. The backward reads the saved gates
// and c_prev and recomputes c with the forward's own device function, so it
// sees the forward's bits. Every element reads its inputs before writing its
// outputs at the same positions: the CPU op's in-place pairs hold here too.
#include "ops/cuda/cuda_op_util.h"

namespace frugal {
namespace {

struct LstmGates {
  float i, f, g, o;
};

__device__ inline float SigmoidDev(float x) { return 1.f / (1.f + expf(-x)); }

__device__ inline LstmGates GatesAt(const float* i2h, const float* h2h, int64_t hid, int64_t b, int64_t j) {
  const int64_t at = b * 4 * hid + j;
  return {SigmoidDev(i2h[at] + h2h[at]), SigmoidDev(i2h[at + hid] + h2h[at + hid]),
          tanhf(i2h[at + 2 * hid] + h2h[at + 2 * hid]), SigmoidDev(i2h[at + 3 * hid] + h2h[at + 3 * hid])};
}

// c = f c_prev + i g, without FMA contraction (forward and backward alike).
__device__ inline float NextC(const LstmGates& s, float c_prev) {
  return __fadd_rn(__fmul_rn(s.f, c_prev), __fmul_rn(s.i, s.g));
}

__device__ inline void Put(float* y, OpReq req, float v) {
  if (req == OpReq::kAdd)
    *y += v;
  else
    *y = v;
}

struct LstmArgs {
  int64_t rows, hid;
  OpReq req0, req1, req2;
};

// inputs: i2h, h2h, c_prev   outputs: h, c, gates (hidden)
__global__ void LstmForwardKernel(LstmArgs a, const float* i2h, const float* h2h, const float* c_prev, float* h,
                                  float* c, float* gates) {
  const int64_t n = a.rows * a.hid;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t b = e / a.hid, j = e % a.hid;
    const LstmGates s = GatesAt(i2h, h2h, a.hid, b, j);
    const float cn = NextC(s, c_prev[e]);
    const float hn = s.o * tanhf(cn);
    if (a.req0 != OpReq::kNull) Put(h + e, a.req0, hn);
    if (a.req1 != OpReq::kNull) Put(c + e, a.req1, cn);  // c may alias c_prev
    if (a.req2 != OpReq::kNull) {                        // gates may alias i2h or h2h: read above
      const int64_t at = b * 4 * a.hid + j;
      Put(gates + at, a.req2, s.i);
      Put(gates + at + a.hid, a.req2, s.f);
      Put(gates + at + 2 * a.hid, a.req2, s.g);
      Put(gates + at + 3 * a.hid, a.req2, s.o);
    }
  }
}

// inputs: dh, dc, gates, c_prev   outputs: da (B, 4H), d_c_prev (B, H)
__global__ void LstmBackwardKernel(LstmArgs a, const float* dh, const float* dc, const float* gates,
                                   const float* c_prev, float* da, float* dc_prev) {
  const int64_t n = a.rows * a.hid;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t b = e / a.hid, j = e % a.hid;
    const int64_t at = b * 4 * a.hid + j;
    const LstmGates s{gates[at], gates[at + a.hid], gates[at + 2 * a.hid], gates[at + 3 * a.hid]};
    const float cp = c_prev[e], dhe = dh[e];
    const float t = tanhf(NextC(s, cp));
    const float dct = dc[e] + dhe * s.o * (1.f - t * t);
    const float da_i = dct * s.g * (s.i * (1.f - s.i));
    const float da_f = dct * cp * (s.f * (1.f - s.f));
    const float da_g = dct * s.i * (1.f - s.g * s.g);
    const float da_o = dhe * t * (s.o * (1.f - s.o));
    // Every input of this element is read above: da may alias the gates,
    // d_c_prev dh, dc or c_prev.
    if (a.req0 != OpReq::kNull) {
      Put(da + at, a.req0, da_i);
      Put(da + at + a.hid, a.req0, da_f);
      Put(da + at + 2 * a.hid, a.req0, da_g);
      Put(da + at + 3 * a.hid, a.req0, da_o);
    }
    if (a.req1 != OpReq::kNull) Put(dc_prev + e, a.req1, dct * s.f);
  }
}

void LstmForwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull && c.req[1] == OpReq::kNull && c.req[2] == OpReq::kNull) return;
  const Shape& x = c.in[0].shape();
  const LstmArgs a{x[0], x[1] / 4, c.req[0], c.req[1], c.req[2]};
  if (a.rows * a.hid == 0) return;
  LstmForwardKernel<<<cuda::Blocks(a.rows * a.hid), cuda::kThreads, 0, cuda::Stream(c)>>>(
      a, c.in[0].f(), c.in[1].f(), c.in[2].f(), Out(c, 0), Out(c, 1), Out(c, 2));
  FRUGAL_CUDA_LAUNCHED();
}

void LstmBackwardCuda(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull && c.req[1] == OpReq::kNull) return;
  const Shape& x = c.in[2].shape();
  const LstmArgs a{x[0], x[1] / 4, c.req[0], c.req[1], OpReq::kNull};
  if (a.rows * a.hid == 0) return;
  LstmBackwardKernel<<<cuda::Blocks(a.rows * a.hid), cuda::kThreads, 0, cuda::Stream(c)>>>(
      a, c.in[0].f(), c.in[1].f(), c.in[2].f(), c.in[3].f(), Out(c, 0), Out(c, 1));
  FRUGAL_CUDA_LAUNCHED();
}

}  // namespace

// lstm_cell builds its gradient node itself (LstmGradient in ops/lstm_cell.cc),
// a _backward_lstm_cell, so the forward op names no backward op.
void RegisterCuda_lstm_cell(OpRegistry* r) {
  r->Existing("lstm_cell").CudaKernel(LstmForwardCuda);
  r->Existing("_backward_lstm_cell").CudaKernel(LstmBackwardCuda);
}

}  // namespace frugal
