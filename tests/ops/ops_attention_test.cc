// attention: the fused kernel against the unfused composition written out
// (softmax(scale q k^T + causal mask), dropout, times v), its gradients by
// finite differences, across several blocks of queries and keys; dropout
// replayed exactly by every memory strategy; memory linear in T; bad shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "frugal/passes/memory_plan.h"
#include "frugal/passes/shapes.h"
#include "frugal/passes/training_plan.h"
#include "ops/cpu/philox.h"
#include "ops/op_harness.h"
#include "ops/op_test_util.h"
#include "test_util.h"
#include "train/train_steps.h"

namespace frugal::test {
namespace {

struct AttnCase {
  Shape q, k, v;
  bool causal = false;
  float dropout = 0;
  Shape mask;  // an additive mask (input 3) where known
  // Fills the mask (default: uniform in [-1, 1], the harness's).
  std::function<void(std::vector<float>*)> fill_mask;
};

// The unfused composition, element by element: y and lse for inputs q, k, v
// (and the mask, broadcast over the leading dims) with the harness's
// dropout stream (seed 7, step 0, node "op").
Values Reference(const AttnCase& a, const Values& in) {
  const int r = a.q.ndim();
  const int64_t slices = a.q.Prod(0, r - 2), tq = a.q[r - 2], tk = a.k[r - 2], d = a.q[r - 1], dv = a.v[r - 1];
  const bool masked = a.mask.known();
  // The mask's slice for q's slice sl: its leading dims broadcast against q's.
  auto mask_at = [&](int64_t sl, int64_t i, int64_t j) {
    const int m = a.mask.ndim();
    int64_t off = 0, rest = sl, stride = 1;
    for (int dim = r - 3, md = m - 3; dim >= 0 && md >= 0; --dim, --md) {
      const int64_t index = rest % a.q[dim];
      rest /= a.q[dim];
      if (a.mask[md] != 1) off += index * stride;
      stride *= a.mask[md];
    }
    return static_cast<double>(in[3][(off * tq + i) * tk + j]);
  };
  const double scale = 1 / std::sqrt(static_cast<double>(d));
  const cpu::CounterStream stream(7, StableHash("op"), 0);
  const double threshold = std::ldexp(static_cast<double>(a.dropout), 32);
  Values out{std::vector<float>(slices * tq * dv), std::vector<float>(slices * tq)};
  std::vector<double> s(tk);
  for (int64_t sl = 0; sl < slices; ++sl) {
    for (int64_t i = 0; i < tq; ++i) {
      double top = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < tk; ++j) {
        double dot = 0;
        for (int64_t x = 0; x < d; ++x) dot += in[0][(sl * tq + i) * d + x] * in[1][(sl * tk + j) * d + x];
        s[j] = a.causal && j > i ? -std::numeric_limits<double>::infinity()
                                 : scale * dot + (masked ? mask_at(sl, i, j) : 0.0);
        top = std::max(top, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < tk; ++j) sum += s[j] = std::exp(s[j] - top);
      out[1][sl * tq + i] = static_cast<float>(top + std::log(sum));
      for (int64_t x = 0; x < dv; ++x) {
        double y = 0;
        for (int64_t j = 0; j < tk; ++j) {
          const int64_t w = (sl * tq + i) * tk + j;
          const bool keep = a.dropout == 0 || stream.Block(w / 4)[w % 4] >= threshold;
          if (keep) y += s[j] / sum / (1 - a.dropout) * in[2][(sl * tk + j) * dv + x];
        }
        out[0][(sl * tq + i) * dv + x] = static_cast<float>(y);
      }
    }
  }
  return out;
}

OpCase Case(const AttnCase& a) {
  OpCase c;
  c.op = "attention";
  if (a.causal) c.attrs["causal"] = "true";
  if (a.dropout > 0) c.attrs["dropout"] = std::to_string(a.dropout);
  c.in_shapes = {a.q, a.k, a.v};
  c.differentiable = {true, true, true};
  if (a.mask.known()) {
    c.attrs["masked"] = "true";
    c.in_shapes.push_back(a.mask);
    c.differentiable.push_back(false);
    if (a.fill_mask)
      c.fill = [a](int k, std::vector<float>* v) {
        if (k == 3) return a.fill_mask(v);
        for (size_t i = 0; i < v->size(); ++i) (*v)[i] = std::sin(0.37f * i + k);
      };
  }
  c.reference = [a](const Values& in) { return Reference(a, in); };
  c.fd_eps = 1e-2;
  c.fd_tol = 3e-3;
  return c;
}

// Small shapes (one block), causal, dropout, different key and value widths,
// and shapes over several query blocks (64) and key blocks (128), where the
// online softmax carries its maximum and sum from block to block.
TEST(OpsAttention, MatchesTheUnfusedCompositionAndItsGradients) {
  const std::vector<std::pair<std::string, AttnCase>> cases = {
      {"small", {Shape{2, 2, 5, 3}, Shape{2, 2, 7, 3}, Shape{2, 2, 7, 4}}},
      {"causal", {Shape{1, 3, 6, 4}, Shape{1, 3, 6, 4}, Shape{1, 3, 6, 4}, true}},
      {"dropout", {Shape{2, 5, 3}, Shape{2, 9, 3}, Shape{2, 9, 2}, false, 0.3f}},
      {"blocks", {Shape{1, 1, 70, 2}, Shape{1, 1, 260, 2}, Shape{1, 1, 260, 3}}},
      {"blocks causal dropout", {Shape{2, 140, 2}, Shape{2, 140, 2}, Shape{2, 140, 2}, true, 0.2f}},
  };
  for (const auto& [name, a] : cases) {
    SCOPED_TRACE(name);
    ExpectCovered(CheckOp(Case(a)));
  }
}

// An additive mask (masked: true): one for every slice, one per batch row
// broadcast over the heads hiding padded keys with -inf, and one over
// several blocks with causal masking and dropout.
TEST(OpsAttention, AnAdditiveMaskIsAddedToTheScores) {
  AttnCase shared{Shape{2, 2, 5, 3}, Shape{2, 2, 7, 3}, Shape{2, 2, 7, 4}};
  shared.mask = Shape{5, 7};
  AttnCase padded{Shape{2, 3, 4, 3}, Shape{2, 3, 6, 3}, Shape{2, 3, 6, 2}};
  padded.mask = Shape{2, 1, 4, 6};
  padded.fill_mask = [](std::vector<float>* v) {  // batch row b sees its first 6 - 2 b keys
    for (size_t e = 0; e < v->size(); ++e) (*v)[e] = e % 6 >= 6 - 2 * (e / 24) ? -INFINITY : 0.f;
  };
  AttnCase blocks{Shape{1, 140, 2}, Shape{1, 140, 2}, Shape{1, 140, 2}, true, 0.2f};
  blocks.mask = Shape{1, 140, 140};
  for (const auto& [name, a] : std::vector<std::pair<std::string, AttnCase>>{
           {"(Tq, Tk)", shared}, {"padding, over the heads", padded}, {"blocks, causal, dropout", blocks}}) {
    SCOPED_TRACE(name);
    ExpectCovered(CheckOp(Case(a)));
  }
}

// A chain of attention layers with dropout between learned projections,
// two of them with an additive mask: every memory strategy trains to the
// bits of none (dropout draws replayed where a plan recomputes attention),
// and the sublinear plans do recompute it.
ConfigFile AttentionChain() {
  // An additive mask for two of the layers: state the graph does not train.
  std::string text =
      "version: 1\nnode { name: \"mask\" op: \"variable\" attr { key: \"kind\" value: \"aux\" }"
      " attr { key: \"shape\" value: \"(12, 12)\" } }\n";
  std::string prev = "data";
  for (int i = 0; i < 6; ++i) {
    const std::string n = std::to_string(i);
    text += "node { name: \"rows" + n + "\" op: \"reshape\" input: \"" + prev +
            "\" attr { key: \"shape\" value: \"(-1, 8)\" } }\n";
    text += "node { name: \"proj" + n + "\" op: \"fully_connected\" input: \"rows" + n +
            "\" attr { key: \"num_hidden\" value: \"8\" } }\n";
    text += "node { name: \"heads" + n + "\" op: \"reshape\" input: \"proj" + n +
            "\" attr { key: \"shape\" value: \"(-1, 2, 12, 8)\" } }\n";
    text += "node { name: \"attn" + n + "\" op: \"attention\" input: \"heads" + n + "\" input: \"heads" + n +
            "\" input: \"heads" + n + "\"" +
            (i % 3 == 1 ? " input: \"mask\" attr { key: \"masked\" value: \"true\" }" : "") +
            " attr { key: \"dropout\" value: \"0.25\" } attr { key: \"causal\" value: \"" + (i % 2 ? "true" : "false") +
            "\" } }\n";
    prev = "attn" + n;
  }
  text += "node { name: \"flat\" op: \"flatten\" input: \"" + prev + "\" }\n";
  text += "node { name: \"out\" op: \"fully_connected\" input: \"flat\" attr { key: \"num_hidden\" value: \"10\" } }\n";
  text += "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"out\" input: \"label\" }\n";
  text += "data { batch_size: 3 sample_shape: [2, 12, 8] }\nsolver { lr: 0.05 momentum: 0.9 seed: 5 }\n";
  return ParseConfig(text, "attention_chain.prototxt", {});
}

TEST(OpsAttention, EveryStrategyReplaysDropoutToTheBitsOfNone) {
  const ConfigFile cfg = AttentionChain();
  const auto reference = TrainSteps(cfg, MemoryStrategy::kNone, 3);
  int recomputing = 0, recomputing_masked = 0;
  for (const MemoryStrategy& s : AllMemoryStrategies()) {
    Model m = BuildModel(cfg, s);
    int mirrors = 0, masked = 0;
    for (const Node& n : m.train.nodes()) {
      const bool mirror = n.mirror_of >= 0 && n.op->name() == "attention";
      mirrors += mirror;
      masked += mirror && n.inputs.size() == 4;
    }
    recomputing += mirrors > 0;
    recomputing_masked += masked > 0;
    EXPECT_EQ(TrainSteps(cfg, s, 3), reference) << s.Name();
  }
  EXPECT_GE(recomputing, 2) << "sqrt and logn should recompute attention";
  EXPECT_GE(recomputing_masked, 1) << "a plan should recompute a masked attention";
}

// The training arena of one attention layer grows linearly in T (an unfused
// layer's T x T scores per head would grow 16x from T to 4T).
int64_t TrainingArena(int64_t t) {
  Graph g;
  Entry x{g.AddVariable("x", VarKind::kInput), 0};
  Entry w{g.AddVariable("w", VarKind::kParam), 0};
  Entry q{g.AddOp("mul", "q", {}, {x, w}), 0};
  Entry y{g.AddOp("attention", "attn", {{"causal", "true"}}, {q, q, q}), 0};
  g.outputs = {{g.AddOp("make_loss", "loss", {}, {y}), 0}};
  const Shape s{1, 4, t, 32};
  return PlanTraining(g, {{"x", s}, {"w", s}}, MemoryStrategy::kShare).plan.arena_bytes;
}

TEST(OpsAttention, MemoryIsLinearInT) {
  const int64_t a1 = TrainingArena(1024), a4 = TrainingArena(4096);
  EXPECT_LE(a4, 4.2 * a1) << a1 << " -> " << a4;
  EXPECT_LT(a4, 4 * 4096 * 4096 * static_cast<int64_t>(sizeof(float)) / 4)
      << "a quarter of one head's scores at T=4096";
}

TEST(OpsAttention, BadShapesAreOneLineErrorsNamingTheNode) {
  auto shapes = [](std::vector<Shape> in, AttrMap attrs = {}) {
    Graph g;
    std::vector<Entry> e;
    for (size_t i = 0; i < in.size(); ++i) e.push_back({g.AddVariable(Fmt("x", i), VarKind::kInput), 0});
    g.outputs = {{g.AddOp("attention", "attn", attrs, e), 0}};
    std::vector<std::pair<std::string, Shape>> named;
    for (size_t i = 0; i < in.size(); ++i) named.push_back({Fmt("x", i), in[i]});
    InferShapes(&g, named);
  };
  ExpectError(
      [&] {
        shapes({Shape{4, 8}, Shape{4, 8}, Shape{4, 8}});
      },
      {"'attn'", "q has shape (4,8)", "3 dimensions"});
  ExpectError([&] { shapes({Shape{2, 4, 8}, Shape{3, 4, 8}, Shape{3, 4, 8}}); }, {"'attn'", "same leading dimensions"});
  ExpectError(
      [&] {
        shapes({Shape{2, 4, 8}, Shape{2, 5, 6}, Shape{2, 5, 8}});
      },
      {"'attn'", "k (2,5,6) has 6 features per position but q (2,4,8) has 8"});
  ExpectError(
      [&] {
        shapes({Shape{2, 4, 8}, Shape{2, 5, 8}, Shape{2, 6, 8}});
      },
      {"'attn'", "v (2,6,8) has 6 positions but k (2,5,8) has 5"});
  ExpectError(
      [&] {
        shapes({Shape{2, 4, 8}, Shape{2, 4, 8}, Shape{2, 4, 8}}, {{"dropout", "1"}});
      },
      {"'attn'", "dropout must be in [0, 1), got 1"});
  ExpectError(
      [&] {
        shapes({Shape{2, 4, 8}, Shape{2, 5, 8}, Shape{2, 5, 8}, Shape{4, 4}}, {{"masked", "true"}});
      },
      {"'attn'", "mask has shape (4,4) but q (2,4,8) and k (2,5,8) need (..., 4, 5)"});
  ExpectError(
      [&] {
        shapes({Shape{2, 4, 8}, Shape{2, 5, 8}, Shape{2, 5, 8}, Shape{3, 4, 5}}, {{"masked", "true"}});
      },
      {"'attn'", "mask has shape (3,4,5)", "its leading dims 1 or q's"});
}

}  // namespace
}  // namespace frugal::test
