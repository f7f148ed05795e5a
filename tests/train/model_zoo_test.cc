// The model zoo (models/**/*.prototxt): every config plans under every memory
// strategy to a sound plan; the configs with data sections train on data of
// their shapes (toy files standing in for the real sets); the ImageNet
// ResNet runs end to end on RecordIO made by data/toy-imagenet/make.py and
// `frugal im2rec`.
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "frugal/config.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/train.h"
#include "test_util.h"

namespace frugal {
namespace {

namespace fs = std::filesystem;

const std::string kModels = std::string(FRUGAL_SOURCE_DIR) + "/models";

// Smaller instances of the large configs, so that every strategy plans
// (and VerifyPlan checks) in seconds; any other config is planned as it is.
const std::map<std::string, std::vector<std::string>>& Shrink() {
  static const auto* m = new std::map<std::string, std::vector<std::string>>{
      {"resnet/resnet_imagenet.prototxt", {"depth=50", "batch=2", "size=64"}},
      {"resnet/resnet_imagenet_basic.prototxt", {"depth=34", "batch=2", "size=64"}},
      {"resnet/resnet_cifar.prototxt", {"depth=20", "batch=8"}},
      {"lstm/lstm_lm.prototxt", {"layers=2", "hidden=32", "seq_len=12", "vocab=50", "batch=4"}},
      {"lstm/char_lm.prototxt", {"seq_len=12", "chunk=4", "batch=4"}},
      {"densenet/densenet_bc.prototxt", {"depth=22", "batch=4"}},
  };
  return *m;
}

TEST(ModelZoo, EveryConfigPlansSoundlyUnderEveryStrategy) {
  const std::vector<std::string> configs = test::ModelConfigPaths();
  ASSERT_GE(configs.size(), 8u) << "models/ lost configs?";
  for (const auto& [rel, defines] : Shrink())
    EXPECT_TRUE(fs::exists(kModels + "/" + rel)) << rel << " is listed in Shrink() but gone";
  for (const std::string& path : configs) {
    const std::string rel = fs::relative(path, kModels).string();
    auto shrink = Shrink().find(rel);
    ConfigFile cfg = LoadConfig(path, shrink == Shrink().end() ? std::vector<std::string>{} : shrink->second);
    for (const MemoryStrategy& s : AllMemoryStrategies()) {
      SCOPED_TRACE(rel + " with " + s.Name());
      Model m = BuildModel(cfg, s);
      EXPECT_EQ(VerifyPlan(m.train, m.train_plan), "");
      EXPECT_EQ(VerifyPlan(m.eval, m.eval_plan), "");
      EXPECT_GE(m.train_plan.arena_bytes, m.train_plan.lower_bound_bytes);
      EXPECT_GT(m.train_plan.lower_bound_bytes, 0);
      if (s.recomputes()) { EXPECT_GT(m.train_plan.num_recomputed, 0); }
    }
  }
}

// Writes IDX files of n 28x28 images of 4 classes, labels i % 4: class c is a
// bright band of rows [7c, 7c + 7) over a faint texture that varies with i.
void WriteIdx(const test::TempDir& dir, const std::string& prefix, int n) {
  auto header = [](std::ofstream& f, std::vector<uint32_t> dims) {
    f.put(0).put(0).put(8).put(static_cast<char>(dims.size()));
    for (uint32_t d : dims)
      for (int s = 24; s >= 0; s -= 8) f.put(static_cast<char>((d >> s) & 0xff));
  };
  std::ofstream images(dir.File(prefix + "-images"), std::ios::binary),
      labels(dir.File(prefix + "-labels"), std::ios::binary);
  header(images, {static_cast<uint32_t>(n), 28, 28});
  header(labels, {static_cast<uint32_t>(n)});
  for (int i = 0; i < n; ++i) {
    const int c = i % 4;
    labels.put(static_cast<char>(c));
    for (int p = 0; p < 28 * 28; ++p) {
      const bool band = p / 28 >= 7 * c && p / 28 < 7 * c + 7;
      images.put(static_cast<char>(band ? 200 + (i * 13 + p) % 56 : (i * 31 + p * 7) % 64));
    }
  }
}

// The Fashion-MNIST configs read IDX files of their shapes and learn (their
// data sections, with toy files in place of the real ones): 4 classes that a
// working model tells apart within a few epochs, where chance is 25%.
TEST(ModelZoo, FashionMnistConfigsTrainOnIdxData) {
  const int saved = FLAGS_minloglevel;
  FLAGS_minloglevel = 2;
  test::TempDir dir;
  WriteIdx(dir, "train", 32);
  WriteIdx(dir, "val", 16);
  for (const auto& [rel, defines] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"resnet/resnet_cifar.prototxt", {"depth=8", "batch=8"}},
           // At its lr of 0.1 this tiny DenseNet's validation loss jumps to 11
           // and back on the way (it then ended at 1.0 or 0.25 as rounding fell);
           // at 0.05 it reaches 1.0 at epoch 10 and stays.
           {"densenet/densenet_bc.prototxt", {"depth=10", "growth=4", "batch=8", "lr=0.05"}},
           {"lenet/fashion_mnist.prototxt", {"batch=8"}}}) {
    SCOPED_TRACE(rel);
    ConfigFile cfg = LoadConfig(kModels + "/" + rel, defines);
    config::Data* data = cfg.net.mutable_data();
    ASSERT_TRUE(data->train().has_idx() && data->val().has_idx()) << "no idx data section";
    EXPECT_EQ(data->train().idx().images(), "data/fashion-mnist/train-images-idx3-ubyte.gz");
    data->mutable_train()->mutable_idx()->set_images(dir.File("train-images"));
    data->mutable_train()->mutable_idx()->set_labels(dir.File("train-labels"));
    data->mutable_val()->mutable_idx()->set_images(dir.File("val-images"));
    data->mutable_val()->mutable_idx()->set_labels(dir.File("val-labels"));
    cfg.net.mutable_solver()->set_max_iters(0);
    cfg.net.mutable_solver()->set_epochs(14);
    const double accuracy = Train(cfg, TrainOptions{});
    EXPECT_GE(accuracy, 0.75) << "4 classes: chance is 0.25";
  }
  FLAGS_minloglevel = saved;
}

// The ImageNet pipeline end to end: generated images, im2rec, the RecordIO
// iterator with ImageNet augmentation, a small ResNet of the ImageNet config.
TEST(ModelZoo, ImagenetResnetTrainsOnRecordIOFromGeneratedImages) {
  test::TempDir dir;
  const std::string make = std::string("python3 ") + FRUGAL_SOURCE_DIR + "/data/toy-imagenet/make.py --frugal " +
                           FRUGAL_BIN + " --out " + dir.path() + " --train 8 --val 2 > " + dir.File("make.log") +
                           " 2>&1";
  ASSERT_EQ(std::system(make.c_str()), 0) << "make.py failed; see " << dir.File("make.log");
  for (const char* f : {"train.rec", "train.idx", "val.rec", "val.idx"}) ASSERT_TRUE(fs::exists(dir.File(f))) << f;
  test::RunResult r = test::RunFrugal(
      "train --config models/resnet/resnet_imagenet.prototxt --define depth=50 --define width=8 --define size=32 "
      "--define classes=4 --define batch=4 --define epochs=1 --define train=" +
      dir.File("train") + " --define val=" + dir.File("val") + " --log-json " + dir.File("log.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("32 images decoded to (3,32,32) on 2 threads"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rand_resized_crop"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("8 images decoded to (3,32,32)"), std::string::npos) << r.output;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(r.output, m, std::regex("arenas allocated ([0-9.]+ [KMG]?i?B) \\(planned ([0-9.]+ [KMG]?i?B)")))
      << r.output;
  EXPECT_EQ(m[1], m[2]);
  std::ifstream log(dir.File("log.json"));
  std::string line, last;
  while (std::getline(log, line)) last = line;
  EXPECT_TRUE(std::regex_search(last, std::regex("\"val_cross_entropy\":[0-9]"))) << last;
}

}  // namespace
}  // namespace frugal
