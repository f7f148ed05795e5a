// The toy run of the `frugal train` CLI tests (train_cli_util.h).
#include "cli/train_cli_util.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>

namespace frugal::test::train_cli {

std::string WriteToy(const TempDir& dir) {
  WriteToyData(dir, "train", 200);
  WriteToyData(dir, "val", 40);
  return dir.path();
}

const char* const kMlp =
    "node { name: \"fc1\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: \"16\" } }\n"
    "node { name: \"relu1\" op: \"relu\" input: \"fc1\" }\n"
    "node { name: \"fc2\" op: \"fully_connected\" input: \"relu1\" attr { key: \"num_hidden\" value: \"4\" } }\n";

std::string ToyConfig(const TempDir& dir, const std::string& solver, const std::string& nodes) {
  return "version: 1\n" + nodes +
         "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc2\" input: \"label\" }\n" +
         ToyDataSection(dir, "8") + "solver { " + solver + " }\n";
}

double LastValAccuracy(const std::string& log_path) {
  std::ifstream log(log_path);
  std::string line;
  double acc = -1;
  std::smatch m;
  while (std::getline(log, line))
    if (std::regex_search(line, m, std::regex("\"val_accuracy\":([0-9.e+-]+)"))) acc = std::stod(m[1]);
  return acc;
}

std::string ErrorLine(const RunResult& r) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(r.output, m, std::regex("frugal: error: [^\n]*"))) << r.output;
  EXPECT_EQ(r.output.find("Check failed"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("*** "), std::string::npos) << "no stack dump\n" << r.output;
  return m.size() ? m.str(0) : "";
}

std::string TrainOneEpoch(const TempDir& dir, std::string* cfg) {
  WriteToy(dir);
  *cfg = dir.Write("toy.prototxt", ToyConfig(dir, "lr: 0.1 epochs: 1"));
  RunResult r = RunFrugal("train --config " + *cfg + " --checkpoint-dir " + dir.File("a"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return Ckpt(dir.File("a"), 25);
}

}  // namespace frugal::test::train_cli
