// dropout (training only):  y = x * m / (1 - p),  m[i] = 1 with probability 1 - p, else 0
//   x, y: any shape; p in [0, 1) (default 0.5); mode: "training" (the only
//   mode: outside training, and when p = 0, y = x).
// grad:  dx = dy * m / (1 - p)                               reads dy only
//
// The mask is never stored. m[i] is a pure function of (seed, node, step, i):
// word i of a Philox-4x32-10 stream (ops/cpu/philox.h; drawn by vec.h's
// philox_blocks, many blocks a call, the same words) keyed by the seed
// and a stable hash of the forward node's name, with the step in the
// counter; m[i] = 1 when the word is >= p * 2^32. The backward kernel
// regenerates the same words instead of reading a saved mask because
//   - the mask would cost as many bytes as x (the planner stores float32)
//     and live from the forward to the backward pass, while regenerating it
//     costs one Philox call per four elements;
//   - the forward keeps nothing for the backward pass, so it runs in place
//     and a recompute plan may drop it for free;
//   - a recomputation of the forward gives the same bits by construction.
// The key is KernelCtx::node_key, a hash of the forward node's name (not its
// index), so adding nodes to a graph does not change a mask; the executor
// gives the gradient node and any recomputed copy the same key. A
// data-parallel rank's words start at KernelCtx::data_part * n: its rows'
// place in the global batch, so ranks draw different masks, those of one
// process with the global batch.
#include <algorithm>
#include <cmath>

#include "ops/cpu/philox.h"
#include "ops/cpu/vec.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

// y[i] = v[i] * m[i] * scale for the stream of this node and step,
// honouring req; v = x forward, dy backward.
void ApplyMask(const KernelCtx& c) {
  const auto& prm = c.params<DropoutParams>();
  const OpReq req = c.req[0];
  if (req == OpReq::kNull) return;
  const float* v = c.in[0].f();
  float* y = Out(c, 0);
  const int64_t n = c.out[0].size();
  if (!c.is_train || prm.p == 0.f) return ForEach(n, y, req, [=](int64_t i) { return v[i]; });
  const cpu::CounterStream stream(c.seed, c.node_key, c.step);
  const uint32_t threshold = static_cast<uint32_t>(std::ldexp(static_cast<double>(prm.p), 32));
  const float scale = 1.f / (1.f - prm.p);
  const int64_t first = c.data_part * n;  // element i draws word first + i
  const int64_t b0 = first / 4, b1 = (first + n + 3) / 4;
  constexpr int64_t kChunk = 256;  // Philox blocks drawn at once (vec.h's philox_blocks)
  const cpu::VecKernels& vec = cpu::Vec();
#pragma omp parallel for if (n > kParallelGrain) schedule(static)
  for (int64_t cb = b0; cb < b1; cb += kChunk) {
    uint32_t words[4 * kChunk];
    vec.philox_blocks(stream.key(), stream.step(), static_cast<uint64_t>(cb), std::min(kChunk, b1 - cb), words);
    for (int64_t w = std::max(4 * cb, first); w < std::min(4 * (cb + kChunk), first + n); ++w) {
      const int64_t i = w - first;
      Assign(y + i, req, words[w - 4 * cb] >= threshold ? v[i] * scale : 0.f);
    }
  }
}

}  // namespace

DropoutParams DropoutParams::Parse(AttrReader& a) {
  DropoutParams p;
  p.p = static_cast<float>(a.Float("p", 0.5));
  a.Choice("mode", "training", {"training"});
  FRUGAL_REQUIRE(p.p >= 0 && p.p < 1, a.where(), ": p must be in [0, 1), got ", p.p);
  return p;
}

void Register_dropout(OpRegistry* r) {
  OpDef& fwd =
      r->Add("dropout")
          .Doc("Inverted dropout when training: y = x * mask / (1 - p); the mask comes from a counter-based RNG.")
          .Elementwise()
          .Params<DropoutParams>()
          .Recompute(Cost::kCheap)
          .Random(Randomness::kCounterRng)
          .CpuKernel(ApplyMask);
  AddBackward(r, fwd, {OutGrad(0)}, "dx = dy * mask / (1 - p), the mask regenerated from the counter-based RNG.")
      .Inplace({{0, 0}})
      .CpuKernel(ApplyMask);
}

}  // namespace frugal
