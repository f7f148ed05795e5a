// The data-parallel path of the trainer without MPI: a one-rank in-process
// communicator gives the same bits as a run without --dist, with the
// gradient buckets requested last layer first; the communicator factory's
// errors. (Runs under mpirun are in tests/mpi/dist_test.cc.)
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <fstream>
#include <mutex>

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
      whats.push_back(what);
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
  std::vector<std::string> whats;
  int64_t floats = 0, lasts = 0, broadcasts = 0;
  uint64_t next_ = 0;
};

void WriteIdx(const std::string& path, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::string bytes = {0, 0, 8, static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<char>((d >> s) & 0xff));
  bytes.append(data.begin(), data.end());
  std::ofstream(path, std::ios::binary) << bytes;
}

ConfigFile Toy(const test::TempDir& dir) {
  const int n = 64;
  std::vector<uint8_t> images(n * 16), labels(n);
  for (int i = 0; i < n; ++i) {
    labels[i] = static_cast<uint8_t>(i % 4);
    for (int p = 0; p < 16; ++p) images[i * 16 + p] = (p / 4 == labels[i]) ? 200 : (i * 13 + p) % 60;
  }
  WriteIdx(dir.File("x"), {n, 4, 4}, images);
  WriteIdx(dir.File("y"), {n}, labels);
  return ParseConfig(
      "version: 1\n"
      "node { name: \"fc1\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: \"16\" } }\n"
      "node { name: \"relu1\" op: \"relu\" input: \"fc1\" }\n"
      "node { name: \"fc2\" op: \"fully_connected\" input: \"relu1\" attr { key: \"num_hidden\" value: \"4\" } }\n"
      "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc2\" input: \"label\" }\n"
      "data { train { idx { images: \"" + dir.File("x") + "\" labels: \"" + dir.File("y") + "\" } }\n"
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
  b.dist.bucket_bytes = 100;  // fc2's gradients, then fc1's
  b.dist.check_every = 1;
  Train(cfg, b);
  FLAGS_minloglevel = saved;
  EXPECT_EQ(plain, dist);
  const int steps = 2 * 8;
  EXPECT_EQ(comm.broadcasts, 4);  // the parameters (no aux state)
  EXPECT_EQ(comm.lasts, steps);
  EXPECT_EQ(comm.floats, steps * (16 * 16 + 16 + 4 * 16 + 4));
  ASSERT_EQ(comm.whats.size(), static_cast<size_t>(steps * 2));
  // Backward order: the last layer's gradients are requested first.
  EXPECT_EQ(comm.whats[0], "allreduce(bucket 0: fc2_bias, ...)");
  EXPECT_EQ(comm.whats[1], "allreduce(bucket 1: fc1_bias, ...)");
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
