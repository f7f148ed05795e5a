// --shard optimizer (ZeRO stage 1) without MPI: ranks as threads of this
// process (the local group; runs under mpirun are in tests/distributed/mpi_test.cc).
// How the parameters are cut among the ranks; each rank's plan holds its
// slice of the optimizer state; a sharded run gives the bits of the
// unsharded data-parallel run (the rules are elementwise: a slice updates as
// the whole does) and the parameters of one process with the global batch;
// its checkpoints hold the whole state and resume with another rank count,
// without sharding, and a one-process checkpoint resumes sharded; the flags'
// errors.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frugal/checkpoint.h"
#include "frugal/dist.h"
#include "frugal/train.h"
#include "test_util.h"

namespace frugal {
namespace {

using Params = std::map<std::string, std::vector<float>>;

TEST(SliceAcrossRanks, CutsTheWholeIntoOneRunPerRank) {
  // 12 elements over 3 ranks: 4 each, the first tensor cut between ranks 0
  // and 1, the empty one owned by nobody.
  const std::vector<std::vector<Slice>> s = SliceAcrossRanks({5, 3, 0, 4}, 3);
  ASSERT_EQ(s.size(), 4u);
  ASSERT_EQ(s[0].size(), 2u);
  EXPECT_EQ(std::make_tuple(s[0][0].owner, s[0][0].begin, s[0][0].size), std::make_tuple(0, 0, 4));
  EXPECT_EQ(std::make_tuple(s[0][1].owner, s[0][1].begin, s[0][1].size), std::make_tuple(1, 4, 1));
  ASSERT_EQ(s[1].size(), 1u);
  EXPECT_EQ(std::make_tuple(s[1][0].owner, s[1][0].begin, s[1][0].size), std::make_tuple(1, 0, 3));
  EXPECT_TRUE(s[2].empty());
  ASSERT_EQ(s[3].size(), 1u);
  EXPECT_EQ(std::make_tuple(s[3][0].owner, s[3][0].begin, s[3][0].size), std::make_tuple(2, 0, 4));
  // More ranks than elements: the last ranks own nothing.
  const std::vector<std::vector<Slice>> few = SliceAcrossRanks({2}, 4);
  ASSERT_EQ(few[0].size(), 2u);
  EXPECT_EQ(few[0][1].owner, 1);
  EXPECT_EQ(SliceAcrossRanks({7}, 1)[0].size(), 1u) << "one rank owns everything";
}

// The toy MLP (16 + 256 + 4 + 64 parameters: over 3 ranks fc1_weight is cut
// twice) on 72 shuffled toy samples.
ConfigFile Mlp(const test::TempDir& dir, int batch, const std::string& solver, const std::string& name) {
  return ParseConfig(
      Fmt("version: 1\n"
          "node { name: \"fc1\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: \"16\" } }\n"
          "node { name: \"relu1\" op: \"relu\" input: \"fc1\" }\n"
          "node { name: \"fc2\" op: \"fully_connected\" input: \"relu1\" attr { key: \"num_hidden\" value: \"4\" } }\n"
          "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc2\" input: \"label\" }\n"
          "data { train { idx { images: \"",
          dir.File("toy-images"), "\" labels: \"", dir.File("toy-labels"), "\" } } batch_size: ", batch,
          " sample_shape: [1, 4, 4] shuffle: true }\n"
          "solver { seed: 5 ",
          solver, " }\n"),
      dir.File(name + ".prototxt"), {});
}

double Worst(const Params& a, const Params& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (const auto& [name, w] : a) {
    const std::vector<float>& v = b.at(name);
    EXPECT_EQ(v.size(), w.size()) << name;
    for (size_t i = 0; i < w.size() && i < v.size(); ++i) worst = std::max(worst, std::abs(double(v[i]) - w[i]));
  }
  return worst;
}

Params Values(const std::map<std::string, Tensor>& ts) {
  Params out;
  for (const auto& [name, t] : ts) out[name].assign(t.f(), t.f() + t.size());
  return out;
}

// "" when a and b hold the same bits, else the first value that differs.
std::string FirstDifference(const Params& a, const Params& b) {
  if (a.size() != b.size()) return Fmt(a.size(), " tensors against ", b.size());
  for (const auto& [name, v] : a) {
    auto it = b.find(name);
    if (it == b.end()) return name + " is missing";
    if (it->second.size() != v.size()) return Fmt(name, ": ", v.size(), " values against ", it->second.size());
    for (size_t i = 0; i < v.size(); ++i)
      if (std::memcmp(&v[i], &it->second[i], sizeof(float)) != 0)
        return Fmt(name, "[", i, "]: ", v[i], " against ", it->second[i]);
  }
  return "";
}

// Adam with L2 decay, a clipping that binds, and two micro-batches per update.
constexpr const char* kAdam = "optimizer: ADAM lr: 0.02 weight_decay: 0.001 clip_gradient: 0.05 iter_size: 2";
constexpr int kSamples = 72;  // 6 global batches of 12 per epoch: 3 updates

class ShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = FLAGS_minloglevel;
    FLAGS_minloglevel = 2;
    std::vector<int> natural(kSamples);
    for (int i = 0; i < kSamples; ++i) natural[i] = i;
    test::WriteToy(dir_, "toy", natural);
  }
  void TearDown() override { FLAGS_minloglevel = saved_; }

  // cfg trained by `ranks` threads (0: one process without --dist), the
  // optimizer state sharded or not; rank 0's parameters at the end, after
  // checking that every rank holds the same.
  Params TrainOn(int ranks, bool shard, const ConfigFile& cfg, const std::string& resume = "") {
    TrainOptions o;
    o.resume = resume;
    Params got;
    if (ranks == 0) {
      o.final_params = &got;
      Train(cfg, o);
      return got;
    }
    std::vector<std::unique_ptr<Communicator>> comms = MakeLocalGroup(ranks);
    std::vector<Communicator*> raw;
    for (auto& c : comms) raw.push_back(c.get());
    o.dist.shard_optimizer = shard;
    o.dist.check_every = 1;  // every update: the ranks' parameters are compared
    std::vector<Params> all;
    TrainRanksInThreads(cfg, o, raw, std::vector<Device>(ranks), &all);
    for (auto& c : comms) c->Finish();
    for (int r = 1; r < ranks; ++r) EXPECT_EQ(FirstDifference(all[r], all[0]), "") << "rank " << r;
    return all[0];
  }

  test::TempDir dir_;
  int saved_ = 0;
};

TEST_F(ShardTest, EachRanksPlanHoldsItsSliceOfTheOptimizerState) {
  const ConfigFile cfg = Mlp(dir_, 4, kAdam, "plan");
  const Model whole = BuildModel(cfg, MemoryStrategy::kShare);
  const int64_t state = whole.update_plan.state_bytes;
  EXPECT_EQ(state, 2 * 340 * 4) << "Adam's m and v of 340 parameters";
  int64_t sum = 0;
  for (int r = 0; r < 3; ++r) {
    const Model m = BuildModel(cfg, MemoryStrategy::kShare, {}, {r, 3});
    EXPECT_EQ(m.update_plan.state_bytes, 2 * (r < 2 ? 114 : 112) * 4) << "rank " << r;
    EXPECT_EQ(m.train_plan.param_grad_bytes, whole.train_plan.param_grad_bytes) << "gradients stay whole";
    EXPECT_LT(PlannedFootprint(m), PlannedFootprint(whole));
    sum += m.update_plan.state_bytes;
  }
  EXPECT_EQ(sum, state);
}

// Sharded: the bits of the unsharded data-parallel run, checkpoints
// included; and one process's parameters with the global batch of 12.
TEST_F(ShardTest, ThreeRanksGiveTheBitsOfUnshardedDataParallel) {
  ConfigFile one = Mlp(dir_, 12, Fmt(kAdam, " epochs: 2"), "one");
  ConfigFile dp = Mlp(dir_, 4, Fmt(kAdam, " epochs: 2 checkpoint_dir: \"", dir_.File("dp"), "\""), "dp");
  ConfigFile sharded = Mlp(dir_, 4, Fmt(kAdam, " epochs: 2 checkpoint_dir: \"", dir_.File("sh"), "\""), "sh");
  const Params ref = TrainOn(0, false, one);
  const Params a = TrainOn(3, false, dp);
  const Params b = TrainOn(3, true, sharded);
  EXPECT_EQ(FirstDifference(b, a), "") << "a slice is updated as the whole is";
  const double worst = Worst(b, ref);
  EXPECT_LT(worst, 2e-6) << "against one process with the global batch";
  std::printf("3 sharded ranks against one process: largest parameter difference %.3g\n", worst);
  EXPECT_GT(Worst(b, TrainOn(0, false, Mlp(dir_, 4, Fmt(kAdam, " epochs: 2"), "local"))), 1e-3)
      << "a rank alone (a third of the batch) trains elsewhere: the comparison above can fail";
  std::string unclipped = Fmt(kAdam, " epochs: 2");
  unclipped.replace(unclipped.find("clip_gradient: 0.05"), 19, "clip_gradient: 0");
  EXPECT_GT(Worst(ref, TrainOn(0, false, Mlp(dir_, 12, unclipped, "unclipped"))), 1e-3)
      << "the clipping binds: the global norm is compared, not each rank's";
  // Rank 0's checkpoint holds every rank's slices, where the unsharded run's has them.
  const int64_t updates = 2 * kSamples / 12 / 2;
  const CheckpointState ca = LoadCheckpoint(test::Ckpt(dir_.File("dp"), updates));
  const CheckpointState cb = LoadCheckpoint(test::Ckpt(dir_.File("sh"), updates));
  ASSERT_EQ(cb.opt_state.size(), 8u) << "m and v of 4 parameters";
  EXPECT_EQ(FirstDifference(Values(cb.opt_state), Values(ca.opt_state)), "");
  EXPECT_EQ(FirstDifference(Values(cb.params), Values(ca.params)), "");
}

// Checkpoints are one format: a sharded run's resumes on another rank count
// and in one process, a one-process checkpoint resumes sharded; each ends
// where one process trained through both epochs does.
TEST_F(ShardTest, CheckpointsResumeWithAnotherRankCountWithoutShardingAndSharded) {
  auto config = [&](int batch, int epochs, const std::string& ckpt, const std::string& name) {
    return Mlp(dir_, batch,
               Fmt(kAdam, " epochs: ", epochs, ckpt.empty() ? "" : Fmt(" checkpoint_dir: \"", dir_.File(ckpt), "\"")),
               name);
  };
  const int64_t epoch = kSamples / 12 / 2;  // updates per epoch at the global batch of 12
  const Params ref = TrainOn(0, false, config(12, 2, "one", "one"));
  TrainOn(3, true, config(4, 1, "three", "three"));
  const std::string sharded_ckpt = test::Ckpt(dir_.File("three"), epoch);
  const std::string one_ckpt = test::Ckpt(dir_.File("one"), epoch);
  EXPECT_LT(Worst(TrainOn(2, true, config(6, 2, "", "two"), sharded_ckpt), ref), 2e-6)
      << "3 sharded ranks, then 2 sharded ranks";
  EXPECT_LT(Worst(TrainOn(0, false, config(12, 2, "", "alone"), sharded_ckpt), ref), 2e-6)
      << "3 sharded ranks, then one process";
  EXPECT_LT(Worst(TrainOn(3, true, config(4, 2, "", "again"), one_ckpt), ref), 2e-6)
      << "one process, then 3 sharded ranks";
}

// --profile on a sharded run: rank 0's trace holds its exchanges beside the
// ops, on their own rows, each within the traced steps.
TEST_F(ShardTest, TheProfileTraceShowsTheExchanges) {
  const ConfigFile cfg = Mlp(dir_, 4, "lr: 0.1 momentum: 0.9 epochs: 1", "traced");
  std::vector<std::unique_ptr<Communicator>> comms = MakeLocalGroup(2);
  TrainOptions o;
  o.dist.shard_optimizer = true;
  o.dist.bucket_bytes = 300;  // fc2's gradients and fc1's bias, then fc1's weight alone
  o.profile = dir_.File("trace.json");
  o.profile_steps = 2;
  TrainRanksInThreads(cfg, o, {comms[0].get(), comms[1].get()}, {Device{}, Device{}});
  for (auto& c : comms) c->Finish();
  const std::string json = ReadTextFile(o.profile);
  auto count = [&json](const std::string& needle) {
    int n = 0;
    for (size_t at = json.find(needle); at != std::string::npos; at = json.find(needle, at + 1)) ++n;
    return n;
  };
  // Two steps: two buckets each, and fc1_weight cut between the two ranks'
  // slices (4 parameters, 5 slices) broadcast after each update.
  EXPECT_EQ(count("\"name\": \"allreduce(bucket 0: fc2_bias, ...)\", \"cat\": \"communication\""), 2) << json;
  EXPECT_EQ(count("\"name\": \"allreduce(bucket 1: fc1_weight)\", \"cat\": \"communication\""), 2) << json;
  EXPECT_EQ(count("\"name\": \"broadcast(slice of rank 0)\""), 2 * 2) << json;
  EXPECT_EQ(count("\"name\": \"broadcast(slice of rank 1)\""), 2 * 3) << json;
  EXPECT_NE(json.find("\"args\": {\"name\": \"all-reduces\"}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"cat\": \"backward\""), std::string::npos) << "the ops are traced beside them";
}

TEST(ShardCli, FlagsAreChecked) {
  test::RunResult r = test::RunFrugal("train --config models/mlp/fashion_mnist.prototxt --shard optimizer");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--shard optimizer shards over the ranks of a data-parallel run: add --dist mpi"),
            std::string::npos)
      << r.output;
  r = test::RunFrugal("train --config models/mlp/fashion_mnist.prototxt --shard gradients");
  EXPECT_NE(r.output.find("--shard gradients (ZeRO stage 2) is not built yet"), std::string::npos) << r.output;
  r = test::RunFrugal("plan --config models/mlp/fashion_mnist.prototxt --shard optimizer");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("give their number, --ranks N"), std::string::npos) << r.output;
  r = test::RunFrugal("plan --config models/gpt/gpt.prototxt --shard optimizer --ranks 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"ranks\":4,\"shard\":\"optimizer\""), std::string::npos) << r.output;
}

}  // namespace
}  // namespace frugal
