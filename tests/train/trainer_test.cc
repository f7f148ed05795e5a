// The fit loop on the engine: with the naive engine it gives the bits of the
// plain sequential loop (load, run, SGD per parameter); the threaded engine
// gives the same bits with any split of workers and kernel threads; an op's
// error during training reaches the caller, named, on both engines.
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include "frugal/checkpoint.h"
#include "frugal/config.h"
#include "frugal/io.h"
#include "frugal/lr_schedule.h"
#include "frugal/metrics.h"
#include "frugal/progress.h"
#include "frugal/train.h"
#include "test_util.h"
#include "train/train_steps.h"

namespace frugal {
namespace {

// A learnable toy problem as IDX files: side x side images of 4 classes, class c
// brightening quarter c of the pixels; `bad_label` >= 0 puts that label on
// sample 37.
void WriteSideToy(const test::TempDir& dir, const std::string& prefix, int n, int bad_label = -1, int side = 6) {
  const int pixels = side * side;
  std::vector<uint8_t> images(n * pixels), labels(n);
  for (int i = 0; i < n; ++i) {
    labels[i] = static_cast<uint8_t>(i % 4);
    for (int p = 0; p < pixels; ++p)
      images[i * pixels + p] = (p * 4 / pixels == labels[i]) ? 180 + (i * 7 + p) % 70 : (i * 13 + p) % 90;
  }
  if (bad_label >= 0) labels[37] = static_cast<uint8_t>(bad_label);
  test::WriteIdx(dir.File(prefix + "-images"),
                 {static_cast<uint32_t>(n), static_cast<uint32_t>(side), static_cast<uint32_t>(side)}, images);
  test::WriteIdx(dir.File(prefix + "-labels"), {static_cast<uint32_t>(n)}, labels);
}

ConfigFile ToyConfig(const test::TempDir& dir, const std::string& engine, int workers = 0, int kernel_threads = 0) {
  std::string text =
      "version: 1\n"
      "node { name: \"flat\" op: \"flatten\" input: \"data\" }\n"
      "node { name: \"fc1\" op: \"fully_connected\" input: \"flat\" attr { key: \"num_hidden\" value: \"40\" } }\n"
      "node { name: \"relu1\" op: \"relu\" input: \"fc1\" }\n"
      "node { name: \"fc2\" op: \"fully_connected\" input: \"relu1\" attr { key: \"num_hidden\" value: \"24\" } }\n"
      "node { name: \"relu2\" op: \"relu\" input: \"fc2\" }\n"
      "node { name: \"fc3\" op: \"fully_connected\" input: \"relu2\" attr { key: \"num_hidden\" value: \"4\" } }\n"
      "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc3\" input: \"label\" }\n" +
      test::ToyDataSection(dir, "8", "[1, 6, 6]") +
      "solver { lr: 0.05 momentum: 0.9 weight_decay: 0.001 epochs: 3 seed: 11 display: 4 engine: \"" + engine +
      "\" engine_workers: " + std::to_string(workers) + " engine_kernel_threads: " + std::to_string(kernel_threads) +
      " }\n";
  return ParseConfig(text, dir.File("toy.prototxt"), {});
}

using Params = std::map<std::string, std::vector<float>>;

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = FLAGS_minloglevel;
    FLAGS_minloglevel = 2;  // quiet: no progress lines
    WriteSideToy(dir_, "train", 100);
    WriteSideToy(dir_, "val", 20);
  }
  void TearDown() override { FLAGS_minloglevel = saved_; }
  Params TrainParams(const ConfigFile& cfg) {
    Params p;
    TrainOptions opts;
    opts.final_params = &p;
    Train(cfg, opts);
    return p;
  }
  test::TempDir dir_;
  int saved_ = 0;
};

// The loop before the engine ran it: load, run and wait, update every
// parameter in name order, in the caller's thread.
Params SequentialReference(const ConfigFile& cfg) {
  const config::Solver& sc = cfg.net.solver();
  test::BoundModel bm(cfg, MemoryStrategy::kShare);
  DatasetIter it(LoadIdxDataset(cfg.net.data().train().idx().images(), cfg.net.data().train().idx().labels()), "train",
                 bm.m.batch, cfg.net.data().shuffle(), sc.seed());
  int64_t step = 0;
  for (int epoch = 0; epoch < sc.epochs(); ++epoch) {
    it.Reset(epoch);
    while (it.Next(bm.data.f(), bm.label.f(), nullptr)) bm.Step(++step);
  }
  Params p;
  for (int id : bm.m.params) {
    const Tensor& w = bm.b.vars[bm.m.train.node(id).name];
    p[bm.m.train.node(id).name].assign(w.f(), w.f() + w.size());
  }
  return p;
}

// Validating every few updates changes nothing in training: the batch
// after a validation, loaded before it, is the next training batch, not
// one the validation loaded.
TEST_F(TrainerTest, ValidationInsideAnEpochLeavesTrainingAlone) {
  for (const char* engine : {"naive", "threaded"}) {
    ConfigFile cfg = ToyConfig(dir_, engine, 2, 1);
    const Params plain = TrainParams(cfg);
    cfg.net.mutable_solver()->set_val_interval(3);
    EXPECT_EQ(TrainParams(cfg), plain) << engine;
  }
}

TEST_F(TrainerTest, NaiveEngineGivesTheBitsOfTheSequentialLoop) {
  Params want = SequentialReference(ToyConfig(dir_, "naive"));
  ASSERT_EQ(want.size(), 6u);
  EXPECT_EQ(TrainParams(ToyConfig(dir_, "naive")), want);
}

// Against the naive engine with the same kernel threads: sgemm's bits
// depend on its thread count.
TEST_F(TrainerTest, ThreadedEngineGivesTheBitsOfTheNaiveOne) {
  for (auto [workers, threads] : std::vector<std::pair<int, int>>{{0, 0}, {1, 1}, {2, 1}, {3, 2}}) {
    const int kernel_threads = MakeEngine("threaded", {workers, threads})->KernelThreads(Device{});
    Params want = TrainParams(ToyConfig(dir_, "naive", 0, kernel_threads));
    for (int round = 0; round < 3; ++round) {
      EXPECT_EQ(TrainParams(ToyConfig(dir_, "threaded", workers, threads)), want)
          << workers << " workers x " << threads << " kernel threads, round " << round;
    }
  }
}

// The MLP of models/mlp at its real shapes (784-512-512-10, batch 64), on
// synthetic 28x28 data so that the test stays fast.
TEST_F(TrainerTest, MlpOnTheThreadedEngineGivesTheBitsOfTheNaiveOne) {
  WriteSideToy(dir_, "mlp-train", 64 * 12, -1, 28);
  auto config = [&](const std::string& engine, int workers, int threads) {
    ConfigFile cfg = LoadConfig(std::string(FRUGAL_SOURCE_DIR) + "/models/mlp/fashion_mnist.prototxt", {});
    config::NetConfig& net = cfg.net;
    net.mutable_data()->mutable_train()->mutable_idx()->set_images(dir_.File("mlp-train-images"));
    net.mutable_data()->mutable_train()->mutable_idx()->set_labels(dir_.File("mlp-train-labels"));
    net.mutable_data()->clear_val();
    net.mutable_solver()->set_epochs(2);
    net.mutable_solver()->set_engine(engine);
    net.mutable_solver()->set_engine_workers(workers);
    net.mutable_solver()->set_engine_kernel_threads(threads);
    return cfg;
  };
  // The default split, against the naive engine with the same kernel
  // threads (sgemm's bits may depend on its thread count).
  const ConfigFile threaded = config("threaded", 0, 0);
  const int default_threads =
      MakeEngineFor(threaded.net.solver(), BuildModel(threaded, MemoryStrategy::kShare).train)->KernelThreads(Device{});
  Params want = TrainParams(config("naive", 0, default_threads));
  EXPECT_EQ(want.size(), 6u);
  EXPECT_EQ(TrainParams(threaded), want) << "default threaded engine";
  // Other splits.
  for (auto [workers, threads] : std::vector<std::pair<int, int>>{{1, 2}, {3, 2}}) {
    EXPECT_EQ(TrainParams(config("threaded", workers, threads)), TrainParams(config("naive", 0, threads)))
        << workers << " workers x " << threads << " kernel threads";
  }
}

// Runs everything on a naive engine and records every push.
class RecordingEngine : public Engine {
 public:
  Var NewVar() override { return inner_->NewVar(); }
  void DeleteVar(Var v) override { inner_->DeleteVar(v); }
  void Push(std::function<void()> fn, const std::vector<Var>& reads, const std::vector<Var>& writes,
            const PushOptions& opts) override {
    pushes.push_back({opts.name, reads, writes});
    inner_->Push(std::move(fn), reads, writes, opts);
  }
  void PushAsync(AsyncFn fn, const std::vector<Var>& reads, const std::vector<Var>& writes,
                 const PushOptions& opts) override {
    pushes.push_back({opts.name, reads, writes});
    inner_->PushAsync(std::move(fn), reads, writes, opts);
  }
  void WaitForVar(Var v) override { inner_->WaitForVar(v); }
  void WaitAll() override { inner_->WaitAll(); }
  int KernelThreads(Device d) const override { return inner_->KernelThreads(d); }
  const char* name() const override { return "recording"; }
  std::string Describe() const override { return "recording"; }
  std::vector<test::PushRecord> pushes;

 private:
  std::unique_ptr<Engine> inner_ = MakeEngine("naive");
};

// Every push of a run of cfg on the naive engine, in order.
std::vector<test::PushRecord> RecordPushes(const ConfigFile& cfg) {
  RecordingEngine engine;
  TrainOptions opts;
  opts.engine = &engine;
  Train(cfg, opts);
  return engine.pushes;
}

// The index of the k-th push (from 0) named `name`.
int NthPush(const std::vector<test::PushRecord>& p, const std::string& name, int k) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i].name == name && k-- == 0) return static_cast<int>(i);
  ADD_FAILURE() << "no push '" << name << "' #" << k;
  return 0;
}

// What the trainer's pushes allow any engine to overlap, and what they order.
TEST_F(TrainerTest, UpdatesAndLoadsMayOverlapBackwardAndOrderTheNextStep) {
  ConfigFile cfg = ToyConfig(dir_, "naive");
  cfg.net.mutable_solver()->set_max_iters(3);
  const std::vector<test::PushRecord> p = RecordPushes(cfg);
  auto hb = test::HappensBefore(p);
  auto find = [&](const std::string& name, int k) { return NthPush(p, name, k); };
  // Step 1 (the second), and the steps around it.
  const int fc3_grad = find("fc3_backward", 1), fc1_grad = find("fc1_backward", 1);
  const int sgd_fc3 = find("update(fc3_weight)", 1), sgd_fc1 = find("update(fc1_weight)", 1);
  const int load_next = find("load_batch", 2), metrics = find("metrics", 1);
  EXPECT_TRUE(hb[fc3_grad][sgd_fc3]) << "an update waits for its gradient";
  EXPECT_FALSE(hb[fc1_grad][sgd_fc3]) << "fc3's update may run while backward goes on below it";
  EXPECT_FALSE(hb[sgd_fc3][fc1_grad]);
  EXPECT_TRUE(hb[fc1_grad][sgd_fc1]);
  EXPECT_FALSE(hb[fc1_grad][load_next]) << "the next batch may load during backward";
  EXPECT_TRUE(hb[find("fc1", 1)][load_next]) << "but only after forward has read this one";
  EXPECT_TRUE(hb[metrics][load_next]) << "and the metrics have read its label";
  EXPECT_TRUE(hb[sgd_fc1][find("fc1", 2)]) << "the next forward reads the updated weights";
  EXPECT_TRUE(hb[find("fc2_backward", 1)][find("fc2_backward", 2)]);
  // Validation (the eval graph's fc1 comes after the three training ones) reads the last weights.
  EXPECT_TRUE(hb[find("update(fc1_weight)", 2)][find("fc1", 3)]);
}

// Validation loads into the eval executor's own inputs: the next training
// batch loads before a validation, and the step after it reads that batch
// and nothing the validation loaded.
TEST_F(TrainerTest, ValidationLoadsIntoItsOwnInputs) {
  ConfigFile cfg = ToyConfig(dir_, "naive");
  cfg.net.mutable_solver()->set_max_iters(2);
  cfg.net.mutable_solver()->set_val_interval(1);
  cfg.net.mutable_solver()->set_val_batches(2);
  const std::vector<test::PushRecord> p = RecordPushes(cfg);
  auto hb = test::HappensBefore(p);
  // Step 0, the load of batch 1, validation's two batches, step 1.
  const int next_load = NthPush(p, "load_batch", 1), step1 = NthPush(p, "fc1", 3);
  EXPECT_TRUE(hb[next_load][step1]) << "step 1 reads the batch loaded before the validation";
  for (int k : {2, 3}) {
    const int val_load = NthPush(p, "load_batch", k);
    EXPECT_LT(next_load, val_load) << "the next training batch loads first";
    EXPECT_FALSE(hb[next_load][val_load]) << "validation's load " << k << " overwrites nothing training loaded";
    EXPECT_FALSE(hb[val_load][step1]) << "step 1 reads nothing validation's load " << k << " wrote";
    EXPECT_TRUE(hb[val_load][NthPush(p, "fc1", k - 1)]) << "the eval forward reads it";
  }
}

// The value of "key":<number> in a JSON line (NaN when absent).
double JsonNumber(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\":");
  return at == std::string::npos ? std::nan("") : std::stod(line.substr(at + key.size() + 3));
}

// What the loop measures reaches the observers in their events (here
// TrainOptions::on_event's): each window's rate is the schedule's for the
// last update pushed when it is reported (the one the next batch ends, or
// at the epoch's end its last); each validation's metrics are what Test
// gives the checkpoint written at that update, the epoch's line carries
// the validation at its end, and the epoch's training metrics are its
// windows' weighted by their samples.
TEST_F(TrainerTest, EventsCarryTheRateAndTheMetrics) {
  ConfigFile cfg = ToyConfig(dir_, "naive");
  config::Solver& sc = *cfg.net.mutable_solver();
  sc.set_lr_policy(config::Solver::STEP);
  sc.set_stepsize(1);
  sc.set_gamma(0.8f);  // every update has its own rate
  sc.set_epochs(1);
  sc.set_display(1);
  sc.set_val_interval(5);
  sc.set_checkpoint_interval(5);
  sc.set_checkpoint_dir(dir_.File("ckpt"));
  std::vector<TrainEvent> events;
  TrainOptions opts;
  opts.on_event = [&](const TrainEvent& e) {
    events.push_back(e);
    return false;
  };
  const double acc = Train(cfg, opts);
  const LrSchedule lr = LrScheduleFromConfig(sc, 13, cfg.path);
  // The metrics Test gives the checkpoint written at an update.
  auto tested = [&](int64_t update) {
    char name[48];
    std::snprintf(name, sizeof name, "ckpt/ckpt-%010lld.frugal", static_cast<long long>(update));
    return frugal::Test(cfg, dir_.File(name));
  };
  int windows = 0, validations = 0;
  double acc_sum = 0, ce_sum = 0, samples = 0;
  for (const TrainEvent& e : events) {
    SCOPED_TRACE(e.kind + " " + e.json);
    const int64_t updates = static_cast<int64_t>(JsonNumber(e.json, "iterations"));
    if (e.kind == "window") {
      ++windows;
      // A window is reported once its batches' metrics are in: during the
      // next batch, or at the epoch's end.
      const bool last = updates == 13;
      const double rate = lr.At(last ? updates - 1 : updates);
      EXPECT_NEAR(JsonNumber(e.json, "lr"), rate, 1e-5 * rate);
      const double n = last ? 4 : 8;  // 100 samples in batches of 8
      acc_sum += n * JsonNumber(e.json, "train_accuracy");
      ce_sum += n * JsonNumber(e.json, "train_cross_entropy");
      samples += n;
    } else if (e.kind == "validation") {
      ++validations;
      EXPECT_EQ(updates % 5, 0);
      const MetricSet want = tested(updates);
      EXPECT_NEAR(JsonNumber(e.json, "val_accuracy"), want.Get("accuracy"), 1e-5);
      EXPECT_NEAR(JsonNumber(e.json, "val_cross_entropy"), want.Get("cross_entropy"), 1e-5);
    } else {
      ASSERT_EQ(e.kind, "epoch");
      EXPECT_EQ(updates, 13);
      const MetricSet want = tested(13);
      EXPECT_NEAR(JsonNumber(e.json, "val_accuracy"), want.Get("accuracy"), 1e-5);
      EXPECT_NEAR(JsonNumber(e.json, "val_cross_entropy"), want.Get("cross_entropy"), 1e-5);
      EXPECT_DOUBLE_EQ(acc, want.Get("accuracy")) << "Train returns the last validation's accuracy";
      EXPECT_EQ(JsonNumber(e.json, "samples"), 100);
      EXPECT_NEAR(JsonNumber(e.json, "train_accuracy"), acc_sum / samples, 1e-5);
      EXPECT_NEAR(JsonNumber(e.json, "train_cross_entropy"), ce_sum / samples, 1e-5);
    }
  }
  EXPECT_EQ(windows, 13);
  EXPECT_EQ(validations, 2) << "at updates 5 and 10; the one at the run's end is in the epoch's line";
}

TEST_F(TrainerTest, TrainingLearnsTheToyProblem) { EXPECT_GT(Train(ToyConfig(dir_, "threaded"), {}), 0.9); }

TEST_F(TrainerTest, AnOpErrorStopsTrainingWithTheOpName) {
  WriteSideToy(dir_, "train", 100, /*bad_label=*/9);
  for (const char* engine : {"naive", "threaded"}) {
    try {
      Train(ToyConfig(dir_, engine), {});
      ADD_FAILURE() << engine << ": no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("prob: ", 0), 0u) << engine << ": " << msg;
      EXPECT_NE(msg.find("label 9 of sample "), std::string::npos) << engine << ": " << msg;
    }
  }
}

TEST_F(TrainerTest, ANonFiniteLossStopsTrainingAndIsNeverCheckpointed) {
  // lr 1e30: the weights overflow the forward pass within a few steps.
  for (const char* engine : {"naive", "threaded"}) {
    ConfigFile cfg = ToyConfig(dir_, engine);
    const std::string ckpt = dir_.File(std::string("ckpt-") + engine);
    cfg.net.mutable_solver()->set_lr(1e30f);
    cfg.net.mutable_solver()->set_checkpoint_dir(ckpt);
    cfg.net.mutable_solver()->set_checkpoint_interval(1);
    try {
      Train(cfg, {});
      ADD_FAILURE() << engine << ": trained to the end";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("is not a number"), std::string::npos) << engine << ": " << msg;
      EXPECT_NE(msg.find("Lower the learning rate (1e+30"), std::string::npos) << engine << ": " << msg;
    }
    // What was checkpointed before the loss broke is finite.
    for (const auto& f : std::filesystem::directory_iterator(ckpt)) {
      if (f.path().filename() == ".lock") continue;  // the run's lock on the folder
      const CheckpointState c = LoadCheckpoint(f.path().string());
      for (const auto& [name, t] : c.params)
        for (int64_t i = 0; i < t.size(); ++i) ASSERT_TRUE(std::isfinite(t.f()[i])) << f.path() << " " << name;
    }
  }
}

TEST_F(TrainerTest, AClipThatIsNotANumberOrIsNegativeIsRefused) {
  for (float clip : {-1.0f, std::nanf("")}) {
    ConfigFile cfg = ToyConfig(dir_, "naive");
    cfg.net.mutable_solver()->set_clip_gradient(clip);
    test::ExpectError([&] { Train(cfg, {}); }, {"toy.prototxt", "solver.clip_gradient must be a number >= 0"});
  }
}

TEST_F(TrainerTest, CountsOutOfRangeAreRefusedNamingTheField) {
  struct Case {
    std::function<void(config::Solver*)> set;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {[](config::Solver* s) { s->set_epochs(0); }, "solver.epochs must be at least 1, got 0"},
      {[](config::Solver* s) { s->set_max_iters(-5); }, "solver.max_iters must be at least 0 (0: no limit), got -5"},
      {[](config::Solver* s) { s->set_display(-3); }, "solver.display must be at least 0"},
      {[](config::Solver* s) { s->set_val_interval(-1); }, "solver.val_interval must be at least 0"},
      {[](config::Solver* s) { s->set_checkpoint_interval(-1); }, "solver.checkpoint_interval must be at least 0"},
      {[](config::Solver* s) { s->set_keep_checkpoints(-1); }, "solver.keep_checkpoints must be at least 0 (0: all)"},
      {[](config::Solver* s) { s->set_warmup_start(-1); }, "warmup_start must be a non-negative number, got -1"},
      {[](config::Solver* s) {
         s->set_lr_policy(config::Solver::POLY);
         s->set_power(-1);
       },
       "lr policy poly needs power >= 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.needle);
    ConfigFile cfg = ToyConfig(dir_, "naive");
    c.set(cfg.net.mutable_solver());
    test::ExpectError([&] { Train(cfg, {}); }, {"toy.prototxt", c.needle});
  }
}

TEST_F(TrainerTest, AFolderHoldsOneRunsCheckpoints) {
  ConfigFile cfg = ToyConfig(dir_, "naive");
  const std::string ckpt = dir_.File("ckpt");
  cfg.net.mutable_solver()->set_checkpoint_dir(ckpt);
  cfg.net.mutable_solver()->set_epochs(1);
  Train(cfg, {});
  const std::vector<std::string> first = CheckpointManager(ckpt, 0, 0).List();
  ASSERT_EQ(first.size(), 1u);
  // A new run there would rotate the first one's away and be resumed as it.
  test::ExpectError([&] { Train(cfg, {}); }, {ckpt, "holds the checkpoints of another run", "--resume " + ckpt});
  EXPECT_EQ(CheckpointManager(ckpt, 0, 0).List(), first);
  // Continuing it there is the same run.
  cfg.net.mutable_solver()->set_epochs(2);
  TrainOptions resume;
  resume.resume = ckpt;
  Train(cfg, resume);
  EXPECT_EQ(CheckpointManager(ckpt, 0, 0).List().size(), 2u);
}

TEST_F(TrainerTest, ACheckpointWhoseFieldsCannotBeThisRunsIsRefused) {
  ConfigFile cfg = ToyConfig(dir_, "naive");
  cfg.net.mutable_solver()->set_checkpoint_dir(dir_.File("ckpt"));
  cfg.net.mutable_solver()->set_epochs(1);
  Train(cfg, {});
  CheckpointState c = LoadCheckpoint(CheckpointManager(dir_.File("ckpt"), 0, 0).Latest());
  c.data_position = 1000000000000;  // a valid CRC over impossible contents
  SaveCheckpoint(dir_.File("bad.frugal"), c);
  cfg.net.mutable_solver()->set_checkpoint_dir("");
  TrainOptions resume;
  resume.resume = dir_.File("bad.frugal");
  test::ExpectError([&] { Train(cfg, resume); }, {"bad.frugal", "batch 1000000000000", "cannot continue from"});
}

TEST(Progress, TextAndDurations) {
  EXPECT_EQ(FormatDuration(0), "0:00");
  EXPECT_EQ(FormatDuration(65.4), "1:05");
  EXPECT_EQ(FormatDuration(3723), "1:02:03");
  EXPECT_EQ(ProgressText({2, 10, 120, 938, 1234.56, 0, "accuracy=0.900000", 0.1f, 245}),
            "Epoch[2] of 10  batch 120/938  1234.6 samples/s  epoch average: accuracy=0.900000  lr 0.1  ETA 4:05");
  EXPECT_EQ(ProgressText({0, 1, 1, 5, 0, 0, "", 0.5f, -1}), "Epoch[0] of 1  batch 1/5  0.0 samples/s  lr 0.5  ETA ?");
  // A language model of 64 tokens a sample.
  EXPECT_EQ(
      ProgressText({0, 1, 3, 5, 10.5, 64, "perplexity=30.1", 0.5f, 10}),
      "Epoch[0] of 1  batch 3/5  10.5 samples/s (672 tokens/s)  epoch average: perplexity=30.1  lr 0.5  ETA 0:10");
}

// Each batch redraws one line in place (rate-limited to none here), and the
// line is erased before training ends, so log lines never run into it.
TEST_F(TrainerTest, TheLiveLineIsRedrawnInPlaceAndErasedAtTheEnd) {
  FILE* tty = std::tmpfile();
  ASSERT_NE(tty, nullptr);
  TrainOptions opts;
  opts.progress = tty;
  ConfigFile cfg = ToyConfig(dir_, "naive");
  cfg.net.mutable_solver()->set_epochs(2);
  Train(cfg, opts);
  std::string out(static_cast<size_t>(std::ftell(tty)), '\0');
  std::rewind(tty);
  ASSERT_EQ(std::fread(out.data(), 1, out.size(), tty), out.size());
  std::fclose(tty);
  EXPECT_EQ(out.find('\n'), std::string::npos) << "one line, rewritten with \\r";
  EXPECT_NE(out.find("\rEpoch[0] of 2  batch 1/13  "), std::string::npos) << out;
  EXPECT_NE(out.find("\rEpoch[1] of 2  batch 12/13  "), std::string::npos) << out;
  EXPECT_NE(out.find(" accuracy="), std::string::npos) << out;
  EXPECT_NE(out.find("  ETA 0:0"), std::string::npos) << out;
  const std::string erase = "\r\033[K";
  EXPECT_EQ(out.compare(out.size() - erase.size(), erase.size(), erase), 0) << "erased at the end";
}

}  // namespace
}  // namespace frugal
