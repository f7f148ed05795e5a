// `frugal train` end to end on the new data sources: RecordIO images made by
// `frugal im2rec`, CIFAR binary files, synthetic data; and shape mismatches
// between the config and the data.
#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <filesystem>

#include "cli/train_cli_util.h"
#include "test_util.h"

namespace frugal::test {
namespace {

// A two-layer MLP over data of `shape` with 4 classes, the given data block.
std::string Config(const std::string& data_block) {
  return "version: 1\n"
         "node { name: \"fc1\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: \"16\" } }\n"
         "node { name: \"relu1\" op: \"relu\" input: \"fc1\" }\n"
         "node { name: \"fc2\" op: \"fully_connected\" input: \"relu1\" attr { key: \"num_hidden\" value: \"4\" } }\n"
         "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc2\" input: \"label\" }\n"
         "data { " +
         data_block +
         " }\n"
         "solver { lr: 0.1 momentum: 0.9 epochs: 3 display: 1000 }\n";
}

// Class c is a dark image with a bright band across rows [c, c+1) quarters,
// plus noise: a mirror image is of the same class.
cv::Mat ToyImage(int c, int i, int size) {
  cv::Mat img(size, size, CV_8UC3, cv::Scalar(20, 20, 20));
  const int h = size / 4;
  img(cv::Rect(0, c * h, size, h)).setTo(cv::Scalar(220, 200, 180));
  cv::Mat noise(size, size, CV_8UC3);
  cv::RNG rng(i);
  rng.fill(noise, cv::RNG::UNIFORM, 0, 30);
  return img + noise;
}

TEST(DataCli, TrainsOnRecordIOFromIm2Rec) {
  TempDir dir;
  for (const char* split : {"train", "val"}) {
    for (int c = 0; c < 4; ++c) {
      std::string folder = dir.File(std::string(split) + "/class" + std::to_string(c));
      std::filesystem::create_directories(folder);
      for (int i = 0; i < (split[0] == 't' ? 40 : 10); ++i)
        cv::imwrite(folder + "/" + std::to_string(i) + ".png", ToyImage(c, i + 100 * c, 12));
    }
    RunResult r = RunFrugal(std::string("im2rec --input ") + dir.File(split) + " --output " + dir.File(split) +
                            " --encoding .png");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  std::string cfg =
      dir.Write("rec.prototxt",
                Config("train { recordio { path: \"" + dir.File("train.rec") + "\" index: \"" + dir.File("train.idx") +
                       "\" threads: 2 augment { pad: 1 rand_crop: true mirror: true mean: [0.5, 0.5, 0.5] } } }\n"
                       "val { recordio { path: \"" +
                       dir.File("val.rec") +
                       "\" augment { mean: [0.5, 0.5, 0.5] } } }\n"
                       "batch_size: 16 sample_shape: [3, 12, 12]"));
  RunResult r = RunFrugal("train --config " + cfg + " --log-json " + dir.File("log.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("160 images decoded to (3,12,12) on 2 threads"), std::string::npos) << r.output;
  EXPECT_GT(train_cli::LastValAccuracy(dir.File("log.json")), 0.9) << r.output;
}

TEST(DataCli, TrainsOnCifarFiles) {
  TempDir dir;
  // CIFAR-10 records: label, then the 32x32 toy image as R, G, B planes.
  auto write = [&](const std::string& name, int n) {
    std::string bytes;
    for (int i = 0; i < n; ++i) {
      const int c = i % 4;
      cv::Mat img = ToyImage(c, i, 32);
      bytes.push_back(static_cast<char>(c));
      for (int ch = 2; ch >= 0; --ch)
        for (int y = 0; y < 32; ++y)
          for (int x = 0; x < 32; ++x) bytes.push_back(static_cast<char>(img.at<cv::Vec3b>(y, x)[ch]));
    }
    return dir.Write(name, bytes);
  };
  std::string train = write("data_batch_1.bin", 160), val = write("test_batch.bin", 40);
  std::string cfg = dir.Write("cifar.prototxt", Config("train { cifar { path: \"" + train +
                                                       "\" augment { mirror: true } } }\n"
                                                       "val { cifar { path: \"" +
                                                       val +
                                                       "\" } }\n"
                                                       "batch_size: 16 sample_shape: [3, 32, 32]"));
  RunResult r = RunFrugal("train --config " + cfg + " --log-json " + dir.File("log.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GT(train_cli::LastValAccuracy(dir.File("log.json")), 0.9) << r.output;
}

TEST(DataCli, SyntheticRunsAndShapeMismatchIsNamed) {
  TempDir dir;
  std::string cfg = dir.Write("syn.prototxt", Config("train { synthetic { num_classes: 4 num_samples: 64 } }\n"
                                                     "batch_size: 8 sample_shape: [5]"));
  RunResult r = RunFrugal("train --config " + cfg + " --max-iters 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("synthetic: 64 samples of (5)"), std::string::npos) << r.output;
  std::string text = dir.Write("t.txt", std::string(500, 'a'));
  cfg = dir.Write("txt.prototxt", Config("train { text { path: \"" + text +
                                         "\" seq_len: 7 } }\n"
                                         "batch_size: 8 sample_shape: [5]"));
  r = RunFrugal("train --config " + cfg);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("frugal: error: " + cfg + ": data.sample_shape is (5) but the data has samples of (7)"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace frugal::test
