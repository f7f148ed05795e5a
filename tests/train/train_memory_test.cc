// "Arena allocated = planned" as a user means it: once training runs, no
// kind of tensor memory grows from one logged window to the next (arena,
// parameters and optimizer state, inputs, other), and the process peak stays
// within a small margin of the first window's; and what the tensors hold,
// and their peak over the run, is the plan's PlannedFootprint. Read from
// --log-json's window lines ("bytes" and "process_peak_bytes").
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "frugal/train.h"
#include "test_util.h"

namespace frugal {
namespace {

// The text of "key":<value> in a JSON line: an object's braces or a number.
std::string Field(const std::string& line, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  const size_t at = line.find(k);
  if (at == std::string::npos) return "";
  const size_t from = at + k.size();
  const size_t to = line[from] == '{' ? line.find('}', from) + 1 : line.find_first_of(",}", from);
  return line.substr(from, to - from);
}

TEST(TrainMemory, NoKindGrowsOverTheSteps) {
  const int saved = FLAGS_minloglevel;
  FLAGS_minloglevel = 2;
  test::TempDir dir;
  const std::string text = R"cfg(version: 1
node { name: "conv1" op: "convolution" input: "data" attr { key: "kernel" value: "(3,3)" } attr { key: "pad" value: "(1,1)" } attr { key: "num_filter" value: "8" } }
node { name: "bn1" op: "batch_norm" input: "conv1" }
node { name: "relu1" op: "relu" input: "bn1" }
node { name: "pool1" op: "pooling" input: "relu1" attr { key: "kernel" value: "(2,2)" } attr { key: "stride" value: "(2,2)" } attr { key: "pool_type" value: "max" } }
node { name: "drop1" op: "dropout" input: "pool1" }
node { name: "fc" op: "fully_connected" input: "drop1" attr { key: "num_hidden" value: "10" } }
node { name: "prob" op: "softmax_cross_entropy" input: "fc" input: "label" }
data { train { synthetic { num_samples: 1000 } } val { synthetic { num_samples: 64 } } batch_size: 8 sample_shape: [3, 12, 12] }
solver { optimizer: ADAM lr: 0.01 epochs: 1 max_iters: 120 display: 15 seed: 3 iter_size: 2 clip_gradient: 5 }
memory { strategy: "sqrt" }
)cfg";
  TrainOptions opts;
  opts.log_json = dir.File("log.json");
  const ConfigFile cfg = ParseConfig(text, "memory.prototxt", {});
  MemoryAccounting::Get().ResetPeaks();
  Train(cfg, opts);
  const int64_t peak = MemoryAccounting::Get().Peak(Device{});
  FLAGS_minloglevel = saved;
  std::ifstream in(opts.log_json);
  std::vector<std::string> windows;
  for (std::string line; std::getline(in, line);)
    if (line.find("\"batch\":") != std::string::npos) windows.push_back(line);
  ASSERT_GE(windows.size(), 6u) << "expected a window every 15 of 120 batches";
  const std::string first = Field(windows[0], "bytes");
  ASSERT_FALSE(Field(first, "arena").empty() || Field(first, "arena") == "0") << windows[0];
  // What the plan predicts is what the tensors hold: the arenas, the
  // parameters with their gradients, optimizer state and sums, the inputs.
  const int64_t held =
      std::stoll(Field(first, "arena")) + std::stoll(Field(first, "param")) + std::stoll(Field(first, "input"));
  const int64_t planned = PlannedFootprint(BuildModel(cfg, MemoryStrategy::kSqrt));
  EXPECT_EQ(held, planned) << first;
  EXPECT_EQ(peak, planned + std::stoll(Field(first, "other"))) << first;
  const double peak0 = std::stod(Field(windows[0], "process_peak_bytes"));
#ifdef FRUGAL_TEST_SANITIZED
  const double bound = 64.0 * (1 << 20);  // a sanitizer's quarantine holds freed memory (16.3 MiB under ASan)
#else
  const double bound = 16.0 * (1 << 20);
#endif
  for (size_t w = 1; w < windows.size(); ++w) {
    EXPECT_EQ(Field(windows[w], "bytes"), first) << "window " << w << " holds other tensor bytes than the first";
    const double grown = std::stod(Field(windows[w], "process_peak_bytes")) - peak0;
    EXPECT_LE(grown, bound) << "window " << w << ": the process peak grew by " << grown / (1 << 20)
                            << " MiB since the first window";
  }
#ifndef FRUGAL_TEST_SANITIZED  // their quarantines grow the heap
  // Per step, past the first two windows (the allocators' first growth,
  // 50-65 KiB here): at most 16 KiB a step on average, so a leak of a few
  // tensors a step shows within the run (it grew by 0-25 KiB in all, 90
  // steps, measured).
  const double from = std::stod(Field(windows[1], "process_peak_bytes"));
  const double steps = 15.0 * static_cast<double>(windows.size() - 2);
  const double per_step = (std::stod(Field(windows.back(), "process_peak_bytes")) - from) / steps;
  EXPECT_LE(per_step, 16.0 * 1024) << "the process peak grew by " << per_step / 1024 << " KiB a step after window 1";
#endif
}

}  // namespace
}  // namespace frugal
