// Optimizers against closed-form values for constant gradients, on a
// quadratic, with multipliers; gradient accumulation and global-norm
// clipping. Every update runs through its op (src/ops/optimizer_update.cc,
// grad_combine.cc) in a one-node graph on an executor.
#include <gtest/gtest.h>

#include <cmath>

#include "frugal/optimizer.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/shapes.h"
#include "train/train_steps.h"

namespace frugal {
namespace {

const std::vector<float> kW0 = {1.0f, -0.5f, 2.0f};
const std::vector<float> kG = {0.5f, -2.0f, 0.25f};

Tensor FromVector(const std::vector<float>& v) {
  Tensor t = Tensor::Empty(Shape{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.f()[i] = v[i];
  return t;
}

// w after `steps` updates with the constant gradient g (lr fixed).
Tensor RunConstant(const OptimizerOptions& o, float lr, int steps, const std::vector<float>& w0 = kW0,
                   const std::vector<float>& g0 = kG, ParamMult mult = {}) {
  auto opt = MakeOptimizer(o);
  Tensor w = FromVector(w0), g = FromVector(g0);
  OptState s = opt->CreateState(w);
  for (int t = 1; t <= steps; ++t) test::Update(*opt, &w, g, &s, lr, t, mult);
  return w;
}

OptimizerOptions Opts(OptimizerKind k) {
  OptimizerOptions o;
  o.kind = k;
  return o;
}

constexpr double kLr = 0.01;

TEST(Optimizer, SgdMomentumClosedForm) {
  // m_t = -lr g (1 - mu^t) / (1 - mu);  w_t = w0 - lr g / (1 - mu) * (t - mu (1 - mu^t) / (1 - mu))
  const double mu = 0.9;
  for (int t : {1, 2, 5}) {
    Tensor w = RunConstant(Opts(OptimizerKind::kSgd), kLr, t);
    for (int i = 0; i < 3; ++i) {
      double want = kW0[i] - kLr * kG[i] / (1 - mu) * (t - mu * (1 - std::pow(mu, t)) / (1 - mu));
      EXPECT_NEAR(w.f()[i], want, 1e-6) << "t=" << t << " i=" << i;
    }
  }
}

TEST(Optimizer, SgdWeightDecayClosedForm) {
  // g = 0, momentum 0:  w_t = w0 (1 - lr wd)^t
  OptimizerOptions o = Opts(OptimizerKind::kSgd);
  o.momentum = 0;
  o.weight_decay = 0.5f;
  Tensor w = RunConstant(o, 0.1f, 4, kW0, {0, 0, 0});
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(w.f()[i], kW0[i] * std::pow(1 - 0.1 * 0.5, 4), 1e-6);
}

TEST(Optimizer, NesterovClosedForm) {
  // buf_k = g (1 - mu^k) / (1 - mu);  w_t = w0 - lr g sum_k (1 + mu (1 - mu^k) / (1 - mu))
  const double mu = 0.9;
  for (int t : {1, 3}) {
    Tensor w = RunConstant(Opts(OptimizerKind::kNesterov), kLr, t);
    double sum = 0;
    for (int k = 1; k <= t; ++k) sum += 1 + mu * (1 - std::pow(mu, k)) / (1 - mu);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(w.f()[i], kW0[i] - kLr * kG[i] * sum, 1e-6) << "t=" << t;
  }
}

TEST(Optimizer, AdamBiasCorrectionGivesSignSteps) {
  // With bias correction, m_hat = g and v_hat = g^2 for a constant g, so each
  // step moves lr * g / (|g| + eps). (Without it the first step would be
  // about 3.2 lr.)
  for (int t : {1, 2, 5}) {
    Tensor w = RunConstant(Opts(OptimizerKind::kAdam), kLr, t);
    for (int i = 0; i < 3; ++i)
      EXPECT_NEAR(w.f()[i], kW0[i] - t * kLr * kG[i] / (std::abs(kG[i]) + 1e-8), 1e-6) << "t=" << t;
  }
}

TEST(Optimizer, AdamWeightDecayIsCoupled) {
  // g = 0: d = wd * w, so the first step is lr * sign(w) whatever wd.
  OptimizerOptions o = Opts(OptimizerKind::kAdam);
  o.weight_decay = 0.01f;
  Tensor w = RunConstant(o, kLr, 1, kW0, {0, 0, 0});
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(w.f()[i], kW0[i] - kLr * (kW0[i] > 0 ? 1 : -1), 1e-6);
}

TEST(Optimizer, AdamWDecayIsDecoupled) {
  // w_t = a w_{t-1} - c with a = 1 - lr wd, c = lr g / (|g| + eps):
  // w_t = a^t w0 - c (1 - a^t) / (1 - a)
  OptimizerOptions o = Opts(OptimizerKind::kAdamW);
  o.weight_decay = 0.5f;
  const double lr = 0.1, a = 1 - lr * 0.5;
  for (int t : {1, 4}) {
    Tensor w = RunConstant(o, lr, t);
    for (int i = 0; i < 3; ++i) {
      double c = lr * kG[i] / (std::abs(kG[i]) + 1e-8);
      EXPECT_NEAR(w.f()[i], std::pow(a, t) * kW0[i] - c * (1 - std::pow(a, t)) / (1 - a), 1e-6) << "t=" << t;
    }
  }
  // g = 0: pure shrinking, w_t = w0 a^t (adam with L2 would move by ~lr per step).
  Tensor w = RunConstant(o, lr, 3, kW0, {0, 0, 0});
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(w.f()[i], kW0[i] * std::pow(a, 3), 1e-6);
}

TEST(Optimizer, RmsPropClosedForm) {
  // v_k = g^2 (1 - rho^k);  w_t = w0 - sum_k lr g / (|g| sqrt(1 - rho^k) + eps)
  const double rho = 0.9, eps = 1e-8;
  for (int t : {1, 3}) {
    Tensor w = RunConstant(Opts(OptimizerKind::kRmsProp), kLr, t);
    for (int i = 0; i < 3; ++i) {
      double want = kW0[i];
      for (int k = 1; k <= t; ++k) want -= kLr * kG[i] / (std::abs(kG[i]) * std::sqrt(1 - std::pow(rho, k)) + eps);
      EXPECT_NEAR(w.f()[i], want, 1e-5) << "t=" << t;
    }
  }
}

TEST(Optimizer, RmsPropCenteredClosedForm) {
  // mg_k = g (1 - rho^k);  v_k - mg_k^2 = g^2 rho^k (1 - rho^k)
  OptimizerOptions o = Opts(OptimizerKind::kRmsProp);
  o.centered = true;
  o.eps = 1e-4f;
  const double rho = 0.9;
  Tensor w = RunConstant(o, kLr, 3);
  for (int i = 0; i < 3; ++i) {
    double want = kW0[i];
    for (int k = 1; k <= 3; ++k)
      want -= kLr * kG[i] / (std::abs(kG[i]) * std::sqrt(std::pow(rho, k) * (1 - std::pow(rho, k))) + 1e-4);
    EXPECT_NEAR(w.f()[i], want, 1e-5);
  }
  EXPECT_EQ(MakeOptimizer(o)->StateNames(), (std::vector<std::string>{"mean_square", "mean_grad"}));
}

TEST(Optimizer, LrAndWdMultipliers) {
  OptimizerOptions o = Opts(OptimizerKind::kSgd);
  o.momentum = 0;
  o.weight_decay = 0.5f;
  // lr_mult 2, wd_mult 0: w1 = w0 - 2 lr g.
  Tensor w = RunConstant(o, kLr, 1, kW0, kG, {2.f, 0.f});
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(w.f()[i], kW0[i] - 2 * kLr * kG[i], 1e-7);
  // lr_mult 0 freezes the parameter.
  w = RunConstant(o, kLr, 3, kW0, kG, {0.f, 1.f});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(w.f()[i], kW0[i]);
}

TEST(Optimizer, ParallelLoopMatchesSerial) {
  // Above the OpenMP threshold each element is still updated alone: bits equal.
  const int64_t n = 100000;
  std::vector<float> w0(n), g0(n);
  for (int64_t i = 0; i < n; ++i) {
    w0[i] = kW0[i % 3];
    g0[i] = kG[i % 3];
  }
  for (OptimizerKind k : {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kRmsProp}) {
    Tensor big = RunConstant(Opts(k), kLr, 3, w0, g0), small = RunConstant(Opts(k), kLr, 3);
    for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{2}, n - 1}) EXPECT_EQ(big.f()[i], small.f()[i % 3]);
  }
}

TEST(Optimizer, EachReducesAQuadratic) {
  // f(w) = 1/2 sum a_i (w_i - c_i)^2, g = a (w - c), from w = 0.
  const std::vector<float> a = {1.f, 4.f, 0.5f}, c = {1.f, -2.f, 3.f};
  auto f = [&](const Tensor& w) {
    double s = 0;
    for (int i = 0; i < 3; ++i) s += 0.5 * a[i] * (w.f()[i] - c[i]) * (w.f()[i] - c[i]);
    return s;
  };
  struct Case {
    OptimizerKind kind;
    float lr;
  };
  for (Case k :
       {Case{OptimizerKind::kSgd, 0.05f}, Case{OptimizerKind::kNesterov, 0.05f}, Case{OptimizerKind::kAdam, 0.05f},
        Case{OptimizerKind::kAdamW, 0.05f}, Case{OptimizerKind::kRmsProp, 0.01f}}) {
    auto opt = MakeOptimizer(Opts(k.kind));
    Tensor w = FromVector({0, 0, 0}), g = FromVector({0, 0, 0});
    OptState s = opt->CreateState(w);
    const double f0 = f(w);
    for (int t = 1; t <= 500; ++t) {
      for (int i = 0; i < 3; ++i) g.f()[i] = a[i] * (w.f()[i] - c[i]);
      test::Update(*opt, &w, g, &s, k.lr, t);
    }
    EXPECT_LT(f(w), 1e-3 * f0) << opt->name() << ": f went from " << f0 << " to " << f(w);
  }
}

TEST(Optimizer, ConfigChecksRanges) {
  config::Solver s;
  s.set_optimizer(config::Solver::ADAMW);
  s.set_beta2(0.99f);
  OptimizerOptions o = OptimizerOptionsFromConfig(s, "net.prototxt");
  EXPECT_EQ(o.kind, OptimizerKind::kAdamW);
  EXPECT_FLOAT_EQ(o.beta2, 0.99f);
  EXPECT_STREQ(MakeOptimizer(o)->name(), "adamw");
  s.set_beta1(1.f);
  try {
    OptimizerOptionsFromConfig(s, "net.prototxt");
    FAIL() << "beta1 = 1 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("net.prototxt: solver.beta1 must be in [0, 1), got 1"), std::string::npos)
        << e.what();
  }
}

TEST(Optimizer, NamedStatesForCheckpoints) {
  auto opt = MakeOptimizer(Opts(OptimizerKind::kAdam));
  std::map<std::string, OptState> states;
  states["fc_weight"] = opt->CreateState(FromVector({1, 2}));
  auto named = NamedStates(*opt, states);
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named.at("fc_weight/v").raw(), states["fc_weight"][1].raw());  // a view, not a copy
}

AttrMap Clip(int n, float rescale, float max_norm) {
  return {{"num_args", Fmt(n)}, {"rescale", ExactAttr(rescale)}, {"max_norm", ExactAttr(max_norm)}};
}

TEST(Gradients, RescaleAndClip) {
  Tensor a = FromVector({3, 4}), b = FromVector({12});  // global norm 13
  // Over the limit: every gradient scaled by max_norm / norm; the norm's
  // partial sums live in the node's workspace, which the plan gives it.
  EXPECT_GT(test::RunNode("rescale_clip", Clip(2, 1.f, 6.5f), {a, b}, 1), 0);
  EXPECT_FLOAT_EQ(a.f()[0], 1.5f);
  EXPECT_FLOAT_EQ(a.f()[1], 2.f);
  EXPECT_FLOAT_EQ(b.f()[0], 6.f);
  // Under the limit: unchanged. Rescaling alone (iter_size 2) needs no workspace.
  test::RunNode("rescale_clip", Clip(2, 1.f, 100.f), {a, b}, 1);
  EXPECT_FLOAT_EQ(a.f()[0], 1.5f);
  EXPECT_EQ(test::RunNode("rescale_clip", Clip(2, 0.5f, 0.f), {a, b}, 1), 0);
  EXPECT_FLOAT_EQ(b.f()[0], 3.f);
  // The norm is of the rescaled gradients: 0.5 * 6.5 = 3.25 < 4, unclipped.
  test::RunNode("rescale_clip", Clip(2, 0.5f, 4.f), {a, b}, 1);
  EXPECT_FLOAT_EQ(b.f()[0], 1.5f);
}

TEST(Gradients, AccumulateOverMicroBatches) {
  // iter_size 3: micro 0 copies, micro 1 adds, micro 2 leaves the total in
  // the gradient. The run step counts micro-batches (step % iter_size).
  Tensor sum = FromVector({7, 7}), g = FromVector({1, 2});
  const AttrMap three{{"iter_size", "3"}};
  test::RunNode("grad_accumulate", three, {sum, g}, 3);  // micro 0 of the second update
  EXPECT_FLOAT_EQ(sum.f()[0], 1.f);
  test::RunNode("grad_accumulate", three, {sum, g}, 4);
  EXPECT_FLOAT_EQ(sum.f()[1], 4.f);
  g.f()[0] = 10;
  test::RunNode("grad_accumulate", three, {sum, g}, 5);
  EXPECT_FLOAT_EQ(g.f()[0], 12.f);
  EXPECT_FLOAT_EQ(g.f()[1], 6.f);
  EXPECT_FLOAT_EQ(sum.f()[0], 2.f) << "the last micro-batch writes the gradient, not the sum";
}

TEST(Gradients, ClipNormOfALargeTensorIsExact) {
  // 300000 ones: norm sqrt(300000) over five chunks, in fixed order.
  Tensor t = Tensor::Empty(Shape{300000});
  t.Fill(1.f);
  test::RunNode("rescale_clip", Clip(1, 1.f, static_cast<float>(std::sqrt(300000.0) / 4)), {t}, 1);
  EXPECT_FLOAT_EQ(t.f()[0], 0.25f);
  EXPECT_FLOAT_EQ(t.f()[299999], 0.25f);
}

TEST(UpdateOps, UpdateNodesMutateWeightAndStateAndReadTheGradient) {
  // adam_update(weight, grad, m, v): the executor writes the variables of
  // weight, m and v and reads the gradient's.
  Optimizer opt(Opts(OptimizerKind::kAdam));
  Graph g;
  std::vector<Entry> in;
  for (const char* name : {"w", "g", "m", "v"}) {
    in.push_back({g.AddVariable(name, VarKind::kInput), 0});
    g.mutable_node(in.back().node).shape = Shape{3};
  }
  g.AddOp(opt.UpdateOp(), "update(w)", opt.UpdateAttrs({}), in);
  InferShapes(&g, {});
  const MemoryPlan plan = PlanMemory(g, MemoryStrategy::kShare);
  EXPECT_EQ(plan.arena_bytes, 0);
  Bindings b;
  auto engine = MakeEngine("naive");
  for (const char* name : {"w", "g", "m", "v"}) {
    b.vars[name] = Tensor::Empty(Shape{3});
    b.var_vars[name] = engine->NewVar();
  }
  Executor e(g, plan, b, engine.get());
  ASSERT_EQ(e.schedule().size(), 1u);
  EXPECT_EQ(e.schedule()[0].reads, std::vector<Var>{b.var_vars["g"]});
  EXPECT_EQ(e.schedule()[0].writes, (std::vector<Var>{b.var_vars["w"], b.var_vars["m"], b.var_vars["v"]}));
}

TEST(UpdateOps, AttributesKeepEveryBitOfTheSolver) {
  // A value with no short decimal form reaches the kernel unchanged: the
  // op's update equals the rule applied with the same floats.
  OptimizerOptions o = Opts(OptimizerKind::kSgd);
  o.momentum = 0.9f;
  o.weight_decay = 1.f / 3.f;
  Tensor w = FromVector(kW0), g = FromVector(kG);
  Optimizer opt(o);
  OptState s = opt.CreateState(w);
  test::Update(opt, &w, g, &s, 0.1f, 1, {0.7f, 1.f / 7.f});
  for (int i = 0; i < 3; ++i) {
    const float lr = 0.1f * 0.7f, wd = (1.f / 3.f) * (1.f / 7.f);
    const float m = 0.9f * 0.f - lr * (kG[i] + wd * kW0[i]);
    EXPECT_EQ(w.f()[i], kW0[i] + m) << i;
  }
}

TEST(UpdateOps, StepCountsFromOne) {
  Optimizer opt(Opts(OptimizerKind::kAdam));
  Tensor w = FromVector(kW0), g = FromVector(kG);
  OptState s = opt.CreateState(w);
  EXPECT_THROW(test::Update(opt, &w, g, &s, 0.1f, 0), Error);
}

}  // namespace
}  // namespace frugal
