// Training on GPUs: the optimizer rules, gradient clipping and whole runs
// on cuda(0) against the CPU, and two GPUs of one process (NCCL) against one
// process with the global batch. Every test here needs a GPU (two for the
// last) and skips itself with the reason where there is none.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "backend/device.h"
#include "frugal/checkpoint.h"
#include "frugal/dist.h"
#include "frugal/train.h"
#include "test_util.h"
#include "train/train_steps.h"

namespace frugal {
namespace {

#define FRUGAL_REQUIRE_GPUS(n)                                                                                         \
  do {                                                                                                                 \
    if (backend::CudaDeviceCount() < (n))                                                                              \
      GTEST_SKIP() << (backend::CudaDeviceCount() == 0 ? backend::NoCudaReason() : Fmt("needs ", n, " CUDA devices")); \
  } while (0)

const Device kGpu{DeviceType::kCUDA, 0};

Tensor Random(const Shape& s, uint64_t seed, Device dev = {}) {
  Tensor t = Tensor::Empty(s);
  Rng rng(seed);
  for (int64_t i = 0; i < t.size(); ++i) t.f()[i] = static_cast<float>(2 * rng.Uniform() - 1);
  if (dev.type == DeviceType::kCPU) return t;
  Tensor d = Tensor::Empty(s, DType::kFloat32, dev);
  d.CopyFrom(t);
  return d;
}

double MaxDiff(const Tensor& cpu, const Tensor& gpu) {
  const Tensor h = gpu.OnHost();
  double worst = 0;
  for (int64_t i = 0; i < h.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(h.f()[i] - cpu.f()[i])) /
                                std::max(1.0, std::abs(static_cast<double>(cpu.f()[i]))));
  return worst;
}

TEST(CudaTrain, OptimizersMatchTheCpu) {
  FRUGAL_REQUIRE_GPUS(1);
  const Shape shape({1000, 37});
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kNesterov, OptimizerKind::kAdam, OptimizerKind::kAdamW,
                             OptimizerKind::kRmsProp}) {
    for (bool centered : {false, true}) {
      if (centered && kind != OptimizerKind::kRmsProp) continue;
      OptimizerOptions o;
      o.kind = kind;
      o.weight_decay = 0.01f;
      o.centered = centered;
      Optimizer opt(o);
      Tensor w = Random(shape, 1), wg = Random(shape, 1, kGpu);
      OptState s = opt.CreateState(w), sg = opt.CreateState(wg);
      for (int step = 1; step <= 3; ++step) {
        Tensor g = Random(shape, 10 + step), gg = Random(shape, 10 + step, kGpu);
        test::Update(opt, &w, g, &s, 0.05f, step, {2.f, 0.5f});
        test::Update(opt, &wg, gg, &sg, 0.05f, step, {2.f, 0.5f});  // the op's CUDA kernel
      }
      EXPECT_LT(MaxDiff(w, wg), 1e-5) << opt.name() << (centered ? " centered" : "");
      for (size_t k = 0; k < s.size(); ++k) EXPECT_LT(MaxDiff(s[k], sg[k]), 1e-5) << opt.name() << " state " << k;
    }
  }
}

TEST(CudaTrain, GradAccumulateMatchesTheCpu) {
  FRUGAL_REQUIRE_GPUS(1);
  Tensor sum = Random(Shape({70000}), 5), sumg = Random(Shape({70000}), 5, kGpu);
  Tensor g = Random(Shape({70000}), 6), gg = Random(Shape({70000}), 6, kGpu);
  for (int64_t micro = 0; micro < 3; ++micro) {
    test::RunNode("grad_accumulate", {{"iter_size", "3"}}, {sum, g}, micro);
    test::RunNode("grad_accumulate", {{"iter_size", "3"}}, {sumg, gg}, micro);
  }
  EXPECT_EQ(MaxDiff(g, gg), 0);
  EXPECT_EQ(MaxDiff(sum, sumg), 0);
}

TEST(CudaTrain, RescaleAndClipMatchesTheCpu) {
  FRUGAL_REQUIRE_GPUS(1);
  for (float max_norm : {0.f, 1.f, 1e6f}) {
    Tensor a = Random(Shape({70000}), 3), b = Random(Shape({5}), 4);
    Tensor ag = Random(Shape({70000}), 3, kGpu), bg = Random(Shape({5}), 4, kGpu);
    const AttrMap attrs{{"num_args", "2"}, {"rescale", "0.5"}, {"max_norm", ExactAttr(max_norm)}};
    test::RunNode("rescale_clip", attrs, {a, b}, 1);
    test::RunNode("rescale_clip", attrs, {ag, bg}, 1);
    EXPECT_LT(MaxDiff(a, ag), 1e-6) << "max_norm " << max_norm;
    EXPECT_LT(MaxDiff(b, bg), 1e-6) << "max_norm " << max_norm;
  }
}

// Toy samples in the order given (test::ToySample), a
// convolution and (with bn) batch norm before the classifier.
ConfigFile Toy(const test::TempDir& dir, const std::string& prefix, const std::vector<int>& order, int batch,
               const std::string& solver, bool bn = true) {
  test::WriteToy(dir, prefix, order);
  return ParseConfig(
      Fmt("version: 1\n"
          "node { name: \"conv\" op: \"convolution\" input: \"data\" attr { key: \"kernel\" value: \"(3,3)\" }"
          " attr { key: \"pad\" value: \"(1,1)\" } attr { key: \"num_filter\" value: \"4\" } }\n"
          "node { name: \"bn\" op: \"",
          bn ? "batch_norm" : "identity",
          "\" input: \"conv\" }\n"
          "node { name: \"relu\" op: \"relu\" input: \"bn\" }\n"
          "node { name: \"fc1\" op: \"fully_connected\" input: \"relu\" attr { key: \"num_hidden\" value: \"16\" } }\n"
          "node { name: \"fc2\" op: \"fully_connected\" input: \"fc1\" attr { key: \"num_hidden\" value: \"4\" } }\n"
          "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc2\" input: \"label\" }\n"
          "data { train { idx { images: \"",
          dir.File(prefix + "-images"), "\" labels: \"", dir.File(prefix + "-labels"),
          "\" } }\n"
          "       val { idx { images: \"",
          dir.File(prefix + "-images"), "\" labels: \"", dir.File(prefix + "-labels"),
          "\" } }\n"
          "       batch_size: ",
          batch,
          " sample_shape: [1, 4, 4] shuffle: false }\n"
          "solver { lr: 0.1 momentum: 0.9 weight_decay: 0.001 seed: 5 epochs: 2 ",
          solver, " }\n"),
      dir.File(prefix + ".prototxt"), {});
}

double WorstDiff(const std::map<std::string, std::vector<float>>& a,
                 const std::map<std::string, std::vector<float>>& b) {
  double worst = 0;
  for (const auto& [name, w] : a) {
    EXPECT_EQ(b.at(name).size(), w.size()) << name;
    for (size_t i = 0; i < w.size(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(b.at(name)[i] - w[i])) /
                                  std::max(1.0, std::abs(static_cast<double>(w[i]))));
  }
  return worst;
}

TEST(CudaTrain, OneGpuTrainsAsTheCpu) {
  FRUGAL_REQUIRE_GPUS(1);
  test::TempDir dir;
  std::vector<int> order(64);
  for (int i = 0; i < 64; ++i) order[i] = i;
  for (const std::string solver : {"", "iter_size: 2 clip_gradient: 0.5", "optimizer: ADAM lr: 0.01"}) {
    const ConfigFile cfg = Toy(dir, "toy", order, 8, solver);
    std::map<std::string, std::vector<float>> cpu, gpu;
    TrainOptions a;
    a.final_params = &cpu;
    const double acc_cpu = Train(cfg, a);
    TrainOptions b;
    b.final_params = &gpu;
    b.device = kGpu;
    b.log_json = dir.File("gpu.json");
    const double acc_gpu = Train(cfg, b);
    EXPECT_LT(WorstDiff(cpu, gpu), 1e-3) << solver;
    EXPECT_NEAR(acc_cpu, acc_gpu, 1.5 / 64) << solver << ": validation accuracy (one sample may flip)";
  }
}

TEST(CudaTrain, GpuCheckpointsResumeOnTheGpuAndTestOnTheCpu) {
  FRUGAL_REQUIRE_GPUS(1);
  test::TempDir dir;
  std::vector<int> order(64);
  for (int i = 0; i < 64; ++i) order[i] = i;
  ConfigFile cfg = Toy(dir, "toy", order, 8, "");
  std::map<std::string, std::vector<float>> whole, resumed;
  TrainOptions a;
  a.final_params = &whole;
  a.device = kGpu;
  Train(cfg, a);
  cfg.net.mutable_solver()->set_checkpoint_dir(dir.File("ckpt"));
  cfg.net.mutable_solver()->set_max_iters(5);
  TrainOptions b;
  b.device = kGpu;
  Train(cfg, b);
  cfg.net.mutable_solver()->set_max_iters(0);
  TrainOptions c;
  c.device = kGpu;
  c.resume = dir.File("ckpt");
  c.final_params = &resumed;
  Train(cfg, c);
  EXPECT_EQ(whole, resumed) << "a resumed GPU run gives the bits of an uninterrupted one";
  const MetricSet m = frugal::Test(cfg, CheckpointManager(dir.File("ckpt"), 0, 0).Latest());
  EXPECT_GT(m.count(), 0);
}

// A label that is not a class: found by the GPU kernel, reported by the
// launch's completion, rethrown by the trainer with the node's name.
TEST(CudaTrain, ABadLabelIsAnErrorNamingTheNode) {
  FRUGAL_REQUIRE_GPUS(1);
  test::TempDir dir;
  std::vector<int> order(16);
  for (int i = 0; i < 16; ++i) order[i] = i;
  ConfigFile cfg = Toy(dir, "toy", order, 8, "");
  for (int i = 0; i < cfg.net.node_size(); ++i) {
    auto* n = cfg.net.mutable_node(i);
    if (n->name() == "fc2") (*n->mutable_attr())["num_hidden"] = "3";  // labels 0..3, classes 0..2
  }
  TrainOptions o;
  o.device = kGpu;
  test::ExpectError([&] { Train(cfg, o); }, {"prob", "is not a class index in [0, 3)", "found on the GPU"});
}

// Two GPUs of this process, batch 4 each, against one process with batch 8
// on the same file: rank r reads rows [4r, 4r+4) of every global batch of 8
// (as tests/distributed/dist_local_test.cc on the CPU).
TEST(CudaTrain, TwoGpusTrainAsOneProcessWithTheGlobalBatch) {
  FRUGAL_REQUIRE_GPUS(2);
  const int ranks = 2, per_rank = 4, steps = 6, n = ranks * per_rank * steps;
  test::TempDir dir;
  std::vector<int> natural(n);
  for (int i = 0; i < n; ++i) natural[i] = i;
  std::map<std::string, std::vector<float>> ref;
  TrainOptions a;
  a.final_params = &ref;
  a.device = kGpu;
  // No batch norm: it would normalise over each GPU's half of the batch.
  Train(Toy(dir, "ref", natural, ranks * per_rank, "", /*bn=*/false), a);
  const ConfigFile dist = Toy(dir, "dist", natural, per_rank, "", /*bn=*/false);
  std::vector<std::unique_ptr<Communicator>> comms = MakeNcclGroup(MakeLocalGroup(ranks), {0, 1});
  TrainOptions o;
  o.dist.check_every = 3;
  std::vector<std::map<std::string, std::vector<float>>> got;
  TrainRanksInThreads(dist, o, {comms[0].get(), comms[1].get()},
                      {Device{DeviceType::kCUDA, 0}, Device{DeviceType::kCUDA, 1}}, &got);
  for (auto& c : comms) c->Finish();
  EXPECT_EQ(got[0], got[1]) << "the GPUs hold the same parameters";
  // The sums differ only in order (two GEMMs and an NCCL average against one GEMM).
  EXPECT_LT(WorstDiff(ref, got[0]), 1e-4);
}

}  // namespace
}  // namespace frugal
