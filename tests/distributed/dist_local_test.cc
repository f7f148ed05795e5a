// The data-parallel path of the trainer without MPI: a one-rank in-process
// communicator gives the same bits as a run without --dist, with the
// gradient buckets requested last layer first; the local group's
// collectives, and two ranks as threads of this process (as `--gpus 0,1`
// runs them, here on the CPU) against one process with the global batch; the
// communicator factory's errors. (Runs under mpirun are in
// tests/distributed/mpi_test.cc.)
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <map>
#include <future>
#include <mutex>
#include <thread>

#include "frugal/checkpoint.h"
#include "frugal/dist.h"
#include "frugal/train.h"
#include "test_util.h"

namespace frugal {
namespace {

// One rank: every collective is the identity, finished at once.
class LocalComm : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  uint64_t Reserve() override { return next_++; }
  void AllReduceSumAsync(uint64_t seq, float*, int64_t n, const char* what, bool last,
                         std::function<void(std::exception_ptr)> done) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      whats[seq] = what;  // two engine workers may call in either order; the sequence number is the order
      floats += n;
      lasts += last;
    }
    done(nullptr);
  }
  void Broadcast(float*, int64_t, int, const char*) override { ++broadcasts; }
  void AllReduceSum(double*, int64_t, const char*) override {}
  void AllReduceMin(int64_t*, int64_t, const char*) override {}
  std::vector<uint64_t> AllGather(uint64_t v, const char*) override { return {v}; }
  [[noreturn]] void Abort(const std::string& m) override { throw Error(m); }
  void Finish() override {}
  std::string Stats() const override { return "local"; }

  std::mutex mu_;
  std::map<uint64_t, std::string> whats;
  int64_t floats = 0, lasts = 0, broadcasts = 0;
  uint64_t next_ = 0;
};

ConfigFile Toy(const test::TempDir& dir) {
  const int n = 64;
  std::vector<uint8_t> images(n * 16), labels(n);
  for (int i = 0; i < n; ++i) {
    labels[i] = static_cast<uint8_t>(i % 4);
    for (int p = 0; p < 16; ++p) images[i * 16 + p] = (p / 4 == labels[i]) ? 200 : (i * 13 + p) % 60;
  }
  test::WriteIdx(dir.File("x"), {n, 4, 4}, images);
  test::WriteIdx(dir.File("y"), {n}, labels);
  return ParseConfig(
      "version: 1\n"
      "node { name: \"fc1\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: \"16\" } }\n"
      "node { name: \"relu1\" op: \"relu\" input: \"fc1\" }\n"
      "node { name: \"fc2\" op: \"fully_connected\" input: \"relu1\" attr { key: \"num_hidden\" value: \"4\" } }\n"
      "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc2\" input: \"label\" }\n"
      "data { train { idx { images: \"" +
          dir.File("x") + "\" labels: \"" + dir.File("y") +
          "\" } }\n"
          "       batch_size: 8 sample_shape: [1, 4, 4] }\n"
          "solver { lr: 0.1 momentum: 0.9 epochs: 2 seed: 3 display: 2 engine: \"threaded\" engine_workers: 2 "
          "engine_kernel_threads: 1 }\n",
      dir.File("toy.prototxt"), {});
}

TEST(DistLocal, OneRankGivesTheBitsOfARunWithoutDist) {
  const int saved = FLAGS_minloglevel;
  FLAGS_minloglevel = 2;
  test::TempDir dir;
  ConfigFile cfg = Toy(dir);
  std::map<std::string, std::vector<float>> plain, dist;
  TrainOptions a;
  a.final_params = &plain;
  Train(cfg, a);
  LocalComm comm;
  TrainOptions b;
  b.final_params = &dist;
  b.dist.comm = &comm;
  // fc2's gradients and fc1's bias (336 bytes), then fc1's weight (1 KiB,
  // over the bucket size: reduced alone, in place).
  b.dist.bucket_bytes = 300;
  b.dist.check_every = 1;
  Train(cfg, b);
  FLAGS_minloglevel = saved;
  EXPECT_EQ(plain, dist);
  const int steps = 2 * 8;
  EXPECT_EQ(comm.broadcasts, 4);  // the parameters (no aux state)
  EXPECT_EQ(comm.lasts, steps);
  EXPECT_EQ(comm.floats, steps * (16 * 16 + 16 + 4 * 16 + 4));
  ASSERT_EQ(comm.whats.size(), static_cast<size_t>(steps * 2));
  // Backward order: the last layer's gradients are reserved first.
  EXPECT_EQ(comm.whats[0], "allreduce(bucket 0: fc2_bias, ...)");
  EXPECT_EQ(comm.whats[1], "allreduce(bucket 1: fc1_weight)");
}

TEST(LocalGroup, CollectivesGiveEveryRankTheSameSums) {
  const int n = 3;
  std::vector<std::unique_ptr<Communicator>> comms = MakeLocalGroup(n);
  std::vector<std::vector<double>> sums(n);
  std::vector<int64_t> mins(n);
  std::vector<std::vector<uint64_t>> gathered(n);
  std::vector<std::vector<float>> bcast(n), reduced0(n), reduced1(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      Communicator* c = comms[r].get();
      EXPECT_EQ(c->rank(), r);
      EXPECT_EQ(c->size(), n);
      sums[r] = {0.1 * (r + 1), 1e20 * (r == 1 ? 1 : 0), 1.0};
      c->AllReduceSum(sums[r].data(), 3, "sum");
      mins[r] = 10 - r;
      c->AllReduceMin(&mins[r], 1, "min");
      gathered[r] = c->AllGather(100 + r, "gather");
      bcast[r] = {static_cast<float>(r), static_cast<float>(2 * r)};
      c->Broadcast(bcast[r].data(), 2, 1, "broadcast");
      // Asynchronous all-reduces requested in one order and issued in the
      // other: they still pair by sequence number.
      const uint64_t s0 = c->Reserve(), s1 = c->Reserve();
      reduced0[r] = {1.f * r, 1.f};
      reduced1[r] = {10.f * r};
      std::promise<void> d0, d1;
      c->AllReduceSumAsync(s1, reduced1[r].data(), 1, "b1", true, [&](std::exception_ptr) { d1.set_value(); });
      c->AllReduceSumAsync(s0, reduced0[r].data(), 2, "b0", false, [&](std::exception_ptr) { d0.set_value(); });
      d0.get_future().wait();
      d1.get_future().wait();
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < n; ++r) {
    // The same bits on every rank: the sum in rank order.
    EXPECT_EQ(sums[r], (std::vector<double>{0.1 + 0.2 + 0.30000000000000004, 1e20, 3.0})) << "rank " << r;
    EXPECT_EQ(sums[r], sums[0]);
    EXPECT_EQ(mins[r], 8);
    EXPECT_EQ(gathered[r], (std::vector<uint64_t>{100, 101, 102}));
    EXPECT_EQ(bcast[r], (std::vector<float>{1.f, 2.f}));
    EXPECT_EQ(reduced0[r], (std::vector<float>{3.f, 3.f}));
    EXPECT_EQ(reduced1[r], (std::vector<float>{30.f}));
  }
  for (auto& c : comms) c->Finish();
  EXPECT_NE(comms[0]->Stats().find("2 gradient all-reduces"), std::string::npos) << comms[0]->Stats();
}

// Two ranks in threads with batch 4 each against one process with batch 8
// on the same file, shuffled (rank r reads rows [4r, 4r+4) of every global
// batch of 8); with iter_size 3, where the ranks exchange the sum of two
// micro-batches and the last one's gradients.
class LocalGroupSolver : public ::testing::TestWithParam<const char*> {};

TEST_P(LocalGroupSolver, TwoThreadRanksTrainAsOneProcessWithTheGlobalBatch) {
  const int saved = FLAGS_minloglevel;
  FLAGS_minloglevel = 2;
  const int ranks = 2, per_rank = 4, steps = 6, n = ranks * per_rank * steps;
  test::TempDir dir;
  std::vector<int> natural(n);
  for (int i = 0; i < n; ++i) natural[i] = i;
  test::WriteToy(dir, "toy", natural);
  auto config = [&](const std::string& prefix, int batch) {
    return ParseConfig(
        Fmt("version: 1\n"
            "node { name: \"fc1\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: \"16\" } "
            "}\n"
            "node { name: \"relu1\" op: \"relu\" input: \"fc1\" }\n"
            "node { name: \"fc2\" op: \"fully_connected\" input: \"relu1\" attr { key: \"num_hidden\" value: \"4\" } "
            "}\n"
            "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc2\" input: \"label\" }\n"
            "data { train { idx { images: \"",
            dir.File("toy-images"), "\" labels: \"", dir.File("toy-labels"), "\" } } batch_size: ", batch,
            " sample_shape: [1, 4, 4] shuffle: true }\n"
            "solver { lr: 0.2 momentum: 0.9 weight_decay: 0.001 seed: 5 epochs: 2 clip_gradient: 5 ",
            GetParam(), " }\n"),
        dir.File(prefix + ".prototxt"), {});
  };
  std::map<std::string, std::vector<float>> ref;
  TrainOptions a;
  a.final_params = &ref;
  Train(config("ref", ranks * per_rank), a);

  std::vector<std::unique_ptr<Communicator>> comms = MakeLocalGroup(ranks);
  TrainOptions o;
  o.dist.bucket_bytes = 100;
  o.dist.check_every = 3;
  std::vector<std::map<std::string, std::vector<float>>> got;
  TrainRanksInThreads(config("dist", per_rank), o, {comms[0].get(), comms[1].get()}, {Device{}, Device{}}, &got);
  for (auto& c : comms) c->Finish();
  FLAGS_minloglevel = saved;
  EXPECT_EQ(got[0], got[1]) << "the ranks hold the same parameters";
  ASSERT_EQ(got[0].size(), ref.size());
  double worst = 0;
  for (const auto& [name, w] : ref) {
    ASSERT_EQ(got[0][name].size(), w.size()) << name;
    for (size_t i = 0; i < w.size(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(got[0][name][i] - w[i])));
  }
  // Without the all-reduce each rank would follow its own half of the data:
  // the ranks would differ, and both would be far from the reference.
  EXPECT_LT(worst, 1e-6) << "largest parameter difference to the one-process run";
}

INSTANTIATE_TEST_SUITE_P(IterSize, LocalGroupSolver, ::testing::Values("", "iter_size: 3"));

// Each rank's BatchNorm moving statistics come from its own shard; at a
// checkpoint (and a validation) every rank holds their mean.
TEST(LocalGroup, BatchNormStatisticsAreAveragedOverRanksAtCheckpoints) {
  const int saved = FLAGS_minloglevel;
  FLAGS_minloglevel = 2;
  const int ranks = 2;
  test::TempDir dir;
  std::vector<int> natural(64);
  for (int i = 0; i < 64; ++i) natural[i] = i;
  test::WriteToy(dir, "toy", natural);
  const ConfigFile cfg = ParseConfig(
      Fmt("version: 1\n"
          "node { name: \"bn\" op: \"batch_norm\" input: \"data\" }\n"
          "node { name: \"fc\" op: \"fully_connected\" input: \"bn\" attr { key: \"num_hidden\" value: \"4\" } }\n"
          "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc\" input: \"label\" }\n"
          "data { train { idx { images: \"",
          dir.File("toy-images"), "\" labels: \"", dir.File("toy-labels"),
          "\" } } batch_size: 4 sample_shape: [1, 4, 4] shuffle: false }\n"
          "solver { lr: 0.1 seed: 5 epochs: 1 }\n"),
      dir.File("bn.prototxt"), {});
  std::vector<std::unique_ptr<Communicator>> comms = MakeLocalGroup(ranks);
  // Copied on this thread (see TrainRanksInThreads); both ranks checkpoint.
  std::vector<ConfigFile> cfgs(ranks, cfg);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    cfgs[r].net.mutable_solver()->set_checkpoint_dir(dir.File(Fmt("ckpt", r)));
    threads.emplace_back([&, r] {
      TrainOptions o;
      o.quiet = r != 0;
      o.dist.comm = comms[r].get();
      Train(cfgs[r], o);
    });
  }
  for (std::thread& t : threads) t.join();
  for (auto& c : comms) c->Finish();
  FLAGS_minloglevel = saved;
  const CheckpointState a = LoadCheckpoint(CheckpointManager(dir.File("ckpt0"), 0, 0).Latest());
  const CheckpointState b = LoadCheckpoint(CheckpointManager(dir.File("ckpt1"), 0, 0).Latest());
  ASSERT_EQ(a.aux.size(), 2u) << "bn's moving mean and variance";
  for (const auto& [name, t] : a.aux) {
    const Tensor& u = b.aux.at(name);
    EXPECT_EQ(std::vector<float>(t.f(), t.f() + t.size()), std::vector<float>(u.f(), u.f() + u.size())) << name;
  }
}

// SIGINT during a 2-rank run in threads: the ranks agree to stop at the
// same update (a multiple of 10), rank 0 checkpoints, nothing hangs (the
// ranks used to stop at their own steps and wait for each other forever).
TEST(LocalGroup, ASignalStopsEveryRankAtTheSameUpdate) {
  const int saved = FLAGS_minloglevel;
  FLAGS_minloglevel = 2;
  test::TempDir dir;
  std::vector<int> natural(64);
  for (int i = 0; i < 64; ++i) natural[i] = i;
  test::WriteToy(dir, "toy", natural);
  ConfigFile cfg = ParseConfig(
      Fmt("version: 1\n"
          "node { name: \"fc\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: \"4\" } }\n"
          "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc\" input: \"label\" }\n"
          "data { train { idx { images: \"",
          dir.File("toy-images"), "\" labels: \"", dir.File("toy-labels"),
          "\" } } batch_size: 4 sample_shape: [1, 4, 4] }\n"
          "solver { lr: 0.01 seed: 5 epochs: 100000 display: 1 checkpoint_dir: \"",
          dir.File("ckpt"), "\" }\n"),
      dir.File("stop.prototxt"), {});
  std::vector<std::unique_ptr<Communicator>> comms = MakeLocalGroup(2);
  TrainOptions o;
  o.log_json = dir.File("log.json");
  std::atomic<bool> finished{false};
  std::thread signaller([&] {
    // Once rank 0 logs a batch, its handler is in place.
    while (!finished && std::ifstream(dir.File("log.json")).peek() == std::ifstream::traits_type::eof())
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (!finished) std::raise(SIGINT);
  });
  std::vector<std::map<std::string, std::vector<float>>> got;
  TrainRanksInThreads(cfg, o, {comms[0].get(), comms[1].get()}, {Device{}, Device{}}, &got);
  finished = true;
  signaller.join();
  for (auto& c : comms) c->Finish();
  FLAGS_minloglevel = saved;
  EXPECT_EQ(got[0], got[1]) << "both ranks stopped after the same update";
  const std::string latest = CheckpointManager(dir.File("ckpt"), 0, 0).Latest();
  ASSERT_FALSE(latest.empty()) << "rank 0 checkpoints when it stops";
  const CheckpointState c = LoadCheckpoint(latest);
  EXPECT_GT(c.iteration, 0);
  EXPECT_EQ(c.iteration % 10, 0) << "the ranks agree every 10 updates";
}

// Ranks of different models (another --define on one of them) stop at the
// start, each naming the first entry of the model that differs and its own
// value there, instead of exchanging buckets of different sizes.
TEST(LocalGroup, RanksOfDifferentModelsStopNamingTheFirstDifference) {
  const int saved = FLAGS_minloglevel;
  FLAGS_minloglevel = 3;
  test::TempDir dir;
  std::vector<int> natural(32);
  for (int i = 0; i < 32; ++i) natural[i] = i;
  test::WriteToy(dir, "toy", natural);
  auto config = [&](int hidden) {
    return ParseConfig(
        Fmt("version: 1\n"
            "node { name: \"fc1\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: \"",
            hidden,
            "\" } }\n"
            "node { name: \"fc2\" op: \"fully_connected\" input: \"fc1\" attr { key: \"num_hidden\" value: \"4\" } }\n"
            "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc2\" input: \"label\" }\n"
            "data { train { idx { images: \"",
            dir.File("toy-images"), "\" labels: \"", dir.File("toy-labels"),
            "\" } } batch_size: 4 sample_shape: [1, 4, 4] }\nsolver { lr: 0.1 epochs: 1 }\n"),
        dir.File("net.prototxt"), {});
  };
  std::vector<ConfigFile> cfgs = {config(16), config(8)};
  std::vector<std::unique_ptr<Communicator>> comms = MakeLocalGroup(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      TrainOptions o;
      o.quiet = true;
      o.dist.comm = comms[r].get();
      try {
        Train(cfgs[r], o);
      } catch (const Error& e) { errors[r] = e.what(); }
    });
  }
  for (std::thread& t : threads) t.join();
  FLAGS_minloglevel = saved;
  // Names in order: fc1_bias is the first entry that differs.
  EXPECT_NE(errors[0].find("the ranks train different models: rank 0 has parameter fc1_bias (16) where rank 1 differs"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("rank 1 has parameter fc1_bias (8) where rank 1 differs from rank 0"), std::string::npos)
      << errors[1];
  EXPECT_NE(errors[1].find("every rank must run the same config"), std::string::npos) << errors[1];
}

TEST(DistLocal, FactoryErrors) {
  test::ExpectError([] { MakeCommunicator("nccl", {}); }, {"--dist nccl: unknown; the only one is mpi"});
#ifndef FRUGAL_HAVE_MPI
  EXPECT_FALSE(MpiBuilt());
  test::ExpectError([] { MakeCommunicator("mpi", {}); },
                    {"--dist mpi: this frugal was built without MPI support", "-DFRUGAL_MPI"});
#else
  EXPECT_TRUE(MpiBuilt());
#endif
}

}  // namespace
}  // namespace frugal
