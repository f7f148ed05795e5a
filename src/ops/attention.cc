// attention: scaled dot-product attention, fused and memory-efficient
// (the online softmax of Milakov & Gimelshein 2018 as FlashAttention uses it,
// Dao et al. 2022; PyTorch's scaled_dot_product_attention).
//   q: (*, Tq, D)   k: (*, Tk, D)   v: (*, Tk, Dv)   * = the same leading
//   dims (batch, heads), at least one
//   y: (*, Tq, Dv)   lse: (*, Tq), hidden: the log-sum-exp of each row of S
//   S = scale q k^T (scale default 1/sqrt(D)), plus the additive mask when
//   the node has one (masked: true, a fourth input of shape (*', Tq, Tk)
//   with *' broadcast against *: e.g. (Tq, Tk), or (batch, 1, Tq, Tk) for
//   every head; -inf hides a key, and a row hidden entirely gives NaN, as
//   PyTorch's attn_mask; the mask gets no gradient); causal: S[i][j] = -inf
//   for j > i (top-left aligned, as PyTorch's is_causal);
//   P = softmax(S) along j; training with dropout p: P' = P * m / (1 - p),
//   m[i][j] = 1 with probability 1 - p (counter-based, as the dropout op);
//   y = P' v.
// The T x T matrices never exist: the forward takes blocks of kBlockQ
// queries against blocks of kBlockK keys, keeping per query row the running
// maximum, the running sum of exp and the running output; it saves y and
// lse only. The backward recomputes each block's P from lse:
//   D_i = sum_c dy[i][c] y[i][c]
//   dv += P'^T dy     dP' = dy v^T     dS = P * (dP' * m / (1 - p) - D_i)
//   dq += scale dS k  dk += scale dS^T q
// so the workspace (declared to the planner) is a few blocks per thread and
// one row of D_i, linear in T.
// Threads take whole (batch, head) slices, each summing in a fixed order, so
// the bits do not depend on the thread count; the dropout mask is a pure
// function of (seed, node, step, element), so a recomputation replays it.
// Kernels: float32, sgemm (ops/cpu/blas.h) per block on one thread, the
// exponentials vectorised (vec.h's exp_shift: exactly 0 for a masked score).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "ops/cpu/blas.h"
#include "backend/cpu/parallel.h"
#include "ops/cpu/philox.h"
#include "ops/cpu/vec.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

constexpr int64_t kBlockQ = 64, kBlockK = 128;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Sizes of a node's q, k and v: `slices` (batch x heads) of tq x d, tk x d
// and tk x dv.
struct Dims {
  int64_t slices, tq, tk, d, dv;
  Dims(const Shape& q, const Shape& k, const Shape& v) {
    const int r = q.ndim();
    slices = q.Prod(0, r - 2);
    tq = q[r - 2];
    tk = k[r - 2];
    d = q[r - 1];
    dv = v[r - 1];
  }
  float Scale(const AttentionParams& p) const {
    return p.scale != 0 ? p.scale : 1.f / std::sqrt(static_cast<float>(d));
  }
  // Floats of one thread's scratch: the score and probability blocks, the
  // running output, maximum and sum of a query block, and D for a slice.
  int64_t ScratchFloats() const { return 2 * kBlockQ * kBlockK + kBlockQ * dv + 2 * kBlockQ + tq; }
};

int ThreadIndex() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

// Threads that may run at once: one scratch each in the workspace.
int64_t Slots(const Dims& d) { return std::max<int64_t>(1, std::min<int64_t>(cpu::NumCores(), d.slices)); }

// The leading dims *' of a mask (*', Tq, Tk) broadcast against q's (*):
// for slice sl of q, the mask's slice at MaskSlices(...)(sl).
StridedIndex MaskSlices(const Shape& q, const Shape& mask) {
  const Shape lead(std::vector<int64_t>(q.dims().begin(), q.dims().end() - 2));
  const Shape mask_lead(std::vector<int64_t>(mask.dims().begin(), mask.dims().end() - 2));
  return BroadcastIndex(mask_lead, lead);
}

void AttentionInferShape(ShapeCtx& c) {
  const Shape &q = c.in[0], &k = c.in[1], &v = c.in[2];
  for (int i = 0; i < 3; ++i) {
    if (!c.in[i].known() || c.in[i].ndim() < 3) {
      c.Fail(Fmt(i == 0   ? "q"
                 : i == 1 ? "k"
                          : "v",
                 " has shape ", c.in[i], "; expected (batch..., T, features) with at least 3 dimensions"));
    }
  }
  const int r = q.ndim();
  bool same = k.ndim() == r && v.ndim() == r;
  for (int i = 0; same && i < r - 2; ++i) same = q[i] == k[i] && q[i] == v[i];
  if (!same) c.Fail(Fmt("q ", q, ", k ", k, " and v ", v, " must have the same leading dimensions (batch, heads)"));
  if (k[r - 1] != q[r - 1])
    c.Fail(Fmt("k ", k, " has ", k[r - 1], " features per position but q ", q, " has ", q[r - 1]));
  if (v[r - 2] != k[r - 2]) c.Fail(Fmt("v ", v, " has ", v[r - 2], " positions but k ", k, " has ", k[r - 2]));
  if (c.params<AttentionParams>().masked) {
    const Shape& mask = c.in[3];
    bool fits = mask.known() && mask.ndim() >= 2 && mask.ndim() <= r && mask[mask.ndim() - 2] == q[r - 2] &&
                mask[mask.ndim() - 1] == k[r - 2];
    for (int i = 0; fits && i < mask.ndim() - 2; ++i) {
      const int64_t m = mask[i], lead = q[i + r - mask.ndim()];
      fits = m == 1 || m == lead;
    }
    if (!fits) {
      c.Fail(Fmt("mask has shape ", mask, " but q ", q, " and k ", k, " need (..., ", q[r - 2], ", ", k[r - 2],
                 "): the queries by the keys, its leading dims 1 or q's"));
    }
  }
  std::vector<int64_t> y = q.dims(), lse = q.dims();
  y[r - 1] = v[r - 1];
  lse.pop_back();
  c.out[0] = Shape(y);
  c.out[1] = Shape(lse);
}

// The dropout mask of one slice: keep(i, j) for the counter-based stream of
// this node and step; element (slice, i, j) draws word first + its index.
class Mask {
 public:
  Mask(const KernelCtx& c, const AttentionParams& p, const Dims& d)
      : on_(c.is_train && p.dropout > 0),
        stream_(c.seed, c.node_key, c.step),
        threshold_(static_cast<uint32_t>(std::ldexp(static_cast<double>(p.dropout), 32))),
        scale_(on_ ? 1.f / (1.f - p.dropout) : 1.f),
        tq_(d.tq),
        tk_(d.tk),
        first_(c.data_part * d.slices * d.tq * d.tk) {}
  bool on() const { return on_; }
  float scale() const { return scale_; }
  // Multiplies row i's columns [j0, j0 + n) of p (n <= kBlockK) by m / (1 - p).
  void Apply(int64_t slice, int64_t i, int64_t j0, int64_t n, float* p) const {
    const int64_t w0 = first_ + (slice * tq_ + i) * tk_ + j0, b0 = w0 / 4;
    uint32_t words[kBlockK + 8];
    cpu::Vec().philox_blocks(stream_.key(), stream_.step(), static_cast<uint64_t>(b0), (w0 + n + 3) / 4 - b0, words);
    const uint32_t* at = words + (w0 - 4 * b0);
    for (int64_t j = 0; j < n; ++j) p[j] = at[j] >= threshold_ ? p[j] * scale_ : 0.f;
  }

 private:
  bool on_;
  cpu::CounterStream stream_;
  uint32_t threshold_;
  float scale_;
  int64_t tq_, tk_, first_;
};

// Keys a query block [i0, i1) sees: all, or under the causal mask those
// before i1.
int64_t KeyEnd(const AttentionParams& p, const Dims& d, int64_t i1) { return p.causal ? std::min(d.tk, i1) : d.tk; }

// s (nq x nk, row stride kBlockK) = scale q[i0..] k[j0..]^T, plus the
// slice's mask (tq x tk) where there is one, -inf above the causal diagonal.
void Scores(const AttentionParams& p, const Dims& d, float scale, const float* q, const float* k, const float* mask,
            int64_t i0, int64_t nq, int64_t j0, int64_t nk, float* s) {
  // Row-major c with ldc = kBlockK: Gemm wants contiguous rows, so compute
  // into a packed nq x nk block and spread it when nk < kBlockK.
  cpu::Gemm(false, true, nq, nk, d.d, scale, q + i0 * d.d, k + j0 * d.d, 0.f, s);
  if (nk < kBlockK)
    for (int64_t r = nq - 1; r >= 0; --r) std::copy_backward(s + r * nk, s + (r + 1) * nk, s + r * kBlockK + nk);
  if (mask) {
    for (int64_t r = 0; r < nq; ++r)
      for (int64_t j = 0; j < nk; ++j) s[r * kBlockK + j] += mask[(i0 + r) * d.tk + j0 + j];
  }
  if (!p.causal) return;
  for (int64_t r = 0; r < nq; ++r)
    for (int64_t j = std::max<int64_t>(0, i0 + r + 1 - j0); j < nk; ++j) s[r * kBlockK + j] = kNegInf;
}

// Packs rows of stride kBlockK to stride nk (for Gemm), in place.
void Pack(float* s, int64_t nq, int64_t nk) {
  if (nk == kBlockK) return;
  for (int64_t r = 1; r < nq; ++r) std::copy(s + r * kBlockK, s + r * kBlockK + nk, s + r * nk);
}

// The additive mask of each slice (nullptr without one): the node's input
// mask_at, broadcast against q (input q_at).
class SliceMask {
 public:
  SliceMask(const KernelCtx& c, const AttentionParams& p, const Dims& d, int q_at, int mask_at)
      : mask_(p.masked ? c.in[mask_at].f() : nullptr),
        slices_(p.masked ? MaskSlices(c.in[q_at].shape(), c.in[mask_at].shape()) : StridedIndex()),
        size_(d.tq * d.tk) {}
  const float* operator()(int64_t slice) const { return mask_ ? mask_ + slices_(slice) * size_ : nullptr; }

 private:
  const float* mask_;
  StridedIndex slices_;
  int64_t size_;
};

// inputs: q, k, v[, mask]   outputs: y, lse
void AttentionForward(const KernelCtx& c) {
  const auto& p = c.params<AttentionParams>();
  const Dims d(c.in[0].shape(), c.in[1].shape(), c.in[2].shape());
  const float scale = d.Scale(p);
  const Mask mask(c, p, d);
  const SliceMask additive(c, p, d, 0, 3);
  const float *q = c.in[0].f(), *k = c.in[1].f(), *v = c.in[2].f();
  float* y = c.req[0] == OpReq::kNull ? nullptr : c.out[0].f();
  float* lse = c.req[1] == OpReq::kNull ? nullptr : c.out[1].f();
  float* ws = static_cast<float*>(c.workspace.raw());
  const cpu::VecKernels& vec = cpu::Vec();
  [[maybe_unused]] const int threads = static_cast<int>(std::min<int64_t>(c.num_threads, Slots(d)));
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) if (threads > 1)
  for (int64_t sl = 0; sl < d.slices; ++sl) {
    float* s = ws + ThreadIndex() * d.ScratchFloats();
    float *acc = s + 2 * kBlockQ * kBlockK, *m = acc + kBlockQ * d.dv, *l = m + kBlockQ;
    const float *qs = q + sl * d.tq * d.d, *ks = k + sl * d.tk * d.d, *vs = v + sl * d.tk * d.dv;
    for (int64_t i0 = 0; i0 < d.tq; i0 += kBlockQ) {
      const int64_t nq = std::min(kBlockQ, d.tq - i0);
      std::fill(m, m + nq, kNegInf);
      std::fill(l, l + nq, 0.f);
      std::fill(acc, acc + nq * d.dv, 0.f);
      for (int64_t j0 = 0; j0 < KeyEnd(p, d, i0 + nq); j0 += kBlockK) {
        const int64_t nk = std::min(kBlockK, d.tk - j0);
        Scores(p, d, scale, qs, ks, additive(sl), i0, nq, j0, nk, s);
        for (int64_t r = 0; r < nq; ++r) {
          float* row = s + r * kBlockK;
          const float top = std::max(m[r], *std::max_element(row, row + nk));
          if (top == kNegInf) {  // nothing seen yet in this row
            std::fill(row, row + nk, 0.f);
            continue;
          }
          const float shrink = std::exp(m[r] - top);
          l[r] = l[r] * shrink + vec.exp_shift(row, top, row, nk);
          m[r] = top;
          for (int64_t x = 0; x < d.dv; ++x) acc[r * d.dv + x] *= shrink;
          if (mask.on()) mask.Apply(sl, i0 + r, j0, nk, row);
        }
        Pack(s, nq, nk);
        cpu::Gemm(false, false, nq, d.dv, nk, 1.f, s, vs + j0 * d.dv, 1.f, acc);
      }
      for (int64_t r = 0; r < nq; ++r) {
        const int64_t i = sl * d.tq + i0 + r;
        if (lse) Assign(lse + i, c.req[1], m[r] + std::log(l[r]));
        if (!y) continue;
        for (int64_t x = 0; x < d.dv; ++x) Assign(y + i * d.dv + x, c.req[0], acc[r * d.dv + x] / l[r]);
      }
    }
  }
}

// inputs: dy, q, k, v, y, lse[, mask]   outputs: dq, dk, dv[, dmask: zeros]
void AttentionBackward(const KernelCtx& c) {
  const auto& p = c.params<AttentionParams>();
  const Dims d(c.in[1].shape(), c.in[2].shape(), c.in[3].shape());
  const float scale = d.Scale(p);
  const Mask mask(c, p, d);
  const SliceMask additive(c, p, d, 1, 6);
  if (p.masked) ForEach(c.in[6].size(), Out(c, 3), c.req[3], [](int64_t) { return 0.f; });
  const float *dy = c.in[0].f(), *q = c.in[1].f(), *k = c.in[2].f(), *v = c.in[3].f();
  const float *y = c.in[4].f(), *lse = c.in[5].f();
  float* out[3];
  for (int o = 0; o < 3; ++o) out[o] = c.req[o] == OpReq::kNull ? nullptr : c.out[o].f();
  float* ws = static_cast<float*>(c.workspace.raw());
  const int64_t widths[3] = {d.d, d.d, d.dv};
  const cpu::VecKernels& vec = cpu::Vec();
  [[maybe_unused]] const int threads = static_cast<int>(std::min<int64_t>(c.num_threads, Slots(d)));
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) if (threads > 1)
  for (int64_t sl = 0; sl < d.slices; ++sl) {
    float* s = ws + ThreadIndex() * d.ScratchFloats();
    float *dp = s + kBlockQ * kBlockK, *rowdot = dp + kBlockQ * kBlockK + kBlockQ * d.dv + 2 * kBlockQ;
    const float *qs = q + sl * d.tq * d.d, *ks = k + sl * d.tk * d.d, *vs = v + sl * d.tk * d.dv;
    const float *dys = dy + sl * d.tq * d.dv, *ls = lse + sl * d.tq;
    float* g[3];  // this slice of dq, dk, dv: written as sums (zeroed first unless adding)
    const int64_t rows[3] = {d.tq, d.tk, d.tk};
    for (int o = 0; o < 3; ++o) {
      g[o] = out[o] ? out[o] + sl * rows[o] * widths[o] : nullptr;
      if (g[o] && c.req[o] != OpReq::kAdd) std::fill(g[o], g[o] + rows[o] * widths[o], 0.f);
    }
    for (int64_t i = 0; i < d.tq; ++i) {
      double dot = 0;
      for (int64_t x = 0; x < d.dv; ++x) dot += static_cast<double>(dys[i * d.dv + x]) * y[(sl * d.tq + i) * d.dv + x];
      rowdot[i] = static_cast<float>(dot);
    }
    for (int64_t j0 = 0; j0 < d.tk; j0 += kBlockK) {
      const int64_t nk = std::min(kBlockK, d.tk - j0);
      for (int64_t i0 = p.causal ? j0 / kBlockQ * kBlockQ : 0; i0 < d.tq; i0 += kBlockQ) {
        const int64_t nq = std::min(kBlockQ, d.tq - i0);
        Scores(p, d, scale, qs, ks, additive(sl), i0, nq, j0, nk, s);
        for (int64_t r = 0; r < nq; ++r) vec.exp_shift(s + r * kBlockK, ls[i0 + r], s + r * kBlockK, nk);
        // dv += P'^T dy (P' in dp), then dp = dP' = dy v^T.
        if (g[2]) {
          for (int64_t r = 0; r < nq; ++r) {
            std::copy(s + r * kBlockK, s + r * kBlockK + nk, dp + r * nk);
            if (mask.on()) mask.Apply(sl, i0 + r, j0, nk, dp + r * nk);
          }
          cpu::Gemm(true, false, nk, d.dv, nq, 1.f, dp, dys + i0 * d.dv, 1.f, g[2] + j0 * d.dv);
        }
        if (!g[0] && !g[1]) continue;
        cpu::Gemm(false, true, nq, nk, d.dv, 1.f, dys + i0 * d.dv, vs + j0 * d.dv, 0.f, dp);
        // dS = P (dP' m / (1 - p) - D_i), packed nq x nk in s.
        for (int64_t r = 0; r < nq; ++r) {
          float* dpr = dp + r * nk;
          if (mask.on()) mask.Apply(sl, i0 + r, j0, nk, dpr);
          const float* pr = s + r * kBlockK;
          for (int64_t j = 0; j < nk; ++j) dpr[j] = pr[j] * (dpr[j] - rowdot[i0 + r]);
        }
        if (g[0]) cpu::Gemm(false, false, nq, d.d, nk, scale, dp, ks + j0 * d.d, 1.f, g[0] + i0 * d.d);
        if (g[1]) cpu::Gemm(true, false, nk, d.d, nq, scale, dp, qs + i0 * d.d, 1.f, g[1] + j0 * d.d);
      }
    }
  }
}

int64_t AttentionWorkspace(const WorkspaceCtx& c) {
  // Forward: q, k, v are inputs 0-2 (then the mask); backward: inputs 1-3 after dy.
  const int first = c.in.size() <= 4 ? 0 : 1;
  const Dims d(c.in[first], c.in[first + 1], c.in[first + 2]);
  return Slots(d) * d.ScratchFloats() * static_cast<int64_t>(sizeof(float));
}

double AttentionFlops(const Node& n, const Shape& q, const Shape& k, const Shape& v, double gemms) {
  const Dims d(q, k, v);
  const auto& p = std::any_cast<const AttentionParams&>(n.params);
  const double pairs = static_cast<double>(d.slices) * d.tq * d.tk * (p.causal ? 0.5 : 1.0);
  return pairs * (gemms * (d.d + d.dv) + 4);  // the GEMMs, and exp and the softmax per score
}

}  // namespace

AttentionParams AttentionParams::Parse(AttrReader& a) {
  AttentionParams p;
  p.causal = a.Bool("causal", false);
  p.masked = a.Bool("masked", false);
  p.scale = static_cast<float>(a.Float("scale", 0));
  p.dropout = static_cast<float>(a.Float("dropout", 0));
  FRUGAL_REQUIRE(std::isfinite(p.scale) && p.scale >= 0, a.where(),
                 ": scale must be a positive number (or 0 for 1/sqrt(features)), got ", p.scale);
  FRUGAL_REQUIRE(p.dropout >= 0 && p.dropout < 1, a.where(), ": dropout must be in [0, 1), got ", p.dropout);
  return p;
}

void Register_attention(OpRegistry* r) {
  OpDef& fwd =
      r->Add("attention")
          .Doc(
              "Scaled dot-product attention softmax(scale q k^T + mask) v over (batch..., T, features), fused: "
              "causal (false), scale (0: 1/sqrt(features)), dropout (0) on the attention weights, masked (false: "
              "true takes an additive mask (..., Tq, Tk) as a fourth input).")
          .Inputs({{"q"}, {"k"}, {"v"}, {"mask"}})
          .Outputs({"y", "lse"})
          .VisibleOutputs(1)
          .NumInputsFn([](const std::any& p) { return std::any_cast<const AttentionParams&>(p).masked ? 4 : 3; })
          .Params<AttentionParams>()
          .InferShape(AttentionInferShape)
          // The mask, read last, only where the node has one.
          .Recompute(Cost::kExpensive)
          .Random(Randomness::kCounterRng)
          .WritesOutputsTogether()
          .Workspace(AttentionWorkspace)
          .Flops([](const Node& n, const std::vector<Shape>& in, const std::vector<Shape>&) {
            return AttentionFlops(n, in[0], in[1], in[2], 2);
          })
          .CpuKernel(AttentionForward);
  AddBackward(r, fwd, {OutGrad(0), Input(0), Input(1), Input(2), Output(0), Output(1), Input(3)},
              "dq, dk, dv, each block's probabilities recomputed from the saved log-sum-exp.")
      .Workspace(AttentionWorkspace)
      .Flops([](const Node& n, const std::vector<Shape>& in, const std::vector<Shape>&) {
        return AttentionFlops(n, in[1], in[2], in[3], 5);
      })
      .CpuKernel(AttentionBackward);
}

}  // namespace frugal
