// lstm_cell: the pointwise part of one LSTM step (MXNet's LSTMCell), fused.
//   i2h, h2h: (B, 4H) the two projections W_x x + b_x and W_h h_prev + b_h
//   c_prev:   (B, H)
//   a = i2h + h2h, cut along axis 1 into a_i, a_f, a_g, a_o (in, forget,
//   transform, out: the order of MXNet's LSTMCell and of the unfused configs)
//   i = sigmoid(a_i)  f = sigmoid(a_f)  g = tanh(a_g)  o = sigmoid(a_o)
//   c = f c_prev + i g          (B, H)   output 1, the next step's c_prev
//   h = o tanh(c)               (B, H)   output 0
//   gates = (i, f, g, o)        (B, 4H)  output 2, hidden: for the backward pass
// grad, with t = tanh(c) and dc the gradient of c from the next step:
//   dc_all  = dc + dh o (1 - t^2)
//   da_i = dc_all g i (1 - i)      da_f = dc_all c_prev f (1 - f)
//   da_g = dc_all i (1 - g^2)      da_o = dh t o (1 - o)
//   d_i2h = d_h2h = da    (one entry, returned for both inputs)
//   d_c_prev = dc_all f
//   reads dh, dc, the saved gates and c_prev; c and tanh(c) are recomputed
//   from them with the forward's own float operations, so they are the
//   forward's bits. What a step keeps for the backward pass is one (B, 4H)
//   tensor besides c_prev (the previous step's state, kept anyway): the
//   unfused cell kept the four gates, c and tanh(c) (6 B H floats), and
//   reading i2h and h2h instead (recomputing the gates) would keep 8 B H.
//   The gates are saved after their activation rather than before: the
//   same bytes, and the backward then needs one tanh instead of five
//   transcendentals per element.
// In place: gates over i2h or h2h and c over c_prev (forward), so the saved
// gates take the memory of a projection that dies here (neither projection's
// backward reads its output); da over the gates and d_c_prev over dc, dh or
// c_prev (backward): every element is computed from the inputs at its own
// (row, column) positions, all read before any is written.
// Kernels: branch-free float loops over contiguous columns, in chunks of a
// row, parallel over elements (ForEachRange). Sigmoid and tanh come from one
// exp written as Cephes' polynomial in plain float arithmetic (no libm call,
// whose vector and scalar variants could differ), so GCC vectorises the
// loops (-O3 -fno-trapping-math -ffp-contract=off for this file in
// CMakeLists.txt) and builds them for AVX-512, AVX2 and baseline x86-64
// (target_clones, chosen at first call). Vector and scalar iterations give
// the same bits (no FMA contraction, only correctly rounded operations), so
// the thread count (which moves chunk boundaries) and recomputation do not
// change a result; the clones should agree for the same reason (only the
// AVX-512 one has run here). lstm_lm 2x256 b32 T=1000: forward 0.035 ms,
// backward 0.029 ms per cell, where the 11 unfused ops took about 0.09 and
// 0.09 ms.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/op_util.h"

namespace frugal {
namespace {

// A view of a kernel's tensors, moved to (row b, column j) by At: the gates'
// tensors (B, 4H), the state's (B, H). Pointers of unrequested outputs (and,
// in the forward, of the gradients) are null.
struct LstmRow {
  int64_t hid = 0;
  const float *i2h = nullptr, *h2h = nullptr, *c_prev = nullptr, *dh = nullptr, *dc = nullptr, *act = nullptr;
  float *h = nullptr, *c = nullptr, *gates = nullptr, *da = nullptr, *dc_prev = nullptr;
  OpReq req_h = OpReq::kNull, req_c = OpReq::kNull, req_gates = OpReq::kNull, req_da = OpReq::kNull,
        req_dc_prev = OpReq::kNull;
  LstmRow At(int64_t b, int64_t j) const;
};

// The column loops are built for AVX-512, AVX2 and baseline x86-64 and
// chosen at first call (GCC's target_clones; -ffp-contract=off for this
// file, so no clone contracts to FMA).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__) && \
    !defined(__SANITIZE_ADDRESS__)
#define FRUGAL_LSTM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FRUGAL_LSTM_CLONES
#endif

// Columns computed into a local buffer before they are stored: loads of a
// chunk all come before its stores (in place), and the stores honour OpReq
// in loops of their own.
constexpr int64_t kChunk = 128;

// exp(x) for x in [-87, 88] (clamped outside), Cephes' expf: x = n ln2 + r,
// exp(r) by a degree-6 polynomial, 2^n built in the exponent bits.
// Plain float arithmetic: the same bits from scalar and vector code. n is
// x / ln2 rounded to nearest by adding and subtracting 1.5 2^23 (a compare
// and select for floor kept GCC from vectorising the loop for AVX).
#define FRUGAL_LSTM_INLINE __attribute__((always_inline)) inline
FRUGAL_LSTM_INLINE float Exp(float x) {
  x = x < -87.f ? -87.f : x;
  x = x > 88.f ? 88.f : x;
  const float n = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;
  x = x - n * 0.693359375f;
  x = x - n * -2.12194440e-4f;
  const float z = x * x;
  float y = 1.9875691500e-4f;
  y = y * x + 1.3981999507e-3f;
  y = y * x + 8.3334519073e-3f;
  y = y * x + 4.1665795894e-2f;
  y = y * x + 1.6666665459e-1f;
  y = y * x + 5.0000001201e-1f;
  y = y * z + x + 1.f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float p;
  std::memcpy(&p, &bits, sizeof p);
  return y * p;
}

FRUGAL_LSTM_INLINE float Sigmoid(float x) { return 1.f / (1.f + Exp(-x)); }

// Cephes' tanhf: an odd polynomial below 0.625, else 1 - 2 / (exp(2|x|) + 1).
FRUGAL_LSTM_INLINE float Tanh(float x) {
  const float ax = x < 0 ? -x : x;
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float big = 1.f - 2.f / (Exp(2.f * ax) + 1.f);
  const float r = x < 0 ? -big : big;
  return ax < 0.625f ? small : r;
}

// y[j] = v[j] or y[j] += v[j]; nothing for kNull.
FRUGAL_LSTM_INLINE void Put(float* y, const float* v, int64_t n, OpReq req) {
  if (req == OpReq::kWrite) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = v[j];
  } else if (req == OpReq::kAdd) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] += v[j];
  }
}

// The gates of n columns of one row: a_* point at the row's i2h (x) and h2h
// (y) at the first column; gate k lies k H further.
struct Gates {
  float i[kChunk], f[kChunk], g[kChunk], o[kChunk];
};
FRUGAL_LSTM_INLINE void ComputeGates(const float* x, const float* y, int64_t hid, int64_t n, Gates* s) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    s->i[j] = Sigmoid(x[j] + y[j]);
    s->f[j] = Sigmoid(x[hid + j] + y[hid + j]);
    s->g[j] = Tanh(x[2 * hid + j] + y[2 * hid + j]);
    s->o[j] = Sigmoid(x[3 * hid + j] + y[3 * hid + j]);
  }
}

FRUGAL_LSTM_CLONES void ForwardColumns(const LstmRow& r, int64_t n) {
  Gates s;
  ComputeGates(r.i2h, r.h2h, r.hid, n, &s);
  float h[kChunk], c[kChunk];
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    c[j] = s.f[j] * r.c_prev[j] + s.i[j] * s.g[j];
    h[j] = s.o[j] * Tanh(c[j]);
  }
  Put(r.h, h, n, r.req_h);
  Put(r.c, c, n, r.req_c);
  if (r.gates) {  // after every load of the chunk: gates may alias i2h or h2h
    Put(r.gates, s.i, n, r.req_gates);
    Put(r.gates + r.hid, s.f, n, r.req_gates);
    Put(r.gates + 2 * r.hid, s.g, n, r.req_gates);
    Put(r.gates + 3 * r.hid, s.o, n, r.req_gates);
  }
}

FRUGAL_LSTM_CLONES void BackwardColumns(const LstmRow& r, int64_t n) {
  const float *gi = r.act, *gf = r.act + r.hid, *gg = r.act + 2 * r.hid, *go = r.act + 3 * r.hid;
  float da[4][kChunk], dcp[kChunk];
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const float i = gi[j], f = gf[j], g = gg[j], o = go[j];
    const float c = f * r.c_prev[j] + i * g;  // as the forward computed it
    const float t = Tanh(c);
    const float dc = r.dc[j] + r.dh[j] * o * (1.f - t * t);
    da[0][j] = dc * g * (i * (1.f - i));
    da[1][j] = dc * r.c_prev[j] * (f * (1.f - f));
    da[2][j] = dc * i * (1.f - g * g);
    da[3][j] = r.dh[j] * t * (o * (1.f - o));
    dcp[j] = dc * f;
  }
  if (r.da) {
    for (int k = 0; k < 4; ++k) Put(r.da + k * r.hid, da[k], n, r.req_da);
  }
  Put(r.dc_prev, dcp, n, r.req_dc_prev);
}

// f(row view, columns) over every (row, column) in [0, B H), in chunks of
// at most kChunk columns of one row, parallel over ranges of elements.
template <typename F>
void ForEachChunk(int64_t rows, int64_t hid, const LstmRow& base, F f) {
  ForEachRange(rows * hid, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end;) {
      const int64_t b = e / hid, j = e % hid;
      const int64_t n = std::min({kChunk, hid - j, end - e});
      f(base.At(b, j), n);
      e += n;
    }
  });
}

void LstmShape(ShapeCtx& c) {
  const Shape &x = c.in[0], &y = c.in[1];
  if (!x.known() || x.ndim() != 2 || x[1] % 4 != 0)
    c.Fail(Fmt("i2h has shape ", x, "; expected (batch, 4 hidden): the in, forget, transform and out gates"));
  if (y != x) c.Fail(Fmt("h2h has shape ", y, " but i2h has ", x, "; both are (batch, 4 hidden)"));
  const Shape state{x[0], x[1] / 4};
  if (!c.in[2].known()) c.in[2] = state;
  if (c.in[2] != state)
    c.Fail(Fmt("c_prev has shape ", c.in[2], " but i2h ", x, " needs (batch, hidden) = ", state));
  c.out[0] = c.out[1] = state;
  c.out[2] = x;
}

// inputs: i2h, h2h, c_prev   outputs: h, c, gates (hidden)
void LstmForward(const KernelCtx& c) {
  const Shape& x = c.in[0].shape();
  LstmRow r{};
  r.hid = x[1] / 4;
  r.i2h = c.in[0].f();
  r.h2h = c.in[1].f();
  r.c_prev = c.in[2].f();
  r.h = Out(c, 0);
  r.c = Out(c, 1);
  r.gates = Out(c, 2);
  r.req_h = c.req[0];
  r.req_c = c.req[1];
  r.req_gates = c.req[2];
  if (!r.h && !r.c && !r.gates) return;
  ForEachChunk(x[0], r.hid, r, ForwardColumns);
}

// inputs: dh, dc, gates, c_prev   outputs: da (= d_i2h = d_h2h), d_c_prev
void LstmBackward(const KernelCtx& c) {
  const Shape& x = c.in[2].shape();
  LstmRow r{};
  r.hid = x[1] / 4;
  r.dh = c.in[0].f();
  r.dc = c.in[1].f();
  r.act = c.in[2].f();
  r.c_prev = c.in[3].f();
  r.da = Out(c, 0);
  r.dc_prev = Out(c, 1);
  r.req_da = c.req[0];
  r.req_dc_prev = c.req[1];
  if (!r.da && !r.dc_prev) return;
  ForEachChunk(x[0], r.hid, r, BackwardColumns);
}

// One backward node; its gradient output 0 is both projections' gradient.
std::vector<Entry> LstmGradient(Graph& g, const GradCtx& c) {
  const Node& f = g.node(c.fwd);
  Node b;
  b.name = f.name + "_backward";
  b.op = &OpRegistry::Get().Require("_backward_lstm_cell", f.Where());
  b.params = f.params;
  b.attrs = f.attrs;
  b.fwd = c.fwd;
  b.loc = f.loc;
  b.inputs = {c.out_grads[0], c.out_grads[1], c.outputs[2], c.inputs[2]};
  const int id = g.AddNode(std::move(b));
  return {Entry{id, 0}, Entry{id, 0}, Entry{id, 1}};
}

LstmRow LstmRow::At(int64_t b, int64_t j) const {
  LstmRow r = *this;
  const int64_t wide = b * 4 * hid + j, state = b * hid + j;  // in (B, 4H), in (B, H)
  if (i2h) r.i2h = i2h + wide;
  if (h2h) r.h2h = h2h + wide;
  if (act) r.act = act + wide;
  if (gates) r.gates = gates + wide;
  r.c_prev = c_prev + state;
  if (h) r.h = h + state;
  if (c) r.c = c + state;
  if (dh) r.dh = dh + state;
  if (dc) r.dc = dc + state;
  if (da) r.da = da + wide;
  if (dc_prev) r.dc_prev = dc_prev + state;
  return r;
}

}  // namespace

void Register_lstm_cell(OpRegistry* r) {
  r->Add("lstm_cell")
      .Doc("Fused LSTM cell: gates sigmoid/sigmoid/tanh/sigmoid of i2h + h2h (in, forget, transform, out); "
           "c = f c_prev + i g, h = o tanh(c). Outputs h, c (and the gates, hidden, for the backward pass).")
      .Inputs({{"i2h"}, {"h2h"}, {"c_prev"}})
      .Outputs({"h", "c", "gates"})
      .VisibleOutputs(2)
      .InferShape(LstmShape)
      .Backward({OutGrad(0), OutGrad(1), Output(2), Input(2)})
      .Gradient(LstmGradient)
      .Inplace({{0, 2}, {1, 2}, {2, 1}})
      .Recompute(Cost::kCheap)
      .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
        // per (row, column): 4 adds, 3 sigmoids and 2 tanh (~20 each), c and h (4)
        return 108.0 * in[2].Size();
      })
      .CpuKernel(LstmForward);
  r->Add("_backward_lstm_cell")
      .Doc("Gradient of lstm_cell: da (the gradient of i2h and of h2h alike) and d_c_prev.")
      .Inputs({{"dh"}, {"dc"}, {"gates"}, {"c_prev"}})
      .Outputs({"da", "dc_prev"})
      .InferShape([](ShapeCtx& c) {
        c.out[0] = (*c.fwd_in)[0];
        c.out[1] = (*c.fwd_in)[2];
      })
      .NoGradient()
      .Inplace({{2, 0}, {1, 1}, {0, 1}, {3, 1}})
      .Recompute(Cost::kCheap)
      .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
        return 45.0 * in[0].Size();  // c and tanh(c) again (~23), then 22 for the gradients
      })
      .CpuKernel(LstmBackward);
}

}  // namespace frugal
