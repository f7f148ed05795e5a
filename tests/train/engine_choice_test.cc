// The threaded engine's split chosen per training graph (MakeEngineFor):
// one worker with every core for a chain, two workers where the graph has
// independent work, and the solver's own numbers always win. `frugal time`
// honours the engine flags and reports the split; frugal makes OpenMP's
// threads wait passively unless the user chose.
#include <gtest/gtest.h>

#include "frugal/passes/schedule.h"
#include "frugal/train.h"
#include "test_util.h"

namespace frugal {
namespace {

// A chain of fully_connected + relu layers, or `branches` such chains side
// by side on one input, summed; `hidden` units per layer, batch `batch`.
ConfigFile Net(int branches, int depth = 4, int hidden = 64, int batch = 16) {
  std::string text = "version: 1\n", sum;
  for (int b = 0; b < branches; ++b) {
    std::string prev = "data";
    for (int i = 0; i < depth; ++i) {
      const std::string fc = "fc" + std::to_string(b) + "_" + std::to_string(i);
      text += "node { name: \"" + fc + "\" op: \"fully_connected\" input: \"" + prev +
              "\" attr { key: \"num_hidden\" value: \"" + std::to_string(hidden) + "\" } }\n";
      text += "node { name: \"r" + fc + "\" op: \"relu\" input: \"" + fc + "\" }\n";
      prev = "r" + fc;
    }
    sum += " input: \"" + prev + "\"";
  }
  text += "node { name: \"sum\" op: \"add_n\"" + sum + " attr { key: \"num_args\" value: \"" +
          std::to_string(branches) + "\" } }\n";
  text += "node { name: \"out\" op: \"fully_connected\" input: \"sum\" attr { key: \"num_hidden\" value: \"10\" } }\n";
  text += "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"out\" input: \"label\" }\n";
  text += "data { batch_size: " + std::to_string(batch) + " sample_shape: [" + std::to_string(hidden) + "] }\n";
  return ParseConfig(text, "net.prototxt", {});
}

TEST(EngineChoice, AChainOfLargeKernelsGetsOneWorkerWithEveryCore) {
  const ConfigFile cfg = Net(1, 4, 1024, 256);  // 0.5 GFLOP per layer
  const Model m = BuildModel(cfg, MemoryStrategy::kShare);
  EXPECT_LT(GraphParallelism(m.train), 1.2);
  EXPECT_GT(MeanOpFlops(m.train), kSmallKernelFlops);
  const EngineOptions eo = ChooseEngineSplit(cfg.net.solver(), m.train, 2);
  EXPECT_EQ(eo.cpu_workers, 1);
  EXPECT_EQ(eo.kernel_threads, 2);
  EXPECT_EQ(ChooseEngineSplit(cfg.net.solver(), m.train, 8).kernel_threads, 8);
}

TEST(EngineChoice, IndependentBranchesGetTwoWorkers) {
  const ConfigFile cfg = Net(3);
  const Model m = BuildModel(cfg, MemoryStrategy::kShare);
  EXPECT_GE(GraphParallelism(m.train), kParallelismForTwoWorkers);
  EngineOptions eo = ChooseEngineSplit(cfg.net.solver(), m.train, 2);
  EXPECT_EQ(eo.cpu_workers, 2);
  EXPECT_EQ(eo.kernel_threads, 1);
  eo = ChooseEngineSplit(cfg.net.solver(), m.train, 1);  // one core: never two workers
  EXPECT_EQ(eo.cpu_workers, 1);
  EXPECT_EQ(eo.kernel_threads, 1);
}

TEST(EngineChoice, KernelsTooSmallToSplitGetTwoWorkers) {
  // The MLP at batch 64 (20 MFLOP per op node) trained faster on 2 x 1 than
  // on 1 x 2, LeNet (53) slower (docs/benchmarks.md).
  for (const auto& [config, two] : std::vector<std::pair<std::string, bool>>{
           {"models/mlp/fashion_mnist.prototxt", true}, {"models/lenet/fashion_mnist.prototxt", false}}) {
    const ConfigFile cfg = LoadConfig(std::string(FRUGAL_SOURCE_DIR) + "/" + config, {});
    const Model m = BuildModel(cfg, MemoryStrategy::kShare);
    EXPECT_LT(GraphParallelism(m.train), kParallelismForTwoWorkers) << config;
    EXPECT_EQ(MeanOpFlops(m.train) < kSmallKernelFlops, two) << config << ": " << MeanOpFlops(m.train) << " FLOPs";
    EXPECT_EQ(ChooseEngineSplit(cfg.net.solver(), m.train, 2).cpu_workers, two ? 2 : 1) << config;
  }
}

TEST(EngineChoice, TheSolversNumbersWin) {
  ConfigFile cfg = Net(1, 4, 1024, 256);
  const Model m = BuildModel(cfg, MemoryStrategy::kShare);
  cfg.net.mutable_solver()->set_engine_workers(2);
  EngineOptions eo = ChooseEngineSplit(cfg.net.solver(), m.train, 2);
  EXPECT_EQ(eo.cpu_workers, 2);
  EXPECT_EQ(eo.kernel_threads, 1);
  cfg.net.mutable_solver()->set_engine_workers(0);
  cfg.net.mutable_solver()->set_engine_kernel_threads(1);
  eo = ChooseEngineSplit(cfg.net.solver(), m.train, 2);
  EXPECT_EQ(eo.cpu_workers, 1);
  EXPECT_EQ(eo.kernel_threads, 1);
}

TEST(EngineChoice, FrugalTimeHonoursTheEngineFlagsAndWaitsPassively) {
  const std::string cmd =
      std::string(FRUGAL_BIN) + " time --config models/mlp/fashion_mnist.prototxt --iters 1 --warmup 0";
  test::RunResult r = test::RunShell("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " + cmd +
                                     " --engine-workers 2 --engine-kernel-threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("engine: threaded (cpu: 2 workers x 1 kernel thread"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("OMP_WAIT_POLICY=PASSIVE"), std::string::npos) << r.output;
  r = test::RunShell("env OMP_WAIT_POLICY=active " + cmd + " --engine naive");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("engine: naive"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("OMP_WAIT_POLICY=active"), std::string::npos) << "the user's choice stands\n" << r.output;
}

}  // namespace
}  // namespace frugal
