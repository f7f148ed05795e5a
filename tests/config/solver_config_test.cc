// The solver's config fields and the per-parameter init / lr_mult / wd_mult
// of a node, from config text to the graph and the training pieces.
#include <gtest/gtest.h>

#include "frugal/config.h"
#include "frugal/lr_schedule.h"
#include "frugal/optimizer.h"

namespace frugal {
namespace {

const char* kNet = R"cfg(version: 1
node { name: "fc" op: "fully_connected" input: "data" attr { key: "num_hidden" value: "8" }
       init { key: "weight" value: "msra" } init { key: "bias" value: "constant(0.1)" }
       lr_mult { key: "bias" value: 2 } wd_mult { key: "bias" value: 0 } }
node { name: "out" op: "fully_connected" input: "fc" attr { key: "num_hidden" value: "3" } }
node { name: "prob" op: "softmax_cross_entropy" input: "out" input: "label" }
data { batch_size: 4 sample_shape: [3] }
solver { optimizer: ADAMW lr: 0.1 beta2: 0.98 weight_decay: 0.01
         lr_policy: MULTISTEP stepvalue: 100 stepvalue: 200 gamma: 0.5 warmup_iters: 10
         clip_gradient: 5 iter_size: 2 metric: "accuracy" metric: "top_k_accuracy_2"
         checkpoint_interval: 500 keep_checkpoints: 2 }
)cfg";

TEST(SolverConfig, NodeParamSettingsReachTheGraph) {
  Graph g = BuildGraph(ParseConfig(kNet, "net.prototxt", {}));
  const Node& w = g.node(g.FindNode("fc_weight"));
  const Node& b = g.node(g.FindNode("fc_bias"));
  EXPECT_EQ(w.init, "msra");
  EXPECT_EQ(w.lr_mult, 1.f);
  EXPECT_EQ(w.wd_mult, 1.f);
  EXPECT_EQ(b.init, "constant(0.1)");
  EXPECT_EQ(b.lr_mult, 2.f);
  EXPECT_EQ(b.wd_mult, 0.f);
  const Node& other = g.node(g.FindNode("out_weight"));  // op defaults
  EXPECT_EQ(other.init, "xavier");
  EXPECT_EQ(other.lr_mult, 1.f);
}

TEST(SolverConfig, KeysMustNameAParameterTheNodeMakes) {
  std::string text = kNet;
  text.replace(text.find("wd_mult { key: \"bias\""), 22, "wd_mult { key: \"bais\"");
  try {
    BuildGraph(ParseConfig(text, "net.prototxt", {}));
    FAIL() << "a misspelt key was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("net.prototxt:2:1: node 'fc' (fully_connected): wd_mult names 'bais'"),
              std::string::npos)
        << e.what();
  }
}

TEST(SolverConfig, SolverFieldsParse) {
  ConfigFile cfg = ParseConfig(kNet, "net.prototxt", {});
  const config::Solver& s = cfg.net.solver();
  OptimizerOptions o = OptimizerOptionsFromConfig(s, cfg.path);
  EXPECT_EQ(o.kind, OptimizerKind::kAdamW);
  EXPECT_FLOAT_EQ(o.beta2, 0.98f);
  LrSchedule lr = LrScheduleFromConfig(s, 1000, cfg.path);
  EXPECT_EQ(lr.ToString(), "multistep(lr=0.1, gamma=0.5, stepvalues=100/200), warmup 10 from 0");
  EXPECT_NEAR(lr.At(150), 0.05, 1e-7);
  EXPECT_EQ(s.clip_gradient(), 5.f);
  EXPECT_EQ(s.iter_size(), 2);
  EXPECT_EQ(s.metric_size(), 2);
  EXPECT_EQ(s.checkpoint_interval(), 500);
  EXPECT_EQ(s.keep_checkpoints(), 2);
  EXPECT_EQ(s.val_interval(), 0);
  EXPECT_FALSE(s.deterministic());
}

// solver.max_iter, the old name of lr_schedule_iters (one letter from
// max_iters, when the run stops), is read into it; both set is an error
// naming the line and both values.
TEST(SolverConfig, MaxIterIsTheDeprecatedNameOfLrScheduleIters) {
  const std::string head = "version: 1\nnode { name: \"fc\" op: \"fully_connected\" input: \"data\" }\n";
  ConfigFile cfg =
      ParseConfig(head + "solver { lr_policy: COSINE\n  max_iter: 50 max_iters: 7 }\n", "old.prototxt", {});
  EXPECT_EQ(cfg.net.solver().lr_schedule_iters(), 50);
  EXPECT_FALSE(cfg.net.solver().has_max_iter());
  EXPECT_EQ(cfg.net.solver().max_iters(), 7);
  EXPECT_EQ(LrScheduleFromConfig(cfg.net.solver(), 7, cfg.path).options().schedule_iters, 50);
  try {
    ParseConfig(head + "solver { lr_policy: COSINE\n  max_iter: 50 lr_schedule_iters: 60 }\n", "both.prototxt", {});
    FAIL() << "both names accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("both.prototxt:4: solver sets max_iter 50 and lr_schedule_iters 60, which are "
                                         "one field (max_iter is its old name): keep lr_schedule_iters"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace frugal
