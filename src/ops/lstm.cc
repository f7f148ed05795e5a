// lstm: one LSTM layer over a run of steps, batch first (MXNet's RNN op in
// LSTM mode, PyTorch's nn.LSTM for one layer with batch_first).
//   x (B, T, I): the inputs of T steps; h0, c0: the state before them, (B, H),
//   or the previous run's outputs y and cs (B, T', H), of which the last step
//   is the state (so a config chains runs without a copy of the state);
//   i2h_weight W_x (4H, I), i2h_bias b_x (4H), h2h_weight W_h (4H, H),
//   h2h_bias b_h (4H): lstm_cell's configs' parameters, in the same layout.
//   Step t: a_t = x_t W_x^T + (b_x + b_h + h_{t-1} W_h^T), the gates i, f, g, o
//   cut from a_t as lstm_cell cuts them, c_t = f c_{t-1} + i g,
//   h_t = o tanh(c_t), by lstm_cell's own kernels (vec.h).
//   Outputs: y (B, T, H), every h_t, and cs (B, T, H), every c_t; hidden, for
//   the backward pass, the gates (B, T, 4H) after their activation: what T
//   lstm_cell nodes keep (h, c and the gates of each step), no more.
// grad, step by step from the last: dh_t = dy_t + da_{t+1} W_h and dc_t =
// dcs_t + dc_t from step t + 1, then lstm_cell's backward gives da_t and
// dc_{t-1}; then over all steps at once: dW_x = da^T x, dW_h = da^T h_prev
// (h_prev: h0, then y one step back), db_x = db_h = the column sums of da,
// dx = da W_x. A (B, T', H) h0 or c0 gets its gradient in its last step.
// Why one op for many steps: of an LSTM's six products per step only two
// (h_{t-1} W_h^T and da_t W_h) run along the recurrence; here the other four
// are one GEMM each over B T rows instead of T GEMMs over B rows (2x256 at
// B = 32: 32 rows reach about 100 GFLOP/s on two threads of this machine,
// 32,000 rows 210). A config cuts a long sequence into runs of steps (the
// chunk variable of models/lstm/char_lm.prototxt) so that the planner still
// sees a chain of nodes to keep or recompute; the workspaces grow with T.
// Threads: the step loop runs in one OpenMP region (InOneRegion); each
// step's recurrent product is cut by columns among the threads (a
// one-thread sgemm on each slice of W_h) and the cell by rows, with
// spinning barriers between: a region per product cost a thread wake-up
// per step under OMP_WAIT_POLICY=PASSIVE. Results do not depend on how the
// columns are cut only as far as sgemm's own blocking does not: runs with
// the same kernel threads give the same bits (recomputation included).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "ops/cpu/blas.h"
#include "ops/cpu/vec.h"
#include "ops/op_util.h"

namespace frugal {
// Named: a unity build puts other ops' files, and their anonymous
// namespaces, in this translation unit.
namespace lstm_layer {
namespace {

struct LstmParams {
  int64_t num_hidden = 0;
  static LstmParams Parse(AttrReader& a) {
    LstmParams p;
    p.num_hidden = a.Int("num_hidden");
    FRUGAL_REQUIRE(p.num_hidden > 0, a.where(), ": num_hidden must be positive, got ", p.num_hidden);
    return p;
  }
};

enum InputIndex { kX, kH0, kC0, kWx, kBx, kWh, kBh };
enum OutputIndex { kY, kCs, kGates };
// The backward node's inputs (the reads in Register_lstm, in order).
enum BackwardInput { kDy, kDcs, kSavedGates, kSavedCs, kSavedY, kSavedX, kSavedH0, kSavedC0, kSavedWx, kSavedWh };

struct Dims {
  int64_t b, t, in, hid;
  int64_t gates() const { return 4 * hid; }
};
Dims DimsOf(const KernelCtx& c, const Shape& x) { return {x[0], x[1], x[2], c.params<LstmParams>().num_hidden}; }

void LstmShape(ShapeCtx& c) {
  const int64_t hid = c.params<LstmParams>().num_hidden;
  const Shape& x = c.in[kX];
  if (!x.known() || x.ndim() != 3) c.Fail(Fmt("x has shape ", x, "; expected (batch, steps, features)"));
  auto expect = [&](int k, const Shape& s, const char* name) {
    if (!c.in[k].known()) c.in[k] = s;
    if (c.in[k] != s)
      c.Fail(Fmt(name, " has shape ", c.in[k], " but x ", x, " with num_hidden=", hid, " needs ", s,
                 k == kH0 || k == kC0 ? Fmt(" or (", x[0], ", steps, ", hid, ") (a previous run's y or cs)") : ""));
  };
  for (int k : {kH0, kC0}) {  // (B, H), or a previous run's (B, T', H)
    const Shape& s = c.in[k];
    if (s.known() && s.ndim() == 3 && s[0] == x[0] && s[2] == hid) continue;
    expect(k, Shape{x[0], hid}, k == kH0 ? "h0" : "c0");
  }
  expect(kWx, Shape{4 * hid, x[2]}, "i2h_weight");
  expect(kBx, Shape{4 * hid}, "i2h_bias");
  expect(kWh, Shape{4 * hid, hid}, "h2h_weight");
  expect(kBh, Shape{4 * hid}, "h2h_bias");
  c.out[kY] = c.out[kCs] = Shape{x[0], x[1], hid};
  c.out[kGates] = Shape{x[0], x[1], 4 * hid};
}

// Thread t's part [first, second) of n, cut at multiples of `align`.
std::pair<int64_t, int64_t> Part(int64_t n, int t, int nt, int64_t align) {
  auto at = [&](int k) { return k == nt ? n : std::min(n, n * k / nt / align * align); };
  return {at(t), at(t + 1)};
}

// f(column, count) over row b's columns [0, hid) in runs of at most
// vec.h's kLstmChunk (what one lstm_forward / lstm_backward call takes).
template <typename F>
void Chunks(int64_t hid, F f) {
  for (int64_t j = 0; j < hid; j += cpu::kLstmChunk) f(j, std::min(cpu::kLstmChunk, hid - j));
}

// A (B, T, W) tensor's step t as rows: the first row and the stride between rows.
struct Rows {
  float* at;
  int64_t stride;
  float* row(int64_t b) const { return at + b * stride; }
};

// The state a (B, H) or (B, T', H) tensor holds: its (last) step as rows.
Rows StateRows(const Tensor& t) {
  const Shape& s = t.shape();
  return s.ndim() == 3 ? Rows{t.f() + (s[1] - 1) * s[2], s[1] * s[2]} : Rows{t.f(), s[1]};
}

// Forward workspace: this step's recurrent product r (B, 4H), and, for
// the outputs not written in place (inference requests none of y, the
// gates and the cell states; OpReq::kAdd adds them at the end), the gates
// (B, T, 4H) and two steps of h and of c (B, H each). The gates are made
// the same way either way (one product for all steps), so that a result
// never depends on what else is asked for.
int64_t ForwardWorkspace(const WorkspaceCtx& c) {
  const Shape& x = c.in[kX];
  const int64_t b = x[0], t = x[1], hid = c.params<LstmParams>().num_hidden;
  return static_cast<int64_t>(sizeof(float)) * (b * 4 * hid + b * t * 4 * hid + 4 * b * hid);
}

// Adds row `row` (n floats) of output k from v where its req is
// OpReq::kAdd (the forward loop writes a kWrite output itself).
void AddRow(const KernelCtx& c, int k, const float* v, int64_t row, int64_t n) {
  if (c.req[k] != OpReq::kAdd) return;
  float* out = c.out[k].f() + row * n;
  for (int64_t j = 0; j < n; ++j) out[j] += v[j];
}

void LstmForward(const KernelCtx& c) {
  const Dims d = DimsOf(c, c.in[kX].shape());
  const int64_t B = d.b, T = d.t, I = d.in, H = d.hid, G = d.gates();
  const float *x = c.in[kX].f(), *wx = c.in[kWx].f(), *wh = c.in[kWh].f();
  const float *bx = c.in[kBx].f(), *bh = c.in[kBh].f();
  auto written = [&](int k) { return c.req[k] == OpReq::kWrite ? c.out[k].f() : nullptr; };
  float* r = static_cast<float*>(Workspace(c));  // (B, 4H)
  float* gates = written(kGates) ? written(kGates) : r + B * G;
  float* roll = r + B * G + B * T * G;  // h of steps t and t - 1, then c of both
  float *y = written(kY), *cs = written(kCs);
  // Every step's input projection in one product; the biases go into each
  // step's recurrent product (r starts as them, the product adds to it),
  // where they are in cache, instead of a pass over the gates.
  cpu::Gemm(false, true, B * T, G, I, 1.f, x, I, wx, I, 0.f, gates, G);
  std::vector<float> bias(G);
  for (int64_t j = 0; j < G; ++j) bias[j] = bx[j] + bh[j];
  auto h_at = [&](int64_t t) {
    return t < 0 ? StateRows(c.in[kH0]) : y ? Rows{y + t * H, T * H} : Rows{roll + (t & 1) * B * H, H};
  };
  auto c_at = [&](int64_t t) {
    return t < 0 ? StateRows(c.in[kC0]) : cs ? Rows{cs + t * H, T * H} : Rows{roll + (2 + (t & 1)) * B * H, H};
  };
  const cpu::VecKernels& vec = cpu::Vec();
  InOneRegion(c.num_threads > 1, [&](int th, int nt, auto sync) {
    const auto [n0, n1] = Part(G, th, nt, 16);
    const auto [b0, b1] = Part(B, th, nt, 1);
    for (int64_t t = 0; t < T; ++t) {
      const Rows hp = h_at(t - 1), cp = c_at(t - 1), h = h_at(t), cell = c_at(t);
      if (n1 > n0) {
        for (int64_t b = 0; b < B; ++b) std::copy(bias.begin() + n0, bias.begin() + n1, r + b * G + n0);
        cpu::Gemm(false, true, B, n1 - n0, H, 1.f, hp.at, hp.stride, wh + n0 * H, H, 1.f, r + n0, G);
      }
      sync();
      for (int64_t b = b0; b < b1; ++b) {
        float* g = gates + (b * T + t) * G;
        Chunks(H, [&](int64_t j, int64_t n) {
          cpu::LstmColumns v{};
          v.hid = H;
          v.i2h = g + j;
          v.h2h = r + b * G + j;
          v.c_prev = cp.row(b) + j;
          v.h = h.row(b) + j;
          v.c = cell.row(b) + j;
          v.gates = g + j;  // over i2h: the kernel writes after its loads
          v.req_h = v.req_c = v.req_gates = OpReq::kWrite;
          vec.lstm_forward(v, n);
        });
        AddRow(c, kY, h.row(b), b * T + t, H);
        AddRow(c, kCs, cell.row(b), b * T + t, H);
      }
      sync();
    }
  });
  if (c.req[kGates] == OpReq::kAdd) {
    float* out = c.out[kGates].f();
    for (int64_t e = 0; e < B * T * G; ++e) out[e] += gates[e];
  }
}

// Backward workspace: da (B, T, 4H) and da transposed (4H, B T), h_prev
// (B, T, H), and the gradients flowing back along the recurrence, of h and
// of c (B, H each).
int64_t BackwardWorkspace(const WorkspaceCtx& c) {
  const Shape& x = c.in[kSavedX];
  const int64_t b = x[0], t = x[1], hid = c.params<LstmParams>().num_hidden;
  return static_cast<int64_t>(sizeof(float)) * (b * t * 9 * hid + 2 * b * hid);
}

// Rows [j0, j1) of a^T (cols x rows) from a (rows x cols), in tiles that
// stay in the cache.
void TransposeRows(const float* a, int64_t rows, int64_t cols, int64_t j0, int64_t j1, float* at) {
  constexpr int64_t kTile = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = j0; c0 < j1; c0 += kTile) {
      const int64_t r1 = std::min(r0 + kTile, rows), c1 = std::min(c0 + kTile, j1);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = c0; j < c1; ++j) at[j * rows + r] = a[r * cols + j];
    }
}

// The gradient of a state input (B, H) or (B, T', H) from its rows v (B, H):
// a (B, T', H) one's last step; its other steps get nothing (zeros, or
// nothing added).
void PutState(const KernelCtx& c, int k, const float* v) {
  const OpReq req = c.req[k];
  if (req == OpReq::kNull) return;
  const Shape& s = c.out[k].shape();
  float* out = c.out[k].f();
  if (s.ndim() == 3 && req == OpReq::kWrite) std::memset(out, 0, s.Size() * sizeof(float));
  const Rows to = s.ndim() == 3 ? Rows{out + (s[1] - 1) * s[2], s[1] * s[2]} : Rows{out, s[1]};
  const int64_t rows = s[0], hid = s[s.ndim() - 1];
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t j = 0; j < hid; ++j) Assign(to.row(b) + j, req, v[b * hid + j]);
}

// inputs: dy, dcs, gates, cs, y, x, h0, c0, W_x, W_h
// outputs: dx, dh0, dc0, dW_x, db_x, dW_h, db_h
void LstmBackward(const KernelCtx& c) {
  const Dims d = DimsOf(c, c.in[kSavedX].shape());
  const int64_t B = d.b, T = d.t, I = d.in, H = d.hid, G = d.gates();
  const float *dy = c.in[kDy].f(), *dcs = c.in[kDcs].f(), *gates = c.in[kSavedGates].f();
  const float *cs = c.in[kSavedCs].f(), *y = c.in[kSavedY].f(), *x = c.in[kSavedX].f();
  const float *wx = c.in[kSavedWx].f(), *wh = c.in[kSavedWh].f();
  const Rows h0 = StateRows(c.in[kSavedH0]), c0 = StateRows(c.in[kSavedC0]);
  float* da = static_cast<float*>(Workspace(c));  // (B, T, 4H)
  float* da_transposed = da + B * T * G;          // (4H, B T)
  float* h_prev = da_transposed + B * T * G;      // (B, T, H)
  float* dh = h_prev + B * T * H;                 // (B, H): dh_t, then da_t W_h
  float* dc = dh + B * H;                         // (B, H): dc_t, then dc_{t-1}
  std::fill(dh, dh + 2 * B * H, 0.f);
  std::vector<float> sum(G, 0.f);
  const cpu::VecKernels& vec = cpu::Vec();
  InOneRegion(c.num_threads > 1, [&](int th, int nt, auto sync) {
    const auto [m0, m1] = Part(H, th, nt, 16);
    const auto [b0, b1] = Part(B, th, nt, 1);
    for (int64_t t = T - 1; t >= 0; --t) {
      for (int64_t b = b0; b < b1; ++b) {
        float *dh_b = dh + b * H, *dc_b = dc + b * H;
        const float *dy_b = dy + (b * T + t) * H, *dcs_b = dcs + (b * T + t) * H;
        for (int64_t j = 0; j < H; ++j) {
          dh_b[j] += dy_b[j];
          dc_b[j] += dcs_b[j];
        }
        Chunks(H, [&](int64_t j, int64_t n) {
          cpu::LstmColumns v{};
          v.hid = H;
          v.dh = dh_b + j;
          v.dc = dc_b + j;
          v.act = gates + (b * T + t) * G + j;
          v.c_prev = (t > 0 ? cs + (b * T + t - 1) * H : c0.row(b)) + j;
          v.da = da + (b * T + t) * G + j;
          v.dc_prev = dc_b + j;  // over dc: the kernel writes after its loads
          v.req_da = v.req_dc_prev = OpReq::kWrite;
          vec.lstm_backward(v, n);
        });
      }
      sync();
      if (m1 > m0) cpu::Gemm(false, false, B, m1 - m0, G, 1.f, da + t * G, T * G, wh + m0, H, 0.f, dh + m0, H);
      sync();
    }
    // With every da: db_x = db_h, the column sums of da, each over the rows
    // in order (a thread's columns a row at a time, so the loop
    // vectorises), the thread's rows of da^T, and its rows of h_prev.
    const auto [j0, j1] = Part(G, th, nt, 16);
    for (int64_t row = 0; row < B * T; ++row) {
      const float* a = da + row * G;
#pragma omp simd
      for (int64_t j = j0; j < j1; ++j) sum[j] += a[j];
    }
    if (c.req[kWh] != OpReq::kNull || c.req[kWx] != OpReq::kNull) TransposeRows(da, B * T, G, j0, j1, da_transposed);
    for (int64_t b = b0; b < b1 && c.req[kWh] != OpReq::kNull; ++b) {
      std::memcpy(h_prev + b * T * H, h0.row(b), H * sizeof(float));
      std::memcpy(h_prev + (b * T + 1) * H, y + b * T * H, (T - 1) * H * sizeof(float));
    }
  });
  PutState(c, kH0, dh);
  PutState(c, kC0, dc);
  for (int k : {kBx, kBh}) ForEach(G, Out(c, k), c.req[k], [&](int64_t j) { return sum[j]; });
  auto beta = [&](int k) { return c.req[k] == OpReq::kAdd ? 1.f : 0.f; };
  // dW = da^T v as (da^T) v, da transposed once for both products:
  // oneDNN's sgemm runs a transposed-A product of 256 columns (2x256's, 4H
  // = 1024 by 256 over 800 rows) at 68-83 GFLOP/s on two AVX2 cores, the
  // plain product at 143-168. The backward op of 2x256 (batch 32, runs of
  // 25) took 11.4-15.2 ms against 15.4-21.6; of 4x1024 the same as before
  // (its products run at 155-165 GFLOP/s either way and the transpose, 13 MB,
  // costs what they gain).
  if (c.req[kWh] != OpReq::kNull)
    cpu::Gemm(false, false, G, H, B * T, 1.f, da_transposed, B * T, h_prev, H, beta(kWh), Out(c, kWh), H);
  if (c.req[kWx] != OpReq::kNull)
    cpu::Gemm(false, false, G, I, B * T, 1.f, da_transposed, B * T, x, I, beta(kWx), Out(c, kWx), I);
  if (c.req[kX] != OpReq::kNull) cpu::Gemm(false, false, B * T, I, G, 1.f, da, G, wx, I, beta(kX), Out(c, kX), I);
}

double ForwardFlops(const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
  const Shape& x = in[kX];
  const double rows = static_cast<double>(x[0]) * x[1], hid = static_cast<double>(in[kWh][1]);
  return 2 * rows * 4 * hid * (x[2] + hid) + 108 * rows * hid;  // the products, then lstm_cell's count
}

}  // namespace
}  // namespace lstm_layer

void Register_lstm(OpRegistry* r) {
  using namespace lstm_layer;  // NOLINT(google-build-using-namespace)
  OpDef& fwd =
      r->Add("lstm")
          .Doc(
              "LSTM layer over a run of steps, batch first: x (B, T, I), h0 and c0 (B, H) or a previous run's y and "
              "cs (their last step); outputs every step's h (y) and c (cs), (B, T, H). lstm_cell's gates and "
              "parameters; the input projections and weight gradients of all steps are one product each.")
          .Inputs({{"x"},
                   {"h0", VarKind::kAux, "zero"},
                   {"c0", VarKind::kAux, "zero"},
                   {"i2h_weight", VarKind::kParam, "xavier"},
                   {"i2h_bias", VarKind::kParam, "zero"},
                   {"h2h_weight", VarKind::kParam, "xavier"},
                   {"h2h_bias", VarKind::kParam, "zero"}})
          .Outputs({"y", "cs", "gates"})
          .VisibleOutputs(2)
          .Params<LstmParams>()
          .InferShape(LstmShape)
          .Recompute(Cost::kExpensive)
          .Flops(ForwardFlops)
          .Workspace(ForwardWorkspace)
          .CpuKernel(LstmForward);
  AddBackward(r, fwd,
              {OutGrad(kY), OutGrad(kCs), Output(kGates), Output(kCs), Output(kY), Input(kX), Input(kH0), Input(kC0),
               Input(kWx), Input(kWh)},
              "Step by step along the recurrence, then dx, dW_x, dW_h and the biases' gradient over all steps at once.")
      .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
        const Shape& x = in[kSavedX];
        const double rows = static_cast<double>(x[0]) * x[1], hid = static_cast<double>(in[kSavedY][2]);
        return 2 * rows * 4 * hid * (2 * x[2] + 2 * hid) + 45 * rows * hid;  // dh and dW_h, dx and dW_x; the cell
      })
      .AddTo({kX, kH0, kC0, kWx, kBx, kWh, kBh})
      .Workspace(BackwardWorkspace)
      .CpuKernel(LstmBackward);
}

}  // namespace frugal
