// The trainer scores every loss of a graph: a time-major language model with
// a loss per step is scored on each step's prediction against its own label.
// Scoring output 0 alone against the first values of the label batch (as the
// trainer once did) reads labels of other rows and steps, and is now an error.
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <fstream>

#include "frugal/config.h"
#include "frugal/train.h"
#include "test_util.h"

namespace frugal {
namespace {

// Per step t of T: embed token t, classify the next token, a loss per step
// (as models/lstm/lstm_lm.prototxt, without the LSTM).
ConfigFile PerStepConfig(const test::TempDir& dir, const std::string& outputs) {
  const std::string corpus = dir.File("corpus.txt");
  std::string text =
      "version: 1\n"
      "variable { name: \"T\" value: \"5\" }\n"
      "variable { name: \"vocab\" value: \"8\" }\n"
      "block { name: \"step\"\n"
      "  node { name: \"embed\" op: \"embedding\" input: \"tokens:@{i}\" input: \"embed_weight\"\n"
      "         attr { key: \"input_dim\" value: \"${vocab}\" } attr { key: \"output_dim\" value: \"8\" } }\n"
      "  node { name: \"logits\" op: \"fully_connected\" input: \"embed\" input: \"out_weight\" input: \"out_bias\"\n"
      "         attr { key: \"num_hidden\" value: \"${vocab}\" } }\n"
      "  node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"logits\" input: \"targets:@{i}\" }\n"
      "}\n"
      "node { name: \"embed_weight\" op: \"variable\" attr { key: \"init\" value: \"uniform(0.5)\" } }\n"
      "node { name: \"out_weight\" op: \"variable\" }\n"
      "node { name: \"out_bias\" op: \"variable\" attr { key: \"init\" value: \"zero\" } }\n"
      "node { name: \"tokens\" op: \"split\" input: \"data\" attr { key: \"num_outputs\" value: \"${T}\" }\n"
      "       attr { key: \"axis\" value: \"1\" } attr { key: \"squeeze_axis\" value: \"true\" } }\n"
      "node { name: \"targets\" op: \"split\" input: \"label\" attr { key: \"num_outputs\" value: \"${T}\" }\n"
      "       attr { key: \"axis\" value: \"1\" } attr { key: \"squeeze_axis\" value: \"true\" } }\n"
      "node { name: \"steps\" block: \"step\" repeat: ${T} input: \"data\" }\n"
      "output: \"steps/" +
      outputs +
      "/prob\"\n"
      "data { train { text { path: \"" +
      corpus +
      "\" seq_len: ${T} } }\n"
      "       val { text { path: \"" +
      corpus +
      "\" seq_len: ${T} } }\n"
      "       batch_size: 4 sample_shape: [${T}] label_shape: [${T}] }\n"
      "solver { lr: 0.5 momentum: 0.9 epochs: 4 seed: 3 engine: \"naive\"\n"
      "         metric: \"accuracy\" metric: \"perplexity\" }\n";
  return ParseConfig(text, dir.File("per_step.prototxt"), {});
}

class PerStepMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = FLAGS_minloglevel;
    FLAGS_minloglevel = 2;
    // The next character is a function of this one ("abcdefg" cycling): 714
    // characters cut into 4 streams of 178 = 3 (mod 7), which start at
    // phases 0, 3, 6 and 2 of the cycle. Row i of step 0 has its own label,
    // not the label of step i of row 0 (phase i): scoring output 0 against
    // the first 4 labels of the batch is right for row 0 only.
    std::string s;
    for (int i = 0; i < 102; ++i) s += "abcdefg";
    std::ofstream(dir_.File("corpus.txt")) << s;
  }
  void TearDown() override { FLAGS_minloglevel = saved_; }
  test::TempDir dir_;
  int saved_ = 0;
};

TEST_F(PerStepMetricsTest, EveryStepIsScoredAgainstItsOwnLabel) {
  TrainOptions opts;
  opts.log_json = dir_.File("log.json");
  // Every step learns the cycle; accuracy over all steps' predictions.
  const double accuracy = Train(PerStepConfig(dir_, "*"), opts);
  EXPECT_GT(accuracy, 0.99);
  // Validation perplexity over every step is near 1.
  std::ifstream in(opts.log_json);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find("\"val_perplexity\"") != std::string::npos) last = line;
  ASSERT_FALSE(last.empty());
  const size_t at = last.find("\"val_perplexity\":");
  EXPECT_LT(std::stod(last.substr(at + 17)), 1.2) << last;
}

TEST_F(PerStepMetricsTest, OneOutputAgainstLabelsOfEveryStepIsAnError) {
  try {
    Train(PerStepConfig(dir_, "4"), TrainOptions{});
    FAIL() << "output 4 was scored against the labels of every step";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("one class index per row is expected"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace frugal
