// batch_norm and its gradient on channels-last (Layout::kNhwc) activations:
// each kernel is run by hand on one node (the graph op_harness builds), once
// on plain tensors and once on the same values with x, y, dy and dx permuted
// to (N, H, W, C) and declared kNhwc, and the nhwc outputs are permuted back
// and compared. The nhwc kernels promise the plain layout's bits (each
// channel's per-sample sums keep the plain path's 16 lanes, the samples are
// added in double in order, y and dx are the same float expressions), so
// everything is compared exactly: y, dx, mean, var, the updated moving
// statistics, dgamma and dbeta, float32 and bfloat16. Also: req add, in
// place, a recomputed run (a mirror reading the saved statistics), and the
// thread count, none of which may change the bits.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/parallel.h"
#include "frugal/bf16.h"
#include "ops/op_harness.h"

namespace frugal::test {
namespace {

// n random values in [lo, hi], rounded to bfloat16 (so that the float32 and
// bfloat16 runs start from the same values).
std::vector<float> Values01(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = Bf16ToFloat(FloatToBf16(u(rng)));
  return v;
}

// Index in the (N, H, W, C) bytes of the element at plain (N, C, H, W) index i.
int64_t NhwcIndex(const Shape& s, int64_t i) {
  const int64_t w = i % s[3], h = i / s[3] % s[2], c = i / (s[2] * s[3]) % s[1], n = i / (s[1] * s[2] * s[3]);
  return ((n * s[2] + h) * s[3] + w) * s[1] + c;
}

// A tensor of dtype `dtype` holding v (given in plain order), its bytes laid out as `layout`.
Tensor Make(const Shape& s, DType dtype, Layout layout, const std::vector<float>& v) {
  Tensor t = Tensor::Empty(s, dtype);
  for (int64_t i = 0; i < t.size(); ++i) {
    const int64_t at = layout == Layout::kNhwc ? NhwcIndex(s, i) : i;
    if (dtype == DType::kBFloat16) {
      t.bf16()[at] = FloatToBf16(v[i]);
    } else {
      t.f()[at] = v[i];
    }
  }
  return layout == Layout::kPlain ? t : t.WithLayout(layout);
}

// A tensor's values (as floats) in plain order, whatever its layout and dtype.
std::vector<float> Read(const Tensor& t) {
  std::vector<float> v(t.size());
  for (int64_t i = 0; i < t.size(); ++i) {
    const int64_t at = t.layout() == Layout::kNhwc ? NhwcIndex(t.shape(), i) : i;
    v[i] = t.dtype() == DType::kBFloat16 ? Bf16ToFloat(t.bf16()[at]) : t.f()[at];
  }
  return v;
}

// Bitwise equality of two float vectors (so -0 and 0 differ, and NaNs compare).
void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) == 0) continue;
    ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", want " << want[i];
    return;  // the first difference is enough
  }
}

struct Case {
  Shape x;
  DType dtype;
  bool relu, global, fix_gamma;
  std::string Name() const {
    std::ostringstream os;
    os << x << (dtype == DType::kBFloat16 ? " bfloat16" : " float32") << (relu ? " relu" : "")
       << (global ? " use_global_stats" : "") << (fix_gamma ? " fix_gamma" : "");
    return os.str();
  }
};

// The forward and gradient nodes of one batch_norm.
struct BnGraph {
  OpGraph og;
  int fwd = -1, bwd = -1;
};
BnGraph Build(const Case& k) {
  OpCase c;
  c.op = "batch_norm";
  c.attrs = {{"fix_gamma", k.fix_gamma ? "true" : "false"}, {"use_global_stats", k.global ? "true" : "false"}};
  if (k.relu) c.attrs["act_type"] = "relu";
  const Shape ch{k.x[1]};
  c.in_shapes = {k.x, ch, ch, ch, ch};
  c.differentiable = {true, true, true, false, false};
  BnGraph b{BuildOpGraph(c, /*with_gradient=*/true)};
  b.fwd = b.og.op_node;
  b.bwd = b.og.in_grads[0].node;
  EXPECT_EQ(b.og.g.node(b.bwd).op->name(), "_backward_batch_norm");
  return b;
}

// A float32 (C,) tensor.
Tensor Param(const std::vector<float>& v) {
  return Make(Shape{static_cast<int64_t>(v.size())}, DType::kFloat32, Layout::kPlain, v);
}

// The values of one case: x, gamma, beta, the moving statistics; dy and the
// statistics the gradient reads as saved; what the outputs hold before a
// run (read with req add).
struct Inputs {
  std::vector<float> x, gamma, beta, moving_mean, moving_var, dy, saved_mean, saved_var, y0, dx0, ch0;
};
Inputs MakeInputs(const Case& k) {
  const int64_t n = k.x.Size(), c = k.x[1];
  return {Values01(n, -1.f, 3.f, 1),  Values01(c, 0.5f, 1.5f, 2), Values01(c, -0.5f, 0.5f, 3),
          Values01(c, 0.5f, 1.5f, 4), Values01(c, 0.5f, 2.f, 5),  Values01(n, -1.f, 1.f, 6),
          Values01(c, 0.5f, 1.5f, 7), Values01(c, 0.5f, 2.f, 8),  Values01(n, -2.f, 2.f, 9),
          Values01(n, -2.f, 2.f, 10), Values01(c, -2.f, 2.f, 11)};
}

// One run of the forward and then the gradient kernel, all in one layout.
struct BnRun {
  std::vector<float> y, mean, var, moving_mean, moving_var;         // forward
  std::vector<float> dx, dgamma, dbeta, dmoving_mean, dmoving_var;  // gradient
};

struct RunOptions {
  Layout layout = Layout::kPlain;
  OpReq req = OpReq::kWrite;
  bool in_place = false;  // y aliasing x, dx aliasing dy
  bool is_train = true;
};

BnRun RunBoth(const BnGraph& b, const Case& k, const Inputs& v, const RunOptions& o) {
  const Graph& g = b.og.g;
  auto act = [&](const std::vector<float>& values) { return Make(k.x, k.dtype, o.layout, values); };
  const Tensor no_ws;
  BnRun r;
  {
    const std::vector<Tensor> in{act(v.x), Param(v.gamma), Param(v.beta), Param(v.moving_mean), Param(v.moving_var)};
    const std::vector<Tensor> out{o.in_place ? in[0] : act(v.y0), Param(v.ch0), Param(v.ch0)};
    const std::vector<OpReq> req(3, o.req);
    const Node& n = g.node(b.fwd);
    n.op->cpu_kernel()(KernelCtx{n, in, out, req, no_ws, o.is_train, /*is_recompute=*/false, 1, 7, 0});
    r.y = Read(out[0]);
    r.mean = Read(out[1]);
    r.var = Read(out[2]);
    r.moving_mean = Read(in[3]);
    r.moving_var = Read(in[4]);
  }
  {
    // dy, x, gamma, beta and the saved statistics (not the forward's: with
    // req add those are the prefill plus the statistics)
    const std::vector<Tensor> in{act(v.dy),           act(v.x),          Param(v.gamma), Param(v.beta),
                                 Param(v.saved_mean), Param(v.saved_var)};
    const std::vector<Tensor> out{o.in_place ? in[0] : act(v.dx0), Param(v.ch0), Param(v.ch0), Param(v.ch0),
                                  Param(v.ch0)};
    const std::vector<OpReq> req(5, o.req);
    const Node& n = g.node(b.bwd);
    n.op->cpu_kernel()(KernelCtx{n, in, out, req, no_ws, true, false, 1, 7, 0});
    r.dx = Read(out[0]);
    r.dgamma = Read(out[1]);
    r.dbeta = Read(out[2]);
    r.dmoving_mean = Read(out[3]);
    r.dmoving_var = Read(out[4]);
  }
  return r;
}

void ExpectSameRun(const BnRun& got, const BnRun& want, const std::string& what) {
  ExpectSameBits(got.y, want.y, what + " y");
  ExpectSameBits(got.mean, want.mean, what + " mean");
  ExpectSameBits(got.var, want.var, what + " var");
  ExpectSameBits(got.moving_mean, want.moving_mean, what + " moving_mean");
  ExpectSameBits(got.moving_var, want.moving_var, what + " moving_var");
  ExpectSameBits(got.dx, want.dx, what + " dx");
  ExpectSameBits(got.dgamma, want.dgamma, what + " dgamma");
  ExpectSameBits(got.dbeta, want.dbeta, what + " dbeta");
  ExpectSameBits(got.dmoving_mean, want.dmoving_mean, what + " dmoving_mean");
  ExpectSameBits(got.dmoving_var, want.dmoving_var, what + " dmoving_var");
}

// Odd channel counts and rows per sample (vector tails), one channel, 90
// and 72 rows per sample (the column sums' passes of 64 rows and their
// tails), 70 channels (past the sums' flat rows) and 300 (several 64-
// channel blocks, and two of the op's 256-channel sum tasks).
const std::vector<Shape> kShapes{{2, 16, 5, 3},  {3, 32, 4, 4}, {4, 5, 3, 7},  {2, 1, 3, 3},
                                 {2, 16, 9, 10}, {3, 70, 8, 9}, {2, 300, 3, 5}};

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const Shape& s : kShapes) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      for (bool relu : {false, true}) {
        for (bool global : {false, true}) {
          for (bool fix_gamma : {false, true}) cases.push_back({s, dtype, relu, global, fix_gamma});
        }
      }
    }
  }
  return cases;
}

TEST(BatchNormNhwc, ForwardAndGradientGiveThePlainLayoutsBits) {
  int checked = 0;
  for (const Case& k : AllCases()) {
    const BnGraph b = Build(k);
    const Inputs v = MakeInputs(k);
    for (bool is_train : {true, false}) {
      RunOptions o;
      o.is_train = is_train;
      const BnRun plain = RunBoth(b, k, v, o);
      o.layout = Layout::kNhwc;
      const BnRun nhwc = RunBoth(b, k, v, o);
      ExpectSameRun(nhwc, plain, k.Name() + (is_train ? " training" : " inference"));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * static_cast<int>(AllCases().size()));
}

// With req add, every output (y and dx in nhwc) gets the result added to
// what it held: the plain layout's bits, and for float32 exactly the
// written result plus the prefill.
TEST(BatchNormNhwc, ReqAddAddsToWhatTheOutputsHeld) {
  for (const Case& k : AllCases()) {
    const BnGraph b = Build(k);
    const Inputs v = MakeInputs(k);
    RunOptions o;
    o.req = OpReq::kAdd;
    const BnRun plain = RunBoth(b, k, v, o);
    o.layout = Layout::kNhwc;
    const BnRun nhwc = RunBoth(b, k, v, o);
    ExpectSameRun(nhwc, plain, k.Name() + " req add");
    if (k.dtype != DType::kFloat32) continue;
    o.req = OpReq::kWrite;
    const BnRun write = RunBoth(b, k, v, o);
    std::vector<float> want_y = v.y0, want_dx = v.dx0;
    for (size_t i = 0; i < want_y.size(); ++i) {
      want_y[i] += write.y[i];
      want_dx[i] += write.dx[i];
    }
    ExpectSameBits(nhwc.y, want_y, k.Name() + " req add y");
    ExpectSameBits(nhwc.dx, want_dx, k.Name() + " req add dx");
  }
}

// y written over x, dx over dy: the bits of the out-of-place run.
TEST(BatchNormNhwc, InPlaceGivesTheBitsOfOutOfPlace) {
  for (const Case& k : AllCases()) {
    const BnGraph b = Build(k);
    const Inputs v = MakeInputs(k);
    RunOptions o;
    o.layout = Layout::kNhwc;
    const BnRun apart = RunBoth(b, k, v, o);
    o.in_place = true;
    const BnRun in_place = RunBoth(b, k, v, o);
    ExpectSameRun(in_place, apart, k.Name() + " in place");
  }
}

// The forward run once by hand, nhwc, y written (the statistics' outputs
// not requested): y, and the statistics inputs 3 and 4 afterwards.
struct Forward {
  std::vector<float> y, in3, in4;
};
Forward RunForward(const BnGraph& b, const Case& k, const Inputs& v, const std::vector<float>& in3,
                   const std::vector<float>& in4, bool is_train, bool is_recompute) {
  const std::vector<Tensor> in{Make(k.x, k.dtype, Layout::kNhwc, v.x), Param(v.gamma), Param(v.beta), Param(in3),
                               Param(in4)};
  const std::vector<Tensor> out{Make(k.x, k.dtype, Layout::kNhwc, v.y0), Tensor(), Tensor()};
  const std::vector<OpReq> req{OpReq::kWrite, OpReq::kNull, OpReq::kNull};
  const Node& n = b.og.g.node(b.fwd);
  const Tensor no_ws;
  n.op->cpu_kernel()(KernelCtx{n, in, out, req, no_ws, is_train, is_recompute, 1, 7, 0});
  return {Read(out[0]), Read(in[3]), Read(in[4])};
}

// A recomputed forward (is_recompute, a mirror) reads the original's saved
// statistics in place of the moving ones (inputs 3 and 4): the original's
// y, bit for bit, and the statistics it was handed are left alone. Handed
// other statistics, it applies those, as inference applies the moving ones
// (it computes none of its own).
TEST(BatchNormNhwc, ARecomputedRunGivesTheOriginalsBits) {
  for (const Case& k : AllCases()) {
    if (k.global) continue;  // the same path either way
    const BnGraph b = Build(k);
    const Inputs v = MakeInputs(k);
    RunOptions o;
    o.layout = Layout::kNhwc;
    const BnRun original = RunBoth(b, k, v, o);
    const Forward again = RunForward(b, k, v, original.mean, original.var, true, /*is_recompute=*/true);
    ExpectSameBits(again.y, original.y, k.Name() + " recomputed y");
    ExpectSameBits(again.in3, original.mean, k.Name() + " saved mean, after the recomputation");
    ExpectSameBits(again.in4, original.var, k.Name() + " saved var, after the recomputation");
    std::vector<float> other_mean = original.mean, other_var = original.var;
    for (float& m : other_mean) m += 0.25f;
    for (float& s : other_var) s *= 1.5f;
    const Forward handed = RunForward(b, k, v, other_mean, other_var, true, /*is_recompute=*/true);
    const Forward inference = RunForward(b, k, v, other_mean, other_var, /*is_train=*/false, false);
    ExpectSameBits(handed.y, inference.y, k.Name() + " recomputed y from other statistics");
    ExpectSameBits(handed.in3, other_mean, k.Name() + " other mean, after the recomputation");
    ExpectSameBits(handed.in4, other_var, k.Name() + " other var, after the recomputation");
  }
}

// Shapes large enough for the kernels' parallel loops (over kParallelGrain
// elements): one thread and two give the same bits, in both layouts.
TEST(BatchNormNhwc, TheThreadCountDoesNotChangeTheBits) {
  int compared = 0;
  for (const Shape& s : {Shape{5, 40, 12, 14}, Shape{3, 300, 6, 7}, Shape{2, 8, 48, 45}}) {
    ASSERT_GT(s.Size(), 32768);
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      for (bool relu : {false, true}) {
        const Case k{s, dtype, relu, false, false};
        const BnGraph b = Build(k);
        const Inputs v = MakeInputs(k);
        for (Layout layout : {Layout::kPlain, Layout::kNhwc}) {
          RunOptions o;
          o.layout = layout;
          cpu::SetKernelThreads(1);
          const BnRun one = RunBoth(b, k, v, o);
          cpu::SetKernelThreads(2);
          const BnRun two = RunBoth(b, k, v, o);
          cpu::SetKernelThreads(cpu::NumCores());
          ExpectSameRun(two, one, k.Name() + " " + LayoutName(layout) + ", 2 threads against 1");
          ++compared;
        }
        // And the layouts agree on these shapes too.
        RunOptions o;
        const BnRun plain = RunBoth(b, k, v, o);
        o.layout = Layout::kNhwc;
        ExpectSameRun(RunBoth(b, k, v, o), plain, k.Name() + " nhwc against plain");
      }
    }
  }
  EXPECT_EQ(compared, 24);
}

// The kernels check that the tied activations share one layout.
TEST(BatchNormNhwc, MixedLayoutsAreRefused) {
  const Case k{Shape{2, 4, 3, 3}, DType::kFloat32, false, false, false};
  const BnGraph b = Build(k);
  const Inputs v = MakeInputs(k);
  const std::vector<Tensor> in{Make(k.x, k.dtype, Layout::kNhwc, v.x), Param(v.gamma), Param(v.beta),
                               Param(v.moving_mean), Param(v.moving_var)};
  const std::vector<Tensor> out{Make(k.x, k.dtype, Layout::kPlain, v.y0), Tensor(), Tensor()};
  const std::vector<OpReq> req{OpReq::kWrite, OpReq::kNull, OpReq::kNull};
  const Node& n = b.og.g.node(b.fwd);
  const Tensor no_ws;
  EXPECT_THROW(n.op->cpu_kernel()(KernelCtx{n, in, out, req, no_ws, true, false, 1, 7, 0}), Error);
}

}  // namespace
}  // namespace frugal::test
