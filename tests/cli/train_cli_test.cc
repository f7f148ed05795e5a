// `frugal train` end to end through the features of the training tool:
// deterministic resume (epoch boundary, mid-epoch, and a conv-BatchNorm-
// dropout net with augmentation, Adam, warm-up and cosine, iter_size 2),
// every optimizer and lr policy, bad checkpoints, SIGTERM, TensorBoard
// events, traces, --weights, and the one-line errors of docs/cli.md's
// bad-input table.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "event.pb.h"
#include "frugal/checkpoint.h"
#include "frugal/lr_schedule.h"
#include "frugal/tensorboard.h"
#include "io/json.h"
#include "test_util.h"
#include "cli/train_cli_util.h"

namespace frugal::test {
namespace {

namespace fs = std::filesystem;
using Json = JsonValue;

// Every tensor of a and b (parameters, aux, optimizer state) bit-identical.
void ExpectSameTensors(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b,
                       const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    ASSERT_NE(it, b.end()) << what << " " << name;
    ASSERT_EQ(t.shape(), it->second.shape()) << name;
    EXPECT_EQ(std::memcmp(t.f(), it->second.f(), t.size() * sizeof(float)), 0) << what << " " << name << " differs";
  }
}

// The config text without its checkpoint_dir (--checkpoint-dir differs between runs).
std::string WithoutCheckpointDir(const std::string& config_text) {
  return std::regex_replace(config_text, std::regex("checkpoint_dir: \"[^\"]*\""), "");
}

// Everything a checkpoint holds but the folder it was written to.
void ExpectSameState(const std::string& a_path, const std::string& b_path) {
  CheckpointState a = LoadCheckpoint(a_path), b = LoadCheckpoint(b_path);
  EXPECT_EQ(WithoutCheckpointDir(a.config_text), WithoutCheckpointDir(b.config_text));
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.iteration, b.iteration);
  EXPECT_EQ(a.data_position, b.data_position);
  EXPECT_EQ(a.rng_state, b.rng_state);
  EXPECT_EQ(a.optimizer, b.optimizer);
  ExpectSameTensors(a.params, b.params, "parameter");
  ExpectSameTensors(a.aux, b.aux, "aux");
  ExpectSameTensors(a.opt_state, b.opt_state, "optimizer state");
}

TEST(TrainCli, DeterministicResumeAtAnEpochIsBitIdentical) {
  TempDir dir;
  train_cli::WriteToy(dir);
  std::string cfg =
      dir.Write("toy.prototxt", train_cli::ToyConfig(dir, "lr: 0.1 momentum: 0.9 epochs: 2 keep_checkpoints: 0"));
  RunResult a = RunFrugal("train --deterministic --config " + cfg + " --checkpoint-dir " + dir.File("a"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find(", engine naive ("), std::string::npos) << a.output;
  ASSERT_TRUE(fs::exists(Ckpt(dir.File("a"), 25))) << a.output;
  ASSERT_TRUE(fs::exists(Ckpt(dir.File("a"), 50))) << a.output;
  CheckpointState first = LoadCheckpoint(Ckpt(dir.File("a"), 25));
  EXPECT_EQ(first.epoch, 1);
  EXPECT_EQ(first.data_position, 0);

  RunResult b = RunFrugal("train --deterministic --config " + cfg + " --checkpoint-dir " + dir.File("b") +
                          " --resume " + Ckpt(dir.File("a"), 25));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("resumed from " + Ckpt(dir.File("a"), 25) + ": epoch 1, iteration 25, batch 0"),
            std::string::npos)
      << b.output;
  EXPECT_EQ(b.output.find("Epoch[0]"), std::string::npos) << "epoch 0 is not run again\n" << b.output;
  ExpectSameState(Ckpt(dir.File("a"), 50), Ckpt(dir.File("b"), 50));

  // The check can fail: the epoch-1 parameters differ from the final ones.
  CheckpointState last = LoadCheckpoint(Ckpt(dir.File("a"), 50));
  const Tensor& w0 = first.params.at("fc1_weight");
  EXPECT_NE(std::memcmp(w0.f(), last.params.at("fc1_weight").f(), w0.size() * sizeof(float)), 0);
}

// --max-iters stopping inside an epoch: its checkpoint points at the next
// batch (not at the next epoch), so the rest of the epoch is not skipped.
TEST(TrainCli, MaxItersCheckpointResumesAtTheNextBatch) {
  TempDir dir;
  train_cli::WriteToy(dir);
  std::string cfg =
      dir.Write("toy.prototxt", train_cli::ToyConfig(dir, "lr: 0.1 momentum: 0.9 epochs: 2 keep_checkpoints: 0"));
  RunResult a = RunFrugal("train --deterministic --config " + cfg + " --checkpoint-dir " + dir.File("a"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  RunResult b =
      RunFrugal("train --deterministic --config " + cfg + " --checkpoint-dir " + dir.File("b") + " --max-iters 7");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  CheckpointState stop = LoadCheckpoint(Ckpt(dir.File("b"), 7));
  EXPECT_EQ(stop.epoch, 0);
  EXPECT_EQ(stop.data_position, 7);
  RunResult c = RunFrugal("train --deterministic --config " + cfg + " --checkpoint-dir " + dir.File("b") +
                          " --resume " + Ckpt(dir.File("b"), 7));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  ExpectSameState(Ckpt(dir.File("a"), 50), Ckpt(dir.File("b"), 50));
}

TEST(TrainCli, DeterministicResumeInsideAnEpochIsBitIdentical) {
  TempDir dir;
  train_cli::WriteToy(dir);
  // Adam: the optimizer state and the step count matter too.
  std::string cfg = dir.Write("toy.prototxt", train_cli::ToyConfig(dir,
                                                                   "optimizer: ADAM lr: 0.01 epochs: 2 "
                                                                   "checkpoint_interval: 5 keep_checkpoints: 0"));
  RunResult a = RunFrugal("train --deterministic --config " + cfg + " --checkpoint-dir " + dir.File("a"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  CheckpointState mid = LoadCheckpoint(Ckpt(dir.File("a"), 10));
  EXPECT_EQ(mid.epoch, 0);
  EXPECT_EQ(mid.data_position, 10);
  for (int64_t from : {10, 25, 35}) {
    std::string out = dir.File("from" + std::to_string(from));
    RunResult b = RunFrugal("train --deterministic --config " + cfg + " --checkpoint-dir " + out + " --resume " +
                            Ckpt(dir.File("a"), from));
    ASSERT_EQ(b.exit_code, 0) << b.output;
    SCOPED_TRACE("resumed from iteration " + std::to_string(from));
    ExpectSameState(Ckpt(dir.File("a"), 50), Ckpt(out, 50));
  }
  // A directory resumes from its latest checkpoint.
  RunResult c = RunFrugal("train --deterministic --config " + cfg + " --epochs 3 --checkpoint-dir " + dir.File("c") +
                          " --resume " + dir.File("a"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("resumed from " + Ckpt(dir.File("a"), 50)), std::string::npos) << c.output;
  EXPECT_TRUE(fs::exists(Ckpt(dir.File("c"), 75))) << c.output;
}

// A run resumed inside an epoch (at batch 7, display 10) logs its first
// window as the batches it ran, [7-10], not [0-10]; the next as [10-20].
TEST(TrainCli, TheFirstWindowAfterAResumeStartsAtTheResumedBatch) {
  TempDir dir;
  train_cli::WriteToy(dir);
  std::string cfg =
      dir.Write("toy.prototxt", train_cli::ToyConfig(dir, "lr: 0.1 epochs: 1 display: 10 checkpoint_interval: 7"));
  RunResult a = RunFrugal("train --config " + cfg + " --checkpoint-dir " + dir.File("a") + " --max-iters 7");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  RunResult b =
      RunFrugal("train --config " + cfg + " --checkpoint-dir " + dir.File("a") + " --resume " + Ckpt(dir.File("a"), 7));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(b.output, m, std::regex("Epoch\\[0\\] Batch \\[[0-9]+-[0-9]+\\]"))) << b.output;
  EXPECT_EQ(m.str(0), "Epoch[0] Batch [7-10]") << b.output;
  EXPECT_NE(b.output.find("Epoch[0] Batch [10-20]"), std::string::npos) << b.output;
}

// With checkpoint_interval, the run's end is checkpointed too: 50 updates
// at interval 7 leave 7, 14, ..., 49 and 50 (the trained model was lost
// after 49 before). An epoch's last update that is also a multiple is
// written once, as the next epoch's start.
TEST(TrainCli, TheRunsEndIsAlwaysCheckpointed) {
  TempDir dir;
  train_cli::WriteToy(dir);
  for (int interval : {7, 5}) {
    std::string cfg =
        dir.Write("toy.prototxt",
                  train_cli::ToyConfig(dir, Fmt("epochs: 2 checkpoint_interval: ", interval, " keep_checkpoints: 0")));
    const std::string out = dir.File(Fmt("i", interval));
    RunResult a = RunFrugal("train --config " + cfg + " --checkpoint-dir " + out);
    ASSERT_EQ(a.exit_code, 0) << a.output;
    for (int u = interval; u < 50; u += interval) EXPECT_TRUE(fs::exists(Ckpt(out, u))) << interval << ": " << u;
    ASSERT_TRUE(fs::exists(Ckpt(out, 50))) << interval;
    const CheckpointState end = LoadCheckpoint(Ckpt(out, 50));
    EXPECT_EQ(end.epoch, 2);
    EXPECT_EQ(end.data_position, 0);
    EXPECT_EQ(fs::exists(Ckpt(out, 25)), interval == 5) << "the first epoch's end only where it is a multiple";
    if (interval == 5) { EXPECT_EQ(LoadCheckpoint(Ckpt(out, 25)).epoch, 1); }
  }
}

// A CIFAR-10 binary file of n records (augmentation needs (c,h,w) images, and
// IDX sources take none): class c (0..3) brightens quadrant c of channel c % 3.
std::string WriteCifar(const TempDir& dir, const std::string& name, int n) {
  constexpr int kPixels = 3 * 32 * 32;
  std::string bytes;
  for (int i = 0; i < n; ++i) {
    const int c = i % 4;
    bytes += static_cast<char>(c);
    for (int p = 0; p < kPixels; ++p) {
      const int ch = p / 1024, y = p / 32 % 32, x = p % 32;
      const bool lit = ch == c % 3 && (y / 16) * 2 + x / 16 == c;
      bytes += static_cast<char>((lit ? 160 : 0) + (i * 31 + p * 7) % 90);
    }
  }
  return dir.Write(name, bytes);
}

// Convolution, BatchNorm, dropout and Adam, a warm-up into a cosine schedule,
// iter_size 2, random crops and mirrors: 44 samples in batches of 4 are 11
// batches per epoch, so update 6 takes the last batch of epoch 0 and the first
// of epoch 1. Checkpoints after every update, and at each epoch's end.
std::string AugmentedConvConfig(const TempDir& dir) {
  return "version: 1\n"
         "node { name: \"conv1\" op: \"convolution\" input: \"data\" attr { key: \"kernel\" value: \"(3,3)\" } "
         "attr { key: \"pad\" value: \"(1,1)\" } attr { key: \"num_filter\" value: \"4\" } }\n"
         "node { name: \"bn1\" op: \"batch_norm\" input: \"conv1\" attr { key: \"fix_gamma\" value: \"false\" } }\n"
         "node { name: \"relu1\" op: \"relu\" input: \"bn1\" }\n"
         "node { name: \"pool1\" op: \"pooling\" input: \"relu1\" attr { key: \"kernel\" value: \"(4,4)\" } "
         "attr { key: \"stride\" value: \"(4,4)\" } attr { key: \"pool_type\" value: \"max\" } }\n"
         "node { name: \"drop1\" op: \"dropout\" input: \"pool1\" attr { key: \"p\" value: \"0.3\" } }\n"
         "node { name: \"fc2\" op: \"fully_connected\" input: \"drop1\" attr { key: \"num_hidden\" value: \"4\" } }\n"
         "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc2\" input: \"label\" }\n"
         "data { train { cifar { path: \"" +
         WriteCifar(dir, "train.bin", 44) +
         "\" "
         "augment { pad: 4 rand_crop: true mirror: true } } }\n"
         "       batch_size: 4 sample_shape: [3, 32, 32] }\n"
         "solver { optimizer: ADAM lr: 0.01 lr_policy: COSINE lr_schedule_iters: 11 min_lr: 0.001 warmup_iters: 3 "
         "warmup_start: 0.002 iter_size: 2 epochs: 2 checkpoint_interval: 1 keep_checkpoints: 0 }\n";
}

// The resume proof on a model with every kind of state: a resumed run ends
// with the checkpoint of the unbroken one (parameters, BatchNorm moving
// statistics, Adam's moments; the step that keys dropout, the augmentation
// and the lr schedule), from an update inside an epoch, from the end of an
// epoch inside an accumulation, and from --max-iters stopping inside one.
TEST(TrainCli, DeterministicResumeOfAugmentedConvNetIsBitIdentical) {
  TempDir dir;
  std::string cfg = dir.Write("conv.prototxt", AugmentedConvConfig(dir));
  RunResult a = RunFrugal("train --deterministic --config " + cfg + " --checkpoint-dir " + dir.File("a"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("augment: pad 4 rand_crop mirror"), std::string::npos) << a.output;
  CheckpointState inside = LoadCheckpoint(Ckpt(dir.File("a"), 8));
  EXPECT_EQ(inside.epoch, 1);
  EXPECT_EQ(inside.data_position, 5);
  CheckpointState epoch_end = LoadCheckpoint(Ckpt(dir.File("a"), 5));
  EXPECT_EQ(epoch_end.epoch, 1);
  EXPECT_EQ(epoch_end.data_position, 0);
  for (int64_t from : {2, 5, 8}) {
    SCOPED_TRACE("resumed from update " + std::to_string(from));
    std::string out = dir.File("from" + std::to_string(from));
    RunResult b = RunFrugal("train --deterministic --config " + cfg + " --checkpoint-dir " + out + " --resume " +
                            Ckpt(dir.File("a"), from));
    ASSERT_EQ(b.exit_code, 0) << b.output;
    EXPECT_EQ(b.output.find("1 of 2 micro-batches summed") != std::string::npos, from == 5) << b.output;
    ExpectSameState(Ckpt(dir.File("a"), 11), Ckpt(out, 11));
  }
  // --max-iters 7 stops after the first micro-batch of update 4.
  RunResult c =
      RunFrugal("train --deterministic --config " + cfg + " --checkpoint-dir " + dir.File("c") + " --max-iters 7");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  CheckpointState stop = LoadCheckpoint(Ckpt(dir.File("c"), 3));
  EXPECT_EQ(stop.epoch, 0);
  EXPECT_EQ(stop.data_position, 7);
  RunResult d = RunFrugal("train --deterministic --config " + cfg + " --checkpoint-dir " + dir.File("c") +
                          " --resume " + dir.File("c"));
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_NE(d.output.find("1 of 2 micro-batches summed"), std::string::npos) << d.output;
  ExpectSameState(Ckpt(dir.File("a"), 11), Ckpt(dir.File("c"), 11));

  // The check can fail: the moving statistics and moments moved.
  CheckpointState last = LoadCheckpoint(Ckpt(dir.File("a"), 11));
  for (const auto& [name, t] : inside.aux) EXPECT_NE(std::memcmp(t.f(), last.aux.at(name).f(), t.bytes()), 0) << name;
  for (const auto& [name, t] : inside.opt_state)
    EXPECT_NE(std::memcmp(t.f(), last.opt_state.at(name).f(), t.bytes()), 0) << name;
}

TEST(TrainCli, EveryOptimizerAndLrPolicyLearnsTheToyProblem) {
  TempDir dir;
  train_cli::WriteToy(dir);
  struct Case {
    std::string solver, lr_shown;
  };
  const std::vector<Case> cases = {
      {"optimizer: SGD lr: 0.1 momentum: 0.9", "lr=0.1\n"},
      {"optimizer: NESTEROV lr: 0.1 momentum: 0.9", "lr=0.1\n"},
      {"optimizer: ADAM lr: 0.01", "lr=0.01"},
      {"optimizer: ADAMW lr: 0.01 weight_decay: 0.01", "lr=0.01"},
      {"optimizer: RMSPROP lr: 0.01", "lr=0.01"},
      // 75 updates: 0.1 until 30, then 0.05, then 0.025 from 60.
      {"optimizer: SGD lr: 0.1 lr_policy: STEP stepsize: 30 gamma: 0.5", "lr=0.025"},
      {"optimizer: ADAM lr: 0.01 lr_policy: COSINE clip_gradient: 5 iter_size: 2", "lr=0.00"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.solver);
    std::string cfg = dir.Write("toy.prototxt", train_cli::ToyConfig(dir, c.solver + " epochs: 3 display: 10"));
    RunResult r = RunFrugal("train --config " + cfg + " --log-json " + dir.File("log.json"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(c.lr_shown), std::string::npos) << r.output;
    EXPECT_GT(train_cli::LastValAccuracy(dir.File("log.json")), 0.9) << r.output;
  }
}

TEST(TrainCli, StepPolicyLowersTheLoggedLr) {
  TempDir dir;
  train_cli::WriteToy(dir);
  std::string cfg = dir.Write("toy.prototxt", train_cli::ToyConfig(dir,
                                                                   "lr: 0.1 lr_policy: STEP stepsize: 30 gamma: 0.5 "
                                                                   "epochs: 3 display: 5"));
  RunResult r = RunFrugal("train --config " + cfg + " --log-json " + dir.File("log.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream log(dir.File("log.json"));
  std::string line;
  std::map<int64_t, double> lr;  // iterations -> lr
  while (std::getline(log, line)) {
    if (line.find("\"batch\":") == std::string::npos) continue;
    Json j = ParseJson(line, "the JSON log");
    lr[static_cast<int64_t>(j["iterations"].num)] = j["lr"].num;
  }
  ASSERT_TRUE(lr.count(10) && lr.count(40) && lr.count(70)) << r.output;
  EXPECT_FLOAT_EQ(lr[10], 0.1f);
  EXPECT_FLOAT_EQ(lr[40], 0.05f);
  EXPECT_FLOAT_EQ(lr[70], 0.025f);
}

// Each window's lr in a --log-json file, by the updates done after it.
std::map<int64_t, double> LoggedLr(const std::string& log_path) {
  std::ifstream log(log_path);
  std::string line;
  std::map<int64_t, double> lr;
  while (std::getline(log, line)) {
    if (line.find("\"batch\":") == std::string::npos) continue;
    Json j = ParseJson(line, "the JSON log");
    lr[static_cast<int64_t>(j["iterations"].num)] = j["lr"].num;
  }
  return lr;
}

// A cosine schedule whose length comes from the run (no lr_schedule_iters):
// a run stopped by --max-iters 10 follows a 10-update cosine, and resuming
// its checkpoint with --max-iters 20 continues that schedule (the rate stays
// at its end, min_lr) instead of restarting a 20-update one (the rate
// jumping from 0.01 back up to 0.055); the length is in both checkpoints.
TEST(TrainCli, AResumeWithAnotherMaxItersContinuesTheLrSchedule) {
  TempDir dir;
  train_cli::WriteToy(dir);
  std::string cfg = dir.Write("toy.prototxt",
                              train_cli::ToyConfig(dir, "lr: 0.1 lr_policy: COSINE min_lr: 0.01 epochs: 2 display: 1"));
  RunResult a = RunFrugal("train --config " + cfg + " --checkpoint-dir " + dir.File("ck") +
                          " --max-iters 10 --log-json " + dir.File("a.json"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(LoadCheckpoint(Ckpt(dir.File("ck"), 10)).lr_schedule_iters, 10);
  RunResult b = RunFrugal("train --config " + cfg + " --checkpoint-dir " + dir.File("ck") +
                          " --max-iters 20 --resume " + dir.File("ck") + " --log-json " + dir.File("b.json"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("the learning rate continues the schedule of 10 updates that " + Ckpt(dir.File("ck"), 10) +
                          " was trained on, not one of this run's 20 (past its end it stays at its last rate)"),
            std::string::npos)
      << b.output;
  EXPECT_EQ(LoadCheckpoint(Ckpt(dir.File("ck"), 20)).lr_schedule_iters, 10);

  LrScheduleOptions o;
  o.policy = LrPolicy::kCosine;
  o.base_lr = 0.1;
  o.min_lr = 0.01;
  o.schedule_iters = 10;
  const LrSchedule want(o);
  std::map<int64_t, double> lr = LoggedLr(dir.File("a.json"));
  const std::map<int64_t, double> resumed = LoggedLr(dir.File("b.json"));
  ASSERT_EQ(lr.size(), 10u) << a.output;
  ASSERT_EQ(resumed.size(), 10u) << b.output;
  lr.insert(resumed.begin(), resumed.end());
  // A window's lr is the rate of the update pushed last when it is logged:
  // update k (0-based) after k updates, or k - 1 at the run's end.
  for (const auto& [k, rate] : lr)
    EXPECT_LT(std::min(std::fabs(rate - want.At(k)), std::fabs(rate - want.At(k - 1))), 1e-6) << "after update " << k;
  for (const auto& [k, rate] : resumed) EXPECT_NEAR(rate, 0.01, 1e-6) << "after update " << k;
}

// A checkpoint inside an epoch continues at a batch: a resume at another
// batch size would start at another sample, so it is refused naming both
// sizes; at the batch size it was written with, it resumes.
TEST(TrainCli, AResumeInsideAnEpochAtAnotherBatchSizeIsRefused) {
  TempDir dir;
  train_cli::WriteToy(dir);
  std::string cfg = dir.Write("toy.prototxt", train_cli::ToyConfig(dir, "lr: 0.1 epochs: 2"));
  RunResult a = RunFrugal("train --config " + cfg + " --checkpoint-dir " + dir.File("ck") + " --max-iters 3");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  RunResult b = RunFrugal("train --resume " + dir.File("ck") + " --batch 4");
  EXPECT_EQ(b.exit_code, 1) << b.output;
  EXPECT_NE(b.output.find("the checkpoint stopped inside epoch 0 after batch 3 of 8 samples; this run's batch is 4, "
                          "which would train some samples twice and skip others. Resume with --batch 8"),
            std::string::npos)
      << b.output;
  RunResult c = RunFrugal("train --resume " + dir.File("ck") + " --max-iters 4");
  EXPECT_EQ(c.exit_code, 0) << c.output;
}

TEST(TrainCli, BadCheckpointsAreOneLineErrors) {
  TempDir dir;
  std::string cfg, good = train_cli::TrainOneEpoch(dir, &cfg);
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000u);
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  std::ofstream(dir.File("flipped.frugal"), std::ios::binary) << flipped;
  std::ofstream(dir.File("truncated.frugal"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  fs::create_directories(dir.File("empty"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {dir.File("flipped.frugal"), "checksum"},
      {dir.File("truncated.frugal"), "truncated"},
      {dir.File("empty"), "no checkpoint in this directory"},
      {dir.File("nope.frugal"), "nope.frugal"},
  };
  for (const auto& [path, why] : cases) {
    RunResult r = RunFrugal("train --config " + cfg + " --resume " + path);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    std::string e = train_cli::ErrorLine(r);
    EXPECT_NE(e.find(path), std::string::npos) << r.output;
    EXPECT_NE(e.find(why), std::string::npos) << r.output;
    r = RunFrugal("train --config " + cfg + " --weights " + path);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    e = train_cli::ErrorLine(r);
    EXPECT_NE(e.find(path), std::string::npos) << r.output;
    EXPECT_NE(e.find(why), std::string::npos) << r.output;
  }
}

// A checkpoint holds the config it was trained with, --defines applied and
// relative data paths made absolute: test, export-onnx and train --resume
// need no --config from any folder. A config given instead that builds
// another model names the variables that differ.
TEST(TrainCli, ACheckpointRemembersItsConfigAndDefines) {
  TempDir dir;
  train_cli::WriteToy(dir);
  std::string text = train_cli::ToyConfig(dir, "lr: 0.1 epochs: 1",
                                          std::regex_replace(train_cli::kMlp, std::regex("\"16\""), "\"${hidden}\""));
  text = "variable { name: \"hidden\" value: \"16\" }\nvariable { name: \"hidden2\" value: \"$(${hidden} * 2)\" }\n" +
         std::regex_replace(text, std::regex(dir.path() + "/"), "");
  const std::string cfg = dir.Write("toy.prototxt", text);
  ASSERT_EQ(text.find(dir.path()), std::string::npos) << "the data paths are relative to dir";
  const std::string in_dir = std::string("cd ") + dir.path() + " && " + FRUGAL_BIN;
  RunResult r = RunShell(in_dir + " train --config toy.prototxt --define hidden=8 --checkpoint-dir ck");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ck = dir.File("ck");

  // From the source directory, without --config or --define.
  RunResult t = RunFrugal("test --checkpoint " + ck);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(t.output, m, std::regex("test-accuracy=([0-9.]+)"))) << t.output;
  EXPECT_GT(std::stod(m[1]), 0.9) << t.output;
  EXPECT_NE(t.output.find("(40 samples)"), std::string::npos) << t.output;
  RunResult x = RunFrugal("export-onnx --checkpoint " + ck + " --out " + dir.File("toy.onnx"));
  EXPECT_EQ(x.exit_code, 0) << x.output;
  RunResult resumed = RunFrugal("train --resume " + ck + " --epochs 2");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + Ckpt(ck, 25)), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("checkpoint " + Ckpt(ck, 50)), std::string::npos) << resumed.output;

  // The config without the --define: one short line naming it.
  RunResult bad = RunFrugal("test --config " + cfg + " --checkpoint " + ck);
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  const std::string e = train_cli::ErrorLine(bad);
  EXPECT_NE(e.find("the config gives hidden=16 but " + Ckpt(ck, 50) +
                   " was trained with hidden=8 (--define "
                   "hidden=8, or leave out --config"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find("hidden2"), std::string::npos) << "a $(...) value follows from the others\n" << e;
  EXPECT_LT(e.size(), 600u) << e;
  // A config that builds the same model is accepted; a --define needs one.
  RunResult same = RunShell(in_dir + " test --config toy.prototxt --define hidden=8 --checkpoint ck");
  EXPECT_EQ(same.exit_code, 0) << same.output;
  RunResult define = RunFrugal("test --checkpoint " + ck + " --define hidden=8");
  EXPECT_EQ(define.exit_code, 1);
  EXPECT_NE(train_cli::ErrorLine(define).find("--define hidden=8 without --config"), std::string::npos)
      << define.output;
}

// --checkpoint DIR (test, export-onnx) and --weights DIR take the latest
// checkpoint in the folder, as --resume DIR does.
TEST(TrainCli, CheckpointFlagsTakeTheLatestInAFolder) {
  TempDir dir;
  std::string cfg;
  const std::string latest = train_cli::TrainOneEpoch(dir, &cfg);
  RunResult t = RunFrugal("test --config " + cfg + " --checkpoint " + dir.File("a"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_NE(t.output.find(latest + ": test-accuracy="), std::string::npos) << t.output;
  RunResult x =
      RunFrugal("export-onnx --config " + cfg + " --checkpoint " + dir.File("a") + " --out " + dir.File("toy.onnx"));
  ASSERT_EQ(x.exit_code, 0) << x.output;
  EXPECT_NE(x.output.find(" + " + latest + " -> "), std::string::npos) << x.output;
  RunResult w = RunFrugal("train --config " + cfg + " --max-iters 1 --weights " + dir.File("a"));
  ASSERT_EQ(w.exit_code, 0) << w.output;
  EXPECT_NE(w.output.find("weights " + latest + ": 4 matched"), std::string::npos) << w.output;
  fs::create_directories(dir.File("empty"));
  RunResult e = RunFrugal("test --config " + cfg + " --checkpoint " + dir.File("empty"));
  EXPECT_EQ(e.exit_code, 1) << e.output;
  EXPECT_NE(train_cli::ErrorLine(e).find(dir.File("empty") + ": no checkpoint in this directory"), std::string::npos)
      << e.output;
}

TEST(TrainCli, SigtermCheckpointsAndExitsCleanly) {
  TempDir dir;
  train_cli::WriteToy(dir);
  std::string cfg = dir.Write("toy.prototxt", train_cli::ToyConfig(dir, "lr: 0.1 epochs: 100000 display: 5"));
  const std::string log = dir.File("out.log");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    if (chdir(FRUGAL_SOURCE_DIR) != 0) _exit(127);
    execl(FRUGAL_BIN, FRUGAL_BIN, "train", "--config", cfg.c_str(), "--checkpoint-dir", dir.File("ck").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  auto read_log = [&] {
    std::ifstream in(log);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::steady_clock::now() - start; };
  int status = 0;
  bool exited = false, signalled = false;
  while (elapsed() < std::chrono::seconds(20)) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    if (!signalled && read_log().find("] Batch [") != std::string::npos) {
      kill(pid, SIGTERM);
      signalled = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "frugal train did not stop within 20 s of starting (SIGTERM sent: " << signalled << ")\n" << read_log();
  }
  const std::string out = read_log();
  ASSERT_TRUE(signalled) << "exited before a progress line\n" << out;
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << "\n" << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("stopped by a signal after"), std::string::npos) << out;
  std::string latest = CheckpointManager(dir.File("ck"), 0, 0).Latest();
  ASSERT_FALSE(latest.empty()) << out;
  EXPECT_NE(out.find("checkpoint " + latest), std::string::npos) << out;
  CheckpointState s = LoadCheckpoint(latest);
  EXPECT_GT(s.iteration, 0);
  EXPECT_EQ(s.params.count("fc1_weight"), 1u);
  // And it resumes.
  RunResult r =
      RunFrugal("train --config " + cfg + " --resume " + latest + " --max-iters " + std::to_string(s.iteration + 2));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(TrainCli, TensorBoardEventsHoldTrainScalars) {
  TempDir dir;
  train_cli::WriteToy(dir);
  std::string cfg = dir.Write("toy.prototxt", train_cli::ToyConfig(dir, "lr: 0.1 epochs: 1 display: 5"));
  RunResult r = RunFrugal("train --config " + cfg + " --tensorboard " + dir.File("tb"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir.File("tb"))) files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(files[0].find("events.out.tfevents."), std::string::npos) << files[0];
  EventRecordReader reader(files[0]);
  std::string data;
  std::map<std::string, int> count;
  std::vector<float> lrs;
  bool version = false;
  while (reader.Next(&data)) {
    tb::Event e;
    ASSERT_TRUE(e.ParseFromString(data));
    if (e.file_version() == "brain.Event:2") version = true;
    for (const auto& v : e.summary().value()) {
      ++count[v.tag()];
      if (v.tag() == "train/lr") lrs.push_back(v.simple_value());
      if (v.tag() == "train/accuracy") { EXPECT_TRUE(v.simple_value() >= 0 && v.simple_value() <= 1); }
    }
  }
  EXPECT_TRUE(version);
  EXPECT_EQ(count["train/accuracy"], 5) << "25 batches, display 5";
  EXPECT_EQ(count["train/lr"], 5);
  EXPECT_EQ(count["val/accuracy"], 1);
  for (float lr : lrs) EXPECT_FLOAT_EQ(lr, 0.1f);
}

// The trace of `frugal train --profile`, parsed.
Json TraceOf(const std::string& args, const TempDir& dir) {
  RunResult r = RunFrugal("train " + args + " --profile " + dir.File("trace.json") + " --profile-steps 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(dir.File("trace.json"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParseJson(text, "trace.json");
}

const std::vector<Json>& Events(const Json& trace) {
  return trace.kind == Json::kArray ? trace.array : trace["traceEvents"].array;
}

TEST(TrainCli, ProfileWritesForwardAndBackwardEvents) {
  TempDir dir;
  train_cli::WriteToy(dir);
  std::string cfg = dir.Write("toy.prototxt", train_cli::ToyConfig(dir, "lr: 0.1 epochs: 1"));
  Json trace = TraceOf("--config " + cfg, dir);
  std::map<std::string, int> cats;
  int recomputed = 0;
  for (const Json& e : Events(trace)) {
    if (e.Has("cat")) ++cats[e["cat"].str];
    if (e.Has("args") && e["args"].Has("recompute")) ++recomputed;
  }
  EXPECT_GT(cats["forward"], 0);
  EXPECT_GT(cats["backward"], 0);
  EXPECT_EQ(recomputed, 0) << "the default strategy recomputes nothing";
  // Two steps of 4 forward nodes (fc1, relu1, fc2, prob).
  EXPECT_EQ(cats["forward"], 8);

  // A chain long enough for sqrt to drop activations and recompute them.
  std::string chain;
  std::string prev = "data";
  for (int i = 0; i < 8; ++i) {
    std::string fc = "h" + std::to_string(i), act = "a" + std::to_string(i);
    chain += "node { name: \"" + fc + "\" op: \"fully_connected\" input: \"" + prev +
             "\" attr { key: \"num_hidden\" value: \"16\" } }\n"
             "node { name: \"" +
             act + "\" op: \"relu\" input: \"" + fc + "\" }\n";
    prev = act;
  }
  chain += "node { name: \"fc2\" op: \"fully_connected\" input: \"" + prev +
           "\" attr { key: \"num_hidden\" value: \"4\" } }\n";
  cfg = dir.Write("chain.prototxt", train_cli::ToyConfig(dir, "lr: 0.1 epochs: 1", chain));
  trace = TraceOf("--config " + cfg + " --memory sqrt", dir);
  recomputed = 0;
  for (const Json& e : Events(trace))
    if (e.Has("args") && e["args"].Has("recompute") && e["args"]["recompute"].kind == Json::kBool &&
        e["args"]["recompute"].b)
      ++recomputed;
  EXPECT_GT(recomputed, 0);
}

TEST(TrainCli, WeightsReportsMatchedAndMissing) {
  TempDir dir;
  std::string cfg, ckpt = train_cli::TrainOneEpoch(dir, &cfg);
  const std::string nodes =
      "node { name: \"fc1\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: \"16\" } }\n"
      "node { name: \"relu1\" op: \"relu\" input: \"fc1\" }\n"
      "node { name: \"fcx\" op: \"fully_connected\" input: \"relu1\" attr { key: \"num_hidden\" value: \"16\" } }\n"
      "node { name: \"relu2\" op: \"relu\" input: \"fcx\" }\n"
      "node { name: \"fc2\" op: \"fully_connected\" input: \"relu2\" attr { key: \"num_hidden\" value: \"4\" } }\n";
  std::string cfg2 = dir.Write("deeper.prototxt", train_cli::ToyConfig(dir, "lr: 0.1 epochs: 1", nodes));
  RunResult r = RunFrugal("train --config " + cfg2 + " --weights " + ckpt + " --max-iters 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("weights " + ckpt + ": 4 matched, 2 missing (fcx_bias, fcx_weight), 0 wrong shape, 0 unused"),
            std::string::npos)
      << r.output;
}

// Each row of docs/cli.md's bad-input table that has no other test at the
// command line: exit 1 and one error line holding the needle.
TEST(TrainCli, BadInputsAreOneLineErrors) {
  TempDir dir;
  train_cli::WriteToy(dir);
  auto config = [&](const std::string& name, const std::string& solver, const std::string& nodes = train_cli::kMlp) {
    return " --config " + dir.Write(name, train_cli::ToyConfig(dir, solver, nodes));
  };
  const std::string toy = config("toy.prototxt", "lr: 0.1 epochs: 1");
  auto shaped = [&](const std::string& name, const std::string& shape) {
    std::string text = train_cli::ToyConfig(dir, "");
    text.replace(text.find("[1, 4, 4]"), 9, shape);
    return " --config " + dir.Write(name, text);
  };
  struct Case {
    std::string args, needle;
  };
  const std::vector<Case> cases = {
      {"train" + config("op.prototxt", "", "node { name: \"fc2\" op: \"fully_conected\" input: \"data\" }\n"),
       "unknown op 'fully_conected'"},
      {"train" + toy + " --dtype fp16", "dtype: unknown dtype 'fp16': use float32 (fp32) or bfloat16 (bf16)"},
      {"train" + config("attrtype.prototxt", "",
                        "node { name: \"fc2\" op: \"fully_connected\" input: \"data\" "
                        "attr { key: \"num_hidden\" value: \"four\" } }\n"),
       "num_hidden"},
      {"train" + config("attr.prototxt", "",
                        "node { name: \"fc2\" op: \"fully_connected\" input: \"data\" "
                        "attr { key: \"num_hiden\" value: \"4\" } }\n"),
       "num_hiden"},
      {"train" + config("shape.prototxt", "",
                        "node { name: \"fc1\" op: \"fully_connected\" input: \"data\" "
                        "attr { key: \"num_hidden\" value: \"16\" } }\n"
                        "node { name: \"fc2\" op: \"fully_connected\" input: \"fc1\" input: \"fc1_weight\" "
                        "attr { key: \"num_hidden\" value: \"4\" } }\n"),
       "fc2"},
      {"train" + config("input.prototxt", "",
                        "node { name: \"fc2\" op: \"fully_connected\" input: \"dta\" "
                        "attr { key: \"num_hidden\" value: \"4\" } }\n"),
       "dta"},
      {"train" + config("dup.prototxt", "",
                        "node { name: \"fc2\" op: \"relu\" input: \"data\" }\n"
                        "node { name: \"fc2\" op: \"fully_connected\" input: \"data\" "
                        "attr { key: \"num_hidden\" value: \"4\" } }\n"),
       "fc2"},
      {"train" + config("attr2.prototxt", "",
                        "node { name: \"fc2\" op: \"fully_connected\" input: \"data\" "
                        "attr { key: \"num_hidden\" value: \"4\" } attr { key: \"bias\" value: \"1\" } }\n"),
       "unknown attribute 'bias'"},
      {"train" + config("field.prototxt", "learning_rate: 0.1"), "no field named \"learning_rate\""},
      {"train" + toy + " --define batch", "--define 'batch': expected name=value"},
      {"train" + toy + " --define", "--define needs name=value"},
      {"train" + toy + " --define nosuch=3", "nosuch"},
      {"train" + toy + " --memory budget=1KB", "budget"},
      {"train" + toy + " --memory sqrtt", "unknown memory strategy 'sqrtt'"},
      {"plan" + toy + " --memory-limit 1GiB --memory sqrt", "the limit chooses the plan"},
      {"train" + toy + " --memory budget=99999999999999999999999GB", "more bytes than frugal counts"},
      {"plan" + shaped("big.prototxt", "[1, 4294967296, 4294967296]"),
       "a batch of 8 samples of data.sample_shape (1,4294967296,4294967296) is more than 2^57 values"},
      {"plan" + shaped("neg.prototxt", "[1, -4, 4]"), "data.sample_shape has a dimension of -4"},
      {"plan --config models/resnet/resnet_cifar.prototxt --define widen=134217728",
       "node 'stage1/conv1' (convolution): input 1 (2147483648,16,3,3) would hold 1.12 TiB, more than one"},
      {"plan --config models/resnet/resnet_cifar.prototxt --define size=65536 --define batch=65536",
       "node 'conv0' (convolution): input 0 (65536,1,65536,65536) would hold 1024.00 TiB, more than one tensor may"},
      // oneDNN died of SIGFPE planning this convolution on an AVX-512 machine.
      {"plan --config models/resnet/resnet_cifar.prototxt --define size=4096 --define batch=4096",
       "node 'conv0' (convolution): output 0 (4096,16,4096,4096) would hold 4.00 TiB, more than one tensor may"},
      {"train" + toy + " --log-json /dev/full", "/dev/full: writing the JSON log failed"},
      {"train --config " + dir.path(), "is a directory; give a config file"},
      {"plan --config models/resnet/resnet_cifar.prototxt --define depth=6000000002",
       "node 'stage1r': repeat 666666665 of block 'u9' (10 nodes) would bring the network to"},
      {"plan --config models/resnet/resnet_cifar.prototxt --max-nodes 10", "more than max_nodes 10;"},
      {"train" + toy + " --batch abc", "--batch 'abc' is not a whole number"},
      {"train" + toy + " --epochs 1e99", "--epochs '1e99' is not a whole number"},
      {"train" + toy + " --batch -3", "--batch -3: must be 1 to 1073741824"},
      {"train" + toy + " --max-iters=-1", "--max-iters -1: must be at least 0"},
      {"train" + toy + " --engine-workers 100000", "--engine-workers 100000: must be 0 to 256"},
      {"train" + toy + " --lr nan", "--lr nan: must be 0 to 1e+30"},
      {"train" + toy + " --lr -0.5", "--lr -0.5: must be 0 to 1e+30"},
      {"train" + config("opt.prototxt", "optimizer: ADAGRAD"), "ADAGRAD"},
      {"train" + config("policy.prototxt", "lr_policy: STEP"), "stepsize"},
      {"train" + config("metric.prototxt", "metric: \"acuracy\""), "acuracy"},
      {"train" + config("iter.prototxt", "iter_size: 0"), "iter_size"},
      {"train" + config("clip.prototxt", "clip_gradient: -1"), "solver.clip_gradient must be a number >= 0"},
      {"train" + config("mult.prototxt", "",
                        "node { name: \"fc2\" op: \"fully_connected\" input: \"data\" "
                        "attr { key: \"num_hidden\" value: \"4\" } lr_mult { key: \"weight\" value: nan } }\n"),
       "lr_mult of 'weight' is nan"},
      {"train" + toy + " --lr 1e30 --checkpoint-dir " + dir.File("nanck"), "the training loss is not a number"},
      {"train --config " + dir.File("missing.prototxt"), "missing.prototxt"},
      {"train", "no config given"},
      {"train" + toy + " extra", "unexpected argument 'extra'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    RunResult r = RunFrugal(c.args);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(train_cli::ErrorLine(r).find(c.needle), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace frugal::test
