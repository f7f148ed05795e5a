// Mixed precision (net dtype bfloat16): where the casts go, what types the
// training graph's entries get, that the plan's activation bytes halve, and
// that a step's gradients agree with float32's to bfloat16's precision.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "ops/cpu/dnnl.h"
#include "frugal/bf16.h"
#include "frugal/config.h"
#include "frugal/engine.h"
#include "frugal/executor.h"
#include "frugal/passes/gradient.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/rewrite.h"
#include "frugal/passes/shapes.h"
#include "frugal/train.h"
#include "ops/op_harness.h"
#include "test_util.h"
#include "train/train_steps.h"

namespace frugal {
namespace {

using test::ConvNet;

// The tests that run or plan oneDNN's bfloat16 primitives report themselves
// skipped, with the reason, on a CPU where oneDNN has none (AVX2 only).
// A CPU with avx512_bf16 has them: a skip there would hide a broken check.
#define SKIP_WITHOUT_BF16()                                                                                   \
  if (!cpu::HasBf16()) {                                                                                      \
    ASSERT_FALSE(test::CpuHasFlag("avx512_bf16")) << "the CPU has avx512_bf16, yet frugal finds no bfloat16 " \
                                                     "convolution in oneDNN (cpu::HasBf16)";                  \
    GTEST_SKIP() << "oneDNN has no bfloat16 convolution on this CPU (it needs AVX-512)";                      \
  }

bool IsParam(const Node& n, int k) {
  const auto& spec = n.op->inputs();
  return k < static_cast<int>(spec.size()) && spec[k].made_as != VarKind::kNone;
}

TEST(MixedPrecision, Float32LeavesTheGraphAlone) {
  const Graph a = BuildGraph(ConvNet("float32"));
  const Graph b = ToMixedPrecision(a, DType::kFloat32);
  EXPECT_EQ(a.num_nodes(), b.num_nodes());
  for (int i = 0; i < a.num_nodes(); ++i) EXPECT_EQ(a.node(i).name, b.node(i).name);
}

TEST(MixedPrecision, CastsOnlyWhereTypesCross) {
  SKIP_WITHOUT_BF16();
  const Model m = BuildModel(ConvNet("bf16"), MemoryStrategy::kShare);
  const Graph& g = m.train;
  std::set<std::pair<int, DType>> cast_of;  // (entry cast, to type): each at most once
  int casts = 0;
  for (int i = 0; i < g.num_forward(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) {
      EXPECT_EQ(g.dtype({i, 0}), DType::kFloat32) << n.name << ": variables stay float32";
      continue;
    }
    if (n.op->name() == "cast") {
      ++casts;
      EXPECT_NE(g.dtype(n.inputs[0]), g.dtype({i, 0})) << n.name << " casts to the type it already has";
      EXPECT_TRUE(cast_of.insert({g.EntryId(n.inputs[0]), g.dtype({i, 0})}).second) << n.name << ": a second cast";
      continue;
    }
    const bool follows = n.op->cost() == Cost::kFree;  // data movement: its input's type
    const DType want = !n.op->bf16() ? DType::kFloat32 : follows ? g.dtype(n.inputs[0]) : DType::kBFloat16;
    for (int k = 0; k < static_cast<int>(n.inputs.size()); ++k)
      EXPECT_EQ(g.dtype(n.inputs[k]), IsParam(n, k) ? DType::kFloat32 : want) << n.name << " input " << k;
    EXPECT_EQ(g.dtype({i, 0}), want) << n.name << " output 0";
    for (int k = n.op->NumVisibleOutputs(n.params); k < g.NumOutputs(i); ++k)
      EXPECT_EQ(g.dtype({i, k}), DType::kFloat32) << n.name << ": hidden output " << k << " stays float32";
  }
  EXPECT_GE(casts, 2);  // the data in, the fully connected layer's input at least
  EXPECT_EQ(g.dtype(g.node(g.FindNode("conv1")).inputs[0]), DType::kBFloat16);
  for (const Entry& e : g.outputs) EXPECT_EQ(g.dtype(e), DType::kFloat32) << "graph outputs are float32";
  // Gradients have the types of what they differentiate: parameters' float32.
  for (int p : m.params) {
    ASSERT_TRUE(g.grad_of[p].valid()) << g.node(p).name;
    EXPECT_EQ(g.dtype(g.grad_of[p]), DType::kFloat32) << g.node(p).name << "'s gradient";
  }
  const int conv2_grad = g.FindNode("conv2_backward");
  ASSERT_GE(conv2_grad, 0);
  EXPECT_EQ(g.dtype({conv2_grad, 0}), DType::kBFloat16) << "conv2's dx";
  EXPECT_EQ(g.dtype({conv2_grad, 1}), DType::kFloat32) << "conv2's dW";
}

// A config's own cast is left as written: its input is not cast first,
// and what follows it sees the type it casts to.
TEST(MixedPrecision, AConfigsOwnCastIsKept) {
  SKIP_WITHOUT_BF16();
  std::string text = R"cfg(version: 1
node { name: "conv1" op: "convolution" input: "data" attr { key: "kernel" value: "(3,3)" } attr { key: "num_filter" value: "4" } }
node { name: "to32" op: "cast" input: "conv1" attr { key: "dtype" value: "float32" } }
node { name: "relu1" op: "relu" input: "to32" }
node { name: "fc" op: "fully_connected" input: "relu1" attr { key: "num_hidden" value: "10" } }
node { name: "prob" op: "softmax_cross_entropy" input: "fc" input: "label" }
data { batch_size: 2 sample_shape: [3, 8, 8] }
dtype: "bfloat16"
)cfg";
  const Model m = BuildModel(ParseConfig(text, "own_cast.prototxt", {}), MemoryStrategy::kShare);
  const Graph& g = m.train;
  const Node& to32 = g.node(g.FindNode("to32"));
  EXPECT_EQ(to32.inputs[0].node, g.FindNode("conv1")) << "the cast reads the convolution itself";
  EXPECT_EQ(g.dtype({g.FindNode("conv1"), 0}), DType::kBFloat16);
  EXPECT_EQ(g.dtype({g.FindNode("to32"), 0}), DType::kFloat32);
  // relu runs in bfloat16 again: one cast back, reading to32.
  const Node& relu = g.node(g.FindNode("relu1"));
  EXPECT_EQ(g.dtype(relu.inputs[0]), DType::kBFloat16);
  EXPECT_EQ(g.node(relu.inputs[0].node).inputs[0].node, g.FindNode("to32"));
}

TEST(MixedPrecision, MixedTypesIntoOneOpAreAnErrorNamingTheNode) {
  Graph g;
  const int a = g.AddVariable("a", VarKind::kInput);
  const int b = g.AddVariable("b", VarKind::kInput);
  const int c = g.AddOp("cast", "a16", {{"dtype", "bf16"}}, {{a, 0}});
  g.AddOp("add_n", "sum", {{"num_args", "2"}}, {{c, 0}, {b, 0}});
  test::ExpectError(
      [&] {
        InferShapes(&g, {{"a", Shape{4}}, {"b", Shape{4}}});
      },
      {"'sum'", "input 1 is float32 but input 0 is bfloat16", "cast"});
  test::ExpectError(
      [&] {
        g.AddOp("cast", "bad", {{"dtype", "fp16"}}, {{a, 0}});
      },
      {"'bad'", "unknown dtype 'fp16'", "bfloat16"});
}

// x -> cast bf16 -> cast float32, run by the executor: the round trip
// rounds to nearest even (ties to even), keeps infinities and NaN.
TEST(MixedPrecision, CastRoundsToNearestEven) {
  Graph g;
  const int x = g.AddVariable("x", VarKind::kInput);
  const int h = g.AddOp("cast", "x16", {{"dtype", "bfloat16"}}, {{x, 0}});
  g.outputs.push_back({g.AddOp("cast", "x32", {{"dtype", "float32"}}, {{h, 0}}), 0});
  const float one_ulp = std::ldexp(1.f, -7);  // bfloat16's spacing at 1
  const std::vector<float> in{
      1.f, 1 + one_ulp / 2, 1 + 3 * one_ulp / 2, 1 + one_ulp * 0.51f, -2.5f, INFINITY, -INFINITY, NAN, 3.0e38f, 1e-40f};
  const std::vector<float> want{1.f,
                                1.f,
                                1 + 2 * one_ulp,
                                1 + one_ulp,
                                -2.5f,
                                INFINITY,
                                -INFINITY,
                                NAN,
                                Bf16ToFloat(FloatToBf16(3.0e38f)),
                                Bf16ToFloat(FloatToBf16(1e-40f))};
  InferShapes(&g, {{"x", Shape{static_cast<int64_t>(in.size())}}});
  EXPECT_EQ(g.dtype({h, 0}), DType::kBFloat16);
  const MemoryPlan plan = PlanMemory(g, MemoryStrategy::kShare);
  auto engine = MakeEngine("naive");
  Bindings b;
  b.vars["x"] = Tensor::Empty(g.shape({x, 0}));
  std::copy(in.begin(), in.end(), b.vars["x"].f());
  Executor exec(g, plan, b, engine.get());
  exec.Run(false, 0, 0);
  exec.WaitForOutputs();
  const float* y = exec.output(0).f();
  for (size_t i = 0; i < in.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(y[i])) << i;
    } else {
      EXPECT_EQ(y[i], want[i]) << "element " << i << ": " << in[i];
    }
  }
  EXPECT_TRUE(std::isfinite(y[8]));  // near float's largest: not rounded up to infinity
  EXPECT_NEAR(y[8], 3.0e38f, 3.0e38f / 256);
}

using test::RelErr;

// One op on p0 (and p1, p2, ...: all float32 parameters) through the
// executor with loss sum(y * c) for a fixed c, in float32 or with p0 cast to
// bfloat16 and y cast back; every value bfloat16-exact, so both runs see the
// same numbers. Returns y, then the gradient of each input.
std::vector<std::vector<float>> RunOp(const std::string& op, const AttrMap& attrs, const std::vector<Shape>& shapes,
                                      DType t) {
  Graph g;
  std::vector<Entry> in;
  std::vector<std::pair<std::string, Shape>> given;
  for (size_t k = 0; k < shapes.size(); ++k) {
    in.push_back({g.AddVariable(Fmt("p", k), VarKind::kParam), 0});
    given.push_back({Fmt("p", k), shapes[k]});
  }
  if (t == DType::kBFloat16) in[0] = {g.AddOp("cast", "x16", {{"dtype", "bf16"}}, {in[0]}), 0};
  Entry y{g.AddOp(op, "op", attrs, in), 0};
  if (t == DType::kBFloat16) y = {g.AddOp("cast", "y32", {{"dtype", "float32"}}, {y}), 0};
  InferShapes(&g, given);
  given.push_back({"c", g.shape(y)});
  const Entry c{g.AddVariable("c", VarKind::kInput), 0};
  g.outputs.push_back({g.AddOp("make_loss", "loss", {}, {{g.AddOp("mul", "yc", {}, {y, c}), 0}}), 0});
  g.outputs.push_back(y);
  InferShapes(&g, given);
  Gradient(&g);
  InferShapes(&g, given);
  const MemoryPlan plan = PlanMemory(g, MemoryStrategy::kShare);
  auto engine = MakeEngine("naive");
  Bindings b;
  auto values = [](const Shape& s, float phase) {
    Tensor v = Tensor::Empty(s);
    for (int64_t i = 0; i < v.size(); ++i) v.f()[i] = Bf16ToFloat(FloatToBf16(std::sin(0.37f * i + phase)));
    return v;
  };
  for (size_t k = 0; k < shapes.size(); ++k) {
    b.vars[Fmt("p", k)] = values(shapes[k], k);
    b.grads[Fmt("p", k)] = Tensor::Empty(shapes[k]);
  }
  b.vars["c"] = values(g.shape(y), 0.5f);
  Executor exec(g, plan, b, engine.get());
  exec.Run(true, 0, 0);
  std::vector<std::vector<float>> out{test::ToVector(exec.output(1))};
  for (size_t k = 0; k < shapes.size(); ++k) out.push_back(test::ToVector(b.grads[Fmt("p", k)]));
  return out;
}

TEST(MixedPrecision, OnednnOpsInBfloat16MatchFloat32) {
  SKIP_WITHOUT_BF16();
  const AttrMap conv{{"kernel", "(3,3)"}, {"pad", "(1,1)"}, {"num_filter", "16"}};
  struct Case {
    std::string op;
    AttrMap attrs;
    std::vector<Shape> shapes;
  };
  const std::vector<Case> cases{
      {"convolution", conv, {Shape{8, 3, 16, 16}, Shape{16, 3, 3, 3}, Shape{16}}},
      {"convolution", conv, {Shape{8, 16, 8, 8}, Shape{16, 16, 3, 3}, Shape{16}}},
      {"pooling", {{"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"pool_type", "max"}}, {Shape{8, 16, 8, 8}}},
      {"pooling", {{"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"pool_type", "avg"}}, {Shape{8, 16, 8, 8}}},
      {"fully_connected", {{"num_hidden", "10"}}, {Shape{8, 16, 4, 4}, Shape{10, 256}, Shape{10}}},
  };
  for (const Case& c : cases) {
    const auto f = RunOp(c.op, c.attrs, c.shapes, DType::kFloat32);
    const auto h = RunOp(c.op, c.attrs, c.shapes, DType::kBFloat16);
    ASSERT_EQ(f.size(), h.size());
    for (size_t k = 0; k < f.size(); ++k) {
      ASSERT_EQ(f[k].size(), h[k].size());
      // Products summed in float32 and rounded once: 2^-9 relative, plus
      // what the summation order moves.
      EXPECT_LT(RelErr(f[k], h[k]), 0.005)
          << c.op << " " << c.shapes[0] << (k == 0 ? ": y" : ": gradient ") << (k == 0 ? "" : std::to_string(k - 1));
    }
  }
}

TEST(MixedPrecision, PlanHalvesTheActivationBytes) {
  SKIP_WITHOUT_BF16();
  const Model f = BuildModel(ConvNet("float32"), MemoryStrategy::kShare);
  const Model h = BuildModel(ConvNet("bf16"), MemoryStrategy::kShare);
  EXPECT_LT(h.train_plan.arena_bytes, 0.6 * f.train_plan.arena_bytes)
      << "bf16 " << h.train_plan.arena_bytes << " B, float32 " << f.train_plan.arena_bytes << " B";
  EXPECT_EQ(h.train_plan.param_bytes, f.train_plan.param_bytes);
  EXPECT_EQ(h.train_plan.param_grad_bytes, f.train_plan.param_grad_bytes);
}

TEST(MixedPrecision, GradientsAgreeWithFloat32) {
  SKIP_WITHOUT_BF16();
  test::BoundModel f(ConvNet("float32"), MemoryStrategy::kShare);
  test::BoundModel h(ConvNet("bf16"), MemoryStrategy::kShare);
  for (test::BoundModel* m : {&f, &h}) {  // the same batch for both
    for (int64_t i = 0; i < m->data.size(); ++i) m->data.f()[i] = std::sin(0.37f * i);
    for (int64_t i = 0; i < m->label.size(); ++i) m->label.f()[i] = static_cast<float>(i * 7 % 10);
    m->Step(1);
    m->exec->WaitForOutputs();  // rethrows a kernel's error
  }
  ASSERT_EQ(f.grads.size(), h.grads.size());
  for (const auto& [name, g] : f.grads) {
    const Tensor& gh = h.grads.at(name);
    ASSERT_EQ(gh.dtype(), DType::kFloat32) << name;
    // bfloat16 keeps 8 significant bits (2^-9 relative per rounding); the
    // roundings of three layers, amplified where BatchNorm divides by a
    // small deviation, move this net's gradients by 2-7%. A kernel that
    // gets a layout or a type wrong moves them by 100% or more.
    EXPECT_LT(RelErr(test::ToVector(g), test::ToVector(gh)), 0.1) << name;
  }
  // The losses, and the moving statistics (updated once), agree too.
  EXPECT_LT(RelErr(test::ToVector(f.exec->output(0)), test::ToVector(h.exec->output(0))), 0.02) << "the predictions";
  const auto pf = f.Params(), ph = h.Params();
  ASSERT_EQ(pf.size(), ph.size());
  for (size_t k = 0; k < pf.size(); ++k) EXPECT_LT(RelErr(pf[k], ph[k]), 0.05) << "parameter " << k;
}

TEST(MixedPrecision, EveryStrategyGivesTheBitsOfNone) {
  SKIP_WITHOUT_BF16();
  // Recomputation in bfloat16 is exact like float32's: the same rounded values.
  const ConfigFile cfg = ConvNet("bf16");
  const auto none = test::TrainSteps(cfg, MemoryStrategy::kNone, 3);
  for (const MemoryStrategy& s : AllMemoryStrategies()) {
    if (s.kind == MemoryStrategy::kNone) continue;
    EXPECT_EQ(test::TrainSteps(cfg, s, 3), none) << s.Name();
  }
}

}  // namespace
}  // namespace frugal
