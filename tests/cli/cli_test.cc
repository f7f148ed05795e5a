// The frugal binary end to end: training on small IDX files, the plan
// report, and one-line errors with a non-zero exit for bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "frugal/io.h"
#include "test_util.h"

namespace frugal::test {
namespace {

std::string ToyConfig(const TempDir& dir) {
  return "version: 1\n"
         "variable { name: \"batch\" value: \"8\" }\n"
         "node { name: \"fc1\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: \"16\" } }\n"
         "node { name: \"relu1\" op: \"relu\" input: \"fc1\" }\n"
         "node { name: \"fc2\" op: \"fully_connected\" input: \"relu1\" attr { key: \"num_hidden\" value: \"4\" } }\n"
         "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc2\" input: \"label\" }\n" +
         ToyDataSection(dir, "${batch}") + "solver { lr: 0.1 momentum: 0.9 epochs: 3 display: 10 }\n";
}

// The error line: exactly one line starting with "frugal: error:".
std::string ErrorLine(const RunResult& r) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(r.output, m, std::regex("frugal: error: [^\n]*"))) << r.output;
  EXPECT_EQ(r.output.find("Check failed"), std::string::npos) << r.output;
  return m.size() ? m.str(0) : "";
}

TEST(Cli, TrainsAndWritesJsonLog) {
  TempDir dir;
  WriteToyData(dir, "train", 200);
  WriteToyData(dir, "val", 40);
  std::string cfg = dir.Write("toy.prototxt", ToyConfig(dir));
  RunResult r = RunFrugal("train --config " + cfg + " --log-json " + dir.File("log.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("memory plan (share, batch 8)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Epoch[0] Batch [0-10]  Speed: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Epoch[2] Validation-accuracy="), std::string::npos) << r.output;
  std::ifstream log(dir.File("log.json"));
  std::string line, last;
  int epochs = 0, intervals = 0;
  while (std::getline(log, line)) {
    if (line.find("\"time_s\":") != std::string::npos) {
      ++epochs;
      last = line;
    } else if (line.find("\"batch\":") != std::string::npos) {
      ++intervals;
    }
  }
  EXPECT_EQ(epochs, 3) << "one line per epoch";
  EXPECT_GT(intervals, 0) << "and one per logged interval";
  std::smatch m;
  ASSERT_TRUE(std::regex_search(last, m, std::regex("\"val_accuracy\":([0-9.]+)"))) << last;
  EXPECT_GT(std::stod(m[1]), 0.9) << "the toy problem is separable";
  EXPECT_NE(last.find("\"samples_per_s\":"), std::string::npos);
  EXPECT_NE(last.find("\"peak_bytes\":"), std::string::npos);
}

// A run without a checkpoint directory ends by saying nothing was saved; a
// run with one does not.
TEST(Cli, ARunWithoutACheckpointDirSaysNothingWasSaved) {
  TempDir dir;
  WriteToyData(dir, "train", 32);
  WriteToyData(dir, "val", 8);
  std::string cfg = dir.Write("toy.prototxt", ToyConfig(dir));
  RunResult r = RunFrugal("train --config " + cfg + " --epochs 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("nothing was saved: no checkpoint directory (give --checkpoint-dir DIR"), std::string::npos)
      << r.output;
  RunResult k = RunFrugal("train --config " + cfg + " --epochs 1 --checkpoint-dir " + dir.File("ck"));
  ASSERT_EQ(k.exit_code, 0) << k.output;
  EXPECT_EQ(k.output.find("nothing was saved"), std::string::npos) << k.output;
  EXPECT_NE(k.output.find("checkpoint " + dir.File("ck") + "/ckpt-0000000004.frugal"), std::string::npos) << k.output;
}

// A window's speed is timed from when the batch before it was in; the
// epoch's first batch alone (display 1) has nothing timed: no speed, rather
// than one read off its forward pass alone (about 4x too fast).
TEST(Cli, TheFirstBatchOfAnEpochIsNotTimed) {
  TempDir dir;
  WriteToyData(dir, "train", 32);
  WriteToyData(dir, "val", 8);
  std::string text = ToyConfig(dir);
  text.replace(text.find("display: 10"), 11, "display: 1");
  std::string cfg = dir.Write("toy.prototxt", text);
  RunResult r = RunFrugal("train --config " + cfg + " --epochs 2 --log-json " + dir.File("log.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Epoch[1] Batch [0-1]  Speed: - samples/sec"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Epoch[1] Batch [1-2]  Speed: "), std::string::npos) << r.output;
  std::ifstream log(dir.File("log.json"));
  std::string line;
  int timed = 0, untimed = 0;
  while (std::getline(log, line)) {
    if (line.find("\"batch\":") == std::string::npos) continue;
    const bool first = line.find("\"batch\":1,") != std::string::npos;
    const bool has = line.find("\"samples_per_s\":") != std::string::npos;
    EXPECT_EQ(has, !first) << line;
    (has ? timed : untimed) += 1;
  }
  EXPECT_EQ(untimed, 2) << "the first window of each epoch";
  EXPECT_EQ(timed, 6) << "the other windows: 4 batches per epoch";
}

// An epoch's last window is logged however few batches it has, so a run
// shorter than `display` still logs (and sends TensorBoard) its training
// metrics; a run cut by --max-iters logs its last batches.
TEST(Cli, TheLastWindowIsLoggedHoweverShort) {
  TempDir dir;
  WriteToyData(dir, "train", 64);  // 8 batches an epoch, display 10
  WriteToyData(dir, "val", 8);
  std::string cfg = dir.Write("toy.prototxt", ToyConfig(dir));
  RunResult r = RunFrugal("train --config " + cfg + " --epochs 2 --tensorboard " + dir.File("tb"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Epoch[0] Batch [0-8]  Speed: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Epoch[1] Batch [0-8]  Speed: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("samples/sec  window: accuracy="), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("tokens/sec"), std::string::npos) << "a classifier has no tokens";
  int train_accuracy = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir.File("tb"))) {
    std::ifstream in(f.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t at = bytes.find("train/accuracy"); at != std::string::npos; at = bytes.find("train/accuracy", at + 1))
      ++train_accuracy;
  }
  EXPECT_EQ(train_accuracy, 2) << "one window at each epoch's end";
  RunResult cut = RunFrugal("train --config " + cfg + " --max-iters 13");
  ASSERT_EQ(cut.exit_code, 0) << cut.output;
  EXPECT_NE(cut.output.find("Epoch[1] Batch [0-5]  Speed: "), std::string::npos) << cut.output;
}

// A language model (a label per input position) reports tokens/s beside
// samples/s: samples times the sequence length.
TEST(Cli, ALanguageModelReportsTokensPerSecond) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  const std::string corpus = dir.Write("corpus.txt", text);
  RunResult r =
      RunFrugal("train --config models/lstm/char_lm.prototxt --define train=" + corpus + " --define val=" + corpus +
                " --define seq_len=16 --define batch=8 --max-iters 6 --log-json " + dir.File("log.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("samples/sec \\([0-9.]+ tokens/sec\\)  window: "))) << r.output;
  std::ifstream log(dir.File("log.json"));
  std::string line;
  int windows = 0;
  std::smatch samples, tokens;
  while (std::getline(log, line)) {
    if (!std::regex_search(line, samples, std::regex("\"samples_per_s\":([0-9.e+-]+)"))) continue;
    ASSERT_TRUE(std::regex_search(line, tokens, std::regex("\"tokens_per_s\":([0-9.e+-]+)"))) << line;
    EXPECT_NEAR(std::stod(tokens[1]), 16 * std::stod(samples[1]), 1e-3 * std::stod(tokens[1])) << line;
    ++windows;
  }
  EXPECT_GE(windows, 2) << "a window and the epoch's line";
  // The epoch's samples, not its predictions (16 a sample).
  EXPECT_NE(ReadTextFile(dir.File("log.json")).find("\"samples\":48,"), std::string::npos) << "6 batches of 8";
}

// frugal train prints one line of the graph at INFO (its ops, parameters
// and memory plan); the table of nodes, a fused pair as "bn1 (+relu1)",
// under --v=1 and in frugal summary.
TEST(Cli, TrainPrintsOneGraphLineAndTheTableUnderV1) {
  TempDir dir;
  WriteToyData(dir, "train", 16);
  WriteToyData(dir, "val", 8);
  std::string cfg = dir.Write("toy.prototxt", ToyConfig(dir));
  RunResult r = RunFrugal("train --config " + cfg + " --epochs 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("graph: [0-9]+ ops, 340 parameter values; memory plan \\(share")))
      << r.output;
  EXPECT_EQ(r.output.find("output shape"), std::string::npos) << "no table at INFO";
  RunResult v = RunFrugal("train --config " + cfg + " --epochs 1 --v=1");
  ASSERT_EQ(v.exit_code, 0) << v.output;
  EXPECT_TRUE(std::regex_search(v.output, std::regex("\nfc1 +fully_connected +\\(8,16\\)"))) << v.output;
  RunResult s = RunFrugal("summary --config models/resnet/resnet_cifar.prototxt --define depth=20");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_NE(s.output.find("stage1/bn1 (+stage1/relu1)"), std::string::npos) << s.output;
}

// A folder given where a file is read says so, in one line (it read as an
// empty file: "expected a value", "the file is empty", "no ms_per_flop line").
TEST(Cli, AFolderGivenForAFileSaysSo) {
  TempDir dir;
  RunResult r = RunFrugal("import-onnx " + dir.path() + " --out " + dir.File("m"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(ErrorLine(r).find(dir.path() + ": is a folder; give the ONNX model file"), std::string::npos) << r.output;
  r = RunFrugal("import-mxnet " + dir.path() + " " + dir.path() + " --out " + dir.File("m"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(ErrorLine(r).find(dir.path() + ": is a folder; give the MXNet symbol file"), std::string::npos) << r.output;
  r = RunFrugal("plan --config models/mlp/fashion_mnist.prototxt --costs " + dir.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(ErrorLine(r).find(dir.path() + ": is a folder; give the cost table"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.File("m.prototxt"))) << "nothing written";
}

TEST(Cli, FlagsOverrideTheConfig) {
  TempDir dir;
  WriteToyData(dir, "train", 64);
  WriteToyData(dir, "val", 8);
  std::string cfg = dir.Write("toy.prototxt", ToyConfig(dir));
  RunResult r = RunFrugal("train --config " + cfg + " --define batch=4 --max-iters 5 --epochs 9 --engine naive");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("batch 4"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Epoch[1]"), std::string::npos) << "max-iters 5 stops inside epoch 0";
}

// The eval executor's arena is allocated for a run with validation data
// (from its start): a run without never holds it, and says so.
TEST(Cli, TheEvalArenaIsAllocatedOnlyForAValidation) {
  TempDir dir;
  WriteToyData(dir, "train", 64);
  WriteToyData(dir, "val", 8);
  std::string text = ToyConfig(dir);
  const size_t val = text.find("       val {");
  const std::string cfg = dir.Write("noval.prototxt", text.erase(val, text.find('\n', val) + 1 - val));
  const std::regex line(
      "arenas allocated ([0-9.]+ [KMG]?i?B) \\(planned ([0-9.]+ [KMG]?i?B): train ([0-9.]+ [KMG]?i?B)");
  std::smatch m;
  RunResult r = RunFrugal("train --config " + cfg + " --max-iters 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(std::regex_search(r.output, m, line)) << r.output;
  EXPECT_EQ(m[1], m[2]);
  EXPECT_EQ(m[2], m[3]) << "the train arena alone";
  EXPECT_NE(r.output.find("not allocated: no validation ran"), std::string::npos) << r.output;
  r = RunFrugal("train --config " + dir.Write("val.prototxt", ToyConfig(dir)) + " --max-iters 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(std::regex_search(r.output, m, line)) << r.output;
  EXPECT_EQ(m[1], m[2]);
  EXPECT_NE(m[2], m[3]) << "train and eval";
}

TEST(Cli, PlanJsonHasOneObjectPerStrategy) {
  RunResult r = RunFrugal("plan --config models/mlp/fashion_mnist.prototxt --memory all --json --batch 32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"none", "inplace", "share"}) {
    std::regex obj(std::string("\\{\"strategy\":\"") + s +
                   "\",\"batch\":32,\"arena_bytes\":[0-9]+,\"lower_bound_bytes\":[0-9]+,\"param_bytes\":2678824");
    EXPECT_TRUE(std::regex_search(r.output, obj)) << s << "\n" << r.output;
  }
}

// The text plan: a line naming the config, its defines, batch, data shape,
// dtype and optimizer, a header of named columns, and per strategy the
// total of what training holds (arenas, parameters, gradients, optimizer
// state, inputs) beside the arena and the live peak.
TEST(Cli, PlanTextHasAHeaderAndTheTotal) {
  RunResult r = RunFrugal("plan --config models/mlp/fashion_mnist.prototxt --memory share --define batch=32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("models/mlp/fashion_mnist.prototxt --define batch=32: batch 32, data (32,1,28,28), "
                          "float32, sgd\n"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("strategy +arena +live peak +params +gradients +opt state +inputs "
                                                     "+other +total")))
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\nshare +[0-9.]+ KiB +[0-9.]+ KiB +2.55 MiB +2.55 MiB +2.55 MiB "
                                                     "+[0-9.]+ KiB +[0-9.]+ KiB +[0-9.]+ MiB ")))
      << r.output;
}

// --timeline: one SVG, first every strategy on one scale (a line each),
// then a panel per strategy with its figures, the backward pass marked and
// the tensors live at its peak; the title names the defines; a file that
// cannot be written is named.
TEST(Cli, PlanTimelineDrawsEveryStrategy) {
  TempDir dir;
  RunResult r = RunFrugal(
      "plan --config models/mlp/fashion_mnist.prototxt --memory all --batch 32 --define hidden=256 --timeline " +
      dir.File("t.svg"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(dir.File("t.svg"));
  const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u) << svg.substr(0, 100);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  for (const char* s : {"none: arena", "share: arena", "sqrt: arena", "logn: arena"})
    EXPECT_NE(svg.find(s), std::string::npos) << s;
  EXPECT_NE(svg.find("peak "), std::string::npos);
  EXPECT_NE(svg.find("fc1"), std::string::npos) << "the peak names its tensors";
  EXPECT_NE(svg.find("hidden=256, batch 32: live arena bytes"), std::string::npos) << "the title";
  EXPECT_NE(svg.find("every strategy on one scale"), std::string::npos);
  auto count = [&](const std::string& what) {
    int n = 0;
    for (size_t at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<polyline"), 6) << "a line per strategy in the overview";
  EXPECT_EQ(count(">backward</text>"), 6) << "each panel marks its backward pass";
  EXPECT_EQ(count(">live bytes</text>"), 7) << "every y axis is named";
  r = RunFrugal("plan --config models/mlp/fashion_mnist.prototxt --timeline " + dir.File("no/such/dir/t.svg"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(ErrorLine(r).find("--timeline " + dir.File("no/such/dir/t.svg") + ": cannot write (No such file"),
            std::string::npos)
      << r.output;
  r = RunFrugal("plan --config models/mlp/fashion_mnist.prototxt --timeline t.pdf");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(ErrorLine(r).find("--timeline t.pdf: the timeline is an SVG or a PNG file"), std::string::npos) << r.output;
  // The same drawing as a PNG: a real one (its signature and IHDR's size), as
  // wide as the SVG and as tall.
  r = RunFrugal(
      "plan --config models/mlp/fashion_mnist.prototxt --memory all --batch 32 --define hidden=256 "
      "--timeline " +
      dir.File("t.png"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string png = ReadTextFile(dir.File("t.png"));
  ASSERT_GT(png.size(), 24u);
  EXPECT_EQ(png.substr(0, 8), "\x89PNG\r\n\x1a\n");
  auto be32 = [&](size_t at) {
    return (uint32_t(uint8_t(png[at])) << 24) | (uint32_t(uint8_t(png[at + 1])) << 16) |
           (uint32_t(uint8_t(png[at + 2])) << 8) | uint32_t(uint8_t(png[at + 3]));
  };
  std::smatch size;
  ASSERT_TRUE(std::regex_search(svg, size, std::regex("width=\"([0-9]+)\" height=\"([0-9]+)\""))) << svg.substr(0, 200);
  EXPECT_EQ(be32(16), std::stoul(size[1])) << "width";
  EXPECT_EQ(be32(20), std::stoul(size[2])) << "height";
  EXPECT_GT(png.size(), 20000u) << "lines, areas and text, not a blank page";
}

// --explain: which step of the planner chose the plan, its peak with the
// tensors live there, and a line per block saying what it recomputes; it
// explains one plan, so --memory all is refused in one line.
TEST(Cli, PlanExplainSaysWhoChoseThePlanAndWhatEachBlockRecomputes) {
  RunResult r = RunFrugal("plan --config models/lenet/fashion_mnist.prototxt --memory drop_cheap --explain");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("drop_cheap: chosen by drop_cheap; peak [0-9.]+ [KM]iB at step")))
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\n +1 +2  bn1 \\.\\. relu1 +all "))) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\n +0 +1  conv1 +nothing "))) << r.output;
  r = RunFrugal("plan --config models/lenet/fashion_mnist.prototxt --memory budget=15MB --explain");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("budget=15MB: chosen by [a-z_ ,]+; peak "))) << r.output;
  r = RunFrugal("plan --config models/lenet/fashion_mnist.prototxt --memory all --explain");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(ErrorLine(r).find("--explain explains one plan"), std::string::npos) << r.output;
  // Flags that cannot combine are one line, not one silently dropped.
  r = RunFrugal("plan --config models/lenet/fashion_mnist.prototxt --fit 100MB --timeline t.svg");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(ErrorLine(r).find("--fit plans many batch sizes and --timeline draws one plan: drop one"),
            std::string::npos)
      << r.output;
}

// --diff A,B: both plans' figures, then each block where what they
// recompute differs; one strategy alone is refused in one line.
TEST(Cli, PlanDiffShowsTheBlocksWhereTwoPlansDiffer) {
  RunResult r = RunFrugal("plan --config models/lenet/fashion_mnist.prototxt --diff share,drop_cheap");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("share -> drop_cheap: arena [0-9.]+ MiB -> [0-9.]+ MiB, recompute "
                                                     "0.0 -> [0-9.]+ MFLOP")))
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\n +1  bn1 \\.\\. relu1 +nothing +all "))) << r.output;
  EXPECT_EQ(r.output.find("conv1  "), std::string::npos) << "conv1 is kept by both: not a difference\n" << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\n[1-9] of 9 blocks differ\n"))) << r.output;
  r = RunFrugal("plan --config models/lenet/fashion_mnist.prototxt --diff share");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(ErrorLine(r).find("--diff share: give two strategies or budgets separated by a comma"), std::string::npos)
      << r.output;
}

TEST(Cli, MalformedConfigGivesFileLineAndExit1) {
  TempDir dir;
  std::string cfg = dir.Write("bad.prototxt", "version: 1\nnode { name: \"a\" op: \"relu\" input: \"data\"\n");
  RunResult r = RunFrugal("plan --config " + cfg);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(ErrorLine(r).find(cfg + ":3:"), std::string::npos) << r.output;
}

// The config mistakes of a first hour: each says the fix.
TEST(Cli, ConfigMistakesSayTheFix) {
  TempDir dir;
  WriteToyData(dir, "train", 16);
  WriteToyData(dir, "val", 8);
  const std::string toy = ToyConfig(dir);
  auto with = [&](const std::string& name, const std::string& from, const std::string& to) {
    std::string text = toy;
    text.replace(text.find(from), from.size(), to);
    return dir.Write(name, text);
  };
  // An enum value that is not one: the values, the nearest first.
  const std::string adam = with("enum.prototxt", "lr: 0.1", "optimizer: Adam lr: 0.1");
  RunResult r = RunFrugal("plan --config " + adam);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(ErrorLine(r).find(adam + ":10:"), std::string::npos) << r.output;
  EXPECT_NE(ErrorLine(r).find("optimizer: 'Adam' is not one of SGD, NESTEROV, ADAM, ADAMW, RMSPROP (did you mean "
                              "ADAM?)"),
            std::string::npos)
      << r.output;
  // A field the optimizer does not read: a warning naming the line.
  const std::string mom = with("mom.prototxt", "lr: 0.1", "optimizer: ADAM lr: 0.1");
  r = RunFrugal("plan --config " + mom);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(mom + ":10: solver.momentum is ignored: optimizer ADAM reads beta1, beta2, eps and "
                                "weight_decay"),
            std::string::npos)
      << r.output;
  r = RunFrugal("plan --config " + dir.Write("sgd.prototxt", toy));
  EXPECT_EQ(r.output.find("is ignored"), std::string::npos) << "SGD reads momentum\n" << r.output;
  // No loss: the file is named.
  const std::string noloss = with(
      "noloss.prototxt", "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc2\" input: \"label\" }\n", "");
  r = RunFrugal("plan --config " + noloss);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(ErrorLine(r).find(noloss + ": the net has no loss op to train"), std::string::npos) << r.output;
  // A relative data path that is not there: read relative to which folder.
  const std::string rel = with("rel.prototxt", dir.File("train-images"), "nope/train-images");
  r = RunFrugal("train --config " + rel);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(ErrorLine(r).find("data.train: nope/train-images is read relative to the working directory /"),
            std::string::npos)
      << r.output;
}

TEST(Cli, MissingDataFileIsNamed) {
  TempDir dir;
  WriteToyData(dir, "val", 8);
  std::string cfg = dir.Write("toy.prototxt", ToyConfig(dir));
  RunResult r = RunFrugal("train --config " + cfg);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(ErrorLine(r).find(dir.File("train-images")), std::string::npos) << r.output;
}

TEST(Cli, TruncatedIdxIsRefused) {
  TempDir dir;
  WriteToyData(dir, "train", 64);
  WriteToyData(dir, "val", 8);
  std::vector<uint8_t> images(64 * 16, 1);
  WriteIdx(dir.File("train-images"), {64, 4, 4}, images, 100);
  std::string cfg = dir.Write("toy.prototxt", ToyConfig(dir));
  RunResult r = RunFrugal("train --config " + cfg);
  EXPECT_EQ(r.exit_code, 1);
  std::string e = ErrorLine(r);
  EXPECT_NE(e.find(dir.File("train-images")), std::string::npos) << r.output;
  EXPECT_NE(e.find("truncated"), std::string::npos) << r.output;
}

TEST(Cli, UnknownCommandAndFlag) {
  RunResult r = RunFrugal("trian");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output,
            "frugal: error: unknown command 'trian' (did you mean 'train'?); 'frugal help' lists the commands\n");
  r = RunFrugal("plan --config models/mlp/fashion_mnist.prototxt --no-such-flag");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output,
            "frugal: error: --no-such-flag is not a flag of 'frugal plan'; 'frugal plan --help' lists its flags\n");
  r = RunFrugal("train --confg models/mlp/fashion_mnist.prototxt");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--confg is not a flag of 'frugal train' (did you mean --config?)"), std::string::npos)
      << r.output;
  // A flag of another command is refused, not silently ignored.
  r = RunFrugal("train --config models/mlp/fashion_mnist.prototxt --iters 3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--iters is a flag of 'frugal time', not of 'frugal train'"), std::string::npos) << r.output;
  // A flag that several commands take names them all.
  r = RunFrugal("plan --config models/mlp/fashion_mnist.prototxt --gpus 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--gpus is a flag of 'frugal time' or 'frugal train', not of 'frugal plan'"),
            std::string::npos)
      << r.output;
  r = RunFrugal("ops --timeline t.svg");  // plan's, not ops' (ops shares only --json)
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--timeline is a flag of 'frugal plan', not of 'frugal ops'"), std::string::npos) << r.output;
  r = RunFrugal("ops --config models/mlp/fashion_mnist.prototxt");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--config is a flag of 'frugal export-onnx' or "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(", not of 'frugal ops'"), std::string::npos) << r.output;
  // The solver's flags act on train alone; the engine's on what runs ops.
  r = RunFrugal("test --config models/mlp/fashion_mnist.prototxt --checkpoint x --lr 0.1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--lr is a flag of 'frugal train', not of 'frugal test'"), std::string::npos) << r.output;
  r = RunFrugal("summary --config models/mlp/fashion_mnist.prototxt --engine naive");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(
      r.output.find("--engine is a flag of 'frugal plan' or 'frugal predict' or 'frugal test' or 'frugal time' or "
                    "'frugal train', not of 'frugal summary'"),
      std::string::npos)
      << r.output;
}

// 'frugal CMD --help' and 'frugal help CMD': every flag of the command with its
// default, and nothing of the other commands.
TEST(Cli, CommandHelpListsEveryFlagWithItsDefault) {
  RunResult r = RunFrugal("time --help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, RunFrugal("help time").output);
  for (const char* line : {"usage: frugal time [flags]", "  --iters ", "timed iterations (after the warm-up) [20]",
                           "  --memory ", "  --config ", "network config (.prototxt) [\"\"]", "--define NAME=VALUE"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  for (const char* train_only : {"--resume", "--lr ", "--epochs ", "--checkpoint-dir "})
    EXPECT_EQ(r.output.find(train_only), std::string::npos) << train_only << ": a flag of train\n" << r.output;
  r = RunFrugal("train -h");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {"--resume ", "--progress ", "[true]", "--max-iters ", "[-1]"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  r = RunFrugal("help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("  im2rec "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'frugal COMMAND --help'"), std::string::npos) << r.output;
  r = RunFrugal("help nosuch");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("frugal: error: no command 'nosuch'"), std::string::npos) << r.output;
}

// Every flag defined in tools/frugal/*.cc is in some command's list (Commands
// in tools/frugal/main.cc), so some 'frugal CMD --help' shows it: a flag in
// no list would be taken by every command and shown by none.
TEST(Cli, EveryFlagOfTheToolBelongsToACommand) {
  RunResult r = RunFrugal("help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string commands = r.output.substr(r.output.find("commands:"));
  const std::regex command_line("\n  (\\S+) "), flag_line("\n  --([a-z0-9-]+) ");
  std::set<std::string> shown;
  for (std::sregex_iterator c(commands.begin(), commands.end(), command_line), end; c != end; ++c) {
    const RunResult h = RunFrugal((*c)[1].str() + " --help");
    ASSERT_EQ(h.exit_code, 0) << (*c)[1] << "\n" << h.output;
    for (std::sregex_iterator f(h.output.begin(), h.output.end(), flag_line); f != end; ++f) shown.insert((*f)[1]);
  }
  int defined = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(FRUGAL_SOURCE_DIR) + "/tools/frugal")) {
    if (e.path().extension() != ".cc") continue;
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string source = text.str();
    const std::regex define("DEFINE_\\w+\\(\\s*(\\w+)");
    for (std::sregex_iterator d(source.begin(), source.end(), define), end; d != end; ++d, ++defined) {
      std::string name = (*d)[1];
      std::replace(name.begin(), name.end(), '_', '-');
      EXPECT_TRUE(shown.count(name)) << "--" << name << " (" << e.path().filename().string()
                                     << ") is taken by no command: add it to a command's flags (or kConfigFlags) "
                                        "in tools/frugal/main.cc";
    }
  }
  EXPECT_GT(defined, 0) << "no DEFINE_ found in tools/frugal";
}

TEST(Cli, PrintsTheEngineAtStart) {
  TempDir dir;
  WriteToyData(dir, "train", 32);
  WriteToyData(dir, "val", 8);
  std::string cfg = dir.Write("toy.prototxt", ToyConfig(dir));
  RunResult r = RunFrugal("train --config " + cfg + " --max-iters 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(", engine threaded (cpu: "), std::string::npos) << "the default\n" << r.output;
  r = RunFrugal("train --config " + cfg + " --max-iters 2 --engine-workers 2 --engine-kernel-threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(", engine threaded (cpu: 2 workers x 1 kernel thread, io: 1 thread"), std::string::npos)
      << r.output;
  r = RunFrugal("train --config " + cfg + " --max-iters 2 --engine naive");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(", engine naive ("), std::string::npos) << r.output;
  r = RunFrugal("train --config " + cfg + " --engine turbo");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(ErrorLine(r).find("unknown engine 'turbo' (built: naive, threaded)"), std::string::npos) << r.output;
}

// frugal time reports the median of the steps timed one by one, between the
// fastest and the slowest, without the data gradient unless asked (a
// training step computes none); --iters 0 is refused by the flag's range.
TEST(Cli, TimeReportsTheMedianStepWithItsSpread) {
  TempDir dir;
  WriteToyData(dir, "train", 32);
  WriteToyData(dir, "val", 8);
  std::string cfg = dir.Write("toy.prototxt", ToyConfig(dir));
  RunResult r = RunFrugal("time --config " + cfg + " --iters 3 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  const std::regex step(R"(step \(forward \+ backward, batch \d+\): ([0-9.]+) ms, [0-9.]+ samples/s )"
                        R"(\(median of 3 after 0 warm-up; fastest ([0-9.]+) ms, slowest ([0-9.]+) ms\))");
  ASSERT_TRUE(std::regex_search(r.output, m, step)) << r.output;
  EXPECT_LE(std::stod(m[2]), std::stod(m[1])) << r.output;
  EXPECT_LE(std::stod(m[1]), std::stod(m[3])) << r.output;
  EXPECT_NE(r.output.find("data gradient off"), std::string::npos) << "training computes none: " << r.output;
  // The step's GFLOP/s against the arithmetic peak measured on the machine.
  const std::regex peak(R"(\); ([0-9.]+) GFLOP/s \([0-9.]+ GFLOP a step\)\n)"
                        R"(arithmetic peak measured here: ([0-9.]+) GFLOP/s on \d+ threads \((avx512|avx2|sse2) )");
  ASSERT_TRUE(std::regex_search(r.output, m, peak)) << r.output;
  // The toy step's few kFLOP print as 0.0 GFLOP/s when the machine is busy.
  EXPECT_GT(std::stod(m[2]), 0) << r.output;
  EXPECT_GT(std::stod(m[2]), std::stod(m[1]) / 4) << "a step at 4 times the peak: the peak is mismeasured\n"
                                                  << r.output;
  r = RunFrugal("time --config " + cfg + " --iters 1 --warmup 0 --data-grad");
  EXPECT_NE(r.output.find("data gradient on"), std::string::npos) << r.output;
  r = RunFrugal("time --config " + cfg + " --iters 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(ErrorLine(r).find("--iters 0: must be 1 to"), std::string::npos) << r.output;
  // A graph that embeds its data reads token ids, not random floats.
  r = RunFrugal("time --config models/lstm/char_lm.prototxt --define seq_len=4 --define chunk=4 --iters 1 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output,
                                std::regex("data: token ids in \\[0, [0-9]+\\) \\(what the graph's index inputs take")))
      << r.output;
  // Each op's row names the kernels it ran; the summary counts reference ones.
  EXPECT_TRUE(std::regex_search(r.output, std::regex(" lstm .* dnnl_sgemm vec:(avx512|avx2|sse2)\n"))) << r.output;
  EXPECT_NE(r.output.find("; 0 ops ran a reference (scalar) implementation\n"), std::string::npos) << r.output;
}

TEST(Cli, AnOpErrorDuringTrainingIsOneLineNamingTheOp) {
  TempDir dir;
  WriteToyData(dir, "train", 32);
  WriteToyData(dir, "val", 8);
  WriteIdx(dir.File("train-labels"), {32}, std::vector<uint8_t>(32, 9));  // the net has 4 classes
  std::string cfg = dir.Write("toy.prototxt", ToyConfig(dir));
  for (const char* engine : {"threaded", "naive"}) {
    RunResult r = RunFrugal("train --config " + cfg + " --engine " + engine);
    EXPECT_EQ(r.exit_code, 1) << engine;
    EXPECT_NE(
        ErrorLine(r).find("node 'prob' (softmax_cross_entropy): label 9 of sample 0 is not a class index in [0, 4)"),
        std::string::npos)
        << engine << "\n"
        << r.output;
  }
}

}  // namespace
}  // namespace frugal::test
