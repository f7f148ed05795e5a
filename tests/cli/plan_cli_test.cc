// `frugal test` (all of data.val, or --val-batches of it), `summary`, `viz` and `plan` on a trained toy model, and
// the process-wide memory plans: --fit's largest batch of each strategy,
// limit=SIZE holding the whole process, budget=auto saying what it chose.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>

#include "test_util.h"
#include "cli/train_cli_util.h"

namespace frugal::test {
namespace {

TEST(TrainCli, TestSummaryAndViz) {
  TempDir dir;
  std::string cfg;
  const std::string ckpt = train_cli::TrainOneEpoch(dir, &cfg);
  RunResult t = RunFrugal("test --config " + cfg + " --checkpoint " + ckpt);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(t.output, m, std::regex("test-accuracy=([0-9.]+)"))) << t.output;
  EXPECT_GT(std::stod(m[1]), 0.9) << "the trained toy model";
  EXPECT_NE(t.output.find("(40 samples)"), std::string::npos) << t.output;
  // --val-batches: the first batches of the set (batch 8), all of it when it asks for more.
  RunResult two = RunFrugal("test --config " + cfg + " --checkpoint " + ckpt + " --val-batches 2");
  EXPECT_NE(two.output.find("(16 samples)"), std::string::npos) << two.output;
  RunResult more = RunFrugal("test --config " + cfg + " --checkpoint " + ckpt + " --val-batches 100");
  EXPECT_NE(more.output.find("(40 samples)"), std::string::npos) << more.output;
  RunResult negative = RunFrugal("test --config " + cfg + " --checkpoint " + ckpt + " --val-batches -1");
  EXPECT_EQ(negative.exit_code, 1);
  EXPECT_NE(train_cli::ErrorLine(negative).find("--val-batches -1: must be at least 0"), std::string::npos)
      << negative.output;
  RunResult bad = RunFrugal("test --config " + cfg + " --checkpoint " + dir.File("nope.ckpt"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(train_cli::ErrorLine(bad).find(dir.File("nope.ckpt")), std::string::npos) << bad.output;

  RunResult s = RunFrugal("summary --config " + cfg);
  ASSERT_EQ(s.exit_code, 0) << s.output;
  // fc1: 16 x 16 weights + 16 biases; its output (8 x 16 floats) is kept for relu's gradient? No: relu
  // reads its own output, and fc2's gradient reads relu1's; fc1's output dies in the forward pass.
  EXPECT_TRUE(std::regex_search(s.output, std::regex("fc1 +fully_connected +\\(8,16\\) +272 "))) << s.output;
  EXPECT_TRUE(std::regex_search(s.output, std::regex("relu1 +relu +\\(8,16\\) +0 +[0-9.e+]+ +512 B"))) << s.output;
  EXPECT_NE(s.output.find("total (share, batch 8): 340 parameters"), std::string::npos) << s.output;

  RunResult v = RunFrugal("viz --config " + cfg + " --memory share");
  ASSERT_EQ(v.exit_code, 0) << v.output;
  EXPECT_NE(v.output.find("digraph"), std::string::npos);
  EXPECT_NE(v.output.find("n1 -> "), std::string::npos) << v.output;
  EXPECT_EQ(v.output.find("style=\"dashed"), std::string::npos) << "share recomputes nothing";
  EXPECT_NE(v.output.find("share: 0 nodes recomputed"), std::string::npos) << v.output;
}

// plan --fit prints the largest batch per strategy (recomputing strategies
// fit more), the process counted as --memory-limit counts it: the size is
// 136 MiB above the process's resident set (about 24 MiB here, several
// hundred under a sanitizer's shadow memory).
TEST(TrainCli, PlanFitFindsTheLargestBatchOfEachStrategy) {
  RunResult none = RunFrugal("plan --config models/lstm/char_lm.prototxt --memory none --fit 1KB");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(none.output, m, std::regex("= resident ([0-9.]+) MiB"))) << none.output;
  const int64_t fit = static_cast<int64_t>(std::stod(m[1])) + 136;
  RunResult r = RunFrugal(Fmt("plan --config models/lstm/char_lm.prototxt --memory all --fit ", fit, "MiB"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, int64_t> batch;
  std::regex line(Fmt("(\\w+) +batch +(\\d+)  process [0-9.]+ [KMG]iB = resident .* \\+ runtime [0-9.]+ MiB, of ", fit,
                      ".00 MiB  \\(\\d+ plans in [0-9.]+ s\\)"));
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), line), end; it != end; ++it)
    batch[(*it)[1]] = std::stoll((*it)[2]);
  ASSERT_EQ(batch.size(), 6u) << r.output;
  EXPECT_GE(batch["none"], 1) << r.output;
  EXPECT_LE(batch["none"], batch["share"]) << r.output;
  EXPECT_LT(batch["share"], batch["sqrt"]) << r.output;
  EXPECT_NE(none.output.find("none         does not fit: batch 1 needs"), std::string::npos) << none.output;
}

// train --memory-limit between the smallest process that fits and share's
// trains with recomputation, and its peak resident set (as the run reports
// it) stays within the limit; plan's answer to a limit too small plans.
TEST(TrainCli, MemoryLimitBoundsTheProcess) {
  const std::string cfg = "plan --config models/resnet/resnet_cifar.prototxt --define batch=32";
  RunResult small = RunFrugal(cfg + " --memory-limit 1MiB");
  ASSERT_NE(small.exit_code, 0) << small.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(small.output, m, std::regex("use --memory-limit (\\d+)MiB or more"))) << small.output;
  const int64_t smallest = std::stoll(m[1]);
#ifdef FRUGAL_TEST_SANITIZED
  // A sanitizer's resident set varies by a few MiB between processes (the
  // answer allows 1 MiB, the variation without one).
  const int64_t answer_limit = smallest + 8;
#else
  const int64_t answer_limit = smallest;
#endif
  RunResult answer = RunFrugal(Fmt(cfg, " --memory-limit ", answer_limit, "MiB"));
  ASSERT_EQ(answer.exit_code, 0) << answer.output;
  RunResult share = RunFrugal(cfg + " --memory-limit 100GiB");
  ASSERT_EQ(share.exit_code, 0) << share.output;
  ASSERT_TRUE(std::regex_search(share.output, m, std::regex("process peak ([0-9.]+) MiB = resident"))) << share.output;
  const int64_t limit = (smallest + static_cast<int64_t>(std::stod(m[1]))) / 2;
  RunResult t = RunFrugal("train --config models/resnet/resnet_cifar.prototxt --define batch=32 --max-iters 3 " +
                          Fmt("--memory-limit ", limit, "MiB --progress=false"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_TRUE(std::regex_search(t.output, std::regex("memory plan \\(limit=\\d+MiB.* nodes recomputed"))) << t.output;
  ASSERT_TRUE(std::regex_search(t.output, m, std::regex("process peak ([0-9.]+) MiB \\(planned"))) << t.output;
#ifdef FRUGAL_TEST_SANITIZED
  GTEST_SKIP() << "the peak is a sanitizer's: its shadow memory and quarantine are not the process's own";
#endif
  EXPECT_LE(std::stod(m[1]), static_cast<double>(limit)) << t.output;
}

// train --memory budget=auto says what budget it chose.
TEST(TrainCli, BudgetAutoSaysWhatItChose) {
  TempDir dir;
  train_cli::WriteToy(dir);
  RunResult t =
      RunFrugal("train --config " + dir.Write("toy.prototxt", train_cli::ToyConfig(dir, "lr: 0.1 epochs: 1")) +
                " --memory budget=auto");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const std::regex chose("budget=auto: [0-9.]+ [KMGT]iB for the training arena \\(cpu\\(0\\) has");
  EXPECT_TRUE(std::regex_search(t.output, chose)) << t.output;
}

}  // namespace
}  // namespace frugal::test
