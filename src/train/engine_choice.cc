// MakeEngineFor: the engine a config asks for, with the threaded engine's
// split between workers and kernel threads chosen for the training graph
// where the config leaves it open.
//
// A second worker only pays when the graph has independent work to run
// beside the critical path; otherwise it halves every kernel's threads for
// nothing (ResNet chains ran 1.2-1.4x slower on 2 workers x 1 kernel thread
// than on 1 x 2). The measure is the graph's parallelism: its total cost over
// the cost of its longest dependency path, each node costing its FLOPs or,
// for memory-bound ops, its output elements, whichever is larger. A second
// worker also pays where the kernels are too small to split: below
// kSmallKernelFlops per op node on average, a second kernel thread costs
// about what it saves (waking it, and each output's halves in two caches),
// while a second worker overlaps the optimizer updates and the metrics
// with the kernels. Measured here (docs/benchmarks.md): the Fashion-MNIST
// MLP at batch 64 (20 MFLOP per op node) trained 8% faster on 2 workers x
// 1 kernel thread than on 1 x 2, and no faster with 2 kernel threads than
// with 1; at batch 128 (40 MFLOP) the two tie; LeNet (53 MFLOP per node)
// ran 1.47x slower on 2 x 1.
#include <algorithm>

#include "backend/cpu/parallel.h"
#include "frugal/passes/schedule.h"
#include "frugal/train.h"

namespace frugal {

EngineOptions ChooseEngineSplit(const config::Solver& sc, const Graph& train, int cores) {
  EngineOptions eo{sc.engine_workers(), sc.engine_kernel_threads()};
  if (eo.cpu_workers == 0) {
    eo.cpu_workers = cores >= 2 && TwoWorkersByDefault(train) ? 2 : 1;
    if (eo.kernel_threads > 0) eo.cpu_workers = std::max(1, std::min(eo.cpu_workers, cores / eo.kernel_threads));
  }
  if (eo.kernel_threads == 0) eo.kernel_threads = std::max(1, cores / eo.cpu_workers);
  return eo;
}

int CpuWorkersFor(const config::Solver& sc, const Graph& train) {
  return sc.engine() == "threaded" ? ChooseEngineSplit(sc, train, cpu::NumCores()).cpu_workers : 1;
}

std::unique_ptr<Engine> MakeEngineFor(const config::Solver& sc, const Graph& train) {
  if (sc.engine() != "threaded") return MakeEngine(sc.engine(), {sc.engine_workers(), sc.engine_kernel_threads()});
  return MakeEngine(sc.engine(), ChooseEngineSplit(sc, train, cpu::NumCores()));
}

}  // namespace frugal
