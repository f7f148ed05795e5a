// linear_cross_entropy: the fused head against the unfused composition
// written out (logits, softmax, -log p[label], the label's rank, and the
// gradients its forward computes), its gradients by finite differences over
// one chunk and several; every memory
// strategy trains it to the bits of none; its arena never holds the logits;
// the metrics read its losses and ranks; bad shapes and labels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "frugal/metrics.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/shapes.h"
#include "frugal/passes/training_plan.h"
#include "ops/op_harness.h"
#include "ops/op_test_util.h"
#include "test_util.h"
#include "train/train_steps.h"

namespace frugal::test {
namespace {

struct LceCase {
  int64_t n, k, v;
  int64_t chunk = 0;
  std::string normalization = "batch";
  double grad_scale = 1;
};

// Per row the loss and the label's rank (score), and the gradients the
// forward computes for the backward (dx, dW, db), in double.
Values Reference(const LceCase& a, const Values& in) {
  Values out{std::vector<float>(2 * a.n), std::vector<float>(a.n * a.k), std::vector<float>(a.v * a.k),
             std::vector<float>(a.v)};
  const double scale = a.grad_scale / (a.normalization == "batch" ? a.n : 1);
  std::vector<double> z(a.v), dx(a.n * a.k, 0), dw(a.v * a.k, 0), db(a.v, 0);
  for (int64_t i = 0; i < a.n; ++i) {
    double top = -INFINITY;
    for (int64_t j = 0; j < a.v; ++j) {
      z[j] = in[3][j];
      for (int64_t x = 0; x < a.k; ++x) z[j] += static_cast<double>(in[0][i * a.k + x]) * in[2][j * a.k + x];
      top = std::max(top, z[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < a.v; ++j) sum += std::exp(z[j] - top);
    const int64_t t = static_cast<int64_t>(in[1][i]);
    int rank = 0;
    for (int64_t j = 0; j < a.v; ++j) rank += z[j] > z[t] || (z[j] == z[t] && j < t);
    out[0][2 * i] = static_cast<float>(top + std::log(sum) - z[t]);
    out[0][2 * i + 1] = static_cast<float>(rank);
    for (int64_t j = 0; j < a.v; ++j) {
      const double g = (std::exp(z[j] - top) / sum - (j == t)) * scale;
      db[j] += g;
      for (int64_t x = 0; x < a.k; ++x) {
        dx[i * a.k + x] += g * in[2][j * a.k + x];
        dw[j * a.k + x] += g * in[0][i * a.k + x];
      }
    }
  }
  for (size_t e = 0; e < dx.size(); ++e) out[1][e] = static_cast<float>(dx[e]);
  for (size_t e = 0; e < dw.size(); ++e) out[2][e] = static_cast<float>(dw[e]);
  for (size_t e = 0; e < db.size(); ++e) out[3][e] = static_cast<float>(db[e]);
  return out;
}

OpCase Case(const LceCase& a) {
  OpCase c;
  c.op = "linear_cross_entropy";
  c.attrs = {{"num_hidden", std::to_string(a.v)},
             {"chunk", std::to_string(a.chunk)},
             {"normalization", a.normalization},
             {"grad_scale", std::to_string(a.grad_scale)}};
  c.in_shapes = {Shape{a.n, a.k}, Shape{a.n}, Shape{a.v, a.k}, Shape{a.v}};
  c.differentiable = {true, false, true, true};
  c.fill = [a](int k, std::vector<float>* v) {
    for (size_t i = 0; i < v->size(); ++i) {
      if (k == 1)
        (*v)[i] = static_cast<float>((7 * i + 3) % a.v);
      else
        (*v)[i] = std::sin(1.7f * i + k);
    }
  };
  c.reference = [a](const Values& in) { return Reference(a, in); };
  c.loss = [a](const Values&, const Values& out) {
    double l = 0;
    for (int64_t i = 0; i < a.n; ++i) l += out[0][2 * i];
    return l * a.grad_scale / (a.normalization == "batch" ? a.n : 1);
  };
  c.fd_eps = 1e-3;
  c.fd_tol = 2e-3;
  return c;
}

TEST(OpsLinearCrossEntropy, MatchesTheUnfusedCompositionAndItsGradients) {
  const std::vector<std::pair<std::string, LceCase>> cases = {
      {"one chunk", {7, 5, 6}},
      {"chunks of 3, the last of 1", {7, 5, 6, 3}},
      {"a row a chunk, null normalization, grad_scale", {4, 3, 11, 1, "null", 0.5}},
  };
  for (const auto& [name, a] : cases) {
    SCOPED_TRACE(name);
    ExpectCovered(CheckOp(Case(a)));
  }
}

// Equal logits: the label ranks behind the lower classes that tie with it,
// as accuracy ranks probabilities.
TEST(OpsLinearCrossEntropy, TiesRankTheLowerClassFirst) {
  OpCase c = Case({3, 2, 4});
  c.fill = [](int k, std::vector<float>* v) {
    if (k == 1)
      *v = {0, 2, 3};
    else
      std::fill(v->begin(), v->end(), k == 0 ? 1.f : 0.f);  // every logit 0
  };
  Values vals(4);
  for (int k = 0; k < 4; ++k) {
    vals[k].resize(c.in_shapes[k].Size());
    c.fill(k, &vals[k]);
  }
  const Values ref = Reference({3, 2, 4}, vals);
  EXPECT_EQ(ref[0][1], 0);
  EXPECT_EQ(ref[0][3], 2);
  EXPECT_EQ(ref[0][5], 3);
  ExpectCovered(CheckOp(c));
}

// A classifier over 12 classes behind two layers: every memory strategy
// trains it to the bits of none, with the head in chunks of 5 rows.
ConfigFile HeadNet(int64_t chunk) {
  const std::string text =
      "version: 1\n"
      "node { name: \"fc1\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: \"16\" } }\n"
      "node { name: \"act\" op: \"gelu\" input: \"fc1\" }\n"
      "node { name: \"fc2\" op: \"fully_connected\" input: \"act\" attr { key: \"num_hidden\" value: \"8\" } }\n"
      "node { name: \"head\" op: \"linear_cross_entropy\" input: \"fc2\" input: \"label\""
      " attr { key: \"num_hidden\" value: \"12\" } attr { key: \"chunk\" value: \"" +
      std::to_string(chunk) +
      "\" } }\n"
      "data { batch_size: 11 sample_shape: [6] }\nsolver { lr: 0.1 momentum: 0.9 seed: 3 }\n";
  return ParseConfig(text, "head.prototxt", {});
}

TEST(OpsLinearCrossEntropy, EveryStrategyTrainsToTheBitsOfNone) {
  const ConfigFile cfg = HeadNet(5);
  const auto reference = TrainSteps(cfg, MemoryStrategy::kNone, 3);
  for (const MemoryStrategy& s : AllMemoryStrategies()) EXPECT_EQ(TrainSteps(cfg, s, 3), reference) << s.Name();
  // One chunk computes the same losses up to rounding (the weight gradient
  // sums its chunks in another order).
  const auto whole = TrainSteps(HeadNet(0), MemoryStrategy::kNone, 3);
  ASSERT_EQ(whole.size(), reference.size());
  for (size_t t = 0; t < whole.size(); ++t) {
    ASSERT_EQ(whole[t].size(), reference[t].size());
    for (size_t i = 0; i < whole[t].size(); ++i) EXPECT_NEAR(whole[t][i], reference[t][i], 1e-5) << t << " " << i;
  }
}

// The training arena of a head over 4,096 rows and 8,192 classes in chunks
// of 256 rows: far below the logits alone (128 MiB), which the unfused head
// (fully_connected, softmax_cross_entropy) keeps and differentiates.
int64_t HeadArena(bool fused) {
  Graph g;
  Entry x{g.AddVariable("x", VarKind::kInput), 0};
  Entry w{g.AddVariable("w", VarKind::kParam), 0};
  Entry label{g.AddVariable("label", VarKind::kInput), 0};
  Entry h{g.AddOp("mul", "h", {}, {x, w}), 0};
  Entry head_w{g.AddVariable("head_w", VarKind::kParam), 0};
  Entry head_b{g.AddVariable("head_b", VarKind::kParam), 0};
  if (fused) {
    const AttrMap attrs{{"num_hidden", "8192"}, {"chunk", "256"}};
    g.outputs = {{g.AddOp("linear_cross_entropy", "head", attrs, {h, label, head_w, head_b}), 0}};
  } else {
    Entry z{g.AddOp("fully_connected", "logits", {{"num_hidden", "8192"}}, {h, head_w, head_b}), 0};
    g.outputs = {{g.AddOp("softmax_cross_entropy", "prob", {}, {z, label}), 0}};
  }
  const Shape s{4096, 64};
  const std::vector<std::pair<std::string, Shape>> shapes = {
      {"x", s}, {"w", s}, {"label", Shape{4096}}, {"head_w", Shape{8192, 64}}, {"head_b", Shape{8192}}};
  return PlanTraining(g, shapes, MemoryStrategy::kShare).plan.arena_bytes;
}

TEST(OpsLinearCrossEntropy, TheArenaNeverHoldsTheLogits) {
  const int64_t logits = int64_t{4096} * 8192 * sizeof(float);
  const int64_t fused = HeadArena(true), unfused = HeadArena(false);
  EXPECT_GE(unfused, logits);
  EXPECT_LT(fused, logits / 8) << "fused " << fused << ", unfused " << unfused;
}

Tensor Host(const Shape& s, const std::vector<float>& v) {
  Tensor t = Tensor::Empty(s);
  std::copy(v.begin(), v.end(), t.f());
  return t;
}

TEST(Metrics, LossAndRankOutputsAreReadAsSuch) {
  // Rows (loss, rank); the labels only count the rows (two samples of two positions).
  Tensor score = Host(Shape{4, 2}, {0.1f, 0, 2.f, 3, 40.f, 1, 0.5f, 0});
  Tensor labels = Host(Shape{2, 2}, {0, 0, 0, 0});
  MetricSet set({"accuracy", "top_k_accuracy_2", "cross_entropy", "perplexity"});
  set.Update(Prediction(score, OutputKind::kLossAndRank), labels, 2);
  EXPECT_EQ(set.count(), 4);
  EXPECT_DOUBLE_EQ(set.Get("accuracy"), 2.0 / 4);
  EXPECT_DOUBLE_EQ(set.Get("top_k_accuracy_2"), 3.0 / 4);
  const double ce = (0.1f + 2.f - std::log(1e-12f) + 0.5f) / 4;  // 40 counts as p = 1e-12, as in probabilities
  EXPECT_NEAR(set.Get("cross_entropy"), ce, 1e-5);
  EXPECT_NEAR(set.Get("perplexity"), std::exp(ce), 1e-3);
  ExpectError([&] { MakeMetric("mse")->Update(Prediction(score, OutputKind::kLossAndRank), labels, 2); },
              {"metric mse", "loss and rank"});
}

TEST(OpsLinearCrossEntropy, BadInputIsAOneLineErrorNamingTheNode) {
  auto shapes = [](std::vector<Shape> in) {
    Graph g;
    std::vector<Entry> e;
    for (size_t i = 0; i < in.size(); ++i) e.push_back({g.AddVariable(Fmt("x", i), VarKind::kInput), 0});
    g.outputs = {{g.AddOp("linear_cross_entropy", "head", {{"num_hidden", "5"}}, e), 0}};
    std::vector<std::pair<std::string, Shape>> named;
    for (size_t i = 0; i < in.size(); ++i) named.push_back({Fmt("x", i), in[i]});
    InferShapes(&g, named);
  };
  ExpectError(
      [&] {
        shapes({Shape{2, 3, 4}, Shape{2}, Shape{5, 4}, Shape{5}});
      },
      {"'head'", "x must be (rows, features), got (2,3,4)"});
  ExpectError(
      [&] {
        shapes({Shape{6, 4}, Shape{2, 3}, Shape{5, 4}, Shape{5}});
      },
      {"'head'", "label has shape (2,3) but x (6,4) needs (6)"});
  ExpectError(
      [&] {
        shapes({Shape{6, 4}, Shape{6}, Shape{5, 3}, Shape{5}});
      },
      {"'head'", "weight has shape (5,3) but x (6,4) needs (5,4)"});
  // A label that is not a class index: the node, the row and the value.
  OpCase c = Case({3, 2, 4});
  c.fill = [](int k, std::vector<float>* v) {
    if (k == 1)
      *v = {0, 4, 1};
    else
      std::fill(v->begin(), v->end(), 0.5f);
  };
  ExpectError([&] { CheckOp(c); },
              {"node 'op' (linear_cross_entropy)", "label 4 of row 1", "not a class index in [0, 4)"});
}

}  // namespace
}  // namespace frugal::test
