// lstm_cell (src/ops/lstm_cell.cc) and the lstm layer (src/ops/lstm.cc):
// the one harness (forward against a reference written the obvious way,
// finite differences, write versus add, in place), the cell's agreement with
// the unfused cell of existing ops over two steps (the second step's c
// gradient flows into the first), the layer's state from a previous run,
// shape errors, every memory strategy training a small LSTM of either to the
// bits of `none`, and the layer's threads against one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/parallel.h"
#include "frugal/config.h"
#include "frugal/passes/gradient.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/train.h"
#include "ops/op_test_util.h"
#include "train/train_steps.h"

namespace frugal::test {
namespace {

// h, c of the cell from i2h, h2h (B, 4H) and c_prev (B, H), in double.
Values LstmReference(const Values& in, int64_t rows, int64_t hid) {
  auto sigmoid = [](double x) { return 1 / (1 + std::exp(-x)); };
  Values out{std::vector<float>(rows * hid), std::vector<float>(rows * hid)};
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t j = 0; j < hid; ++j) {
      auto a = [&](int k) {
        return static_cast<double>(in[0][b * 4 * hid + k * hid + j]) + in[1][b * 4 * hid + k * hid + j];
      };
      const double i = sigmoid(a(0)), f = sigmoid(a(1)), g = std::tanh(a(2)), o = sigmoid(a(3));
      const double c = f * in[2][b * hid + j] + i * g;
      out[0][b * hid + j] = static_cast<float>(o * std::tanh(c));
      out[1][b * hid + j] = static_cast<float>(c);
    }
  return out;
}

OpCase LstmCase(int64_t rows, int64_t hid) {
  OpCase c;
  c.op = "lstm_cell";
  c.in_shapes = {Shape{rows, 4 * hid}, Shape{rows, 4 * hid}, Shape{rows, hid}};
  c.differentiable = {true, true, true};
  // Pre-activations over [-6, 6] (both branches of tanh, saturated gates),
  // c_prev over [-2, 2].
  c.fill = [](int k, std::vector<float>* v) {
    for (size_t i = 0; i < v->size(); ++i) {
      const float t = static_cast<float>(i);
      (*v)[i] = k < 2 ? 3.f * std::sin(0.37f * t + 1.3f * k) : 2.f * std::cos(0.53f * t);
    }
  };
  c.reference = [rows, hid](const Values& in) { return LstmReference(in, rows, hid); };
  c.fd_eps = 1e-2;
  c.fd_tol = 2e-3;
  return c;
}

TEST(OpsLstm, CellAgainstReferenceAndFiniteDifferences) {
  OpReport r = CheckOp(LstmCase(3, 5));
  ExpectCovered(r);
  EXPECT_GE(r.inplace_checked, 7);  // gates over i2h, h2h; c over c_prev; da over gates; d_c_prev over dc, dh, c_prev
  EXPECT_GE(r.null_checked, 4);
}

// More columns than one chunk of the kernel (128), not a multiple of any
// vector width: chunk and vector tails.
TEST(OpsLstm, CellAcrossChunks) { ExpectCovered(CheckOp(LstmCase(2, 150))); }

TEST(OpsLstm, ShapeErrorsNameTheNodeAndTheShapes) {
  auto message = [](const std::vector<Shape>& in) {
    try {
      OutShapes("lstm_cell", {}, in);
    } catch (const Error& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  const std::string odd = message({Shape{2, 10}, Shape{2, 10}, Shape{2, 2}});
  EXPECT_NE(odd.find("op"), std::string::npos) << odd;
  EXPECT_NE(odd.find("(2,10)"), std::string::npos) << odd;
  const std::string h2h = message({Shape{2, 8}, Shape{3, 8}, Shape{2, 2}});
  EXPECT_NE(h2h.find("h2h has shape (3,8) but i2h has (2,8)"), std::string::npos) << h2h;
  const std::string c = message({Shape{2, 8}, Shape{2, 8}, Shape{2, 3}});
  EXPECT_NE(c.find("c_prev has shape (2,3) but i2h (2,8) needs (batch, hidden) = (2,2)"), std::string::npos) << c;
  EXPECT_EQ(OutShapes("lstm_cell", {}, {Shape{4, 12}, Shape{4, 12}, Shape{4, 3}}),
            (std::vector<Shape>{Shape{4, 3}, Shape{4, 3}, Shape{4, 12}}));  // h, c, the gates (hidden)
}

// The lstm layer op (src/ops/lstm.cc) over x (B, T, I) from the state h0,
// c0 ((B, H), or (B, S, H) whose last step is the state), in double: y and
// cs (B, T, H).
Values LayerReference(const Values& in, int64_t rows, int64_t steps, int64_t feat, int64_t hid, int64_t state_steps) {
  auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  const std::vector<float>&x = in[0], &wx = in[3], &bx = in[4], &wh = in[5], &bh = in[6];
  const int64_t at = std::max<int64_t>(state_steps, 1);
  std::vector<double> h(rows * hid), c(rows * hid);
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t j = 0; j < hid; ++j) {
      h[b * hid + j] = in[1][(b * at + at - 1) * hid + j];
      c[b * hid + j] = in[2][(b * at + at - 1) * hid + j];
    }
  Values out{std::vector<float>(rows * steps * hid), std::vector<float>(rows * steps * hid)};
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<double> nh(rows * hid), nc(rows * hid);
    for (int64_t b = 0; b < rows; ++b)
      for (int64_t j = 0; j < hid; ++j) {
        auto a = [&](int k) {
          const int64_t row = k * hid + j;
          double v = static_cast<double>(bx[row]) + bh[row];
          for (int64_t i = 0; i < feat; ++i)
            v += static_cast<double>(x[(b * steps + t) * feat + i]) * wx[row * feat + i];
          for (int64_t i = 0; i < hid; ++i) v += h[b * hid + i] * wh[row * hid + i];
          return v;
        };
        const double ig = sigmoid(a(0)), fg = sigmoid(a(1)), gg = std::tanh(a(2)), og = sigmoid(a(3));
        nc[b * hid + j] = fg * c[b * hid + j] + ig * gg;
        nh[b * hid + j] = og * std::tanh(nc[b * hid + j]);
        out[0][(b * steps + t) * hid + j] = static_cast<float>(nh[b * hid + j]);
        out[1][(b * steps + t) * hid + j] = static_cast<float>(nc[b * hid + j]);
      }
    h = nh;
    c = nc;
  }
  return out;
}

// state_steps 0: h0 and c0 (B, H); else a previous run's (B, state_steps, H).
OpCase LayerCase(int64_t rows, int64_t steps, int64_t feat, int64_t hid, int64_t state_steps = 0) {
  OpCase c;
  c.op = "lstm";
  c.attrs = {{"num_hidden", std::to_string(hid)}};
  const Shape state = state_steps > 0 ? Shape{rows, state_steps, hid} : Shape{rows, hid}, bias{4 * hid};
  c.in_shapes = {Shape{rows, steps, feat}, state, state, Shape{4 * hid, feat}, bias, Shape{4 * hid, hid}, bias};
  c.differentiable = std::vector<bool>(7, true);
  // Inputs and state in [-1, 1], weights small enough that the gates are
  // neither all saturated nor all linear.
  c.fill = [feat, hid](int k, std::vector<float>* v) {
    const float scale = k == 3   ? 1.5f / std::sqrt(static_cast<float>(feat))
                        : k == 5 ? 1.5f / std::sqrt(static_cast<float>(hid))
                                 : 1.f;
    for (size_t i = 0; i < v->size(); ++i) (*v)[i] = scale * std::sin(0.71f * static_cast<float>(i) + 0.9f * k);
  };
  c.reference = [=](const Values& in) { return LayerReference(in, rows, steps, feat, hid, state_steps); };
  c.fd_eps = 1e-2;
  c.fd_tol = 2e-3;
  return c;
}

TEST(OpsLstm, LayerAgainstReferenceAndFiniteDifferences) {
  OpReport r = CheckOp(LayerCase(3, 4, 5, 6));
  ExpectCovered(r);
  EXPECT_GE(r.null_checked, 2);
}

// The state from a previous run's y and cs: their last step, which alone
// gets a gradient.
TEST(OpsLstm, LayerTakesItsStateFromAPreviousRunsLastStep) { ExpectCovered(CheckOp(LayerCase(2, 3, 4, 5, 2))); }

// More hidden columns than one call of the cell's kernel takes (128), an
// odd batch split between the threads, one step.
TEST(OpsLstm, LayerAcrossChunksAndOneStep) {
  ExpectCovered(CheckOp(LayerCase(5, 2, 3, 130)));
  ExpectCovered(CheckOp(LayerCase(2, 1, 4, 3)));
}

TEST(OpsLstm, LayerShapeErrorsNameTheInputAndTheShapes) {
  auto message = [](const std::vector<Shape>& in) {
    try {
      OutShapes("lstm", {{"num_hidden", "2"}}, in);
    } catch (const Error& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  const Shape any;  // inferred
  const std::string flat = message({Shape{2, 8}, any, any, any, any, any, any});
  EXPECT_NE(flat.find("x has shape (2,8); expected (batch, steps, features)"), std::string::npos) << flat;
  const std::string h0 = message({Shape{2, 3, 4}, Shape{3, 2}, any, any, any, any, any});
  EXPECT_NE(h0.find("h0 has shape (3,2) but x (2,3,4) with num_hidden=2 needs (2,2) or (2, steps, 2)"),
            std::string::npos)
      << h0;
  EXPECT_EQ(OutShapes("lstm", {{"num_hidden", "2"}}, {Shape{2, 3, 4}, any, any, any, any, any, any}),
            (std::vector<Shape>{Shape{2, 3, 2}, Shape{2, 3, 2}, Shape{2, 3, 8}}));  // y, cs, the gates (hidden)
  EXPECT_EQ(
      OutShapes("lstm", {{"num_hidden", "2"}}, {Shape{2, 3, 4}, Shape{2, 5, 2}, Shape{2, 5, 2}, any, any, any, any}),
      (std::vector<Shape>{Shape{2, 3, 2}, Shape{2, 3, 2}, Shape{2, 3, 8}}));
}

// Two steps of one cell with shared weights, fused or made of existing ops;
// losses on both steps' h and on the last c. x0, x1, h0, c0 are parameters
// so that they get gradients.
std::string TwoSteps(bool fused) {
  std::string t = R"(version: 1
node { name: "x0" op: "variable" }
node { name: "x1" op: "variable" }
node { name: "h0" op: "variable" }
node { name: "c0" op: "variable" }
node { name: "wx" op: "variable" }
node { name: "bx" op: "variable" }
node { name: "wh" op: "variable" }
node { name: "bh" op: "variable" }
)";
  for (int s = 1; s <= 2; ++s) {
    const std::string p = "s" + std::to_string(s) + "/", x = "x" + std::to_string(s - 1);
    const std::string hp = s == 1 ? "h0" : "s1/h", cp = s == 1 ? "c0" : "s1/c";
    t += "node { name: \"" + p + "i2h\" op: \"fully_connected\" input: \"" + x +
         "\" input: \"wx\" input: \"bx\" attr { key: \"num_hidden\" value: \"24\" } }\n";
    t += "node { name: \"" + p + "h2h\" op: \"fully_connected\" input: \"" + hp +
         "\" input: \"wh\" input: \"bh\" attr { key: \"num_hidden\" value: \"24\" } }\n";
    if (fused) {
      t += "node { name: \"" + p + "cell\" op: \"lstm_cell\" input: \"" + p + "i2h\" input: \"" + p +
           "h2h\" input: \"" + cp + "\" }\n";
      t += "node { name: \"" + p + "h\" op: \"identity\" input: \"" + p + "cell:0\" }\n";
      t += "node { name: \"" + p + "c\" op: \"identity\" input: \"" + p + "cell:1\" }\n";
      continue;
    }
    t += "node { name: \"" + p + "gates\" op: \"add_n\" input: \"" + p + "i2h\" input: \"" + p + "h2h\" }\n";
    t += "node { name: \"" + p + "slice\" op: \"split\" input: \"" + p +
         "gates\" attr { key: \"num_outputs\" value: \"4\" } }\n";
    const char* gate[] = {"in", "forget", "transform", "out"};
    for (int k = 0; k < 4; ++k)
      t += "node { name: \"" + p + gate[k] + "\" op: \"activation\" input: \"" + p + "slice:" + std::to_string(k) +
           "\" attr { key: \"act_type\" value: \"" + (k == 2 ? "tanh" : "sigmoid") + "\" } }\n";
    t += "node { name: \"" + p + "keep\" op: \"mul\" input: \"" + p + "forget\" input: \"" + cp + "\" }\n";
    t += "node { name: \"" + p + "new\" op: \"mul\" input: \"" + p + "in\" input: \"" + p + "transform\" }\n";
    t += "node { name: \"" + p + "c\" op: \"add_n\" input: \"" + p + "keep\" input: \"" + p + "new\" }\n";
    t += "node { name: \"" + p + "c_act\" op: \"activation\" input: \"" + p +
         "c\" attr { key: \"act_type\" value: \"tanh\" } }\n";
    t += "node { name: \"" + p + "h\" op: \"mul\" input: \"" + p + "out\" input: \"" + p + "c_act\" }\n";
  }
  t += R"(node { name: "l1" op: "linear_regression_output" input: "s1/h" input: "label" }
node { name: "l2" op: "linear_regression_output" input: "s2/h" input: "label" }
node { name: "lc" op: "make_loss" input: "s2/c" attr { key: "grad_scale" value: "0.5" } }
)";
  return t;
}

TEST(OpsLstm, FusedCellAgreesWithTheUnfusedOps) {
  const int64_t n = 3, d = 5, h = 6;
  std::map<std::string, std::pair<Shape, std::vector<float>>> vars{
      {"x0", {Shape{n, d}, AwayFromZero(n * d, 0.2f, 1.5f, true, 1)}},
      {"x1", {Shape{n, d}, AwayFromZero(n * d, 0.2f, 1.5f, true, 2)}},
      {"h0", {Shape{n, h}, AwayFromZero(n * h, 0.1f, 0.8f, true, 3)}},
      {"c0", {Shape{n, h}, AwayFromZero(n * h, 0.1f, 2.f, true, 4)}},
      {"wx", {Shape{4 * h, d}, AwayFromZero(4 * h * d, 0.1f, 1.2f, true, 5)}},
      {"bx", {Shape{4 * h}, AwayFromZero(4 * h, 0.f, 0.5f, true, 6)}},
      {"wh", {Shape{4 * h, h}, AwayFromZero(4 * h * h, 0.1f, 1.2f, true, 7)}},
      {"bh", {Shape{4 * h}, AwayFromZero(4 * h, 0.f, 0.5f, true, 8)}},
      {"label", {Shape{n, h}, AwayFromZero(n * h, 0.f, 0.5f, true, 9)}}};
  auto run = [&](bool fused, const MemoryStrategy& s) {
    Graph g = BuildGraph(ParseConfig(TwoSteps(fused), fused ? "fused.prototxt" : "unfused.prototxt", {}));
    Gradient(&g);
    return RunGraph(g, vars, true, 0, 1, s);
  };
  const GraphRun fused = run(true, MemoryStrategy::kNone), unfused = run(false, MemoryStrategy::kNone);
  ASSERT_EQ(fused.outputs.size(), 3u);
  ASSERT_EQ(fused.outputs.size(), unfused.outputs.size());
  auto near = [](const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 2e-6 * std::max(1.f, std::fabs(want[i]))) << what << "[" << i << "]";
  };
  for (size_t k = 0; k < fused.outputs.size(); ++k)
    near(fused.outputs[k], unfused.outputs[k], "output " + std::to_string(k));
  ASSERT_EQ(fused.grads.size(), 8u);
  for (const auto& [name, grad] : unfused.grads) {
    ASSERT_TRUE(fused.grads.count(name)) << name;
    near(fused.grads.at(name), grad, "gradient of " + name);
    EXPECT_GT(*std::max_element(grad.begin(), grad.end()), 1e-3) << name << " gets a gradient";
  }
  // In place (share) gives the same bits as none.
  const GraphRun shared = run(true, MemoryStrategy::kShare);
  EXPECT_EQ(shared.outputs, fused.outputs);
  EXPECT_EQ(shared.grads, fused.grads);
}

// A small unrolled LSTM on lstm_cell, written as models/lstm/lstm_lm.prototxt
// (time-major, a classifier and loss per step marked `stage`), on float
// inputs (B, T, D) so that tests::TrainSteps' uniform data fits it.
ConfigFile SmallLstm(int layers, int steps) {
  std::string t = "version: 1\n";
  t += "node { name: \"xs\" op: \"split\" input: \"data\" attr { key: \"num_outputs\" value: \"" +
       std::to_string(steps) +
       "\" } attr { key: \"axis\" value: \"1\" } attr { key: \"squeeze_axis\" value: \"true\" } }\n";
  t += "node { name: \"ys\" op: \"split\" input: \"label\" attr { key: \"num_outputs\" value: \"" +
       std::to_string(steps) +
       "\" } attr { key: \"axis\" value: \"1\" } attr { key: \"squeeze_axis\" value: \"true\" } }\n";
  for (int l = 0; l < layers; ++l) {
    const std::string w = "lstm" + std::to_string(l) + "_";
    for (const char* v : {"i2h_weight", "i2h_bias", "h2h_weight", "h2h_bias"})
      t += "node { name: \"" + w + v + "\" op: \"variable\" }\n";
    t += "node { name: \"t-1/l" + std::to_string(l) +
         "/h\" op: \"variable\" attr { key: \"kind\" value: \"aux\" } attr { key: \"shape\" value: \"(4,8)\" } }\n";
    t += "node { name: \"t-1/l" + std::to_string(l) +
         "/c\" op: \"variable\" attr { key: \"kind\" value: \"aux\" } attr { key: \"shape\" value: \"(4,8)\" } }\n";
  }
  for (int s = 0; s < steps; ++s) {
    const std::string ts = "t" + std::to_string(s), prev = "t" + std::to_string(s - 1);
    std::string below = "xs:" + std::to_string(s);
    for (int l = 0; l < layers; ++l) {
      const std::string w = "lstm" + std::to_string(l) + "_", p = ts + "/l" + std::to_string(l) + "/";
      const std::string pp = prev + "/l" + std::to_string(l) + "/";
      t += "node { name: \"" + p + "i2h\" op: \"fully_connected\" input: \"" + below + "\" input: \"" + w +
           "i2h_weight\" input: \"" + w + "i2h_bias\" attr { key: \"num_hidden\" value: \"32\" } }\n";
      t += "node { name: \"" + p + "h2h\" op: \"fully_connected\" input: \"" + pp + "h\" input: \"" + w +
           "h2h_weight\" input: \"" + w + "h2h_bias\" attr { key: \"num_hidden\" value: \"32\" } }\n";
      // As the configs: h and c name the cell's outputs through identities.
      t += "node { name: \"" + p + "cell\" op: \"lstm_cell\" input: \"" + p + "i2h\" input: \"" + p +
           "h2h\" input: \"" + pp + "c\" }\n";
      t += "node { name: \"" + p + "h\" op: \"identity\" input: \"" + p + "cell:0\" }\n";
      t += "node { name: \"" + p + "c\" op: \"identity\" input: \"" + p + "cell:1\" }\n";
      below = p + "h";
    }
    t += "node { name: \"" + ts + "/logits\" op: \"fully_connected\" input: \"" + below +
         "\" attr { key: \"num_hidden\" value: \"10\" } }\n";
    t += "node { name: \"" + ts + "/prob\" op: \"softmax_cross_entropy\" input: \"" + ts +
         "/logits\" input: \"ys:" + std::to_string(s) + "\" stage: true }\n";
  }
  t += "data { batch_size: 4 sample_shape: [" + std::to_string(steps) + ", 6] label_shape: [" + std::to_string(steps) +
       "] }\nsolver { lr: 0.5 momentum: 0.9 seed: 3 }\n";
  return ParseConfig(t, "small_lstm.prototxt", {});
}

// Expects 3 training steps of cfg under each strategy to give the bits of
// `none`; returns how many of the strategies recompute nodes of `op`.
int TrainsAsNone(const ConfigFile& cfg, const std::vector<MemoryStrategy>& strategies, const std::string& op) {
  const auto reference = TrainSteps(cfg, MemoryStrategy::kNone, 3);
  int recomputing = 0;
  for (const MemoryStrategy& s : strategies) {
    SCOPED_TRACE(s.Name());
    const Model m = BuildModel(cfg, s);
    int mirrors = 0;
    for (const Node& n : m.train.nodes()) mirrors += n.mirror_of >= 0 && n.op->name() == op;
    recomputing += mirrors > 0;
    EXPECT_EQ(TrainSteps(cfg, s, 3), reference);
  }
  return recomputing;
}

TEST(OpsLstm, EveryStrategyTrainsASmallLstmBitIdentically) {
  const ConfigFile cfg = SmallLstm(2, 8);
  std::vector<MemoryStrategy> all = AllMemoryStrategies();
  const int64_t share = BuildModel(cfg, MemoryStrategy::kShare).train_plan.arena_bytes;
  const int64_t sqrt = BuildModel(cfg, MemoryStrategy::kSqrt).train_plan.arena_bytes;
  all.push_back({MemoryStrategy::kBudget, (share + sqrt) / 2});
  EXPECT_GE(TrainsAsNone(cfg, all, "lstm_cell"), 2) << "sqrt and logn should recompute cells";
}

// Two layers of the lstm op over `chunks` runs of 3 steps each, each run's
// state its previous run's y and cs (the first's a split aux variable), a
// classifier and loss on every run's y, as models/lstm/char_lm.prototxt
// chains them.
ConfigFile ChunkedLstm(int chunks) {
  const std::string n = std::to_string(chunks);
  std::string t = "version: 1\n";
  t += "node { name: \"xs\" op: \"split\" input: \"data\" attr { key: \"num_outputs\" value: \"" + n +
       "\" } attr { key: \"axis\" value: \"1\" } }\n";
  t += "node { name: \"ys\" op: \"split\" input: \"label\" attr { key: \"num_outputs\" value: \"" + n +
       "\" } attr { key: \"axis\" value: \"1\" } attr { key: \"squeeze_axis\" value: \"true\" } }\n";
  for (int l = 0; l < 2; ++l) {
    const std::string p = "-1/l" + std::to_string(l) + "/";
    t += "node { name: \"" + p +
         "state\" op: \"variable\" attr { key: \"kind\" value: \"aux\" } attr { key: \"shape\" value: \"(4,32)\" } }\n";
    t += "node { name: \"" + p + "rnn\" op: \"split\" input: \"" + p +
         "state\" attr { key: \"num_outputs\" value: \"2\" } attr { key: \"axis\" value: \"1\" } }\n";
    for (const char* v : {"i2h_weight", "i2h_bias", "h2h_weight", "h2h_bias"})
      t += "node { name: \"lstm" + std::to_string(l) + "_" + v + "\" op: \"variable\" }\n";
  }
  for (int k = 0; k < chunks; ++k) {
    std::string below = "xs:" + std::to_string(k);
    for (int l = 0; l < 2; ++l) {
      const std::string w = "lstm" + std::to_string(l) + "_", p = std::to_string(k) + "/l" + std::to_string(l) + "/";
      const std::string pp = std::to_string(k - 1) + "/l" + std::to_string(l) + "/";
      t += "node { name: \"" + p + "rnn\" op: \"lstm\" input: \"" + below + "\" input: \"" + pp + "rnn:0\" input: \"" +
           pp + "rnn:1\" input: \"" + w + "i2h_weight\" input: \"" + w + "i2h_bias\" input: \"" + w +
           "h2h_weight\" input: \"" + w + "h2h_bias\" attr { key: \"num_hidden\" value: \"16\" } }\n";
      below = p + "rnn:0";
    }
    const std::string ks = std::to_string(k);
    t += "node { name: \"" + ks + "/logits\" op: \"fully_connected\" input: \"" + below +
         "\" attr { key: \"num_hidden\" value: \"10\" } }\n";
    t += "node { name: \"" + ks + "/prob\" op: \"softmax_cross_entropy\" input: \"" + ks +
         "/logits\" input: \"ys:" + ks + "\" stage: true }\n";
  }
  t += "data { batch_size: 4 sample_shape: [" + std::to_string(3 * chunks) + ", 6] label_shape: [" + n +
       "] }\nsolver { lr: 0.5 momentum: 0.9 seed: 3 }\n";
  return ParseConfig(t, "chunked_lstm.prototxt", {});
}

TEST(OpsLstm, EveryStrategyTrainsChunkedLayersBitIdentically) {
  EXPECT_GE(TrainsAsNone(ChunkedLstm(4), AllMemoryStrategies(), "lstm"), 2)
      << "sqrt and logn should recompute runs of steps";
}

// The step loop's threads (columns of the recurrent products, rows of the
// cell) against one thread: the same training within rounding.
TEST(OpsLstm, ChunkedLayersTrainAlikeOnOneAndTwoThreads) {
  const ConfigFile cfg = ChunkedLstm(2);
  cpu::SetKernelThreads(1);
  const auto one = TrainSteps(cfg, MemoryStrategy::kShare, 3);
  cpu::SetKernelThreads(2);
  const auto two = TrainSteps(cfg, MemoryStrategy::kShare, 3);
  cpu::SetKernelThreads(cpu::NumCores());
  ASSERT_EQ(one.size(), two.size());
  int64_t compared = 0;
  for (size_t k = 0; k < one.size(); ++k) {
    ASSERT_EQ(one[k].size(), two[k].size());
    for (size_t i = 0; i < one[k].size(); ++i, ++compared)
      ASSERT_NEAR(two[k][i], one[k][i], 1e-5 * std::max(1.f, std::fabs(one[k][i])))
          << "tensor " << k << " element " << i;
  }
  EXPECT_GT(compared, 2000);
}

}  // namespace
}  // namespace frugal::test
